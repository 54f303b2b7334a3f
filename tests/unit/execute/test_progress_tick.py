"""`bmx run` prints progress in runs, not Snakemake jobs (issue 23): one batch job may
hold one run or a thousand, and Snakemake prints a line only when a job ends; while a
long batch runs, a line every 30 s counts the records written and the runs finished on
the hosts (issue 15)."""

from __future__ import annotations

import json
import os

from benchmatrix.execute.supervise import RunProgress, progress_tick


def _plan(exp, attempts: int) -> None:
    (exp / "plan.csv").write_text("seq,host,run_id\n" + "".join(f"{i},h,r{i}\n" for i in range(1, attempts + 1)))


def _record(exp, run_id: str) -> None:
    (exp / "runs" / run_id / "1").mkdir(parents=True)
    (exp / "runs" / run_id / "1" / "record.json").write_text("{}")


def test_progress_line_counts_records_and_runs_finished_on_the_hosts(tmp_path):
    exp = tmp_path
    progress = RunProgress(exp, t0=0.0)
    progress.start = 0.0
    assert progress_tick(progress, 5, None) == (None, (0, 0))  # nothing yet: no line
    (exp / "batches").mkdir()
    (exp / "batches" / "b1.progress.json").write_text(json.dumps(
        {"batch": "b1", "finished": [{"run_id": "r1", "attempt": 1}, {"run_id": "r2", "attempt": 1}]}))
    line, last = progress_tick(progress, 65, (0, 0))
    # No plan.csv (yet): no total. Two runs done in 65 s but the plan is unknown: no ETA.
    assert line == "bmx: 0 run records, 2 more finished on the hosts, elapsed 0:01:05"
    _plan(exp, 10)
    # The first slice's records are written: r1 no longer counts as only on the host.
    _record(exp, "r1")
    line, last = progress_tick(progress, 90, last)
    # 2 of 10 finished in 90 s: 8 left at that rate take 360 s.
    assert line == "bmx: 1/10 runs done, 1 more finished on the hosts, elapsed 0:01:30, ETA 0:06:00"
    assert progress_tick(progress, 125, last) == (None, last)  # unchanged: no line


def test_the_eta_counts_this_passs_runs_not_earlier_ones(tmp_path):
    """Records of an earlier pass (a resumed campaign) do not make this one look fast."""
    exp = tmp_path
    _plan(exp, 8)
    for r in ("r1", "r2", "r3", "r4"):
        _record(exp, r)
    progress = RunProgress(exp, t0=0.0)
    progress.start = 100.0
    # Nothing new yet: the ETA falls back on the jobs' rate (1 of 3 jobs in 60 s).
    assert progress.line(160.0, 4, jobs=(1, 3)) == "bmx: 4/8 runs done, 1/3 jobs, elapsed 0:02:40, ETA 0:02:00"
    _record(exp, "r5")
    _record(exp, "r6")
    # 2 runs of this pass in 60 s; 2 left: 60 s.
    assert progress.line(160.0, progress.records(), jobs=(2, 3)) == \
        "bmx: 6/8 runs done, 2/3 jobs, elapsed 0:02:40, ETA 0:01:00"


def test_the_plans_attempts_are_read_again_when_it_changes(tmp_path):
    exp = tmp_path
    _plan(exp, 3)
    progress = RunProgress(exp, t0=0.0)
    assert progress.planned() == 3
    _plan(exp, 5)  # a re-run round appended
    os.utime(exp / "plan.csv", (1, 1))
    assert progress.planned() == 5
