"""The experiment lock: one controller per experiment, whichever way it was started.

``results/NAME/.bmx.lock`` is an flock. ``bmx run`` (and plan, rerun, restore) takes
it; the Snakemake it starts inherits the descriptor (``BMX_LOCK_FD``) and so keeps
the experiment locked while it lives; a plain ``snakemake --config spec=...`` takes
it in the workflow's ``onstart``. The file's text names the holder (``pid N (bmx run)
on HOST since ...; snakemake pid M``), so that a refused command can tell a live
controller from an orphan: a Snakemake whose bmx was killed.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from benchmatrix import layout
from benchmatrix.errors import LockError

#: Environment variable naming the inherited lock descriptor in bmx's Snakemake.
LOCK_FD_ENV = "BMX_LOCK_FD"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holders(path: Path) -> list[int]:
    """Pids of the processes with the lock file open (Linux ``/proc``), sorted.

    An flock belongs to the open file, not to a pid: after its bmx died, the
    processes still holding the descriptor are what keeps the experiment locked.
    """
    try:
        st = os.stat(path)
    except OSError:
        return []
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    fst = os.stat(fd)
                except OSError:
                    continue
                if fst.st_ino == st.st_ino and fst.st_dev == st.st_dev:
                    found.add(int(proc.name))
                    break
        except OSError:  # gone, or not ours to read
            continue
    return sorted(found)


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    short = " ".join(w.rsplit("/", 1)[-1] if i == 0 else w for i, w in enumerate(words[:4]))
    return short[:80]


def orphans(path: Path) -> tuple[int | None, list[int]]:
    """(dead controller pid, pids still holding its lock) when the holder's bmx is gone.

    Returns ``(None, [])`` when the lock is free or its recorded controller lives.
    """
    try:
        text = path.read_text()
    except OSError:
        return None, []
    m = re.match(r"pid (\d+)", text)
    if not m:
        return None, []
    owner = int(m.group(1))
    if pid_alive(owner):
        return None, []
    return owner, holders(path)


def acquire(exp_dir: Path, what: str, hint: str = "") -> IO[str]:
    """Take the experiment's lock for this process, or raise :class:`LockError` (exit 4).

    Args:
        exp_dir: ``results/NAME``.
        what: What holds it, written into the lock file (``bmx run``, ``snakemake``).
        hint: The command a user would run to stop an orphan (named in the error).
    """
    exp_dir.mkdir(parents=True, exist_ok=True)
    path = exp_dir / layout.LOCK
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        other = fh.read().strip()
        fh.close()
        raise _refusal(exp_dir, other, hint) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} ({what}) on {os.uname().nodename} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
    fh.flush()
    return fh


def _refusal(exp_dir: Path, holder: str, hint: str) -> LockError:
    """The refusal of a held lock: its orphan, or the holder named by the lock's text."""
    dead, left = orphans(exp_dir / layout.LOCK)
    if dead is not None and left:
        procs = ", ".join(f"pid {p} ({_cmdline(p)})" for p in left)
        return LockError(f"experiment {exp_dir.name} is locked by an orphan: {procs}, left running by "
                         f"pid {dead} which is gone; stop it with {hint or 'kill -INT -PGID'} "
                         "(finished runs are kept)")
    return LockError(f"experiment {exp_dir.name} is in use by another bmx or snakemake process "
                     f"({holder or 'unknown'}); wait for it or stop it first")


def refuse_if_held(exp_dir: Path, hint: str = "") -> None:
    """Raise the :class:`LockError` (exit 4) that :func:`acquire` would, while another
    process holds the experiment's lock, without taking it.

    For a command that finds no plan.csv: a ``bmx run`` that holds the lock may not have
    written it yet. Taking the lock, even for a moment, could refuse that run; this only
    looks at who has the lock file open (an flock lives as long as its open file).
    """
    path = exp_dir / layout.LOCK
    if not holders(path):
        return
    try:
        holder = path.read_text().strip()
    except OSError:
        holder = ""
    raise _refusal(exp_dir, holder, hint)


def note_child(fh: IO[str], pid: int) -> None:
    """Add the Snakemake that inherits the lock to its text (found again if it is orphaned)."""
    fh.seek(0, os.SEEK_END)
    fh.write(f"; snakemake pid {pid}")
    fh.flush()


def release(fh: IO[str]) -> None:
    """Empty the lock's text and drop it."""
    try:
        fh.seek(0)
        fh.truncate()
    finally:
        fh.close()


def same_file(a: int | Path, b: int | Path) -> bool:
    """Whether two open descriptors or paths are the same file (False when one is not there)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_ino, sa.st_dev) == (sb.st_ino, sb.st_dev)


def is_inherited(fd: int, path: Path) -> bool:
    """Whether descriptor ``fd`` of this process is the lock file at ``path`` (bmx passed it on)."""
    return same_file(fd, path)


def _signal(target: int, sig: int) -> None:
    """Signal a process group (``target`` > 0) or a single process (``-pid``)."""
    try:
        if target > 0:
            os.killpg(target, sig)
        else:
            os.kill(-target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_orphans(exp_dir: Path, wait_s: float = 120.0) -> list[int]:
    """Stop what holds the lock after its bmx died: SIGINT to each holder's process group.

    SIGINT lets an orphaned Snakemake stop its batch jobs, which stop the runners on
    their hosts and restore them; after ``wait_s`` the groups get SIGKILL. A lock
    whose controller still lives is never touched.

    Returns:
        The pids that held the lock.
    """
    path = exp_dir / layout.LOCK
    dead, left = orphans(path)
    if dead is None or not left:
        return []
    groups = set()
    for pid in left:
        try:
            # bmx starts Snakemake as a group leader: its group is its batch jobs too.
            # Any other holder is signalled alone (its group may be a user's shell).
            groups.add(pid if os.getpgid(pid) == pid else -pid)
        except ProcessLookupError:
            continue
    for sig in (signal.SIGCONT, signal.SIGINT):  # a stopped orphan must run to stop
        for g in groups:
            _signal(g, sig)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in left):
        time.sleep(0.2)
    for g in groups:
        _signal(g, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and holders(path):
        time.sleep(0.1)
    return left


@contextmanager
def experiment_lock(exp_dir: Path, what: str = "bmx", spec: str = "",
                    stop_orphan: bool = False) -> Iterator[IO[str]]:
    """Hold the experiment's lock for one bmx command; refuse if another process has it.

    The lock is an flock, so a killed bmx releases it
    with its process: a stale lock file is never an obstacle. Children given the
    file descriptor keep the lock while they live; when such a child outlived its
    bmx (an orphan), the refusal says so, and ``stop_orphan`` stops it first.
    """
    hint = f"'bmx run {spec} --stop-orphan'" if spec else ""
    if stop_orphan:
        stopped = stop_orphans(exp_dir)
        if stopped:
            print(f"bmx: stopped the orphan holding {exp_dir.name} (pid {', '.join(map(str, stopped))}); "
                  "finished runs are kept", file=sys.stderr, flush=True)
    fh = acquire(exp_dir, what, hint)
    try:
        yield fh
    finally:
        release(fh)
