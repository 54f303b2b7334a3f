"""Wall-clock time of what is left (issue 38, items 1 and 2): bmx run's ETA counts the
runs left at their own pace plus the batches and the campaign's tail; an until-decided
round costs a pass of its own, its batches and its runs; bmx plan's until-decided times
are wall times. The figures come from the experiment's earlier campaigns (runs.csv and
campaign.json's passes) or config.yaml's defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_campaign_overhead import T0, _campaign, _pass

from benchmatrix.plan.design import make_plan
from benchmatrix.plan.measured_costs import OrchestrationCosts, orchestration_costs
from benchmatrix.plan.reruns import round_requests
from benchmatrix.plan.wall_time import WallModel, adaptive_seconds, pace_of, round_seconds, seconds_left
from benchmatrix.spec.load import load_spec

COSTS = OrchestrationCosts(batch_s=3.0, batch_source="test", campaign_s=20.0, campaign_source="test",
                           tail_s=8.0, tail_source="test")


def _spec(tmp_path: Path, **extra):
    doc = {"name": "t", "factors": {"bs": ["4k", "64k"]},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ bs }}"]}},
           "replicates": 3, "warmup": 0, "order": {"strategy": "random", "seed": 3}, **extra}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def test_the_tail_is_what_a_pass_took_after_its_last_run(tmp_path):
    exp = tmp_path / "exp"
    # The pass ended at 100 s; h1's last run ended at 70 s, h2's at 50 s: 30 s of
    # restoring, collecting and the report after the last run.
    _campaign(exp / "campaigns" / "a", [_pass(0, 100)], {"h1": [(10, 30), (40, 70)], "h2": [(20, 50)]})
    got = orchestration_costs(_spec(tmp_path), exp, 3.0, 16.0)
    assert got.tail_s == pytest.approx(30.0) and got.tail_source == "median of 1 earlier campaign(s)"
    # Without an earlier pass: half the campaign's fixed seconds of config.yaml.
    fresh = orchestration_costs(_spec(tmp_path), tmp_path / "none", 3.0, 16.0)
    assert fresh.tail_s == 8.0 and "campaign_overhead_seconds" in fresh.tail_source


def test_before_the_first_run_the_eta_is_the_runs_batches_and_tail_from_the_estimates(tmp_path):
    spec = _spec(tmp_path)
    runs = make_plan(spec, ["h1", "h2"], 1000, 300, {})
    model = WallModel(per_cell={c.cell_id: 2.0 for c in spec.cells}, per_run_s=None, costs=COSTS)
    # Each host: 6 runs of 2 s and one batch of 3 s, in parallel; then the 8 s tail.
    assert seconds_left(spec, runs, model) == pytest.approx(6 * 2 + 3 + 8)
    # Nothing known about the runs: no ETA from the model.
    assert seconds_left(spec, runs, WallModel({}, None, COSTS)) is None
    # Every run finished: the tail alone.
    assert seconds_left(spec, [], model) == pytest.approx(8.0)


def test_the_hosts_own_pace_replaces_the_estimate_and_a_started_batch_is_paid(tmp_path):
    spec = _spec(tmp_path)
    runs = make_plan(spec, ["h1"], 1000, 300, {})
    model = WallModel({c.cell_id: 2.0 for c in spec.cells}, None, COSTS)
    # The runner on h1 finished runs at 10 s intervals (host clock, its progress file).
    items = [("h1", f"2026-12-03T00:00:{s:02d}+00:00") for s in (5, 15, 25)]
    pace = pace_of(items)
    assert pace == {"h1": pytest.approx(10.0)}
    left = runs[3:]
    started = {runs[0].batch}
    assert seconds_left(spec, left, model, pace, started) == pytest.approx(3 * 10 + 8)
    # One finished run gives no pace.
    assert pace_of(items[:1]) == {}


def test_an_until_decided_round_costs_a_pass_its_batches_and_its_runs(tmp_path):
    spec = _spec(tmp_path)
    planned = make_plan(spec, ["h1"], 1000, 300, {})
    model = WallModel({c.cell_id: 0.5 for c in spec.cells}, None, COSTS)
    requests = round_requests({("h1", c.cell_id): 5 for c in spec.cells}, {("h1", c.cell_id): 3 for c in spec.cells})
    # 4 new runs of 0.5 s in one batch of 3 s, in a pass whose fixed start and end is 20 s:
    # the runs alone (2 s) were what the budget counted.
    assert round_seconds(spec, planned, requests, model, 1000, 300) == pytest.approx(20 + 3 + 4 * 0.5)


def test_bmx_plans_until_decided_times_are_wall_times(tmp_path):
    spec = _spec(tmp_path)
    planned = make_plan(spec, ["h1"], 1000, 300, {})
    model = WallModel({c.cell_id: 1.0 for c in spec.cells}, None, COSTS)
    walls = adaptive_seconds(spec, planned, [3, 5, 8], model, 1000, 300)
    first = 20 + 3 + 6 * 1.0             # the plan itself: one pass, one batch, 6 runs
    second = first + 20 + 3 + 4 * 1.0    # every cell to 5: a pass, a batch, 4 runs
    third = second + 20 + 3 + 6 * 1.0    # to 8: 6 more
    assert walls == pytest.approx([first, second, third])
    assert adaptive_seconds(spec, planned, [3, 5], WallModel({}, None, COSTS), 1000, 300) is None



def test_bmx_plan_shows_the_until_decided_wall_time(in_project, capsys):
    """``bmx plan``'s "0:00:36 to 0:02:24" counted the measured runs only, about 5x short:
    it is now the wall time (each look a pass with its batches), the fixed plan's
    campaign time at the first look."""
    from benchmatrix.cli import main

    spec = "config/experiments/until_decided.yaml"
    assert main(["plan", spec, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    f, fixed = data["until_decided"], data["this_plan"]
    assert f["seconds_min"] == pytest.approx(fixed["campaign_s"])
    runs_only = f["runs_max"] * data["per_run_s"]
    looks = f["looks"]
    # Every look past the first adds a pass of its own (start and end) and its batches.
    assert f["seconds_max"] >= runs_only + looks * data["campaign_overhead_s"] + looks * data["batch_overhead_s"]
    assert f["wall"] is True
    assert main(["plan", spec]) == 0
    out = capsys.readouterr().out
    assert "; wall time " in out, out


def test_a_round_costs_besides_its_runs_what_this_campaigns_passes_and_looks_took(tmp_path):
    """The budget's figure for a round beyond its runs: the slowest pass less its slowest
    host's runs (plan, batches, restoring, collect, the report), plus twice the longest
    look (judging before the round and after it), from this bmx run's own passes, with
    a margin for a machine whose load grows."""
    from benchmatrix.plan.wall_time import round_overhead

    exp = tmp_path / "exp"
    # Pass 1 took 20 s around 10 s of runs, pass 2 20 s around 6 s; the look between
    # them 4 s, the current one 3 s so far.
    _campaign(exp, [_pass(0, 20), _pass(24, 44)], {"h1": [(5, 10), (10, 15), (30, 33), (33, 36)]})
    t0 = T0.timestamp()
    assert round_overhead(exp, since=t0 - 1, now=t0 + 47) == pytest.approx(1.25 * (14 + 2 * 4))
    # Passes of an earlier bmx run (a resumed campaign) are not this one's looks.
    assert round_overhead(exp, since=t0 + 22, now=t0 + 47) == pytest.approx(1.25 * (14 + 2 * 3))
    assert round_overhead(tmp_path / "none", since=t0, now=t0 + 5) == 0.0


def test_bmx_check_estimates_an_until_decided_campaign_up_to_max_in_wall_time(in_project):
    """bmx check priced the first round alone; an until-decided spec may take every look."""
    from benchmatrix.cli import _check_costs
    from benchmatrix.layout import exp_dir_of
    from benchmatrix.spec.config import project_config

    spec = load_spec(in_project.root / "config" / "experiments" / "until_decided.yaml")
    cfg = project_config(in_project.root)
    costs, _ = _check_costs(spec, in_project.root, exp_dir_of(in_project.root, spec), cfg)
    assert costs["until_decided_max_s"] > 3 * costs["campaign_s"], costs   # 4 looks, each a pass
    plain = load_spec(in_project.root / "config" / "experiments" / "quickstart.yaml")
    assert _check_costs(plain, in_project.root, exp_dir_of(in_project.root, plain), cfg)[0][
        "until_decided_max_s"] is None
