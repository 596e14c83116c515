"""Every host's first process: the task service that starts this host's workers (the ssh
hop of horovodrun: sshd and its sessions), and on the driver's host also the elastic driver
and its store (horovodrun itself).

The task service ends when the driver tells it the job is over (over a connection, so a
lossy link delays it but does not lose it), or once its driver is gone (a session's peer
reset: the driver's process ended, or its host came back without it) and none of its
workers runs any more. On a host other than the driver's it stands for sshd, a daemon
outside the job (:meth:`Runtime.detach`): the run does not wait for it, so one the driver
never reached (or could not tell) does not keep a finished job "running" to the time
limit. horovodrun is not restarted: when the driver's host comes back after
a crash, its first process is only that host's sshd, and nothing of the job runs there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from elastic_sim.protocols.api import Message, OperationTimeout, Proc, Runtime, Task
from elastic_sim.protocols.horovod.conn import (
    RENDEZVOUS,
    Client,
    ConnectFailed,
    Server,
    Sockets,
)
from elastic_sim.protocols.horovod.driver import ElasticDriver
from elastic_sim.protocols.horovod.settings import HorovodKnobs, load_knobs
from elastic_sim.protocols.sync import Event

WORKER_ENTRY = "elastic_sim.protocols.horovod.worker:worker_main"


class TaskService:
    """Starts workers on the driver's request after the start-up latency, reports their
    exit codes back (the spawner's blocking wait), and kills them on request (SIGTERM, then
    SIGKILL after the grace period)."""

    def __init__(
        self, rt: Runtime, args: Mapping[str, Any], knobs: HorovodKnobs, driver: str, store: str,
        server: Server,
    ) -> None:
        self.rt = rt
        self.server = server
        """The ssh sessions: a spawn is served once, its exit status resent until received."""
        self.args = args
        self.k = knobs
        self.driver = driver
        self.store = store
        self.procs: dict[str, Proc] = {}
        self.kill_generation = 0
        self.tasks: list[Task[None]] = []
        self.stopped = Event(rt)
        """Set when this host's part of the job is over."""
        self.driver_gone = False
        """A session's driver end is gone: nothing will be spawned or stopped any more."""
        self.starting = 0

    def handle(self, msg: Message) -> None:
        """Serve one request."""
        op = msg.body.get("op")
        kind = msg.body.get("kind")
        if op == "conn_req" and kind == "spawn":
            if self.server.accept(msg):
                self.starting += 1
                self.tasks.append(self.rt.spawn(self._run_worker(msg.body), "spawn"))
        elif op == "conn_req" and kind == "job":
            self.server.accept(msg)  # held open until the job ends: see session_gone
        elif op == "conn_req" and kind == "shutdown":
            if self.server.accept(msg):
                self.server.answer(msg.body, {"ok": True})
                self.stopped.set()
        elif op == "kill_workers":
            self.kill_generation += 1
            for name in sorted(self.procs):
                self.rt.spawn(self._terminate(self.procs[name]), "kill")
        elif op == "conn_req" and kind == "hosts_updated":
            # A connection to a worker's notification service (this host's kernel stands
            # in for the worker's socket): delivered while the process lives, reset once it
            # has exited; the worker's ack comes back as ``hosts_updated_ack``.
            if self.server.accept(msg):
                if self.listening(str(msg.body["to"])):
                    self.rt.send(str(msg.body["to"]), msg.body)
                else:
                    self.server.refuse(msg)
        elif op == "hosts_updated_ack":
            self.server.answer(msg.body["request"], {"ok": True})
        elif op in ("kill_me", "stop_me"):
            proc = self.procs.get(str(msg.body["name"]))
            if proc is not None:
                proc.signal("KILL" if op == "kill_me" else "STOP")

    def listening(self, port: str) -> bool:
        """Whether the worker process ``port`` names lives on this host (its notification
        service listens): a SYN to it is answered, else refused."""
        proc = self.procs.get(port)
        return proc is not None and proc.poll() is None

    def session_gone(self, request: Mapping[str, Any]) -> None:
        """The driver's end of a connection is gone (its process ended, or its host came
        back without it): a running worker is left to itself, and this host's part of the
        job ends with its last worker. The driver holds a ``job`` connection to every task
        service for the whole job, so even an idle host learns it (a harness need: sshd,
        which this stands for, is a daemon outside the job upstream)."""
        if request.get("kind") in ("spawn", "job"):
            self.driver_gone = True
            self._done_if_idle()

    def _done_if_idle(self) -> None:
        if self.driver_gone and not self.procs and not self.starting:
            self.stopped.set()

    async def _run_worker(self, body: Mapping[str, Any]) -> None:
        generation = self.kill_generation
        if self.k.process_start_latency > 0:
            await self.rt.sleep(self.k.process_start_latency)
        slot = body["slot"]
        name = f"w{slot['local_rank']}.{body['sid']}"
        proc = await self.rt.start_process(name, WORKER_ENTRY, {
            "knobs": self.args["knobs"], "workload": self.args["workload"],
            "seed": self.args.get("seed", 0), "driver": self.driver,
            "service": self.rt.name, "store": self.store, "slot": slot,
            "members": body["members"], "rendezvous": body["rendezvous"],
        }, env={"HOROVOD_RANK": str(slot["rank"]), "HOROVOD_HOSTNAME": self.rt.host,
                "HOROVOD_LOCAL_RANK": str(slot["local_rank"]), "HOROVOD_ELASTIC": "1"})
        self.procs[proc.name] = proc
        self.starting -= 1
        if self.kill_generation != generation:
            self.rt.spawn(self._terminate(proc), "kill")
        code = await proc.wait()
        self.procs.pop(proc.name, None)
        self.server.answer(body, {"code": code, "t": self.k.wall_clock_base + self.rt.now()})
        self._done_if_idle()

    async def _terminate(self, proc: Proc) -> None:
        proc.signal("TERM")
        await self.rt.sleep(self.k.kill_grace)
        if proc.poll() is None:
            proc.signal("KILL")

    async def drain(self) -> None:
        """Kill what still runs and wait until every worker has exited and been reported."""
        for name in sorted(self.procs):
            self.rt.spawn(self._terminate(self.procs[name]), "kill")
        for task in list(self.tasks):
            await task


