"""``bmx run``'s look at the run records written so far (its progress line, the doomed-pass
watch), every second or two while a campaign runs: the records a glob of
``runs/*/*/record.json`` finds, read with os.scandir (issue 34: the glob was most of bmx
run's CPU on a 1600-run campaign)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmatrix.execute.supervise import RecordIndex, RunProgress, record_paths


def test_every_attempt_with_a_record_and_nothing_else(tmp_path):
    exp = tmp_path / "exp"
    assert record_paths(exp) == {}  # no runs directory yet
    for run, attempt, record in (("r1", "1", True), ("r1", "2", True), ("r2", "1", False), ("r3", "1", True),
                                 ("r3", "tmp", True)):
        d = exp / "runs" / run / attempt
        d.mkdir(parents=True)
        if record:
            (d / "record.json").write_text("{}")
    (exp / "runs" / "stray.txt").write_text("")
    want = {(p.parent.parent.name, int(p.parent.name)): p for p in (exp / "runs").glob("*/*/record.json")
            if p.parent.name.isdigit()}
    assert record_paths(exp) == want == {("r1", 1): exp / "runs/r1/1/record.json",
                                         ("r1", 2): exp / "runs/r1/2/record.json",
                                         ("r3", 1): exp / "runs/r3/1/record.json"}
    assert all(isinstance(p, Path) for p in record_paths(exp).values())
    progress = RunProgress.__new__(RunProgress)
    progress.exp, progress.index = exp, RecordIndex(exp)
    assert progress.recorded() == set(want)


def _write(exp: Path, run: str, attempt: str, record: bool = True) -> None:
    d = exp / "runs" / run / attempt
    d.mkdir(parents=True, exist_ok=True)
    if record:
        (d / "record.json").write_text("{}")


def _age(path: Path, seconds: float = 10.0) -> None:
    """Back-date a directory's mtime: what a look finds once the write is past the
    file system's timestamp granularity."""
    import os
    import time

    t = time.time() - seconds
    os.utime(path, (t, t))


def test_a_look_again_lists_only_the_runs_that_changed(tmp_path, monkeypatch):
    # bmx run looks at the records on every Snakemake progress line, every 2 s and, until a
    # run is ok, every second: 1600 runs were 1600 directory listings a look (about 1 CPU-s
    # of bmx run's in a 16-host campaign, most of its cost beyond one host's).
    import os

    from benchmatrix.execute.supervise import RecordIndex

    exp = tmp_path / "exp"
    index = RecordIndex(exp)
    assert index.look() == {}  # no runs directory yet
    for i in range(20):
        _write(exp, f"r{i}", "1", record=i < 10)
    for d in (exp / "runs").iterdir():
        _age(d)
    assert set(index.look()) == {(f"r{i}", 1) for i in range(10)}
    listed: list[str] = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        listed.append(path if isinstance(path, int) else os.fspath(path))  # shutil.rmtree lists by fd
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    # Nothing changed: only the runs directory is listed again.
    assert set(index.look()) == {(f"r{i}", 1) for i in range(10)}
    assert listed == [str(exp / "runs")]
    # A record written into an attempt directory already seen: found.
    (exp / "runs" / "r15" / "1" / "record.json").write_text("{}")
    assert ("r15", 1) in index.look()
    # A new attempt of a run already seen (its directory changed), a new run: found.
    _write(exp, "r3", "2")
    _write(exp, "r30", "1")
    got = index.look()
    assert ("r3", 2) in got and ("r30", 1) in got and got[("r3", 2)] == exp / "runs/r3/2/record.json"
    # A run removed (a re-run's clean-up): gone.
    import shutil

    shutil.rmtree(exp / "runs" / "r0")
    assert ("r0", 1) not in index.look()
    assert index.look() == record_paths(exp)


def test_a_run_changed_within_the_timestamp_granularity_is_listed_again(tmp_path):
    # A directory's mtime moves in coarse ticks: an attempt added in the same tick as the
    # look before leaves the mtime as that look saw it. A listing that close to the mtime
    # is not trusted: the run is listed once more after RACY_NS, and not at every look in
    # between (a batch's 100 new run directories at each of the looks of those seconds).
    import os

    from benchmatrix.execute.supervise import RACY_NS, RecordIndex

    exp = tmp_path / "exp"
    _write(exp, "r1", "1")
    run = exp / "runs" / "r1"
    st = run.stat()
    clock = [st.st_mtime_ns]  # the look comes in the tick of the mtime
    index = RecordIndex(exp, clock=lambda: clock[0])
    assert set(index.look()) == {("r1", 1)}
    _write(exp, "r1", "2")
    os.utime(run, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same tick as the look before
    clock[0] += RACY_NS // 2
    assert set(index.look()) == {("r1", 1)}  # within the window: not listed again yet
    clock[0] += RACY_NS
    assert set(index.look()) == {("r1", 1), ("r1", 2)}
