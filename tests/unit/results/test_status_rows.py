"""`bmx status` (campaign_status) reads a finished batch's rows file and marker, not
one record.json per run, and counts exactly what the records say (issue 34: at the end
of every `bmx run` it read each record, about 0.2 ms a run)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from campaign_factory import Campaign, make_experiment

from benchmatrix import layout
from benchmatrix.results.batch_rows import MARKER_SUFFIX, ROWS_SUFFIX
from benchmatrix.results.records import write_record
from benchmatrix.results.status import campaign_status
from benchmatrix.spec.load import load_spec


@pytest.fixture()
def made(tmp_path):
    # Three batches of two runs; two measured runs failed; the last batch cut short (no
    # rows file, no marker: its record is read).
    return make_experiment(tmp_path, campaigns=[Campaign(failed=[0, 3], pending=1)], batch_max_runs=2)


def status_of(made):
    return campaign_status(made.exp, load_spec(made.spec_path).factor_names)


def markers(exp: Path) -> list[Path]:
    return sorted((exp / layout.BATCHES_DIR).glob(f"*{MARKER_SUFFIX}"))


def test_status_from_the_rows_is_the_status_from_the_records(made):
    from_rows = status_of(made)
    assert from_rows["totals"]["failed"] == 2 and from_rows["totals"]["pending"] == 1
    # A failed run's log and reason are its record's (the rows file holds no log).
    for f in from_rows["failed"]:
        rec = json.loads(layout.record_path(made.exp, f["run_id"], f["attempt"]).read_text())
        assert (f["log"], f["reason"]) == (rec["log"], rec["reason"]) and f["log"]
    for rows in (made.exp / layout.BATCHES_DIR).glob(f"*{ROWS_SUFFIX}"):
        rows.unlink()  # every record read, as before
    assert status_of(made) == from_rows


def test_a_marker_of_an_older_benchmatrix_has_its_records_read(made):
    from_rows = status_of(made)
    for marker in markers(made.exp):
        meta = json.loads(marker.read_text())
        meta.pop("run_overhead_s")
        marker.write_text(json.dumps(meta) + "\n")
    for record in made.exp.glob(f"{layout.RUNS_DIR}/*/*/{layout.RECORD}"):
        rec = json.loads(record.read_text())
        if rec["status"] == "ok":  # the records now say something the rows do not
            rec["status"] = "timeout"
            record.write_text(json.dumps(rec))
    assert status_of(made)["totals"]["timeout"] == from_rows["totals"]["ok"]


def test_a_finished_batch_costs_no_record_read(made):
    before = status_of(made)
    marked = {row["run_id"] for m in markers(made.exp)
              for row in csv.DictReader(io.StringIO(m.with_name(m.name[:-len(MARKER_SUFFIX)] + ROWS_SUFFIX)
                                                    .read_text()))}
    for run_id in marked:
        record = layout.record_path(made.exp, run_id, 1)
        if json.loads(record.read_text())["status"] == "ok":
            record.unlink()
    assert status_of(made) == before


def test_an_attempt_no_rows_file_holds_is_read_from_its_record(made):
    """A re-run round's attempt whose batch has not finished: its record counts."""
    status = status_of(made)
    run_id = status["failed"][0]["run_id"]
    plan = made.exp / layout.PLAN
    lines = plan.read_text().splitlines()
    header = next(csv.reader([lines[0]]))
    (row,) = [r for r in csv.DictReader(lines) if r["run_id"] == run_id]
    row.update(attempt="2", seq=str(len(lines)), batch="localhost-b9999-00000000")
    buf = io.StringIO()
    csv.DictWriter(buf, header, lineterminator="\n").writerow(row)
    plan.write_text(plan.read_text() + buf.getvalue())
    write_record(made.exp, {"run_id": run_id, "attempt": 2, "cell_id": row["cell_id"], "host": row["host"],
                            "status": "ok", "reason": "", "duration_s": 1.0,
                            "started_at": "2026-01-05T12:00:00+00:00", "ended_at": "2026-01-05T12:00:01+00:00"})
    after = status_of(made)
    assert after["totals"]["ok"] == status["totals"]["ok"] + 1
    assert after["totals"]["failed"] == status["totals"]["failed"] - 1
    assert run_id not in {f["run_id"] for f in after["failed"]}
