"""Batches sized by time (issue 15): batch_max_seconds from workload.estimate_s or the
median duration of earlier runs of each cell; batch_max_runs as an upper bound."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import yaml

from benchmatrix.plan.design import make_plan, run_estimates
from benchmatrix.spec.config import read_config
from benchmatrix.spec.load import load_spec


def _spec(tmp_path: Path, estimate_s: float | None = None, replicates: int = 20):
    workload = {"role": "workload_command", "vars": {"argv": ["echo", "{{ size }}"]}}
    if estimate_s is not None:
        workload["estimate_s"] = estimate_s
    doc = {"name": "t", "factors": {"size": [1, 2, 3, 4, 5]}, "workload": workload,
           "replicates": replicates, "warmup": 0, "order": {"strategy": "random", "seed": 3}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def _sizes(runs) -> list[int]:
    return list(Counter(r.batch for r in runs).values())


def test_short_runs_fill_large_batches_and_long_runs_small_ones(tmp_path):
    # 100 runs of 0.1 s: 10 s of work, one batch under a 300 s budget.
    short = make_plan(_spec(tmp_path, 0.1), ["h1"], max_runs=1000, max_seconds=300,
                      estimates=run_estimates(_spec(tmp_path, 0.1), tmp_path))
    assert _sizes(short) == [100]
    # 100 runs of 60 s: five per batch.
    spec = _spec(tmp_path, 60)
    long = make_plan(spec, ["h1"], max_runs=1000, max_seconds=300, estimates=run_estimates(spec, tmp_path))
    assert _sizes(long) == [5] * 20
    # A run longer than the budget gets a batch of its own.
    spec = _spec(tmp_path, 900)
    assert _sizes(make_plan(spec, ["h1"], 1000, 300, run_estimates(spec, tmp_path))) == [1] * 100


def test_batch_max_runs_stays_an_upper_bound(tmp_path):
    spec = _spec(tmp_path, 0.01)
    assert _sizes(make_plan(spec, ["h1"], 30, 300, run_estimates(spec, tmp_path))) == [30, 30, 30, 10]


def test_unknown_durations_fill_batches_up_to_batch_max_runs(tmp_path):
    # A run of unknown duration costs nothing in the time budget: its batch fills up to
    # batch_max_runs (the runner returns results every batch_max_seconds of execution
    # instead, test_runner_stops_after_its_time_slice), so 100 no-op runs are one batch,
    # not two of 50.
    spec = _spec(tmp_path)
    assert run_estimates(spec, tmp_path) == {}
    plan = make_plan(spec, ["h1"], 1000, 300, {})
    assert _sizes(plan) == [100]
    assert _sizes(make_plan(spec, ["h1"], 30, 300, {})) == [30, 30, 30, 10]
    # Deterministic: the same spec plans the same batches.
    assert [r.batch for r in make_plan(spec, ["h1"], 1000, 300, {})] == [r.batch for r in plan]


def test_unknown_durations_still_split_batches_at_every_knob_change(tmp_path):
    doc = {"name": "t", "factors": {"ra": [0, 4096], "size": [1, 2, 3]},
           "knobs": {"ra": {"role": "knob_read_ahead", "cost": "restart"}},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ size }}"]}},
           "replicates": 4, "warmup": 0, "order": {"strategy": "restricted", "seed": 3, "visits": 2}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    runs = make_plan(load_spec(path), ["h1"], 1000, 300, {})
    # One batch per whole-plot visit (2 levels x 2 visits), each one knob setting.
    assert _sizes(runs) == [6, 6, 6, 6]
    for batch in {r.batch for r in runs}:
        assert len({r.factors["ra"] for r in runs if r.batch == batch}) == 1


def test_earlier_runs_give_each_cell_its_median_and_new_cells_the_overall_median(tmp_path):
    spec = _spec(tmp_path)
    cells = [c.cell_id for c in spec.cells]
    rows = [{"cell_id": cells[0], "status": "ok", "duration_s": d} for d in (1.0, 2.0, 9.0)]
    rows += [{"cell_id": cells[1], "status": "ok", "duration_s": 4.0},
             {"cell_id": cells[1], "status": "failed", "duration_s": 100.0},  # failed runs do not count
             {"cell_id": cells[1], "status": "ok", "duration_s": ""}]
    old = tmp_path / "campaigns" / "abc"
    old.mkdir(parents=True)
    for path, part in ((tmp_path / "runs.csv", rows[:2]), (old / "runs.csv", rows[2:])):
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, ["cell_id", "status", "duration_s"])
            w.writeheader()
            w.writerows(part)
    est = run_estimates(spec, tmp_path)
    assert est[cells[0]] == 2.0 and est[cells[1]] == 4.0
    assert est[cells[2]] == 3.0  # median of 1, 2, 9, 4
    # workload.estimate_s wins over earlier runs.
    assert set(run_estimates(_spec(tmp_path, 7.5), tmp_path).values()) == {7.5}


def test_batch_max_seconds_is_read_and_checked_in_config(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("batch_max_seconds: 120\n")
    assert read_config(cfg).batch_max_seconds == 120.0
    cfg.write_text("batch_max_seconds: 0\n")
    try:
        read_config(cfg)
    except Exception as exc:  # SpecErrors, as FILE:LINE: message
        assert "config.yaml:1" in str(exc) and "batch_max_seconds must be a number of seconds > 0" in str(exc)
    else:
        raise AssertionError("batch_max_seconds: 0 was accepted")


def test_shipped_config_sizes_batches_by_time():
    cfg = read_config(Path(__file__).resolve().parents[3] / "config" / "config.yaml")
    assert cfg.batch_max_seconds == 300 and cfg.batch_max_runs == 10000
    assert {"batch_max_seconds", "batch_max_runs", "runner_lease_seconds"} <= cfg.given
