"""Issue 38, item 6: plots a wide interval cannot flatten, the site index's headline and
the site's history by the unbounded rule.

Results are synthetic: the quickstart spec with seeded runs, campaign directories with
the files publish reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_readable_numbers import UNITS, _plan_and_runs, bare

from benchmatrix.analyze.stats import summarize
from benchmatrix.campaigns.publish import publish
from benchmatrix.campaigns.store import Campaign
from benchmatrix.report import plots

PHONE_WIDTH = 390


# ------------------------------------------------------------------ compare pages

# ------------------------------------------------------------------ plots

def test_robust_limits_keep_ordinary_intervals_and_clip_a_wild_one():
    means = np.array([100.0, 110.0, 120.0, 130.0])
    lows, highs = means - 5, means + 5
    assert plots.robust_limits(means, lows, highs) == (95.0, 135.0)       # nothing clipped
    highs[2] = 1e6
    lows[1] = -1e6
    lo, hi = plots.robust_limits(means, lows, highs)
    assert 135.0 <= hi < 500.0 and -400.0 < lo <= 95.0


def test_a_wide_interval_does_not_flatten_the_line_plot():
    bare_spec = bare()
    plan, runs = _plan_and_runs(bare_spec)
    summary = summarize(runs, bare_spec.factor_names, UNITS)
    p99 = summary["metric"] == "read_clat_p99_us"
    first = summary.index[p99][0]
    summary.loc[first, "ci_high"] = summary.loc[first, "mean"] * 5000
    drawn = plots.factor_lines(bare_spec, summary, ["read_clat_p99_us"], UNITS, [])
    assert len(drawn) == 1
    assert "clipped" in drawn[0].caption
    ordinary = plots.factor_lines(bare_spec, summarize(runs, bare_spec.factor_names, UNITS),
                                  ["read_clat_p99_us"], UNITS, [])
    assert "clipped" not in ordinary[0].caption


# ------------------------------------------------------------------ the site index

def _campaign_dir(path: Path, cid: str, created: str, decided: list[str], total: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "campaign.json").write_text(json.dumps({"id": cid, "created_at": created, "label": cid}))
    pd.DataFrame([{"cell_id": "t1", "metric": "tps", "unit": "tx/s", "n": 3, "mean": 10.0, "ci_low": 9.0,
                   "ci_high": 11.0}]).to_csv(path / "summary.csv", index=False)
    findings = {"experiment": path.name, "configured": True, "total": total, "counts": {},
                "findings": [{"sentence": s, "verdict": "better", "metric": "tps", "rel_diff_pct": 10.0 - i,
                              "ci_low_pct": 1.0, "ci_high_pct": 20.0} for i, s in enumerate(decided)],
                "warnings": [], "report": {"html": "", "md": ""}}
    (path / "findings.json").write_text(json.dumps(findings))


def test_the_site_index_opens_with_the_latest_findings(tmp_path):
    results = tmp_path / "results"
    _campaign_dir(results / "old" / "campaigns" / "c1", "o1", "2026-01-01T10:00:00Z", ["stale finding"], 2)
    _campaign_dir(results / "old", "o2", "2026-01-02T10:00:00Z", ["old: threads=8 vs 1: +5.0% tps"], 4)
    sentences = [f"threads={n} vs 1: +{n}.0% tps" for n in (9, 8, 7, 6, 5)]
    _campaign_dir(results / "scan", "s1", "2026-02-01T10:00:00Z", sentences, 12)
    publish(results, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    body = index.split("<body>")[1] if "<body>" in index else index
    head = body[:body.index('id="experiments"')]
    assert 'id="latest"' in head
    # The newest campaign's experiment first, its decided count and its top findings.
    assert head.index("scan") < head.index("old")
    assert "5 of 12 comparisons decided" in head and "1 of 4 comparisons decided" in head
    assert sentences[0] in head and sentences[2] in head and sentences[4] not in head
    assert "stale finding" not in head


def test_a_site_index_without_findings_says_so(tmp_path):
    results = tmp_path / "results"
    path = results / "plain"
    path.mkdir(parents=True)
    (path / "campaign.json").write_text(json.dumps({"id": "p1", "created_at": "2026-01-01T10:00:00Z"}))
    publish(results, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    head = index[:index.index('id="experiments"')]
    assert 'id="latest"' in head and "no report" in head




def test_a_wide_interval_does_not_squeeze_the_throughput_bars():
    spec = bare()
    plan, runs = _plan_and_runs(spec)
    summary = summarize(runs, spec.factor_names, UNITS)
    labels = {c.cell_id: c.cell_id for c in spec.cells}
    (ordinary,) = plots.latency_beside_throughput(spec, summary, ["read_bw_kib", "read_clat_p99_us"], UNITS,
                                                  labels, [])
    assert "clipped" not in ordinary.caption
    bw = summary.index[summary["metric"] == "read_bw_kib"][0]
    summary.loc[bw, "ci_high"] = summary.loc[bw, "mean"] * 5000
    (wide,) = plots.latency_beside_throughput(spec, summary, ["read_bw_kib", "read_clat_p99_us"], UNITS, labels, [])
    assert "1 interval end(s) reach beyond the axis" in wide.caption


def test_the_site_history_page_uses_the_unbounded_rule():
    from benchmatrix.campaigns import publish as site

    step = {"cell": "t=1", "metric": "tps", "unit": "tx/s", "step_campaign": "w3", "before": 100.0, "after": 0.001,
            "relative_pct": -99.99, "relative_low_pct": -100.0, "relative_high_pct": 8213105.8,
            "p_adjusted": 0.001, "verdict": "worse"}
    page = site._environment().get_template("history.html.j2").render(
        name="scan", campaigns=[Campaign(f"c{i}", Path(f"/c{i}")) for i in range(8)], steps=[step], series=[],
        series_total=0, tested=1, plots=[], tables=[], max_cells=10, max_campaigns=10, alpha=0.05, min_campaigns=6,
        host_changes=[])
    table = page[page.index('id="step-table"'):]
    assert "8213105" not in table and "unbounded" in table


def _x_tick_labels(svg: str) -> list[list[tuple[float, str]]]:
    """Each plot panel's x tick labels as drawn in the SVG: (x position, text); a label drawn
    as mathtext (``10^{-1}``) is kept as its TeX so a test can refuse it. The axis' title
    lies below its tick labels and is left out."""
    panels = []
    for axis in re.findall(r'<g id="matplotlib\.axis_\d+">(.*?)(?=<g id="matplotlib\.axis_\d+">|<g id="patch_|$)',
                           svg, re.S):
        if '<g id="xtick_' not in axis:
            continue
        found = []
        for tex in re.finditer(r"<!-- (\$.*?\$) -->\s*<g transform=\"translate\(([\d.]+) ([\d.]+)\)", axis):
            found.append((float(tex.group(3)), float(tex.group(2)), tex.group(1)))
        plain = r'<text style="font-size: [\d.]+px[^"]*"[^>]* x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]+)</text>'
        for text in re.finditer(plain, axis):
            found.append((float(text.group(2)), float(text.group(1)), text.group(3)))
        top = min(y for y, _, _ in found)
        panels.append(sorted((x, t) for y, x, t in found if y < top + 5))
    return panels


def _latency_svg(scale_p99: float) -> str:
    spec = bare()
    plan, runs = _plan_and_runs(spec)
    summary = summarize(runs, spec.factor_names, UNITS)
    p99 = summary["metric"] == "read_clat_p99_us"
    for col in ("mean", "ci_low", "ci_high"):
        summary.loc[p99, col] = summary.loc[p99, col] * scale_p99
    labels = {c.cell_id: c.cell_id for c in spec.cells}
    (plot,) = plots.latency_beside_throughput(spec, summary, ["read_bw_kib", "read_clat_mean_us", "read_clat_p99_us"],
                                              UNITS, labels, [])
    return plot.svg


@pytest.mark.parametrize("scale_p99", [1.0, 30.0, 3000.0], ids=["linear", "log", "wide-log"])
def test_the_latency_plots_x_ticks_are_plain_numbers_that_do_not_run_together(scale_p99):
    panels = _x_tick_labels(_latency_svg(scale_p99))
    assert len(panels) == 2, panels  # throughput, latency
    for labels in panels:
        assert 2 <= len(labels) <= 6, labels
        assert all(re.fullmatch(r"-?[0-9][0-9,]*(\.[0-9]+)?", text) for _, text in labels), labels
        # 9 px DejaVu Sans: a digit or comma is at most 0.64 em wide; a gap of 4 px between neighbours.
        for (x1, t1), (x2, t2) in zip(labels, labels[1:]):
            assert x2 - x1 >= 0.64 * 9 * (len(t1) + len(t2)) / 2 + 4, (t1, t2, x2 - x1)
