"""The fault mechanics of real mode: the scenario's faults turned into signals, nftables
rules, ``tc netem`` classes and connection resets, or refused before a run starts.

:mod:`.injector` fires the schedule at the run's fault targets (:mod:`.targets`: the
protocol, and its one implementation for the launchers that run hosts' processes on this
machine); :mod:`.netns` cuts the network in a run's private namespace, :mod:`.shaping`
shapes its links, :mod:`.connreset` resets its connections, and :mod:`.startfaults`
tells a host's processes what the processes they start meet (a crash loop, a slow start).
"""
