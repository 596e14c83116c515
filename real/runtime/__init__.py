"""The runtime the protocols see inside a process of a real run: the contract of
:mod:`elastic_sim.protocols.api` on asyncio (:mod:`.runtime`, with :mod:`.aio` at the
boundary), control messages over TCP (:mod:`.net`), torch's TCPStore (:mod:`.store`),
Gloo and NCCL process groups (:mod:`.group`, :mod:`.nccl`), the children a process starts
(:mod:`.child`), and what every process of a run runs first (:mod:`.proc`).

Only code that runs inside a run's processes lives here. Importing it does not import
torch; a process does, up front.
"""
