"""The batch runner's time slices and its check of finished runs (issue 15).

A batch may hold up to batch_max_runs runs of unknown duration; ``stop_after_s`` makes
the runner return after that many seconds, so the controller takes the finished runs
in and starts the rest. Runs are written without an fsync each: result.json carries
the sizes of stdout and stderr, and a run whose files do not match (a host crash cut
it short) is executed again instead of being skipped.

Real batch runner processes; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from benchmatrix.host import batch_runner

RUNNER = Path(batch_runner.__file__)


def _manifest(workdir: Path, ids: list[str], **extra) -> dict:
    runs = [{"run_id": i, "attempt": 1, "seq": n, "timeout": 30, "before_run": [],
             "argv": [sys.executable, "-c", f"print('run {i}')"]} for n, i in enumerate(ids, start=1)]
    return {"experiment": "t", "batch": "b1", "workdir": str(workdir),
            "archive": str(workdir / "batches" / "b1.tar.gz"), "runs": runs, **extra}


def _start(manifest: dict) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, str(RUNNER), "-"], input=json.dumps(manifest),
                         capture_output=True, text=True, timeout=60)
    return res.returncode, json.loads(res.stdout)


def _archived(workdir: Path) -> list[str]:
    with tarfile.open(workdir / "batches" / "b1.tar.gz") as tar:
        return sorted(n.split("/")[1] for n in tar.getnames() if n.endswith("/result.json"))


def test_runner_stops_after_its_time_slice_and_reports_the_rest(tmp_path):
    workdir = tmp_path / "work"
    # A slice of 1 ms: over after the first run (a slice always runs at least one).
    rc, summary = _start(_manifest(workdir, ["a", "b", "c"], stop_after_s=0.001))
    assert rc == 0
    assert summary["executed"] == ["a"] and summary["deferred"] == ["b", "c"]
    assert _archived(workdir) == ["a"]
    # The controller starts the rest as the next slice (a manifest of the runs left).
    rc, summary = _start(_manifest(workdir, ["b", "c"]))
    assert rc == 0 and summary["executed"] == ["b", "c"] and "deferred" not in summary
    assert _archived(workdir) == ["b", "c"]
    # Without stop_after_s nothing is deferred.
    rc, summary = _start(_manifest(tmp_path / "w2", ["a", "b", "c"]))
    assert summary["executed"] == ["a", "b", "c"] and "deferred" not in summary


def test_result_records_output_sizes_and_a_run_cut_short_runs_again(tmp_path):
    workdir = tmp_path / "work"
    rc, summary = _start(_manifest(workdir, ["a", "b", "c"]))
    assert rc == 0 and summary["executed"] == ["a", "b", "c"]
    runs = workdir / "runs"
    result = json.loads((runs / "a" / "1" / "result.json").read_text())
    assert result["output_bytes"] == {"stdout": len("run a\n"), "stderr": 0}
    assert batch_runner.finished(str(runs / "a" / "1"))
    # What a power loss can leave of runs written without fsync: an output shorter
    # than its result.json says, an empty result.json.
    (runs / "a" / "1" / "stdout").write_text("")
    (runs / "b" / "1" / "result.json").write_text("")
    assert not batch_runner.finished(str(runs / "a" / "1"))
    assert not batch_runner.finished(str(runs / "b" / "1"))
    rc, summary = _start(_manifest(workdir, ["a", "b", "c"]))
    assert rc == 0
    assert summary["executed"] == ["a", "b"] and summary["skipped"] == ["c"]
    assert (runs / "a" / "1" / "stdout").read_text() == "run a\n"
    assert batch_runner.finished(str(runs / "b" / "1"))


def test_collect_only_archives_the_finished_runs_and_runs_none(tmp_path):
    """After a batch call that failed once its runner had started (the runner killed on
    the host): the controller starts the runner in collect mode, which archives what
    finished, runs nothing, takes no lease, and defers the rest (also a run cut short)."""
    workdir = tmp_path / "work"
    rc, _ = _start(_manifest(workdir, ["a", "b"]))
    assert rc == 0
    runs = workdir / "runs"
    (runs / "b" / "1" / "stdout").write_text("")  # b cut short (its sizes do not match)
    (runs / "c" / "1.partial").mkdir(parents=True)  # c in flight when the runner died
    (workdir / "batches" / "b1.tar.gz").unlink()
    leases = sorted(p.name for p in (workdir / "batches").glob("*.lease"))
    rc, summary = _start(_manifest(workdir, ["a", "b", "c", "d"], collect_only=True, lease_seconds=300))
    assert rc == 0, summary
    assert summary["executed"] == [] and summary["skipped"] == ["a"] and summary["deferred"] == ["b", "c", "d"]
    assert _archived(workdir) == ["a"]
    assert not (runs / "d").exists() and sorted(p.name for p in (workdir / "batches").glob("*.lease")) == leases
    # The batch's next execution runs what was not collected and skips what was.
    rc, summary = _start(_manifest(workdir, ["a", "b", "c", "d"]))
    assert rc == 0 and summary["skipped"] == ["a"] and summary["executed"] == ["b", "c", "d"]
