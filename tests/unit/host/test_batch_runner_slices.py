"""The batch runner's time slices and its check of finished runs (issue 15).

A batch may hold up to batch_max_runs runs of unknown duration; ``stop_after_s`` makes
the runner return after that many seconds, so the controller takes the finished runs
in and starts the rest. Runs are written without an fsync each: a run's result line
carries the sizes of stdout and stderr, and a run whose files do not match, or whose
line does not parse (a host crash cut it short), is executed again instead of being
skipped.

Real batch runner processes; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import host_layout

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


def _keys(*ids: str) -> set[tuple[str, str]]:
    return {(i, "1") for i in ids}


def _finished(workdir: Path, ids: str) -> set[tuple[str, str]]:
    return set(batch_runner.finished_runs(str(workdir), [{"run_id": i, "attempt": 1} for i in ids]))


def test_result_records_output_sizes_and_a_run_cut_short_runs_again(tmp_path):
    workdir = tmp_path / "work"
    rc, summary = _start(_manifest(workdir, ["a", "b", "c"]))
    assert rc == 0 and summary["executed"] == ["a", "b", "c"]
    # Flat: a run's files beside each other, its result a line of the index; no directory a run.
    assert sorted(p.name for p in (workdir / "runs").iterdir()) == [
        "a.1.stderr", "a.1.stdout", "b.1.stderr", "b.1.stdout", "c.1.stderr", "c.1.stdout", "results.jsonl"]
    assert host_layout.result(workdir, "a")["output_bytes"] == {"stdout": len("run a\n"), "stderr": 0}
    assert _finished(workdir, "abc") == _keys("a", "b", "c")
    # What a power loss can leave of runs written without fsync: an output shorter than
    # its result says (a), a result line cut short (b's, the index's last).
    host_layout.file(workdir, "a", "stdout").write_text("")
    index = workdir / "runs" / batch_runner.RESULTS_INDEX
    a, b, c, _ = index.read_bytes().split(b"\n")
    index.write_bytes(a + b"\n" + c + b"\n" + b[:60])
    assert _finished(workdir, "abc") == _keys("c")
    rc, summary = _start(_manifest(workdir, ["a", "b", "c"]))
    assert rc == 0
    assert summary["executed"] == ["a", "b"] and summary["skipped"] == ["c"]
    assert host_layout.file(workdir, "a", "stdout").read_text() == "run a\n"
    assert _finished(workdir, "abc") == _keys("a", "b", "c")
    # The cut line was ended before the next was appended: every later line parses.
    lines = index.read_bytes().split(b"\n")
    assert lines[2] == b[:60] and [json.loads(x)["run_id"] for x in lines[3:-1]] == ["a", "b"]
    assert _archived(workdir) == ["a", "b", "c"]


def test_a_work_directory_of_the_layout_before_is_still_read(tmp_path):
    """A campaign whose host got the flat runner mid-campaign: its runs/RUN_ID/ATTEMPT/
    directories (the runner before) count as finished and go into the archive as they are."""
    workdir = tmp_path / "work"
    old = workdir / "runs" / "a" / "1"
    old.mkdir(parents=True)
    (old / "stdout").write_text("old a\n")
    (old / "stderr").write_text("")
    (old / "result.json").write_text(json.dumps({"version": 1, "run_id": "a", "attempt": 1, "exit_code": 0,
                                                 "outcome": "exited", "output_bytes": {"stdout": 6, "stderr": 0}}))
    cut = workdir / "runs" / "b" / "1"  # b cut short under the runner before: run again, flat
    cut.mkdir(parents=True)
    (cut / "result.json").write_text("")
    rc, summary = _start(_manifest(workdir, ["a", "b"]))
    assert rc == 0 and summary["skipped"] == ["a"] and summary["executed"] == ["b"]
    with tarfile.open(workdir / "batches" / "b1.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert members["runs/a/1/stdout"] == b"old a\n" and json.loads(members["runs/a/1/result.json"])["run_id"] == "a"
    assert members["runs/b/1/stdout"] == b"run b\n" and json.loads(members["runs/b/1/result.json"])["run_id"] == "b"
    assert host_layout.result(workdir, "a")["exit_code"] == 0


def test_collect_only_archives_the_finished_runs_and_runs_none(tmp_path):
    """After a batch call that failed once its runner had started (the runner killed on
    the host): the controller starts the runner in collect mode, which archives what
    finished, runs nothing, takes no lease, and defers the rest (also a run cut short)."""
    workdir = tmp_path / "work"
    rc, _ = _start(_manifest(workdir, ["a", "b"]))
    assert rc == 0
    host_layout.file(workdir, "b", "stdout").write_text("")  # b cut short (its sizes do not match)
    host_layout.file(workdir, "c", "stdout").write_text("run")  # c in flight when the runner died
    (workdir / "batches" / "b1.tar.gz").unlink()
    leases = sorted(p.name for p in (workdir / "batches").glob("*.lease"))
    rc, summary = _start(_manifest(workdir, ["a", "b", "c", "d"], collect_only=True, lease_seconds=300))
    assert rc == 0, summary
    assert summary["executed"] == [] and summary["skipped"] == ["a"] and summary["deferred"] == ["b", "c", "d"]
    assert _archived(workdir) == ["a"]
    assert not host_layout.file(workdir, "d", "stdout").exists()
    assert sorted(p.name for p in (workdir / "batches").glob("*.lease")) == leases
    # The batch's next execution runs what was not collected and skips what was.
    rc, summary = _start(_manifest(workdir, ["a", "b", "c", "d"]))
    assert rc == 0 and summary["skipped"] == ["a"] and summary["executed"] == ["b", "c", "d"]


def test_a_short_write_to_the_held_index_is_healed_by_the_next_line(tmp_path, monkeypatch):
    """main() holds the index open for its batch (one write a run); a line a full disk
    cut short lets go of it, so the next line reopens it and ends the cut one first."""
    workdir = str(tmp_path)
    (tmp_path / "runs").mkdir()
    index = tmp_path / "runs" / batch_runner.RESULTS_INDEX
    batch_runner._hold_index(workdir)
    try:
        batch_runner._index_result(workdir, {"run_id": "a"}, None, None)
        real = batch_runner.os.write
        monkeypatch.setattr(batch_runner.os, "write", lambda fd, data: real(fd, data[:5]))
        batch_runner._index_result(workdir, {"run_id": "b"}, None, None)
        monkeypatch.setattr(batch_runner.os, "write", real)
        assert workdir not in batch_runner._index_fds
        batch_runner._index_result(workdir, {"run_id": "c"}, None, None)
    finally:
        batch_runner._release_index(workdir)
    lines = index.read_bytes().split(b"\n")
    assert [json.loads(x)["run_id"] for x in (lines[0], lines[2])] == ["a", "c"] and lines[1] == b'{"run'
    assert lines[3:] == [b""]


def test_a_run_executed_again_never_writes_through_its_earlier_files(tmp_path):
    """The controller's own host links a finished run's files into its results (issue 34):
    a run executed again makes new output files; another name for the old ones keeps its bytes."""
    workdir = tmp_path / "work"
    rc, _ = _start(_manifest(workdir, ["a"]))
    assert rc == 0
    index = workdir / "runs" / batch_runner.RESULTS_INDEX
    index.write_bytes(b"")  # a crash lost a's line: a is executed again
    kept = tmp_path / "kept-stdout"
    kept.hardlink_to(host_layout.file(workdir, "a", "stdout"))
    again = _manifest(workdir, ["a"])
    again["runs"][0]["argv"] = [sys.executable, "-c", "print('again')"]
    rc, summary = _start(again)
    assert rc == 0 and summary["executed"] == ["a"]
    assert kept.read_text() == "run a\n" and kept.stat().st_nlink == 1
    assert host_layout.file(workdir, "a", "stdout").read_text() == "again\n"
