"""A local-connection host's runs are copied from its runner's work directory, no archive
(issue 34): the same run directories, results and kept bytes as the archive gives.

Real files and the real runner's functions; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from host_layout import leave_run

from benchmatrix.execute.batch import KEEP_MAX_BYTES, _copy_runs, _unpack_runs
from benchmatrix.host import batch_runner
from benchmatrix.plan.design import PlannedRun


def _planned(run_id: str) -> PlannedRun:
    return PlannedRun(seq=1, host="localhost", run_id=run_id, cell_id="c", replicate=1, warmup=False,
                      control=False, visit=1, batch="b1", attempt=1)


def _tree(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def test_copied_as_the_archive_would_bring_them(tmp_path):
    work = tmp_path / "work"
    leave_run(work, "a", {"stdout": b"runtime: 5us\r\n", "stderr": b"warn\n", "counters.json": b'{"samples": []}',
                          "inputs/job.fio": b"[job]\n"}, counters={"file": "counters.json"})
    leave_run(work, "b", {"stdout": b"b\n", "usage.json": b'{"wall_s": 1}', "counters.json": b"stale"},
              usage={"wall_s": 1})  # counters.json its result does not name: left out, as from an archive
    leave_run(work, "c", {"stdout": b"cut"}, finished=False)  # no result line: not finished
    leave_run(work, "d", {"stdout": b"short"})
    Path(batch_runner.run_file(str(work), "d", 1, "stdout")).write_bytes(b"sh")  # shorter than its line says
    old = Path(batch_runner.old_run_dir(str(work), "e", 1))  # the runner's layout before
    old.mkdir(parents=True)
    (old / "stdout").write_bytes(b"old e\n")
    (old / "stderr").write_bytes(b"")
    (old / "other.txt").write_bytes(b"not the runner's")
    (old / "result.json").write_text(json.dumps({"version": 1, "run_id": "e", "attempt": 1, "exit_code": 0,
                                                 "output_bytes": {"stdout": 6, "stderr": 0}}))
    todo = [_planned(r) for r in "abcde"]
    manifest = {"archive": str(work / "batches" / "b1.tar.gz"), "runs": [{"run_id": r, "attempt": 1} for r in "abcde"]}
    archive = batch_runner._archive(manifest, str(work), batch_runner.finished_runs(str(work), manifest["runs"]))

    packed, direct = tmp_path / "packed", tmp_path / "direct"
    touched_p, touched_d = {"partial": []}, {"partial": []}
    got_p = _unpack_runs(Path(archive), packed, todo, touched_p)
    got_d = _copy_runs(str(work), direct, todo, touched_d)
    assert got_d == got_p
    assert sorted(got_d[0]) == ["a", "b", "e"]
    assert got_d[1]["a"] == {"stdout": b"runtime: 5us\r\n", "stderr": b"warn\n", "counters.json": b'{"samples": []}'}
    assert _tree(direct) == _tree(packed)
    assert "runs/a/1/inputs/job.fio" in _tree(direct) and "runs/b/1/counters.json" not in _tree(direct)
    assert sorted(map(str, touched_d["partial"])) == sorted(str(p).replace(str(packed), str(direct))
                                                             for p in touched_p["partial"])


def test_on_one_file_system_the_runners_files_are_linked_not_copied(tmp_path):
    """A link is a directory entry; a copy a new file, about 0.1 ms each on ext4 here."""
    work, exp = tmp_path / "work", tmp_path / "exp"
    big = b"x" * (KEEP_MAX_BYTES + 1)
    leave_run(work, "a", {"stdout": b"runtime: 5us\n", "counters.json": b'{"samples": []}',
                          "inputs/job.fio": b"[job]\n"}, counters={"file": "counters.json"})
    leave_run(work, "b", {"stdout": big})
    # What a take-in whose records were never written left: replaced, never written through.
    stale = exp / "runs" / "a" / "1" / "stdout"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"stale")
    other = tmp_path / "other"
    other.hardlink_to(stale)
    results, kept = _copy_runs(str(work), exp, [_planned("a"), _planned("b")], {"partial": []})
    assert sorted(results) == ["a", "b"]
    for name in ("stdout", "stderr", "counters.json", "inputs/job.fio"):
        src = batch_runner.run_file(str(work), "a", 1, name.split("/")[0])
        src = f"{src}/job.fio" if name.startswith("inputs") else src
        assert os.path.samefile(exp / "runs" / "a" / "1" / name, src), name
    assert other.read_bytes() == b"stale"
    assert kept["a"] == {"stdout": b"runtime: 5us\n", "stderr": b"", "counters.json": b'{"samples": []}'}
    assert kept["b"] == {"stdout": None, "stderr": b""}  # too large to keep: read back when judged
    assert (exp / "runs" / "b" / "1" / "stdout").read_bytes() == big


def test_across_file_systems_the_runners_files_are_copied(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second file system: /dev/shm beside the test's directory")
    work = Path(tempfile.mkdtemp(dir=shm, prefix="bmx-test-copy-runs-"))
    try:
        leave_run(work, "a", {"stdout": b"runtime: 5us\n", "inputs/job.fio": b"[job]\n"})
        results, kept = _copy_runs(str(work), tmp_path / "exp", [_planned("a")], {"partial": []})
        assert sorted(results) == ["a"] and kept["a"] == {"stdout": b"runtime: 5us\n", "stderr": b""}
        assert (tmp_path / "exp" / "runs" / "a" / "1" / "stdout").read_bytes() == b"runtime: 5us\n"
        assert (tmp_path / "exp" / "runs" / "a" / "1" / "inputs" / "job.fio").read_bytes() == b"[job]\n"
    finally:
        shutil.rmtree(work)
