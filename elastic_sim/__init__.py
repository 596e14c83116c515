"""elastic-sim: a simulation and fault-injection testbed for elastic training protocols.

Installed, everything lives under this one package: ``elastic_sim.sim`` (the simulated
runtime), ``.real`` (real processes), ``.protocols`` (the protocols and their contract),
``.faults``, ``.checks``, ``.reports``, ``.trace``, ``.world``; the built-in scenarios ship
as package data of ``elastic_sim.scenarios``. In the repository those are the top-level
folders ``sim/``, ``real/``, ... (setuptools' ``package-dir`` maps them; no links).
"""

__version__ = "0.1.0"
