"""Issue 38, item 5 and the unbounded rule of item 6: numbers without a comparison on the
terminal and at the report's top; one rule for printing an interval with no useful end.

Results are synthetic: the quickstart spec with seeded runs (as test_report.py builds
them), rendered without plots.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import make_plan, ok_runs

from benchmatrix.analyze.stats import summarize
from benchmatrix.report import render as report
from benchmatrix.report import terminal, units
from benchmatrix.report.render import findings_digest, report_context
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
UNITS = {"read_iops": "IO/s", "read_bw_kib": "KiB/s", "read_clat_mean_us": "us", "read_clat_p99_us": "us"}
PHONE_WIDTH = 390


# ------------------------------------------------------------------ the unbounded rule

@pytest.mark.parametrize(("low", "high", "text"), [
    (-3.14, 4.2, "[-3.1 %, +4.2 %]"),
    (-999.0, 999.0, "[-999.0 %, +999.0 %]"),
    (-100.0, 8213105.8, "unbounded"),                 # the bounds: neither end says anything
    (-100.0, 5.0, "[unbounded, +5.0 %]"),             # a ratio's lower bound at 0 × A
    (-12.0, 1500.0, "[-12.0 %, unbounded]"),
    (float("nan"), float("nan"), "unbounded"),        # Fieller's interval when A's mean could be 0
    (None, 3.0, "[unbounded, +3.0 %]"),
    (-5.0, float("inf"), "[-5.0 %, unbounded]"),
])
def test_one_rule_prints_an_interval_with_no_useful_end_as_unbounded(low, high, text):
    assert units.pct_interval(low, high) == text


def test_a_bound_within_the_limits_keeps_its_number_and_the_suffix_is_the_callers():
    assert units.pct_bound(-99.0) == "-99.0 %" and units.pct_bound(1000.0) == "+1000.0 %"
    assert units.pct_bound(1000.1) == "unbounded" and units.pct_bound(-99.96) == "unbounded"
    assert units.pct_interval(-1.0, 2.0, suffix="") == "[-1.0, +2.0]"


def test_history_on_the_terminal_uses_the_rule():
    step = {"metric": "tps", "cell": "t=1", "step_campaign": "w3", "before": 100.0, "after": 0.001, "unit": "tx/s",
            "relative_pct": -99.99, "relative_low_pct": -100.0, "relative_high_pct": 8213105.8,
            "verdict": "worse", "detected": True}
    text = terminal.history_text(["w1", "w2", "w3"], [step])
    assert "8213105" not in text and "unbounded" in text


# ------------------------------------------------------------------ numbers without a comparison

def bare():
    """The quickstart spec without report.compare."""
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    data = {**spec.data, "report": {**spec.data["report"], "metrics": ["read_bw_kib", "read_clat_p99_us"],
                                    "compare": None}}
    return type(spec)(spec.path, data, spec.digest, spec.cells, spec.knobs)


@pytest.fixture(scope="module")
def bare_spec():
    return bare()


def _plan_and_runs(spec, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    plan = make_plan(spec, replicates=4, warmup=0)
    rng = np.random.default_rng(seed)
    runs = ok_runs(plan, duration_s=1.0)
    # Every cell its own level: bandwidth grows with bs and iodepth, latency with bs.
    scale = runs["bs"].map({"4k": 1.0, "64k": 8.0}) * runs["iodepth"].map({1: 1.0, 8: 3.0})
    runs["read_bw_kib"] = 80_000.0 * scale * rng.normal(1, 0.01, len(runs))
    runs["read_iops"] = runs["read_bw_kib"] / 4
    runs["read_clat_mean_us"] = 40.0 * runs["bs"].map({"4k": 1.0, "64k": 5.0}) * rng.normal(1, 0.01, len(runs))
    runs["read_clat_p99_us"] = runs["read_clat_mean_us"] * 2.5
    return plan, runs


@pytest.fixture(scope="module")
def bare_context(bare_spec):
    plan, runs = _plan_and_runs(bare_spec)
    summary = summarize(runs, bare_spec.factor_names, UNITS)
    return report_context(bare_spec, plan, runs, summary, {}, with_plots=False), summary


def _expected_order(summary: pd.DataFrame, metric: str, best_high: bool) -> list[str]:
    rows = summary[summary["metric"] == metric]
    return rows.sort_values("mean", ascending=not best_high)["cell_id"].tolist()


def test_without_a_comparison_the_terminal_prints_each_cells_numbers_best_first(bare_context, tmp_path):
    context, summary = bare_context
    digest = findings_digest(context, tmp_path)
    json.dumps(digest)                                   # findings.json stays JSON
    text = terminal.findings_text(digest)
    assert "none configured" not in text
    labels = {c["cell_id"]: c["label"] for c in context["cells"]}
    bw = text.split("read_bw_kib")[1].split("read_clat_p99_us")[0]
    lines = [ln for ln in bw.splitlines() if "MiB/s" in ln or "GiB/s" in ln]
    assert len(lines) == 8                               # every cell, in human units (no KiB/s)
    assert "KiB/s" not in bw
    best = _expected_order(summary, "read_bw_kib", best_high=True)
    assert [next(c for c in best if labels[c] in ln) for ln in lines] == best
    # The interval beside the mean, in the mean's unit.
    assert re.search(r"\[\d[\d.,]* – \d[\d.,]*\] (MiB|GiB)/s", lines[0])
    lat = text.split("read_clat_p99_us")[1]
    lat_lines = [ln for ln in lat.splitlines() if re.search(r"\d (µs|ms)\b", ln)]
    assert [next(c for c in _expected_order(summary, "read_clat_p99_us", best_high=False) if labels[c] in ln)
            for ln in lat_lines][:1] == _expected_order(summary, "read_clat_p99_us", best_high=False)[:1]
    assert "lower is better" in text and "higher is better" in text


def test_the_terminals_numbers_are_bounded(bare_context, tmp_path, monkeypatch):
    context, _ = bare_context
    monkeypatch.setattr(terminal, "NUMBERS_SHOWN", 3)
    text = terminal.findings_text(findings_digest(context, tmp_path))
    assert text.count("… and 5 more cells in the report") == 2


def test_without_a_comparison_the_reports_top_shows_the_numbers_best_first(bare_context):
    context, summary = bare_context
    env = report._environment()
    md = env.get_template("report.md.j2").render(context)
    html = env.get_template("report.html.j2").render(context)
    top = md.split("## Summary of findings")[1].split("\n## ")[0]
    labels = {c["cell_id"]: c["label"] for c in context["cells"]}
    best = _expected_order(summary, "read_bw_kib", best_high=True)
    table = top.split("read_bw_kib")[1].split("read_clat_p99_us")[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and ("MiB/s" in ln or "GiB/s" in ln)]
    assert [next(c for c in best if labels[c] in r) for r in rows] == best
    findings = html.split('<section id="findings">')[1].split("</section>")[0]
    assert 'id="numbers"' in findings and "higher is better" in findings
    assert findings.index(labels[best[0]]) < findings.index(labels[best[-1]])


def test_numbers_are_finite_in_the_digest(bare_context, tmp_path):
    context, _ = bare_context
    numbers = findings_digest(context, tmp_path)["numbers"]
    assert [m["metric"] for m in numbers] == ["read_bw_kib", "read_clat_p99_us"]
    assert all(math.isfinite(c["mean"]) for m in numbers for c in m["cells"])


def test_the_reports_comparison_table_uses_the_rule(tmp_path):
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")       # compares iodepth
    plan, runs = _plan_and_runs(spec)
    context = report_context(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), {}, with_plots=False)
    row = context["comparisons"]["rows"][0]
    row["ci_shown_low"], row["ci_shown_high"] = -100.0, 8213105.8
    env = report._environment()
    for name in report.TEMPLATES:
        text = env.get_template(name).render(context)
        section = text.split("Comparisons</h2>" if name.endswith("html.j2") else "## Comparisons")[1]
        assert "8213105" not in section and "unbounded" in section and "unbounded –" not in section, name


def test_with_primary_metrics_only_those_are_the_numbers(tmp_path):
    spec = bare()
    data = {**spec.data, "report": {**spec.data["report"], "primary": ["read_clat_p99_us"]}}
    spec = type(spec)(spec.path, data, spec.digest, spec.cells, spec.knobs)
    plan, runs = _plan_and_runs(spec)
    context = report_context(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), {}, with_plots=False)
    assert [m["metric"] for m in findings_digest(context, tmp_path)["numbers"]] == ["read_clat_p99_us"]


def test_an_interval_can_keep_a_dash_between_its_ends():
    assert units.pct_interval(-1.0, 2.0, "", " – ") == "-1.0 – +2.0"
    assert units.pct_interval(-100.0, 2.0, "", " – ") == "unbounded – +2.0"


def test_with_nothing_decided_the_terminal_still_prints_each_cells_numbers(tmp_path):
    # Issue 38's trial: a compared campaign whose every comparison was inconclusive ended
    # with "no difference decided" and a count, and no figure at all on the terminal.
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")       # compares iodepth
    plan, runs = _plan_and_runs(spec)
    rng = np.random.default_rng(1)
    for metric in ("read_iops", "read_bw_kib", "read_clat_mean_us", "read_clat_p99_us"):
        # No effect of iodepth, and noise far too wide for 4 runs to decide anything.
        runs[metric] = 1000.0 * runs["bs"].map({"4k": 1.0, "64k": 8.0}) * rng.lognormal(0, 0.5, len(runs))
    context = report_context(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), {}, with_plots=False)
    digest = findings_digest(context, tmp_path)
    assert digest["configured"] and not digest["findings"] and digest["counts"].get("inconclusive")
    text = terminal.findings_text(digest)
    assert "no difference decided" in text and "no comparison configured" not in text
    bw = text.split("read_bw_kib (")[1].split("read_clat")[0]
    assert len([ln for ln in bw.splitlines() if re.search(r"\d (MiB|GiB)/s", ln)]) == 8
