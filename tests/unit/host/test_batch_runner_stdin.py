"""The batch runner as run_batch.yml drives it since issue 15: installed once per
campaign, the manifest on its stdin, the archives of earlier batches removed by the
runner itself, and a stale installed copy refused (so the playbook reinstalls it).

Real batch runner processes; nothing is mocked.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import host_layout

from benchmatrix.host import batch_runner

RUNNER = Path(batch_runner.__file__)


def _manifest(workdir: Path, batch: str, digest: str = "") -> dict:
    runs = [{"run_id": f"{batch}-r{i}", "attempt": 1, "seq": i, "timeout": 30, "before_run": [],
             "argv": [sys.executable, "-c", f"print('run {i}')"]} for i in (1, 2)]
    return {"experiment": "t", "batch": batch, "workdir": str(workdir),
            "archive": str(workdir / "batches" / f"{batch}.tar.gz"), "runner_digest": digest, "runs": runs}


def _start(runner: Path, manifest: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(runner), "-"], input=json.dumps(manifest),
                          capture_output=True, text=True, timeout=60)


def test_manifest_on_stdin_runs_the_batch_and_removes_earlier_archives(tmp_path):
    workdir = tmp_path / "work"
    digest = hashlib.sha256(RUNNER.read_bytes()).hexdigest()
    first = _start(RUNNER, _manifest(workdir, "b1", digest))
    assert first.returncode == 0, first.stderr
    assert (workdir / "batches" / "b1.tar.gz").is_file()
    # Both directories are the owner's only, made by the runner itself.
    assert all((p.stat().st_mode & 0o777) == 0o700 for p in (workdir, workdir / "batches", workdir / "runs"))
    second = _start(RUNNER, _manifest(workdir, "b2", digest))
    assert second.returncode == 0, second.stderr
    # The next batch's runner deleted the archive (and progress) of the batch before.
    assert sorted(p.name for p in (workdir / "batches").iterdir()) == ["b2.progress", "b2.tar.gz"]
    # One line per finished run, in order, for the controller to read while the batch runs.
    progress = [json.loads(line) for line in (workdir / "batches" / "b2.progress").read_text().splitlines()]
    assert [(p["run_id"], p["attempt"], p["outcome"], p["exit_code"]) for p in progress] == [
        ("b2-r1", 1, "exited", 0), ("b2-r2", 1, "exited", 0)]
    with tarfile.open(workdir / "batches" / "b2.tar.gz") as tar:
        names = tar.getnames()
    assert "runs/b2-r1/1/result.json" in names and not any("b1-" in n for n in names)
    assert json.loads(second.stdout)["executed"] == ["b2-r1", "b2-r2"]


def test_a_runner_other_than_the_controllers_exits_3_and_runs_nothing(tmp_path):
    workdir = tmp_path / "work"
    old = tmp_path / "batch_runner.py"
    shutil.copyfile(RUNNER, old)
    with old.open("a") as fh:
        fh.write("\n# an older copy\n")
    res = _start(old, _manifest(workdir, "b1", hashlib.sha256(RUNNER.read_bytes()).hexdigest()))
    assert res.returncode == batch_runner.STALE_RUNNER_RC == 3
    assert "stale runner" in res.stderr
    assert not (workdir / "runs").exists()


def test_the_runner_takes_the_controllers_lease_itself_at_its_start(tmp_path):
    """The manifest's lease_seconds: the runner writes BATCH.lease as it starts, so the
    controller's first renewal is due only a quarter lease later (a short batch needs
    no renewal call at all), and the lease holds from the first run on."""
    workdir = tmp_path / "work"
    (workdir / "batches").mkdir(parents=True)
    lease = workdir / "batches" / "b1.lease"
    lease.write_text("5 2020-01-01T00:00:00+00:00\n")  # left by an earlier execution, long expired
    manifest = _manifest(workdir, "b1") | {"lease_seconds": 120}
    # The first run reads the lease as it stands while the batch runs.
    manifest["runs"][0]["argv"] = [sys.executable, "-c", f"print(open({str(lease)!r}).read())"]
    res = _start(RUNNER, manifest)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["executed"] == ["b1-r1", "b1-r2"], "an old lease stopped the batch"
    with tarfile.open(workdir / "batches" / "b1.tar.gz") as tar:
        seen = tar.extractfile("runs/b1-r1/1/stdout").read().decode()
    assert seen.split()[0] == "120" and "2020" not in seen, seen
    # Without lease_seconds (an older controller) or with 0 (lease off): no lease written.
    for i, extra in enumerate(({}, {"lease_seconds": 0})):
        other = tmp_path / f"other{i}"
        assert _start(RUNNER, _manifest(other, "b2") | extra).returncode == 0
        assert not (other / "batches" / "b2.lease").exists()


def test_runs_as_json_text_get_the_batchs_run_settings(tmp_path):
    """run_batch.yml hands the runs on as the workload role's JSON text, with the knobs'
    run settings apart: the runner decodes the text and puts the settings on top of
    every run's own (here a working directory the knob would set)."""
    workdir = tmp_path / "work"
    manifest = _manifest(workdir, "b1")
    for run in manifest["runs"]:
        run["argv"] = [sys.executable, "-c", "import os; print(os.getcwd())"]
        run["cwd"] = "/"
    manifest["runs"] = json.dumps(manifest["runs"])
    manifest["run_settings"] = {"cwd": str(tmp_path)}
    res = _start(RUNNER, manifest)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["executed"] == ["b1-r1", "b1-r2"]
    outs = [host_layout.file(workdir, f"b1-r{i}", "stdout").read_text().strip() for i in (1, 2)]
    assert outs == [str(tmp_path)] * 2


def test_the_runner_sees_a_run_end_at_once(tmp_path):
    """A run's end is seen when it happens, not at the next poll: Popen.wait(timeout)
    sleeps between polls (0.5 ms doubling up to 50 ms), which made every run's
    duration_s up to 50 ms too long and added about a millisecond to the shortest runs.
    Each run prints the moment it ends (date, exec'd as the run's last process); the
    runner's ended_at follows within a few milliseconds."""
    workdir = tmp_path / "work"
    manifest = _manifest(workdir, "b1")
    runs = [dict(manifest["runs"][0], run_id=f"b1-r{i}", seq=i,
                 argv=["sh", "-c", "sleep 0.2; exec date +%s.%N"]) for i in range(1, 6)]
    res = _start(RUNNER, manifest | {"runs": runs})
    assert res.returncode == 0, res.stderr
    lags = []
    for run in runs:
        ended = float(host_layout.file(workdir, run["run_id"], "stdout").read_text())
        lags.append(host_layout.result(workdir, run["run_id"])["ended_at"] - ended)
    lags.sort()
    assert lags[2] < 0.008, lags  # the median; the old polling wait lagged 25 ms on average
