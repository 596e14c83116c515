"""Child processes: the handle a runtime gives back (:class:`Proc`), the signals a protocol
may send or handle, and the exit status both runtimes report alike."""

from __future__ import annotations

import abc

SIGNALS = ("TERM", "KILL", "STOP", "CONT", "INT", "HUP", "QUIT", "USR1", "USR2")

HANDLED_SIGNALS = ("TERM", "INT", "HUP", "QUIT", "USR1", "USR2")
"""Signals a process may install a handler for (:meth:`Runtime.on_signal`); unhandled,
each ends the process (its default action)."""


class Proc(abc.ABC):
    """A child process started by :meth:`Runtime.start_process`."""

    name: str

    @abc.abstractmethod
    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    @abc.abstractmethod
    async def wait(self) -> int:
        """Wait for the exit code (negative: killed by that signal number)."""

    @abc.abstractmethod
    def signal(self, sig: str) -> None:
        """Deliver one of :data:`SIGNALS`; nothing if it has exited."""


SIGNAL_NUMBERS = {"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12,
                  "TERM": 15, "CONT": 18, "STOP": 19}
"""Linux numbering, so exit codes read the same in both runtimes (-9 = SIGKILL)."""


def exit_status(result: object, exc: BaseException | None = None) -> tuple[int, str]:
    """The exit status of a process whose entry returned ``result`` (or raised ``exc``), and
    why: what ``waitpid`` reports for a real process, so both runtimes agree.

    ``None`` is 0; an int is taken modulo 256 (256 exits 0, -1 exits 255); anything else
    (``True``, ``False``, a string) is 1, as is an exception. ``SystemExit(code)`` follows
    the same rules for its code, as Python's interpreter does."""
    if isinstance(exc, SystemExit):
        code, why = exit_status(exc.code)
        return code, "SystemExit" if why == "returned" else why.replace("returned", "SystemExit", 1)
    if exc is not None:
        return 1, f"{type(exc).__name__}: {exc}"
    if result is None:
        return 0, "returned"
    if isinstance(result, bool) or not isinstance(result, int):
        return 1, f"returned {result!r}, not an exit code"
    if not 0 <= result <= 255:
        return result & 0xFF, f"returned {result}, truncated to {result & 0xFF}"
    return result, "returned"
