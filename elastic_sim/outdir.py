"""A run's output directory: held by one run at a time, checked before anything runs, and
replaced as one set.

A run writes into a staging directory beside ``OUT`` (``OUT.part-<pid>``, marked partial)
and, once complete, swaps it with ``OUT`` in one atomic rename (Linux ``renameat2`` with
``RENAME_EXCHANGE``): a reader of ``OUT`` finds the earlier run's files or the new run's,
never a mix, whatever moment the writer dies at. The manifest (:data:`MANIFEST`) lists
what the tool wrote, so replacing an earlier run removes exactly that and keeps any file
a user put beside it. ``.OUT.lock`` beside ``OUT`` is held (``flock``) for the whole run
and names its holder.

Keeping a user's files across the swap moves them into the new set first, and takes them
back out of the replaced one after. Every move is one rename, and the journal of what is
whose is the manifests: the staging directory's manifest is written before the first of a
user's files enters it, so in any directory of the tool's, a file its manifest lists is
the tool's and any other is the user's. A step cut short (Ctrl-C, SIGKILL, a full disk)
is settled from that alone, by this run on its way out or by the next run on ``OUT``:
before the swap it is rolled back (the new set's files removed, the user's returned), after
it rolled forward (the earlier set's files removed, the user's returned). Only files a
manifest lists are ever removed; a staging directory without one (a run that died before
its swap began) holds nothing but the run's own files.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from elastic_sim.errors import ScenarioError

MANIFEST = ".elastic-sim-run.json"
"""What a finished run wrote into its directory: ``{"tool", "files": {path: sha256}}``, every
file at any depth (``real/logs/...`` included)."""
PARTIAL = ".elastic-sim-partial"
"""Marks a staging directory whose run has not finished: everything in it is the tool's."""
_TOOL = "elastic-sim"


def safe_component(name: str) -> str:
    """``name`` as one harmless path component: no separator, no ``..``, not hidden."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".")
    return re.sub(r"\.{2,}", ".", out) or "scenario"


def _is_inside(rel: str) -> bool:
    """Whether manifest entry ``rel`` names a path inside the run directory."""
    parts = PurePosixPath(rel).parts
    return bool(parts) and not rel.startswith("/") and ".." not in parts and rel != MANIFEST


def read_manifest(run_dir: Path) -> dict[str, str] | None:
    """The files (relative paths -> sha256) an earlier run wrote into ``run_dir``; None
    if it is not a run's output."""
    try:
        obj = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = obj.get("files") if isinstance(obj, dict) and obj.get("tool") == _TOOL else None
    if not isinstance(files, dict):
        return None
    return {str(k): str(v) for k, v in files.items() if _is_inside(str(k))}


def _files_under(root: Path, empty_folders: bool = False) -> list[str]:
    """Every file under ``root`` as a relative POSIX path, sorted (the markers at its top
    left out); a link counts as a file, and with ``empty_folders`` so does an empty
    folder (a user's is kept across a swap)."""
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if rel in (MANIFEST, PARTIAL, MANIFEST + ".part"):
            continue
        if p.is_symlink() or not p.is_dir() or (empty_folders and not any(p.iterdir())):
            out.append(rel)
    return sorted(out)


def write_manifest(run_dir: Path, names: list[str]) -> None:
    """List the files ``names`` (relative to ``run_dir``) as the tool's, with their sha256."""
    files = {name: hashlib.sha256((run_dir / name).read_bytes()).hexdigest()
             for name in sorted(names)}
    tmp = run_dir / (MANIFEST + ".part")
    tmp.write_text(json.dumps({"tool": _TOOL, "files": files}, indent=1) + "\n",
                   encoding="utf-8")
    os.replace(tmp, run_dir / MANIFEST)


def add_to_manifest(run_dir: Path, names: list[str]) -> None:
    """Record further files the tool wrote into an earlier run's directory."""
    known = read_manifest(run_dir)
    if known is not None:
        write_manifest(run_dir, sorted(set(known) | set(names)))


def _refuse(out: Path, message: str) -> ScenarioError:
    return ScenarioError("--out", "", f"{out}: {message}")


def check_place(out: Path) -> Path:
    """``out`` resolved; refused if it is the root, the home directory, a file, or holds
    the current directory."""
    resolved = out.expanduser().resolve()
    if resolved == Path(resolved.anchor):
        raise _refuse(out, "is the root directory; choose a new or empty directory")
    if resolved == Path.home().resolve():
        raise _refuse(out, "is your home directory; choose a new or empty directory")
    if resolved.exists() and not resolved.is_dir():
        raise _refuse(out, "exists and is not a directory")
    if Path.cwd().resolve().is_relative_to(resolved):
        raise _refuse(out, "holds the current directory; choose a new or empty directory")
    return resolved


