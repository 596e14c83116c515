"""The command line: ``elastic-sim run | sweep | explore | study | report | validate |
scenarios | schema``.

Exit codes: 0 every check and expectation holds; 1 a violation or an unmet expectation;
2 bad input (named file, field and what was expected) or a run that cannot start here (a
host dying before it is ready, a missing optional dependency); 3 an internal error (its traceback
is written to a file the message names). A complete run
whose reports (report.html, plots) could not be written keeps its verdict's exit code and
prints a ``warning:`` line on stderr; ``elastic-sim report OUT`` writes them later.

This module is the entry point (:func:`main`: parse, dispatch, turn errors into exit codes);
the arguments are :mod:`elastic_sim.cli_args`, the subcommand handlers
:mod:`elastic_sim.cli_commands`.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from elastic_sim.cli_args import _parser
from elastic_sim.cli_commands import (
    EXIT_BAD_INPUT,
    EXIT_FAIL,
    EXIT_INTERNAL,
    EXIT_OK,
    _cmd_explore,
    _cmd_report,
    _cmd_run,
    _cmd_scenarios,
    _cmd_validate,
    _err,
)
from elastic_sim.errors import ScenarioError

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAIL", "EXIT_INTERNAL", "EXIT_OK", "_parser", "main"]
"""What this module offers: the entry point; the parser is :mod:`elastic_sim.cli_args`'s,
the subcommand handlers and exit codes :mod:`elastic_sim.cli_commands`'."""

WIDE = 4096
"""Columns of output that is not a terminal: tables are laid out in that much width (and
text is not wrapped at all)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``elastic-sim`` console script."""
    # When the command began: a command line's limits (--wall-limit) count what its user
    # waits for, the interpreter's start included; a call from Python counts from here.
    began = time.monotonic() - (_process_age() if argv is None else 0.0)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["node"]:  # the node entry owns its arguments (and its exit codes)
        from elastic_sim.real.cluster.node import main as node_main

        return node_main(argv[1:])
    argv = list(argv)
    script_args: list[str] = []
    if "--" in argv:  # what follows is the user's script's command line
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1:]
    args = _parser().parse_args(argv)
    args.script_args = script_args
    args.began = began
    # Not a terminal (CI logs, pipes, grep): no line is wrapped, whatever its length.
    tty = sys.stdout.isatty()
    from rich.console import Console  # not for --help or an argument error

    console = Console(highlight=False, width=None if tty else WIDE, soft_wrap=not tty)
    try:
        if args.command == "run":
            return _cmd_run(args, console)
        if args.command == "validate":
            return _cmd_validate(args, console)
        if args.command == "explore":
            return _cmd_explore(args, console)
        if args.command == "report":
            return _cmd_report(args, console)
        if args.command == "sweep":
            from elastic_sim.sweep import cmd_sweep

            return cmd_sweep(args, console)
        if args.command == "study":
            from elastic_sim.study.cli import cmd_study

            return cmd_study(args, console)
        if args.command == "schema":
            from elastic_sim.schema import fault_reference, schema_text

            print(fault_reference() if args.faults_markdown else schema_text())
            return EXIT_OK
        if args.command == "compare":
            from elastic_sim.compare.cli import cmd_compare

            return cmd_compare(args, console)
        return _cmd_scenarios(args, console)
    except ScenarioError as exc:
        _err(f"error: {exc}")
        return EXIT_BAD_INPUT

    except KeyboardInterrupt as exc:
        if type(exc).__name__ == "Terminated":  # SIGTERM to a campaign
            _err("terminated")
            return 143
        _err("interrupted")
        return 130
    except Exception as exc:  # an internal error still gets one line, not a traceback
        if type(exc).__name__ == "NotInAllocation":  # the sbatch script goes to stdout
            why, _, script = str(exc).partition("\n\n")
            print(script, end="")
            _err(f"error: {why}")
            return EXIT_BAD_INPUT
        if type(exc).__name__ == "ClusterError":
            _err(f"error: cluster run: {exc}")
            return EXIT_BAD_INPUT
        if type(exc).__name__ == "LaunchError":  # a host could not start: this machine's
            _err(f"error: the run could not start: {exc}")  # setup, not the tool's fault
            return EXIT_BAD_INPUT
        if args.debug:
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc} (traceback: "
             f"{_save_traceback()})")
        return EXIT_INTERNAL


def _process_age() -> float:
    """Seconds since this process started (0 where ``/proc`` cannot say)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _save_traceback() -> str:
    """Write the current exception's traceback to a fresh file; its path."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix="elastic-sim-traceback-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as fh:
        traceback.print_exc(file=fh)
    return name


if __name__ == "__main__":
    sys.exit(main())
