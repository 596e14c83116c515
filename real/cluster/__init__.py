"""Cluster mode: each scenario host on a machine of its own, started by the cluster's
launcher.

A *node* (:mod:`.node`, ``elastic-sim node``) runs once per machine and starts the
processes of the scenario hosts it is given, exactly as the local launcher does. A
*coordinator* (:mod:`.coordinator`, inside ``elastic-sim run --mode real --launcher X``)
hands out the hosts, estimates every node's clock offset, starts the run at one origin,
fires the scenario's faults by sending commands to the nodes, relays the processes'
addresses, and merges the nodes' traces onto its own time axis. Control traffic is JSON
with an HMAC on every frame (:mod:`.wire`); nothing off the network is ever unpickled.
:mod:`.launchers` starts the nodes: in network namespaces on this machine (``netns``),
through Slurm's ``srun`` (``slurm``), as Kubernetes manifests (``k8s``), or by anyone who
follows the plain contract (``env``).
"""
