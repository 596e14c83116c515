"""A process's mailbox: messages delivered by the network, received by its tasks in order."""

from __future__ import annotations

from collections import deque

from elastic_sim.protocols.api import Message, OperationTimeout
from elastic_sim.sim.kernel import Call, Kernel
from elastic_sim.sim.tasks import Pending


class _Recv(Pending[Message]):
    """One pending ``recv``: resolved by a delivery or by its timer."""

    __slots__ = ("timer",)

    def __init__(self, kernel: Kernel) -> None:
        super().__init__(kernel)
        self.timer: Call | None = None


class Mailbox:
    """Messages wait here until a task receives them; receivers wait in FIFO order."""

    def __init__(self, kernel: Kernel) -> None:
        self._k = kernel
        self._messages: deque[Message] = deque()
        self._receivers: deque[_Recv] = deque()

    def __len__(self) -> int:
        return len(self._messages)

    def deliver(self, msg: Message) -> None:
        """Hand ``msg`` to the oldest waiting receiver, or queue it. Called from a kernel
        callback (the message's arrival), so the receiver is resumed right here."""
        while self._receivers:
            r = self._receivers.popleft()
            if r.done or r.stale():
                continue
            if r.timer is not None:
                r.timer.cancel()
                r.timer = None  # no receiver <-> timer cycle
            r.resolve(msg, direct=True)
            return
        self._messages.append(msg)

    async def recv(self, timeout: float | None) -> Message:
        """The next message; :class:`OperationTimeout` after ``timeout`` seconds."""
        if self._messages:
            return self._messages.popleft()
        if timeout is not None and timeout <= 0:
            raise OperationTimeout("no message")
        r = _Recv(self._k)
        self._receivers.append(r)
        if timeout is not None:
            r.timer = self._k.call_later(timeout, self._expire, r, timeout)
        return await r

    def _expire(self, r: _Recv, timeout: float) -> None:
        r.timer = None
        if r.done:
            return
        try:
            self._receivers.remove(r)
        except ValueError:
            pass
        r.resolve(exc=OperationTimeout(f"no message within {timeout}s"), direct=True)

    def clear(self) -> None:
        """Drop every queued message and receiver (the process died)."""
        self._messages.clear()
        self._receivers.clear()
