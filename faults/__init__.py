"""The fault vocabulary and the world it applies to: data only, no runtime code."""

if __name__ != "elastic_sim.faults":  # `import faults` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.faults; import it by that name "
                      "(a second copy of its modules would not be the same)")
