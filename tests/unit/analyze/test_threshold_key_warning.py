"""A report.threshold key that validation could not check is warned of in the report
(issue 35, item 8, follow-up).

A workload whose metric names come from its output alone (a project's own role; a
workload_command without declared ``metrics`` is timed by bmx, its names known) cannot
have its threshold keys checked by ``bmx validate``: a misspelt key silently left its
metric at the default. Collect's
tables now carry a report warning (one line, naming the key) for each key that names
no metric of the runs; a key of a checked spec stays quiet even when these runs lack
its metric (a read-only fio job has no write metrics).
"""

from __future__ import annotations

import pandas as pd

from benchmatrix.analyze.tables import derive_tables
from benchmatrix.spec.load import load_spec

SPEC = """\
name: t
factors:
  a: [1, 2]
workload:
  role: {role}
  vars:
    argv: [echo, "{{{{ a }}}}"]
replicates: 3
warmup: 0
report:
  threshold: {{default: 5%, tps: 10%, tsp: 20%, write_iops: 10%}}
"""


def tables_of(tmp_path, role: str):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(role=role))
    spec = load_spec(path)
    rows = []
    for cell in spec.cells:
        for i in range(3):
            rows.append({"seq": len(rows) + 1, "host": "h1", "run_id": f"{cell.cell_id}-{i}", "cell_id": cell.cell_id,
                         "replicate": i + 1, "warmup": "false", "control": "false", "visit": 1, "batch": 1,
                         "attempt": 1, **cell.factors})
    plan = pd.DataFrame(rows)
    runs = plan.copy()
    runs["status"], runs["reason"], runs["duration_s"] = "ok", "", 1.0
    runs["started_at"] = runs["ended_at"] = "2026-12-02T10:00:00Z"
    runs["tps"] = [100.0 + i for i in range(len(runs))]
    return derive_tables(spec, plan, runs, {"tps": "tx/s"}, records=[])


def threshold_warnings(tables) -> list[dict]:
    return [w for w in tables.checks.warnings if w["check"] == "threshold_key"]


def test_a_key_no_run_holds_is_warned_of_when_validation_could_not_check(tmp_path):
    # A project's own role: its names come from its output (a command without declared
    # metrics is timed by bmx, so validation checks its keys).
    found = threshold_warnings(tables_of(tmp_path, "workload_site"))
    assert [w["title"] for w in found] == ["report.threshold names 'tsp', which no run's metrics hold",
                                           "report.threshold names 'write_iops', which no run's metrics hold"]
    assert "\n" not in found[0]["message"]
    assert "the default threshold (5%) applies to it" in found[0]["message"]


def test_keys_validation_checked_are_not_warned_of(tmp_path):
    # workload_fio's names are known before the runs: write_iops is one, just not measured here.
    text = SPEC.replace("tsp: 20%, ", "")
    path = tmp_path / "spec.yaml"
    path.write_text(text.format(role="workload_fio"))
    spec = load_spec(path)
    plan = pd.DataFrame([{"seq": 1, "host": "h1", "run_id": "r1", "cell_id": spec.cells[0].cell_id, "replicate": 1,
                          "warmup": "false", "control": "false", "visit": 1, "batch": 1, "attempt": 1,
                          **spec.cells[0].factors}])
    runs = plan.assign(status="ok", reason="", duration_s=1.0, started_at="2026-12-02T10:00:00Z",
                       ended_at="2026-12-02T10:00:01Z", read_iops=1000.0)
    tables = derive_tables(spec, plan, runs, {"read_iops": "IO/s"}, records=[])
    assert threshold_warnings(tables) == []
