"""The READY wait both launchers (real mode's, torchrun mode's) use before GO."""

from __future__ import annotations

import subprocess
import sys

import pytest

from elastic_sim.real.supervisor.process import LaunchError, wait_ready


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)


def _run(procs: dict[str, subprocess.Popen[bytes]], timeout: float) -> None:
    try:
        wait_ready(list(procs.items()), timeout, lambda name: f"{name} died",
                   lambda late: f"late: {','.join(late)}")
    finally:
        for p in procs.values():
            p.kill()
            p.wait()
            assert p.stdout is not None
            p.stdout.close()


def test_every_ready_line_counts_even_in_pieces() -> None:
    procs = {"a": _child("import sys,time; sys.stdout.write('RE'); sys.stdout.flush(); "
                         "time.sleep(0.3); print('ADY 12', flush=True); time.sleep(30)"),
             "b": _child("import time; print('noise'); print('READY', flush=True); "
                         "time.sleep(30)")}
    _run(procs, 30.0)  # returns: both said READY (a in two writes)


def test_a_process_that_exits_first_is_named() -> None:
    procs = {"a": _child("import time; print('READY', flush=True); time.sleep(30)"),
             "b": _child("print('READ', end='')")}  # no complete READY line, then EOF
    with pytest.raises(LaunchError, match=r"^b died$"):
        _run(procs, 30.0)


def test_the_late_ones_are_named_after_the_timeout() -> None:
    procs = {"a": _child("import time; print('READY', flush=True); time.sleep(30)"),
             "b": _child("import time; time.sleep(30)"),
             "c": _child("import time; print('READY?', end='', flush=True); time.sleep(30)")}
    with pytest.raises(LaunchError, match=r"^late: b,c$"):
        _run(procs, 1.0)