async def host_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """Entry of every host: ``args`` holds hosts, store_host, knobs, workload and seed."""
    knobs = load_knobs(args["knobs"])
    hosts = [str(h) for h in args["hosts"]]
    driver_host = knobs.driver_host or str(args["store_host"])
    driver_addr = f"{driver_host}/main"
    server = Server(rt)
    client = Client(rt, knobs.connect_timeout)
    service = TaskService(rt, args, knobs, driver_addr, f"{driver_host}:{knobs.store_port}",
                          server)
    launcher = rt.host == driver_host and rt.info.incarnation == 0
    driver = (ElasticDriver(rt, knobs, {h: f"{h}/main" for h in hosts}, client, server)
              if launcher else None)

    def listening(port: str) -> bool:
        if port == RENDEZVOUS:
            return driver is not None and not driver.finished()
        return service.listening(port)

    def reset(hit: Callable[[str], bool]) -> None:
        client.reset(hit)
        server.reset(hit)

    server.listening = listening
    server.on_gone = service.session_gone
    rt.answer_in_kernel(server.syn)
    rt.close_in_kernel(Sockets(client, server))
    rt.on_conn_reset(reset)
    if rt.host == driver_host and not launcher:
        # horovodrun died with its host and nothing starts it again
        rt.record("hvd_launcher_gone", incarnation=rt.info.incarnation)
        return 0
    if driver is None:
        rt.detach()  # sshd: the run does not wait for it, only for the workers it starts

    async def dispatch() -> None:
        while True:
            msg = await rt.recv()
            if client.handle(msg) or server.handle(msg):
                continue
            if driver is None or not driver.handle(msg):
                service.handle(msg)

    rt.spawn(dispatch(), "dispatch")
    if driver is None:
        await service.stopped.wait()
        await service.drain()
        return 0
    await rt.host_store(knobs.store_port)
    jobs = {h: client.open(f"{h}/main", {"kind": "job"})  # never answered: session_gone
            for h in hosts if h != rt.host}
    error = await driver.run()
    if error is None:
        rt.record("hvd_job_succeeded", results=len(driver.results))
    else:
        rt.record("job_failed", error=error)
    told = {h: rt.spawn(_stop_service(rt, client, f"{h}/main"), "shutdown")
            for h in hosts if h != rt.host}
    await service.drain()
    for h, task in told.items():
        # a harness wait (horovodrun itself just exits): for the task services it reached,
        # so that they end in the trace; one it never reached is a daemon left running
        if h not in driver.silent_hosts and client.reached(jobs[h]):
            await task
    return 1 if error is not None else 0


async def _stop_service(rt: Runtime, client: Client, addr: str) -> None:
    """Tell the task service ``addr`` the job is over, over a connection: retransmitted
    through loss and partitions, given up when the connect fails (``connect_timeout``).
    The driver waits for it except from hosts it has seen go silent (likely down)."""
    cid = client.open(addr, {"kind": "shutdown"})

    async def told() -> None:
        await client.connect(cid)
        await client.reply(cid, addr)

    try:
        await rt.wait_for(told(), client.connect_timeout)
    except (ConnectFailed, OperationTimeout):
        client.close(cid)
