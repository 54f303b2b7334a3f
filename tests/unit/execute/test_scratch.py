"""The scratch directories of a controller killed outright are removed by the next bmx run."""

import os
import subprocess
import sys

import pytest

from benchmatrix.execute import scratch


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_gone_process_scratch_is_removed_a_live_one_and_other_files_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    mine = scratch.scratch_dir("wave")
    assert mine.parent == tmp_path and mine.name.startswith(f"bmx-wave-{os.getpid()}-")
    assert oct(mine.stat().st_mode & 0o777) == "0o700"
    dead = _dead_pid()
    gone = [tmp_path / f"bmx-{kind}-{dead}-abc_123" for kind in scratch.KINDS]
    for d in gone:
        (d / "artifacts").mkdir(parents=True)
        (d / "artifacts" / "events").write_text("{}")
    # Not scratch of this kind: the start slots' directory, an older name without a PID, a file.
    kept = [tmp_path / f"bmx-ansible-starts-{os.getuid()}", tmp_path / "bmx-wave-x1y2z3", tmp_path / "bmx-pg-1-abc"]
    for d in kept:
        d.mkdir()
    (tmp_path / f"bmx-broker-{dead}-file").write_text("")

    removed = scratch.sweep()

    assert sorted(removed) == sorted(gone)
    assert not any(d.exists() for d in gone)
    assert mine.is_dir() and all(d.is_dir() for d in kept)
    assert (tmp_path / f"bmx-broker-{dead}-file").is_file()


def test_the_broker_and_the_calls_name_their_scratch_after_their_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    from benchmatrix.execute.wave import WaveBroker

    broker = WaveBroker(tmp_path)
    try:
        assert broker.dir.name.startswith(f"bmx-broker-{os.getpid()}-")
    finally:
        broker.server.close()
        broker.dir.rmdir()
    # The wave's and a batch job's ansible-runner data come from the same helper.
    from benchmatrix.execute import ansible, wave

    asked = []

    def fake(kind):
        asked.append(kind)
        raise RuntimeError("stop here")

    monkeypatch.setattr(ansible, "scratch_dir", fake)
    monkeypatch.setattr(wave, "scratch_dir", fake)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n")
    for start in (lambda: ansible.run_playbook("x.yml", project_dir=tmp_path, inventory=inventory, host="localhost",
                                               extravars={}, log=tmp_path / "a.log"),
                  lambda: wave.run_wave("x.yml", project_dir=tmp_path, inventory=inventory, calls=[])):
        with pytest.raises(RuntimeError, match="stop here"):
            start()
    assert asked == ["ansible", "wave"]
