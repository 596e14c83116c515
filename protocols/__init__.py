"""Elastic training protocols, written once against :mod:`elastic_sim.protocols.api`."""

if __name__ != "elastic_sim.protocols":  # `import protocols` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.protocols; import it by that name "
                      "(a second copy of its modules would not be the same)")
