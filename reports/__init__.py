"""Trace and verdicts -> metrics, plots, HTML, Perfetto: what a run shows a person."""

if __name__ != "elastic_sim.reports":  # `import reports` from the repository root
    raise ImportError(f"{__name__} is installed as elastic_sim.reports; import it by that name "
                      "(a second copy of its modules would not be the same)")
