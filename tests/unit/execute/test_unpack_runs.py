"""A batch archive is unpacked straight into the runs' directories (issue 15: no
staging copy per run), taking only the runner's files of the batch's own attempts."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from benchmatrix.errors import ResultChannelError
from benchmatrix.execute.batch import _unpack_runs
from benchmatrix.plan.design import PlannedRun


def _run(run_id: str, attempt: int = 1) -> PlannedRun:
    return PlannedRun(seq=1, host="h1", run_id=run_id, cell_id="c", replicate=1, warmup=False, control=False,
                      visit=1, batch="b", attempt=attempt)


def _archive(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_only_the_batchs_run_files_are_unpacked(tmp_path):
    exp = tmp_path / "exp"
    archive = tmp_path / "b.tar.gz"
    _archive(archive, {
        "runs/a/1/result.json": json.dumps({"run_id": "a", "duration_s": 1.5}).encode(),
        "runs/a/1/stdout": b"out a\n",
        "runs/a/1/stderr": b"",
        "runs/a/1/inputs/job.fio": b"[job]\n",
        "runs/a/1/other.txt": b"not the runner's",
        "runs/a/1/inputs/../../../../escape": b"no",
        "runs/b/2/result.json": b"{}",  # an attempt this slice did not ask for
        "runs/b/2/stdout": b"b",
        "../outside": b"no",
        "runs/c/1/result.json": json.dumps({"run_id": "c"}).encode(),  # no output files at all
    })
    touched: dict = {"partial": []}
    results, kept = _unpack_runs(archive, exp, [_run("a"), _run("b", 1), _run("c")], touched)
    assert results == {"a": {"run_id": "a", "duration_s": 1.5}, "c": {"run_id": "c"}}
    # What judging reads is kept as unpacked (no read back), nothing else.
    assert kept == {"a": {"stdout": b"out a\n", "stderr": b""}}
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["b.tar.gz", "exp/runs/a/1/inputs/job.fio", "exp/runs/a/1/stderr", "exp/runs/a/1/stdout"]
    assert (exp / "runs" / "a" / "1" / "stdout").read_bytes() == b"out a\n"
    assert (exp / "runs" / "c" / "1").is_dir()  # every run with a result gets its directory
    assert sorted(str(p.relative_to(exp)) for p in touched["partial"]) == ["runs/a/1", "runs/c/1"]


def test_a_file_too_large_to_keep_is_left_to_be_read_back(tmp_path, monkeypatch):
    import benchmatrix.execute.batch as batch

    monkeypatch.setattr(batch, "KEEP_MAX_BYTES", 4)
    archive = tmp_path / "b.tar.gz"
    _archive(archive, {"runs/a/1/result.json": b"{}", "runs/a/1/stdout": b"12345", "runs/a/1/stderr": b"1234",
                       "runs/a/1/counters.json": b"{}"})
    _, kept = _unpack_runs(archive, tmp_path / "exp", [_run("a")], {"partial": []})
    assert kept == {"a": {"stdout": None, "stderr": b"1234", "counters.json": b"{}"}}
    assert (tmp_path / "exp" / "runs" / "a" / "1" / "stdout").read_bytes() == b"12345"


def test_a_slice_keeps_no_more_than_its_budget_in_memory(tmp_path, monkeypatch):
    import benchmatrix.execute.batch as batch

    monkeypatch.setattr(batch, "KEEP_TOTAL_BYTES", 10)
    archive = tmp_path / "b.tar.gz"
    _archive(archive, {"runs/a/1/result.json": b"{}", "runs/a/1/stdout": b"123456", "runs/a/1/stderr": b"",
                       "runs/b/1/result.json": b"{}", "runs/b/1/stdout": b"123456", "runs/b/1/stderr": b"1"})
    _, kept = _unpack_runs(archive, tmp_path / "exp", [_run("a"), _run("b")], {"partial": []})
    assert kept == {"a": {"stdout": b"123456", "stderr": b""}, "b": {"stdout": None, "stderr": b"1"}}


def test_an_archive_that_cannot_be_read_is_a_named_error_naming_it(tmp_path):
    archive = tmp_path / "b.tar.gz"
    _archive(archive, {"runs/a/1/result.json": b"{}", "runs/a/1/stdout": b"x" * 5000})
    archive.write_bytes(archive.read_bytes()[:-40])  # the gzip stream cut short
    with pytest.raises(ResultChannelError, match=f"the batch archive {archive} cannot be read"):
        _unpack_runs(archive, tmp_path / "exp", [_run("a")], {"partial": []})
