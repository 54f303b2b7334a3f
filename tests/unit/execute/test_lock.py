"""The experiment lock (benchmatrix/execute/lock.py) with real processes, no Snakemake: fast."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmatrix import layout
from benchmatrix.errors import LockError
from benchmatrix.execute import lock


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    fh = lock.acquire(tmp_path / "exp", "bmx run")
    try:
        res = subprocess.run([sys.executable, "-c", "from pathlib import Path; from benchmatrix.execute import lock; "
                              f"lock.acquire(Path({str(tmp_path / 'exp')!r}), 'snakemake')"],
                             capture_output=True, text=True)
        assert res.returncode != 0 and "LockError" in res.stderr
        assert "is in use by another bmx or snakemake process (pid" in res.stderr
    finally:
        lock.release(fh)
    lock.release(lock.acquire(tmp_path / "exp", "bmx run"))  # free again


def test_an_orphan_is_named_and_stopped(tmp_path):
    exp = tmp_path / "exp"
    fh = lock.acquire(exp, "bmx run")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {gone} (bmx run) on here since now")  # its bmx is gone ...
    fh.flush()
    # ... but a child it gave the lock to lives on, as a group leader like bmx's Snakemake.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             pass_fds=(fh.fileno(),), start_new_session=True)
    fh.close()
    try:
        with pytest.raises(LockError) as info:
            lock.acquire(exp, "bmx run", "'bmx run X --stop-orphan'")
        msg = str(info.value)
        assert f"locked by an orphan: pid {child.pid} (" in msg and f"pid {gone} which is gone" in msg, msg
        assert "'bmx run X --stop-orphan'" in msg and "\n" not in msg
        assert lock.stop_orphans(exp, wait_s=10) == [child.pid]
        assert child.wait(timeout=10) != 0
        lock.release(lock.acquire(exp, "bmx run"))
    finally:
        child.kill()
        child.wait()


def test_a_live_holder_is_never_stopped(tmp_path):
    fh = lock.acquire(tmp_path / "exp", "bmx run")
    try:
        assert lock.stop_orphans(tmp_path / "exp", wait_s=1) == []
        assert lock.orphans(tmp_path / "exp" / layout.LOCK) == (None, [])
    finally:
        lock.release(fh)


def test_experiment_lock_holds_for_the_block_and_names_the_resume_hint(tmp_path):
    with lock.experiment_lock(tmp_path, "bmx run", "spec.yaml") as fh:
        assert not fh.closed
        with pytest.raises(LockError, match="bmx run spec.yaml --stop-orphan|pid"):
            with lock.experiment_lock(tmp_path, "bmx rerun", "spec.yaml"):
                pass
    assert fh.closed
    with lock.experiment_lock(tmp_path, "bmx rerun"):
        pass  # free again once the block ended
