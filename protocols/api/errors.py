"""The contract's errors: part of the seam, because elastic protocols live in their error
paths (a store timeout, a collective failure or timeout, a process exit, a cancelled task)."""


class Cancelled(BaseException):
    """Thrown into a task that was cancelled. A BaseException, so ``except Exception``
    in protocol code does not swallow it (as with asyncio.CancelledError)."""


class OperationTimeout(Exception):
    """A deadline given to :meth:`Runtime.wait_for` or :meth:`Runtime.recv` passed."""


class StoreError(Exception):
    """Base of key-value store errors."""


class StoreTimeout(StoreError):
    """A store ``get``/``wait`` did not see its key(s) before the client's timeout."""


class StoreConnectionError(StoreError):
    """The store server is gone (its process died) or could not be reached at connect.

    Like c10d's TCPStore client, a client never reconnects: every later call fails too.
    """


class CollectiveError(Exception):
    """Base of process-group errors."""


class CollectiveFailed(CollectiveError):
    """A peer of the group died (connection closed by peer) or the group was aborted.

    ``peer``: the group rank whose loss failed the call, when the runtime knows it (traced
    as ``coll_fail``'s ``peer``: the failure names the dead peer)."""

    def __init__(self, message: str, peer: int | None = None) -> None:
        super().__init__(message)
        self.peer = peer


class CollectiveTimeout(CollectiveError):
    """A collective did not complete within the group's timeout (a peer hangs or is cut off)."""


class ProcessExited(Exception):
    """A child process ended; ``code`` is its exit status (negative: killed by a signal)."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"process {name} exited with code {code}")
        self.name = name
        self.code = code