def _check_contents(out: Path, resolved: Path, force: bool) -> dict[str, str] | None:
    """The earlier run's manifest when ``out`` holds one that may be replaced."""
    if not resolved.is_dir() or not any(resolved.iterdir()):
        return None
    manifest = read_manifest(resolved)
    if manifest is None:
        shown = ", ".join(sorted(p.name for p in resolved.iterdir())[:5])
        raise _refuse(out, f"is not empty and not an earlier run's output (holds {shown}); "
                      "choose a new or empty directory")
    if not force:
        raise _refuse(out, "holds an earlier run's output; pass --force to replace it "
                      "(only the files elastic-sim wrote are removed)")
    return manifest


@contextlib.contextmanager
def held(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock; :class:`ScenarioError` naming the holder if another run has it."""
    resolved = out.expanduser().resolve()
    lock = resolved.parent / f".{resolved.name}.lock"
    try:
        resolved.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a file in the path, no permission, a full disk
        raise _refuse(out, f"cannot write there ({exc.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another run"
            raise _refuse(out, f"in use by another run ({holder}); wait for it or choose "
                          "another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {' '.join(sys.argv)}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def staged(out: Path, *, force: bool) -> Iterator[Path]:
    """Hold ``out`` and give a fresh staging directory; when the block ends normally, its
    contents replace ``out``'s as one set; when it raises, it is removed and ``out`` is
    untouched. :class:`ScenarioError` (exit 2, nothing written) if ``out`` is refused."""
    resolved = check_place(out)
    _check_contents(out, resolved, force)  # refused: not even a lock file beside it
    with held(out):
        earlier = _check_contents(out, resolved, force)  # again: another run may have ended
        _clear_stale(resolved)
        stage = resolved.with_name(f"{resolved.name}.part-{os.getpid()}")
        stage.mkdir()
        (stage / PARTIAL).touch()
        try:
            yield stage
            write_manifest(stage, _files_under(stage))
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        _publish(stage, resolved, earlier)


def _publish(stage: Path, out: Path, earlier: dict[str, str] | None) -> None:
    """Swap the finished ``stage`` (its manifest written) into ``out``; keep a user's
    files, drop the earlier run's. Cut short, what it did is settled before it raises."""
    try:
        if out.is_dir():
            _move_others(out, stage, set(earlier or {}))  # a user's files go with the set
        (stage / PARTIAL).unlink()
        if out.is_dir():
            _exchange(stage, out)
            _remove_written(stage, out)
        else:
            stage.rename(out)
    except BaseException:
        _settle(stage, out)  # interrupted again here: the next run on out settles it
        raise


def _move_others(src: Path, dst: Path, written: set[str]) -> None:
    """Move the files under ``src`` that the tool did not write into ``dst`` where their
    place is free (what is not moved stays in ``src``)."""
    for rel in _files_under(src, empty_folders=True):
        target = dst / rel
        if rel not in written and not target.exists() and not target.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            (src / rel).rename(target)


def _remove_written(old: Path, out: Path) -> None:
    """Remove what the manifest of ``old`` (a replaced set, or a new one rolled back)
    lists, return anything else to ``out`` where its place is free, then remove ``old``
    if that left it empty."""
    for rel in read_manifest(old) or {}:
        (old / rel).unlink(missing_ok=True)
    (old / MANIFEST).unlink(missing_ok=True)
    _return_others(old, out)


def _return_others(old: Path, out: Path) -> None:
    """Move what is left in ``old`` (a user's files) back to ``out`` where their place is
    free, remove the folders that left empty, and ``old`` itself if it is."""
    _move_others(old, out, set())
    for path in sorted(old.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.rmdir()  # only an emptied folder
    with contextlib.suppress(OSError):
        old.rmdir()


def _settle(path: Path, out: Path) -> None:
    """Finish or undo what a run on ``out`` left in its staging directory ``path``."""
    if not path.is_dir():
        return
    partial, listed = (path / PARTIAL).exists(), (path / MANIFEST).exists()
    if partial and not listed:
        shutil.rmtree(path, ignore_errors=True)  # the run's own files only: none moved yet
    elif partial:  # the swap began (the manifest is its journal): roll it back
        made = not out.exists()
        out.mkdir(exist_ok=True)
        (path / PARTIAL).unlink()
        _remove_written(path, out)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()
    elif listed and not out.exists():
        path.rename(out)  # died between two renames of the fallback swap
    elif listed:
        _remove_written(path, out)  # before the swap: rolled back; after it: forward
    else:
        _return_others(path, out)  # died returning a user's files


def _clear_stale(out: Path) -> None:
    """Staging directories of runs on ``out`` that died (the lock is ours, so none lives)."""
    for path in sorted(out.parent.glob(glob.escape(out.name) + ".part-*")):
        _settle(path, out)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> None:
    """Swap directories ``a`` and ``b`` atomically (Linux >= 3.15); elsewhere two renames,
    with a moment where ``b`` is missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
                     _RENAME_EXCHANGE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not supported here
            raise OSError(err, os.strerror(err), str(b))
    aside = a.with_name(a.name + "-old")
    b.rename(aside)
    a.rename(b)
    aside.rename(a)
