"""Comparing two campaigns (benchmatrix.campaigns.compare): verdict logic on synthetic frames."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze.stats import holm
from benchmatrix.analyze.verdict import adjusted_levels
from benchmatrix.campaigns.compare import (
    CampaignComparison,
    Side,
    compare_campaigns,
    compare_frames,
    provenance,
    write_comparison,
)
from benchmatrix.campaigns.store import Campaign


def runs(values: dict[tuple[str, str], list[float]], metric: str = "tps", host: str = "h1") -> pd.DataFrame:
    """runs.csv rows: {(cell_id, level): [values]} -> one ok measured run per value."""
    rows = []
    for (cell, level), vals in values.items():
        for i, v in enumerate(vals):
            rows.append({"run_id": f"{host}-{cell}-r{i}", "cell_id": cell, "host": host, "status": "ok",
                         "warmup": False, "control": False, "attempt": 1, "x": level, metric: v})
    return pd.DataFrame(rows)


BASE = [100.0, 101.0, 99.0, 100.5, 99.5]


def test_each_cell_gets_a_relative_difference_ci_and_a_verdict_in_the_metrics_direction():
    a = runs({("c1", "1"): BASE, ("c2", "2"): BASE, ("c3", "3"): BASE})
    b = runs({("c1", "1"): [v * 1.10 for v in BASE], ("c2", "2"): [v * 0.9 for v in BASE],
              ("c3", "3"): [100.2, 100.9, 99.1, 100.4, 99.6]})
    # Campaigns of this machine move by about 1 % (report.campaign_sd: 1%).
    t = compare_frames(a, b, ["tps"], ["tps"], {"tps": {"better": "higher"}}, campaign_sd=0.01).set_index("cell_id")
    assert t.loc["c1", "verdict"] == "better" and t.loc["c2", "verdict"] == "worse"
    assert t.loc["c3", "verdict"] == "equivalent"          # its interval lies inside +-5 %
    assert t.loc["c1", "rel_diff_pct"] == pytest.approx(10.0)
    assert t.loc["c1", "ci_low_adj_pct"] < 10.0 < t.loc["c1", "ci_high_adj_pct"]
    assert t.loc["c1", "n_a"] == 5 and t.loc["c1", "mean_b"] == pytest.approx(110.0)
    # A metric that is better lower: the same rise is worse.
    t = compare_frames(a, b, ["tps"], ["tps"], {"tps": {"better": "lower"}}, campaign_sd=0.01).set_index("cell_id")
    assert t.loc["c1", "verdict"] == "worse" and t.loc["c2", "verdict"] == "better"
    # Unknown direction: higher / lower.
    t = compare_frames(a, b, ["tps"], ["tps"], {}, campaign_sd=0.01).set_index("cell_id")
    assert t.loc["c1", "verdict"] == "higher" and t.loc["c2", "verdict"] == "lower"


def test_holm_runs_over_every_row_of_the_family_and_its_intervals_agree_with_the_verdicts():
    rng = np.random.default_rng(3)
    cells = {(f"c{i}", str(i)): list(100 + rng.normal(0, 1, 4)) for i in range(8)}
    shifted = {k: [x + (1.5 if k[0] in ("c0", "c1") else 0) for x in v] for k, v in cells.items()}
    t = compare_frames(runs(cells), runs(shifted), ["tps"], ["tps"], {"tps": {"better": "higher"}})
    assert np.allclose(t["p_value"], holm(t["p_value_unadjusted"]), equal_nan=True)
    levels = adjusted_levels(t["p_value_unadjusted"], 0.05)
    assert (levels[np.isfinite(levels)] >= 0.95).all()
    differs = t["verdict"].isin(["better", "worse"])
    excludes_zero = (t["ci_low_adj_pct"] > 0) | (t["ci_high_adj_pct"] < 0)
    assert (differs == excludes_zero).all()


def test_too_few_runs_are_inconclusive_and_metrics_outside_the_family_are_descriptive():
    a = runs({("c1", "1"): [1.0, 2.0]}) .assign(lat=[5.0, 6.0])
    b = runs({("c1", "1"): [1.1, 2.1]}).assign(lat=[5.5, 6.5])
    t = compare_frames(a, b, ["tps", "lat"], ["tps"], {}).set_index("metric")
    assert t.loc["tps", "verdict"] == "inconclusive"
    assert t.loc["lat", "verdict"] == "descriptive" and np.isnan(t.loc["lat", "p_value"])
    # One run a side: no spread to judge by, no test.
    t = compare_frames(a.iloc[:1], b.iloc[:1], ["tps"], ["tps"], {})
    assert t["verdict"].tolist() == ["insufficient_data"]


def test_only_matching_cells_and_hosts_are_compared():
    a = pd.concat([runs({("c1", "1"): BASE}, host="h1"), runs({("c1", "1"): BASE}, host="h2")])
    b = pd.concat([runs({("c1", "1"): BASE}, host="h1"), runs({("c2", "2"): BASE}, host="h2")])
    t = compare_frames(a, b, ["tps"], ["tps"], {})
    assert list(zip(t["cell_id"], t["host"])) == [("c1", "h1")]


def _side(path, spec, kernel="6.1", argv="x", cid="a"):
    records = [{"cell_id": "c1", "host": "h1", "status": "ok", "warmup": False, "control": False,
                "workload": {"role": "workload_command", "argv": [argv]}, "knobs": {},
                "benchmatrix_version": "0.1.0"}]
    return Side(Campaign(cid, path), pd.DataFrame(), ["x"], spec, {"h1": {"kernel": kernel, "cpu_model": "EPYC"}},
                records)


def test_the_guard_refuses_a_changed_measurement_and_names_a_changed_environment(tmp_path):
    spec = {"workload": {"role": "workload_command", "vars": {"argv": ["x"]}, "timeout": 10}, "warmup": 1}
    a = _side(tmp_path, spec)
    same_but_timeout = json.loads(json.dumps(spec))
    same_but_timeout["workload"]["timeout"] = 99
    m, e, _ = provenance(a, _side(tmp_path, same_but_timeout, kernel="6.6"), [("c1", "h1")])
    assert m == [] and e == [{"kind": "environment", "scope": "host", "host": "h1", "cell_id": "", "what": "kernel",
                              "a": "6.1", "b": "6.6"}]
    edited = json.loads(json.dumps(spec))
    edited["workload"]["vars"]["argv"] = ["y"]
    m, _, _ = provenance(a, _side(tmp_path, edited, argv="y"), [("c1", "h1")])
    assert [(d["scope"], d["what"], d["a"], d["b"]) for d in m] == [("spec", "workload.vars.argv.0", "x", "y"),
                                                                    ("cell", "workload.argv.0", "x", "y")]
    # Without spec.json, the records' rendered argv still catch the edit.
    m, _, notes = provenance(_side(tmp_path, None), _side(tmp_path, None, argv="y"), [("c1", "h1")])
    assert [d["what"] for d in m] == ["workload.argv.0"] and "no spec.json" in notes[0]


def test_exit_codes_and_the_written_files(tmp_path):
    a, b = Campaign("aaa", tmp_path / "a"), Campaign("bbb", tmp_path / "b", label="new kernel")
    ra = runs({("c1", "1"): BASE, ("c2", "2"): BASE})
    rb = runs({("c1", "1"): [v * 0.8 for v in BASE], ("c2", "2"): BASE})
    table = compare_frames(ra, rb, ["tps"], ["tps"], {"tps": {"better": "higher"}}, campaign_sd=0.01)
    table["environment"] = "kernel 6.1 -> 6.6"
    table["x"] = ["1", "2"]
    result = CampaignComparison(a, b, table, factor_names=["x"])
    assert result.exit_code == 1
    paths = write_comparison(result, tmp_path / "out")
    md = paths["compare.md"].read_text()
    assert "worse (kernel 6.1 -> 6.6)" in md and "| tps | x=1 |" in md
    assert "worse (kernel 6.1 -&gt; 6.6)" in paths["compare.html"].read_text()
    assert pd.read_csv(paths["compare.csv"])["verdict"].tolist() == ["worse", "equivalent"]
    assert CampaignComparison(a, b, table[table["cell_id"] == "c2"]).exit_code == 0
    refused = CampaignComparison(a, b, table, measurement=[{"kind": "measurement", "scope": "spec", "host": "",
                                                            "cell_id": "", "what": "workload.vars", "a": "1",
                                                            "b": "2"}])
    assert refused.exit_code == 3          # not comparable: neither a verdict nor a usage error
    paths = write_comparison(refused, tmp_path / "refused")
    assert "Not comparable" in paths["compare.md"].read_text() and "| spec | workload.vars |" in \
        paths["compare.md"].read_text()
    assert pd.read_csv(paths["provenance.csv"])["kind"].tolist() == ["measurement"]
    assert CampaignComparison(a, b, table.iloc[0:0]).exit_code == 3


def test_a_campaign_that_cannot_be_found_exits_2_and_one_never_run_3_with_one_line(tmp_path, monkeypatch, capsys):
    from benchmatrix import cli

    exp = tmp_path / "results" / "x"
    (exp / "campaigns" / "a").mkdir(parents=True)
    (exp / "campaign.json").write_text(json.dumps({"id": "cur000000001", "label": "now"}))
    (exp / "campaigns" / "a" / "campaign.json").write_text(json.dumps({"id": "old000000001"}))
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    assert cli.main(["compare", "old", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no campaign 'nosuch'" in err
    # Found, but never run: no runs.csv to compare, so not comparable.
    assert cli.main(["compare", "old", "now"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no runs.csv yet" in err


def _campaign_dir(path, cid, values, kernel, argv="bench"):
    """A campaign directory as collect leaves it: plan.csv, runs.csv, records, spec.json, facts."""
    from benchmatrix.results.records import write_record

    spec = {"workload": {"role": "workload_command", "vars": {"argv": [argv]},
                         "metrics": {"tps": {"regex": "x", "better": "higher", "unit": "tx/s"}}},
            "report": {"metrics": ["tps"], "campaign_sd": "1%"}}
    path.mkdir(parents=True)
    (path / "campaign.json").write_text(json.dumps({"id": cid, "created_at": "2026-01-01T00:00:00+00:00"}))
    (path / "spec.json").write_text(json.dumps(spec))
    (path / "hosts" / "h1").mkdir(parents=True)
    (path / "hosts" / "h1" / "facts.json").write_text(json.dumps({"kernel": kernel, "cpu_model": "EPYC"}))
    frame = runs(values)
    plan = ["seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,x"]
    for i, r in enumerate(frame.itertuples(), start=1):
        plan.append(f"{i},h1,{r.run_id},{r.cell_id},{i},false,false,1,b1,1,{r.x}")
        write_record(path, {"run_id": r.run_id, "attempt": 1, "status": "ok", "cell_id": r.cell_id, "host": "h1",
                            "warmup": False, "control": False, "workload": {"role": "workload_command",
                                                                            "argv": [argv, r.x]},
                            "knobs": {}, "metrics": {"tps": {"value": r.tps, "unit": "tx/s"}}})
    (path / "plan.csv").write_text("\n".join(plan) + "\n")
    frame.to_csv(path / "runs.csv", index=False)
    return Campaign(cid, path)


def test_compare_campaigns_names_the_environment_change_in_the_verdicts(tmp_path):
    a = _campaign_dir(tmp_path / "a", "aaa000000001", {("c2", "2"): BASE, ("c1", "1"): BASE}, "6.1")
    b = _campaign_dir(tmp_path / "b", "bbb000000001", {("c2", "2"): BASE, ("c1", "1"): [v * 0.9 for v in BASE]},
                      "6.6")
    result = compare_campaigns(a, b)
    t = result.table
    assert result.exit_code == 1 and list(t["x"]) == ["1", "2"] and list(t["verdict"]) == ["worse", "equivalent"]
    assert set(t["environment"]) == {"kernel 6.1 -> 6.6"} and t["unit"].tolist() == ["tx/s", "tx/s"]
    # B's spec.json says campaigns move by about 1 %: no history, so the prior alone.
    assert t["campaign_sd_pct"].tolist() == pytest.approx([1.0, 1.0]) and set(t["basis"]) == {"prior"}
    assert "tps 1 % on 8 df (prior 1 %, report.campaign_sd, alone" in result.basis
    md = write_comparison(result, tmp_path / "out")["compare.md"].read_text()
    assert "| tps (tx/s) | x=1 | 5 | 5 | 100.00 | 90.00 | -10.0 |" in md and "worse (kernel 6.1 -> 6.6)" in md
    assert "| ±5 |" in md and "| ratio | worse" in md
    c = _campaign_dir(tmp_path / "c", "ccc000000001", {("c1", "1"): BASE}, "6.6", argv="other")
    refused = compare_campaigns(a, c)
    assert refused.exit_code == 3 and {d["what"] for d in refused.measurement} == {
        "workload.vars.argv.0", "workload.argv.0"}
    assert refused.only_a == [("c2", "h1")]
