"""The built-in scenarios: YAML files shipped as package data of ``elastic_sim.scenarios``
(``elastic-sim scenarios`` lists them; :mod:`elastic_sim.builtin` finds one by name).
A package only so that the installed name maps onto this folder; it holds no code."""
