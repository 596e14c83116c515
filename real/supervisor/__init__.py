"""The supervisor: what starts a real run's processes on a machine, watches them until
they end, and leaves none of them behind.

The local launcher (:mod:`.launcher`) starts each host's first process
(:mod:`.process`, from a :mod:`.spec`), waits for it to be ready, starts the run, fires
the faults while it watches the exits, then kills and reaps whatever is left and accounts
for every process; the frame of a run, the GO handshake and the supervision loop are
:mod:`.supervise`, which torchrun mode's launcher shares. The run directory
(:mod:`.workdir`) and the per-process trace files (:mod:`.tracefile`, followed live by
:mod:`.tail`) are the layout the processes share with it; :mod:`.reaper` (parent-death
signals, subreaping, marker scans) and :mod:`.warden` (a process that outlives a killed
launcher) are the backstops.
"""
