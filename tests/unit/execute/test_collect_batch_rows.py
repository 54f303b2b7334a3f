"""Collect reads each finished batch's rows files (batches/BATCH.runs.csv, .notes.csv)
instead of every record.json, and the records only of attempts no rows file holds:
the tables are the same either way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmatrix.execute.collect import collect
from benchmatrix.execute.entry import entry
from benchmatrix.files import atomic_write
from benchmatrix.plan.design import read_plan
from benchmatrix.results.batch_rows import write_batch_rows
from benchmatrix.results.records import write_records
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
SPEC = """name: rows_t
factors: {a: [1, 2]}
replicates: 4
workload:
  role: workload_command
  vars: {argv: [echo, '{{ a }}']}
  metrics: {lat_us: {regex: 'lat (?P<value>[0-9.]+)', unit: us}}
"""
FACTS = {"kernel": "6.1", "cpu_count": 2}


def _record(run, i: int) -> dict:
    ok = i % 5 != 3
    return {"run_id": run.run_id, "attempt": run.attempt, "seq": run.seq, "host": run.host, "cell_id": run.cell_id,
            "replicate": run.replicate, "warmup": run.warmup, "control": run.control, "visit": run.visit,
            "batch": run.batch, "factors": run.factors, "status": "ok" if ok else "failed",
            "reason": "" if ok else "exit 1", "started_at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
            "ended_at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.5+00:00", "duration_s": 0.5,
            "metrics": {"lat_us": {"value": 100 + i * 1.25, "unit": "us"}} if ok else {},
            "host_facts": dict(FACTS, kernel="6.2" if i > 5 else "6.1"),
            "details": {"warnings": ["odd output"]} if i == 2 else {},
            "knobs": {}}


def test_collect_from_batch_rows_equals_collect_from_records(tmp_path):
    project = tmp_path / "proj"
    (project / "config" / "inventory").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "inventory" / "local.yml", project / "config" / "inventory" / "local.yml")
    spec_path = project / "s.yaml"
    spec_path.write_text(SPEC)
    exp = project / "results" / "rows_t"
    plan_path = exp / "plan.csv"
    assert entry("plan", ["--spec", str(spec_path), "--project-dir", str(project), "--out", str(plan_path),
                          "--batch-max-runs", "3"]) == 0
    spec = load_spec(spec_path)
    runs, _ = read_plan(plan_path)
    batches = list(dict.fromkeys(r.batch for r in runs))
    assert len(batches) >= 3
    for b in batches:
        records = [_record(r, i) for i, r in enumerate(runs) if r.batch == b]
        write_records(exp, records)
        if b != batches[-1]:  # the last batch was cut short: records, no rows files, no marker
            meta = write_batch_rows(exp, b, records, spec.factor_names)
            atomic_write(exp / "batches" / f"{b}.done", json.dumps({"batch": b, **meta}) + "\n")
    names = ["runs.csv", "summary.csv", "record_notes.csv", "comparisons.csv"]
    collect(str(spec_path), project, plan_path, render=False)
    from_rows = {n: (exp / n).read_text() for n in names}
    for p in (exp / "batches").glob("*.csv"):
        p.unlink()
    collect(str(spec_path), project, plan_path, render=False)
    from_records = {n: (exp / n).read_text() for n in names}
    assert from_rows["runs.csv"] == from_records["runs.csv"]
    assert len(from_rows["runs.csv"].splitlines()) == len(runs) + 1
    assert from_rows["summary.csv"] == from_records["summary.csv"]
    assert from_rows["comparisons.csv"] == from_records["comparisons.csv"]
    # Notes: the same rows (their order follows the batches, then the records read).
    assert sorted(from_rows["record_notes.csv"].splitlines()) == sorted(from_records["record_notes.csv"].splitlines())
    assert "odd output" in from_rows["record_notes.csv"] and "host_facts" in from_rows["record_notes.csv"]
