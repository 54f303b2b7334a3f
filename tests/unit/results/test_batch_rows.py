"""Each batch job's runs rows and record notes (issue 15), concatenated by
read_batch_rows into what collect derives from every record.json."""

from __future__ import annotations

import io
import json

import pandas as pd

from benchmatrix.analyze.sanity import record_notes
from benchmatrix.files import atomic_write
from benchmatrix.layout import RUN_COLUMNS
from benchmatrix.plan.design import PlannedRun, plan_csv_text
from benchmatrix.results.batch_rows import read_batch_rows, write_batch_rows
from benchmatrix.results.records import runs_rows

FACTS = {"kernel": "6.1", "cpu_count": 2, "gathered_at": "2026-01-01T00:00:00"}


def _record(run: PlannedRun, status: str = "ok", value: float | None = 1.5, **extra) -> dict:
    rec = {"run_id": run.run_id, "attempt": run.attempt, "seq": run.seq, "host": run.host, "cell_id": run.cell_id,
           "replicate": run.replicate, "warmup": run.warmup, "control": run.control, "visit": run.visit,
           "batch": run.batch, "factors": run.factors, "status": status, "reason": "" if status == "ok" else "boom",
           "started_at": f"2026-01-01T00:00:{run.seq:02d}+00:00", "ended_at": None, "duration_s": 0.25,
           "metrics": {} if value is None else {"lat_us": {"value": value, "unit": "us"}},
           "host_facts": dict(FACTS), "details": {}, "knobs": {}}
    return rec | extra


def _write_batch(exp, batch, records, factors):
    meta = write_batch_rows(exp, batch, records, factors)
    atomic_write(exp / "batches" / f"{batch}.done", json.dumps({"batch": batch, **meta}) + "\n")


def test_batch_rows_concatenate_to_collects_runs_table_and_notes(tmp_path):
    factors = ["size"]
    plan = [PlannedRun(i, "h1", f"r{i}", f"c{i % 2}", 1, False, False, 1, "b1" if i <= 2 else "b2", 1,
                       {"size": str(i % 2)}) for i in (1, 2, 3)]
    retry = PlannedRun(4, "h1", "r1", "c1", 1, False, False, 1, "b3", 2, {"size": "1"})
    plan.append(retry)
    atomic_write(tmp_path / "plan.csv", plan_csv_text(plan, factors))
    killed = {"killed": [{"pid": 7, "command": "sleep 9", "signal": "SIGKILL", "after": "timeout"}]}
    b1 = [_record(plan[0], "failed", None), _record(plan[1], value=2)]
    b2 = [_record(plan[2], details=killed, host_facts={**FACTS, "kernel": "6.2"})]
    b3 = [_record(retry, value=3.25)]
    for batch, recs in (("b1", b1), ("b2", b2), ("b3", b3)):
        _write_batch(tmp_path, batch, recs, factors)
    got = read_batch_rows(tmp_path)
    assert got.missing == [] and got.units == {"lat_us": "us"}
    # collect's table: records in plan order, a run's attempts together.
    records = [b1[0], b3[0], b1[1], b2[0]]
    rows, units = runs_rows(records, factors)
    want = pd.read_csv(io.StringIO(pd.DataFrame(rows, columns=RUN_COLUMNS + factors + sorted(units))
                                   .to_csv(index=False)))
    pd.testing.assert_frame_equal(got.rows, want)
    want_notes = record_notes(records).astype(str)
    key = ["run_id", "attempt", "check", "detail"]
    # r3 ran on a new kernel (a change), the retry of r1 on the old one again (another).
    assert sorted(map(tuple, got.notes[key].values)) == sorted(map(tuple, want_notes[key].values))
    assert sorted((r, c) for r, _, c, _ in got.notes[key].values) == [
        ("r1", "host_facts"), ("r3", "host_facts"), ("r3", "killed")]


def test_batches_without_rows_files_are_named_as_missing(tmp_path):
    plan = [PlannedRun(1, "h1", "r1", "c1", 1, False, False, 1, "b1", 1, {"size": "1"})]
    atomic_write(tmp_path / "plan.csv", plan_csv_text(plan, ["size"]))
    atomic_write(tmp_path / "batches" / "b1.done", json.dumps({"batch": "b1", "runs": 1}) + "\n")
    got = read_batch_rows(tmp_path)
    assert got.missing == ["b1"] and got.rows.empty and list(got.rows.columns[:len(RUN_COLUMNS)]) == RUN_COLUMNS


def test_batches_with_different_columns_keep_file_order_and_the_last_copy(tmp_path):
    # The rows files are parsed in runs of files sharing a header: a batch without
    # metrics (every run failed) or with another metric starts a new run of them.
    factors = ["size"]
    plan = [PlannedRun(i, "h1", f"r{i}", "c1", 1, False, False, 1, f"b{i}", 1, {"size": "1"}) for i in (1, 2, 3, 4)]
    atomic_write(tmp_path / "plan.csv", plan_csv_text(plan, factors))
    recs = [_record(plan[0], value=1), _record(plan[1], "failed", None),
            _record(plan[2], value=3) | {"metrics": {"lat_us": {"value": 3, "unit": "us"},
                                                      "iops": {"value": 9, "unit": "1/s"}}},
            _record(plan[3], value=4)]
    for rec in recs:
        _write_batch(tmp_path, rec["batch"], [rec], factors)
    # r1 again under an older batch id that sorts after b1: the copy read last is kept.
    _write_batch(tmp_path, "b9", [_record(plan[0], value=7) | {"batch": "b9"}], factors)
    got = read_batch_rows(tmp_path)
    kept = [recs[0] | {"batch": "b9", "metrics": {"lat_us": {"value": 7, "unit": "us"}}}, *recs[1:]]
    rows, units = runs_rows(kept, factors)
    want = pd.read_csv(io.StringIO(pd.DataFrame(rows, columns=RUN_COLUMNS + factors + sorted(units))
                                   .to_csv(index=False)))
    assert got.units == {"lat_us": "us", "iops": "1/s"}
    pd.testing.assert_frame_equal(got.rows, want)
