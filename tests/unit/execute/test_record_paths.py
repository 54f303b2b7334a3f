"""``bmx run``'s look at the run records written so far (its progress line, the doomed-pass
watch), every second or two while a campaign runs: the records a glob of
``runs/*/*/record.json`` finds, read with os.scandir (issue 34: the glob was most of bmx
run's CPU on a 1600-run campaign)."""

from __future__ import annotations

from pathlib import Path

from benchmatrix.execute.supervise import RunProgress, record_paths


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
    progress.exp = exp
    assert progress.recorded() == set(want)
