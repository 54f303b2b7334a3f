"""A campaign's fixed start and end (issue 23): the plan job, preparing and restoring
the hosts, collect, the report and Snakemake's own start cost every campaign the same
seconds whatever its runs; bmx run records when each Snakemake pass started and ended
(campaign.json ``passes``), and bmx plan and bmx check add the fixed part earlier
campaigns measured (else config.yaml's ``campaign_overhead_seconds``) to the estimate."""

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
from benchmatrix.plan.measured_costs import campaign_overhead, orchestration_costs
from benchmatrix.results.campaign import campaign_id, end_pass, read_meta, start_pass
from benchmatrix.spec.config import DEFAULT_CAMPAIGN_OVERHEAD_SECONDS, read_config
from benchmatrix.spec.load import load_spec

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
COLUMNS = ["host", "run_id", "batch", "attempt", "status", "started_at", "ended_at", "duration_s", "ra"]


def _spec(tmp_path: Path):
    doc = {"name": "t", "factors": {"ra": [0, 4096], "bs": ["4k", "64k"]},
           "knobs": {"ra": {"role": "knob_read_ahead", "cost": "none"}},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ bs }}"]}, "estimate_s": 2},
           "replicates": 3, "warmup": 0, "order": {"strategy": "random", "seed": 3}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _campaign(camp: Path, passes: list[dict[str, Any]], runs: dict[str, list[tuple[float, float]]]) -> None:
    """campaign.json with ``passes`` and runs.csv with each host's runs as (start, end) seconds after T0."""
    camp.mkdir(parents=True, exist_ok=True)
    (camp / "campaign.json").write_text(json.dumps({"id": camp.name, "passes": passes}))
    with (camp / "runs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        for host, times in runs.items():
            for i, (start, end) in enumerate(times):
                w.writerow({"host": host, "run_id": f"{host}-{i}", "batch": f"{host}-b0001", "attempt": 1,
                            "status": "ok", "started_at": _at(start), "ended_at": _at(end),
                            "duration_s": end - start, "ra": 0})


def _pass(start: float, end: float | None, outcome: str = "ok") -> dict[str, Any]:
    out = {"started_at": _at(start), "outcome": outcome}
    return {**out, "ended_at": _at(end)} if end is not None else out


def test_without_recorded_passes_the_config_figure_stands(tmp_path):
    got = orchestration_costs(_spec(tmp_path), tmp_path / "none", 3.0, 12.0)
    assert got.campaign_s == 12.0
    assert got.campaign_source == "campaign_overhead_seconds in config/config.yaml"


def test_fixed_cost_is_the_wall_less_the_slowest_hosts_span_and_its_first_batch(tmp_path):
    exp = tmp_path / "exp"
    # Snakemake ran 100 s; h1's runs spanned 10..70 s, h2's 20..50 s; a batch costs 5 s:
    # 100 - 60 - 5 = 35 s of the campaign's own start and end.
    _campaign(exp / "campaigns" / "a", [_pass(0, 100)],
              {"h1": [(10, 30), (40, 70)], "h2": [(20, 50)]})
    assert campaign_overhead(exp, 5.0, 12.0) == (pytest.approx(35.0), "median of 1 earlier campaign(s)")


def test_median_over_campaigns_and_passes_that_measured_nothing_left_out(tmp_path):
    exp = tmp_path / "exp"
    _campaign(exp / "campaigns" / "a", [_pass(0, 50)], {"h1": [(10, 30)]})   # 50 - 20 - 0 = 30
    _campaign(exp / "campaigns" / "b", [_pass(0, 30)], {"h1": [(5, 15)]})    # 20
    _campaign(exp / "campaigns" / "c", [_pass(0, 100)], {"h1": [(10, 20)]})  # 90
    # Interrupted, still running (no end) or with no run of its own: no figure. The
    # runs of an earlier pass are not the later pass's.
    _campaign(exp / "campaigns" / "d", [_pass(0, 40, "interrupted"), _pass(100, None), _pass(200, 210)],
              {"h1": [(10, 20)]})
    _campaign(exp / "campaigns" / "e", [_pass(0, 40, "failed")], {"h1": [(10, 20)]})
    got, source = campaign_overhead(exp, 0.0, 12.0)
    assert got == pytest.approx(30.0) and source == "median of 3 earlier campaign(s)"


def test_a_resumed_campaign_measures_each_completed_pass(tmp_path):
    exp = tmp_path / "exp"
    # First pass cut short, the resume ran the rest: only the resume's window counts.
    _campaign(exp, [_pass(0, 25, "interrupted"), _pass(1000, 1040)],
              {"h1": [(5, 15), (1010, 1020), (1022, 1030)]})
    assert campaign_overhead(exp, 0.0, 12.0)[0] == pytest.approx(40 - 20)


def test_a_span_longer_than_the_wall_measures_no_negative_cost(tmp_path):
    exp = tmp_path / "exp"
    _campaign(exp, [_pass(0, 10)], {"h1": [(0, 10)]})
    assert campaign_overhead(exp, 3.0, 12.0)[0] == 0.0


def test_plan_costs_add_the_campaign_overhead_to_the_campaign_time(tmp_path):
    spec = _spec(tmp_path)
    runs = make_plan(spec, ["h1"], 1000, 300, {})
    without = plan_costs(spec, runs, per_run_s=2, batch_overhead_s=3)
    with_it = plan_costs(spec, runs, 2, 3, campaign_overhead_s=40.0)
    assert without["campaign_overhead_s"] == 0.0
    assert with_it["campaign_overhead_s"] == 40.0
    assert with_it["campaign_s"] == pytest.approx(without["campaign_s"] + 40.0)
    assert with_it["orchestration_s"] == without["orchestration_s"], "the same for every strategy"
    assert plan_costs(spec, runs, None, 3, campaign_overhead_s=40.0)["campaign_s"] is None


def test_passes_are_recorded_in_campaign_json(tmp_path):
    campaign_id(tmp_path)
    first = start_pass(tmp_path)
    meta = read_meta(tmp_path)
    assert first == 0 and set(meta["passes"][0]) == {"started_at"}
    end_pass(tmp_path, first, "ok")
    second = start_pass(tmp_path)
    end_pass(tmp_path, second, "interrupted")
    passes = read_meta(tmp_path)["passes"]
    assert [p["outcome"] for p in passes] == ["ok", "interrupted"]
    assert all(datetime.fromisoformat(p["started_at"]) <= datetime.fromisoformat(p["ended_at"]) for p in passes)


def test_no_campaign_json_no_pass_recorded(tmp_path):
    assert start_pass(tmp_path) is None
    end_pass(tmp_path, None, "ok")
    assert not (tmp_path / "campaign.json").exists()


def test_config_campaign_overhead_seconds(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("campaign_overhead_seconds: 7.5\n")
    assert read_config(cfg).campaign_overhead_seconds == 7.5
    assert read_config(tmp_path / "missing.yaml").campaign_overhead_seconds == DEFAULT_CAMPAIGN_OVERHEAD_SECONDS
    cfg.write_text("spec: x.yaml\ncampaign_overhead_seconds: -2\n")
    with pytest.raises(Exception) as info:
        read_config(cfg)
    assert str(info.value).startswith(f"{cfg}:2: ") and "campaign_overhead_seconds must be" in str(info.value)


def test_bmx_plan_and_check_show_the_campaign_overhead(in_project, capsys):
    spec = "config/experiments/quickstart.yaml"
    name = yaml.safe_load((in_project.root / spec).read_text())["name"]
    exp = in_project.exp(name)
    assert main(["plan", spec, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["campaign_overhead_s"] == DEFAULT_CAMPAIGN_OVERHEAD_SECONDS
    assert "config" in before["campaign_overhead_source"]
    _campaign(exp / "campaigns" / "old", [_pass(0, 100)], {"h1": [(10, 70)]})
    assert main(["plan", spec, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    fixed = 100 - 60 - data["batch_overhead_s"]
    assert data["campaign_overhead_s"] == pytest.approx(fixed)
    assert data["campaign_overhead_source"] == "median of 1 earlier campaign(s)"
    this = data["this_plan"]
    assert this["campaign_overhead_s"] == pytest.approx(fixed)
    assert main(["plan", spec]) == 0
    out = capsys.readouterr().out
    assert f"campaign start and end {fixed:.0f} s from median of 1 earlier campaign(s)" in out
    assert any(line.startswith("campaign start and end") for line in out.splitlines())
