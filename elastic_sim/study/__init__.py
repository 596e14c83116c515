"""Studies: how much of a job's weeks survive its failures, per protocol and per setting
(``elastic-sim study SPEC``). A study file (:mod:`.model`, read by :mod:`.load`) names the
protocol and its knobs, the cluster, the workload, the failure process (:mod:`.failures`)
and the settings to compare. It runs one of two ways (:mod:`.run`): directly, the whole
horizon simulated (:mod:`.direct`), or composed, recoveries sampled with the faithful
model (:mod:`.samples`, :mod:`.sampling`, cached by :mod:`.cache`, scaled by
:mod:`.scaling`) and composed over the failure arrivals by a Monte Carlo (:mod:`.compose`).
Both give the same :class:`~.outcome.Run`; :mod:`.report` writes what a study shows."""
