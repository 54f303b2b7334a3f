"""Time estimates from earlier campaigns (issue 23, item 4): the fixed seconds a batch
and a restart or reboot cost, measured in this experiment's earlier runs.csv tables,
replace config.yaml's batch_overhead_seconds and cost_seconds in bmx plan and bmx check."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmatrix.cli import main
from benchmatrix.plan.design import make_plan, plan_costs
from benchmatrix.plan.measured_costs import orchestration_costs
from benchmatrix.spec.load import load_spec

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
COLUMNS = ["host", "run_id", "batch", "attempt", "status", "started_at", "ended_at", "duration_s", "ra", "bs"]


def _spec(tmp_path: Path, ra_cost: str = "none"):
    doc = {"name": "t", "factors": {"ra": [0, 4096], "bs": ["4k", "64k"]},
           "knobs": {"ra": {"role": "knob_read_ahead", "cost": ra_cost}},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ bs }}"]}, "estimate_s": 2},
           "replicates": 3, "warmup": 0, "order": {"strategy": "restricted", "seed": 3, "visits": 2}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def _campaign(exp: Path, name: str, batches: list[tuple[float, list[int]]], run_s: float = 2.0,
              in_gap: float = 0.5, host: str = "h1") -> None:
    """Write campaigns/NAME/runs.csv: each batch starts ``gap`` seconds after the last
    run before it and holds runs of ``ra`` levels as given, ``in_gap`` seconds apart."""
    rows: list[dict[str, Any]] = []
    t = T0
    for b, (gap, levels) in enumerate(batches, 1):
        t += timedelta(seconds=gap)
        for i, ra in enumerate(levels):
            if i:
                t += timedelta(seconds=in_gap)
            end = t + timedelta(seconds=run_s)
            rows.append({"host": host, "run_id": f"r{b}-{i}", "batch": f"{host}-b{b:04d}", "attempt": 1,
                         "status": "ok", "started_at": t.isoformat(), "ended_at": end.isoformat(),
                         "duration_s": run_s, "ra": ra, "bs": "4k"})
            t = end
    path = exp / "campaigns" / name / "runs.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Rows in another order than their times: the measurement sorts them itself.
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows(reversed(rows))


def test_without_earlier_campaigns_the_config_figures_stand(tmp_path):
    got = orchestration_costs(_spec(tmp_path), tmp_path / "results" / "t", 3.0)
    assert got.batch_s == 3.0 and got.batch_source == "batch_overhead_seconds in config/config.yaml"
    assert got.class_seconds == {} and got.class_source == ""


def test_a_batch_costs_the_median_of_the_hosts_time_outside_runs(tmp_path):
    exp = tmp_path / "exp"
    # Every batch after the first: 19 s before its first run plus 2 gaps of 0.5 s
    # between its 3 runs; one pause of 300 s (a user who resumed later) is an outlier
    # the median ignores.
    _campaign(exp, "a", [(0, [0, 0, 0]), (19, [0, 0, 0]), (19, [0, 0, 0])])
    _campaign(exp, "b", [(0, [0, 0, 0]), (19, [0, 0, 0]), (300, [0, 0, 0])])
    got = orchestration_costs(_spec(tmp_path), exp, 3.0)
    assert got.batch_s == pytest.approx(20.0)
    assert got.batch_source == "median of 4 batch(es) in 2 earlier campaign(s)"
    assert got.class_seconds == {}


def test_a_single_batch_campaign_measures_nothing(tmp_path):
    exp = tmp_path / "exp"
    _campaign(exp, "a", [(0, [0, 0, 0, 0])])
    got = orchestration_costs(_spec(tmp_path), exp, 3.0)
    assert got.batch_s == 3.0 and "config" in got.batch_source


def test_a_pause_of_over_an_hour_is_no_batch_cost(tmp_path):
    exp = tmp_path / "exp"
    _campaign(exp, "a", [(0, [0, 0]), (7200, [0, 0])])
    assert orchestration_costs(_spec(tmp_path), exp, 3.0).batch_s == 3.0


def test_a_restart_costs_its_batches_extra_time(tmp_path):
    exp = tmp_path / "exp"
    # Batches that change the restart-class knob wait 100 s (80 s restart beyond the
    # batch's own 20 s, in-batch gaps included); the others 20 s.
    _campaign(exp, "a", [(0, [0, 0]), (99.5, [4096, 4096]), (19.5, [4096, 4096]), (99.5, [0, 0]),
                         (19.5, [0, 0])])
    got = orchestration_costs(_spec(tmp_path, "restart"), exp, 3.0)
    assert got.batch_s == pytest.approx(20.0)
    assert got.class_seconds == {"restart": pytest.approx(80.0)}
    assert got.class_source == "restart: median of 2 reconfiguration(s) in 1 earlier campaign(s)"


def test_only_restarts_measured_take_the_config_batch_cost_off(tmp_path):
    exp = tmp_path / "exp"
    _campaign(exp, "a", [(0, [0]), (99.5, [4096, 4096])])
    got = orchestration_costs(_spec(tmp_path, "restart"), exp, 3.0)
    assert got.batch_s == 3.0
    assert got.class_seconds == {"restart": pytest.approx(97.0)}


def test_the_measured_restart_replaces_cost_seconds_in_the_plan(tmp_path):
    spec = _spec(tmp_path, "restart")
    runs = make_plan(spec, ["h1"], 1000, 300, {})
    default = plan_costs(spec, runs, per_run_s=2, batch_overhead_s=3)
    measured = plan_costs(spec, runs, 2, 20, class_seconds={"restart": 80.0})
    assert default["reconfiguration_s"] == default["reconfigurations"]["restart"] * 60
    assert measured["reconfiguration_s"] == measured["reconfigurations"]["restart"] * 80
    assert measured["campaign_s"] == 12 * 2 + measured["batches"] * 20 + measured["reconfiguration_s"]


def test_bmx_plan_takes_the_measured_batch_cost(in_project, capsys):
    spec = "config/experiments/quickstart.yaml"
    name = yaml.safe_load((in_project.root / spec).read_text())["name"]
    exp = in_project.exp(name)
    assert main(["plan", spec, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["batch_overhead_s"] == 3.0 and "config" in before["batch_overhead_source"]
    _campaign(exp, "old", [(0, [0, 0]), (19, [0, 0]), (19, [0, 0])])
    assert main(["plan", spec, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["batch_overhead_s"] == pytest.approx(19.5)
    assert data["batch_overhead_source"] == "median of 2 batch(es) in 1 earlier campaign(s)"
    this = data["this_plan"]
    assert this["orchestration_s"] == pytest.approx(this["batches"] * 19.5 + this["reconfiguration_s"])
    assert main(["plan", spec]) == 0
    assert "batch overhead 19.5 s from median of 2 batch(es)" in capsys.readouterr().out
