"""The built-in scenarios: YAML files shipped as package data of ``elastic_sim.scenarios``
(``elastic-sim scenarios`` lists them; :mod:`elastic_sim.builtin` finds one by name).
A package only so that the installed name maps onto this folder."""

if __name__ != "elastic_sim.scenarios":  # `import scenarios` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.scenarios; import it by that name "
                      "(a second copy of its modules would not be the same)")
