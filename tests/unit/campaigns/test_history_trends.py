"""History that sees slides and steps (issue 33, item 6), in seeded Monte Carlo through
the package's own functions: the site's history by
:func:`benchmatrix.campaigns.publish.build_history` on campaign summaries, compare's
history choice by :func:`benchmatrix.analyze.campaign_model.select_history` and its
verdicts by :func:`benchmatrix.campaigns.compare.compare_frames`. The figures in
docs/report.md ("Calibration", "Steps and slides in the history") come from the same
scenarios with BMX_MC_SCALE=10."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled, upper

from benchmatrix.analyze.campaign_model import PRIOR_DOF
from benchmatrix.analyze.changepoint import detect_change
from benchmatrix.campaigns.publish import CampaignPage, build_history
from benchmatrix.campaigns.store import Campaign


def page(rng, k: int, cells: int = 4, n: int = 4, cv: float = 0.05, campaign_sd: float = 0.01,
         factor: float = 1.0) -> CampaignPage:
    """Campaign ``k`` as the site reads it: one summary row per cell of ``n`` lognormal
    runs (CV ``cv``) of a bandwidth around 100 MiB/s times ``factor``, each cell moved by
    the campaign (SD ``campaign_sd``)."""
    sigma = math.sqrt(math.log1p(cv * cv))
    move = 1.0 + rng.normal(0.0, campaign_sd, cells)
    runs = np.exp(rng.normal(-sigma * sigma / 2, sigma, (cells, n))) * 100.0 * (move * factor)[:, None]
    summary = pd.DataFrame({"cell_id": [f"c{i}" for i in range(cells)], "metric": "bw", "unit": "MiB/s", "n": n,
                            "mean": runs.mean(axis=1), "sd": runs.std(axis=1, ddof=1)})
    campaign = Campaign(f"k{k}", Path("/nonexistent"), started_at=f"2026-11-{1 + k:02d}T00:00:00+00:00")
    return CampaignPage(campaign, campaign.id, summary=summary)


def history(rng, factors: list[float], **kw) -> pd.DataFrame:
    """steps.csv of an experiment whose campaigns ran at ``factors`` times the level."""
    return build_history([page(rng, k, factor=f, **kw) for k, f in enumerate(factors)], plots=False).steps


# ------------------------------------------------------------------ the issue's slide

def test_the_issues_four_campaign_slide_is_a_slide_with_a_bounded_interval():
    # 88 -> 27 -> 14 -> 7.5 MiB/s was "no step" (step -84 % [-99.999 %, +193,968 %]).
    rng = np.random.default_rng(60)
    pages = [page(rng, k, cells=1, campaign_sd=0.0, factor=f / 100) for k, f in enumerate([88, 27, 14, 7.5])]
    row = build_history(pages, plots=False).steps.iloc[0]
    assert row["detected"] and row["kind"] == "slide" and row["verdict"] == "lower", row.to_dict()
    # About -56 % a campaign, and the change over the history is bounded on both sides.
    assert -65 < row["slide_pct"] < -45 and row["slide_low_pct"] < row["slide_pct"] < row["slide_high_pct"] < 0
    assert -100 < row["relative_low_pct"] < row["relative_pct"] < row["relative_high_pct"] < -80
    assert row["step_campaign"] == "" and row["after"] < row["before"]


def test_a_step_stays_a_step_and_names_its_campaign():
    change = detect_change(np.log([100, 101, 99, 50, 50.5, 49]), None, 0.02 ** 2, PRIOR_DOF)
    assert change.detected and change.kind == "step" and change.index == 3
    assert change.after - change.before == pytest.approx(math.log(0.5), abs=0.02)
    assert change.p_value == pytest.approx(2 * min(change.p_step, change.p_slide))


# ------------------------------------------------------------------ calibration

def test_a_steady_slide_of_20_percent_a_campaign_over_4_campaigns_is_reported_in_90_percent_of_pages():
    # 4 cells, CV 5 %, n = 4, campaigns moving by 1 %: the bandwidth loses 20 % a campaign.
    rng = np.random.default_rng(61)
    sims = scaled(40)
    reported = sum(history(rng, [0.8 ** k for k in range(4)])["detected"].any() for _ in range(sims))
    assert reported / sims >= 0.9, reported


def test_unchanged_pages_report_a_step_or_slide_at_most_5_percent():
    # Campaigns that move by 2 % (report.campaign_sd's default, the tests' prior, is larger).
    rng = np.random.default_rng(62)
    sims = scaled(60)
    alarms = sum(history(rng, [1.0] * 4, campaign_sd=0.02)["detected"].any() for _ in range(sims))
    assert alarms / sims <= upper(sims), alarms


def test_the_page_and_the_terminal_name_a_slide():
    from benchmatrix.campaigns import publish as site
    from benchmatrix.report.terminal import history_text

    rng = np.random.default_rng(63)
    pages = [page(rng, k, cells=1, campaign_sd=0.0, factor=f / 100) for k, f in enumerate([88, 27, 14, 7.5])]
    rows = build_history(pages, plots=False).steps.to_dict("records")
    text = history_text([p.campaign.name for p in pages], rows)
    assert "steps (1, largest first):" in text and "slide -5" in text and "% a campaign" in text, text
    html = site._environment().get_template("history.html.j2").render(
        name="scan", campaigns=[p.campaign for p in pages], steps=rows, series=rows, series_total=1, tested=1,
        plots=[], tables=[], max_cells=10, max_campaigns=10, alpha=0.05, min_campaigns=3, host_changes=[])
    table = html[html.index('id="step-table"'):html.index("</table>", html.index('id="step-table"'))]
    assert "slide, -5" in table and "a campaign [" in table, table
    assert "Steps and slides" in html and 'id="no-steps"' not in html


def test_one_wide_interval_does_not_flatten_the_history_plot():
    rng = np.random.default_rng(64)
    pages = [page(rng, k) for k in range(4)]
    for p in pages:
        half = 2 * p.summary["sd"] / 2
        p.summary["ci_low"], p.summary["ci_high"] = p.summary["mean"] - half, p.summary["mean"] + half
    (ordinary,) = build_history(pages, plots=True).plots
    assert ordinary["clipped"] == 0 and "beyond the axis" not in ordinary["caption"]
    # One campaign of one cell whose interval reaches 5000x its mean (a run or two).
    pages[2].summary.loc[1, "ci_high"] = pages[2].summary.loc[1, "mean"] * 5000
    (wide,) = build_history(pages, plots=True).plots
    assert wide["clipped"] == 1 and "1 interval end(s) reach beyond the axis" in wide["caption"], wide["caption"]
    # The axis stays where the means are (within +-30 %), not at +500 000 %.
    labels = re.findall(r'id="ytick_\d+">.*?<text[^>]*>([^<]*)</text>', wide["svg"], re.S)
    ticks = [float(t.replace("−", "-").replace(",", "")) for t in labels]
    assert ticks and max(abs(t) for t in ticks) < 100, ticks


# ------------------------------------------------------------------ unbounded everywhere

def test_compare_pages_print_an_interval_beyond_the_bound_as_unbounded(tmp_path):
    from campaign_factory import Campaign as Made
    from campaign_factory import make_experiment

    from benchmatrix.campaigns.compare import compare_campaigns, context, write_comparison
    from benchmatrix.campaigns.store import list_campaigns

    made = make_experiment(tmp_path, campaigns=[Made(label="A"), Made(label="B", shift=0.3)], seed=3)
    a, b = list_campaigns(made.exp)
    result = compare_campaigns(a, b)
    # The issue's bounds: [-100.0, +8213105.8] printed as numbers; compare.csv keeps them.
    result.table.loc[0, ["ci_low_adj_pct", "ci_high_adj_pct"]] = [-100.0, 8213105.8]
    result.table.loc[1, ["ci_low_adj_pct", "ci_high_adj_pct"]] = [-3.3, 4.5]
    rows = context(result)["rows"]
    shown = {r["ci"] for r in rows}
    assert "unbounded" in shown and "[-3.3, +4.5]" in shown, shown
    assert not any("8213105" in r["ci"] for r in rows)
    write_comparison(result, tmp_path / "cmp")
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "8213105" not in md and "unbounded" in md
    assert pd.read_csv(tmp_path / "cmp" / "compare.csv")["ci_high_adj_pct"].max() == pytest.approx(8213105.8)


# ------------------------------------------------------------------ compare's history

def test_a_step_right_before_a_is_cut_from_a_short_history():
    from benchmatrix.analyze.campaign_model import CampaignSummary, select_history

    # Two campaigns at twice A's level, then A: levels are log ratios to A. Tested on
    # their own scatter (1 degree of freedom) the step went unseen, and the outlier rule
    # then left out A itself, estimating the campaign variance from the wrong side.
    old = [CampaignSummary("k0", "old1", level=math.log(2.03)), CampaignSummary("k1", "old2", level=math.log(1.96))]
    a = CampaignSummary("k2", "A", level=0.0)
    chosen = select_history(a, [*old, a])
    assert chosen.used == ("k2",), chosen
    assert [k for k, _ in chosen.left_out] == ["k0", "k1"] and all("step" in why for _, why in chosen.left_out)
    # Campaigns that move by about the prior (2 %) are no step.
    same = [CampaignSummary(f"s{i}", f"s{i}", level=x) for i, x in enumerate([0.021, -0.015, 0.03])]
    assert select_history(a, [*same, a]).used == ("s0", "s1", "s2", "k2")

