"""bmx compare across campaigns that move (issue 33, item 1): one model of the
campaign-to-campaign variation, a prior (report.campaign_sd) pooled with the
experiment's comparable campaigns, in every comparison.

Seeded Monte Carlo through compare_frames, as tests/unit/analyze/test_verdict_calibration.py;
the figures in docs/report.md ("Calibration") come from the same scenarios with
BMX_MC_SCALE=10.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled, upper

from benchmatrix.analyze.campaign_model import PRIOR_DOF
from benchmatrix.campaigns.compare import compare_frames
from benchmatrix.spec.load import DEFAULT_CAMPAIGN_SD

LATENCY = {"lat": {"unit": "ms", "better": "lower"}}
UNITS = {"lat": "ms"}


def campaign(rng, cells: int, n: int, cv: float, campaign_sd: float = 0.0, factor: float = 1.0) -> pd.DataFrame:
    """Effective runs of one campaign: ``cells`` cells of ``n`` lognormal runs (CV ``cv``)
    around 100 ms, each cell's level moved by the campaign (SD ``campaign_sd``) and
    scaled by ``factor``."""
    move = 1.0 + rng.normal(0.0, campaign_sd, cells) if campaign_sd else np.ones(cells)
    sigma = math.sqrt(math.log1p(cv * cv))
    values = np.exp(rng.normal(-sigma * sigma / 2, sigma, (cells, n))) * 100.0 * (move * factor)[:, None]
    return pd.DataFrame({"run_id": np.arange(cells * n).astype(str),
                         "cell_id": np.repeat([f"c{i:03d}" for i in range(cells)], n), "host": "h1",
                         "status": "ok", "warmup": False, "control": False, "attempt": 1, "lat": values.ravel()})


def _compare(a, b, history, **kw):
    return compare_frames(a, b, ["lat"], ["lat"], LATENCY, UNITS, history=history, **kw)


# ------------------------------------------------------------- the model in compare

def test_every_comparison_adds_the_campaign_variance_even_without_a_history():
    rng = np.random.default_rng(1)
    a, b = campaign(rng, 2, 5, 0.02), campaign(rng, 2, 5, 0.02)
    t = _compare(a, b, [a])
    # Only A besides B: the prior alone ("campaigns vary about 2.5 %"), never "threshold".
    assert set(t["basis"]) == {"prior"}
    assert t["campaign_sd_pct"].tolist() == pytest.approx([DEFAULT_CAMPAIGN_SD * 100] * 2)
    assert t.attrs["campaign_models"]["lat"].dof == PRIOR_DOF == 8
    # report.campaign_sd, per metric or for all.
    assert _compare(a, b, None, campaign_sd={"lat": 0.05})["campaign_sd_pct"].tolist() == pytest.approx([5.0, 5.0])
    wide = _compare(a, b, None, campaign_sd=0.05)
    narrow = _compare(a, b, None, campaign_sd=0.0)
    assert (wide["ci_high_pct"] - wide["ci_low_pct"] > narrow["ci_high_pct"] - narrow["ci_low_pct"]).all()
    # With earlier campaigns: pooled.
    t = _compare(a, b, [a, campaign(rng, 2, 5, 0.02), campaign(rng, 2, 5, 0.02)])
    assert set(t["basis"]) == {"pooled"} and t.attrs["campaign_models"]["lat"].dof > PRIOR_DOF


def test_a_history_of_two_campaigns_that_agree_does_not_make_campaigns_look_still():
    # A and one earlier campaign with the same cell means: the history's estimate of
    # the campaign variance is 0 (one degree of freedom; 44 % of such draws). B moved
    # by 3 %, as campaigns of the quickstart do: not a regression to call.
    rng = np.random.default_rng(2)
    a = campaign(rng, 1, 10, 0.01)
    earlier = a.assign(lat=a["lat"] * 1.0)
    b = campaign(rng, 1, 10, 0.01, factor=1.03)
    t = _compare(a, b, [a, earlier])
    assert t["verdict"].tolist() == ["inconclusive"], t[["rel_diff_pct", "ci_low_pct", "ci_high_pct", "basis"]]
    assert t["campaign_sd_pct"].iloc[0] > 1.0


def test_one_shifted_campaign_in_the_history_does_not_blind_compare():
    # The case: a first campaign ran at load 4 (twice the bandwidth), the next
    # two, A among them, at load 20; an I/O hog then costs B 40 % of its bandwidth.
    # Counted as "campaigns wobble", the step made the campaign SD 90-110 % and the
    # loss inconclusive.
    rng = np.random.default_rng(3)
    bw = {"bw": {"unit": "MiB/s", "better": "higher"}}
    first = campaign(rng, 4, 5, 0.05, 0.01, factor=2.0).rename(columns={"lat": "bw"})
    second = campaign(rng, 4, 5, 0.05, 0.01).rename(columns={"lat": "bw"})
    a = campaign(rng, 4, 5, 0.05, 0.01).rename(columns={"lat": "bw"})
    b = campaign(rng, 4, 5, 0.05, 0.01, factor=0.6).rename(columns={"lat": "bw"})
    t = compare_frames(a, b, ["bw"], ["bw"], bw, {"bw": "MiB/s"}, history=[first, second, a])
    model = t.attrs["campaign_models"]["bw"]
    assert model.dropped == (0,) and model.sd_pct < 5.0
    assert set(t["verdict"]) == {"worse"}, t[["rel_diff_pct", "ci_low_adj_pct", "ci_high_adj_pct"]]


# ------------------------------------------------------------- calibration

@pytest.mark.parametrize("history", [0, 2, 5])
@pytest.mark.parametrize("campaign_sd", [0.0, 0.01, 0.03])
@pytest.mark.parametrize("cells", [1, 16])
def test_aa_across_campaigns_exits_1_at_most_5_percent(cells, campaign_sd, history):
    # Nothing changed; runs CV 2 %, the campaigns move by campaign_sd (SD) and the
    # experiment has `history` earlier comparable campaigns besides A. Half the draws
    # with 5 runs a cell, half with 10. bmx compare exits 1 on any worse.
    rng = np.random.default_rng([61, cells, round(campaign_sd * 1000), history])
    sims = scaled(40 if cells == 1 else 16)
    exits = 0
    for i in range(sims):
        kw = {"cells": cells, "n": 5 if i % 2 else 10, "cv": 0.02, "campaign_sd": campaign_sd}
        a, b = campaign(rng, **kw), campaign(rng, **kw)
        t = _compare(a, b, [a, *(campaign(rng, **kw) for _ in range(history))])
        exits += (t["verdict"] == "worse").any()
    assert exits / sims <= upper(sims), exits


@pytest.mark.parametrize("history", [0, 2, 5])
@pytest.mark.parametrize("campaign_sd", [0.01, 0.03])
def test_a_change_exactly_at_the_threshold_is_seldom_called_equivalent(campaign_sd, history):
    # B 5 % slower in every cell, the practical threshold 5 %: `equivalent` claims the
    # change is inside +-5 %, so at most 5 % of comparisons may say it.
    rng = np.random.default_rng([62, round(campaign_sd * 1000), history])
    sims, cells = scaled(12), 4
    equivalent = 0
    for i in range(sims):
        kw = {"cells": cells, "n": 5 if i % 2 else 10, "cv": 0.02, "campaign_sd": campaign_sd}
        a, b = campaign(rng, **kw), campaign(rng, factor=1.05, **kw)
        t = _compare(a, b, [a, *(campaign(rng, **kw) for _ in range(history))])
        equivalent += int((t["verdict"] == "equivalent").sum())
    assert equivalent / (sims * cells) <= upper(sims * cells), equivalent


@pytest.mark.parametrize("history", [0, 2, 5])
def test_one_more_unchanged_campaign_seldom_changes_the_exit(history):
    # The same A and B (one cell, B 5 % slower, campaigns moving by 1 %), judged with
    # `history` earlier campaigns and with one more: the exit may differ in at most 5 %
    # of cases (with the history's estimate alone: 60 % against 71 % exit 1; with a
    # prior of 2 % on 4 degrees of freedom 8-10 % from 0 to 1 earlier campaigns).
    rng = np.random.default_rng([63, history])
    sims = scaled(40)
    flips = 0
    for i in range(sims):
        kw = {"cells": 1, "n": 5 if i % 2 else 10, "cv": 0.02, "campaign_sd": 0.01}
        a, b = campaign(rng, **kw), campaign(rng, factor=1.05, **kw)
        earlier = [a, *(campaign(rng, **kw) for _ in range(history))]
        before = (_compare(a, b, earlier)["verdict"] == "worse").any()
        after = (_compare(a, b, [*earlier, campaign(rng, **kw)])["verdict"] == "worse").any()
        flips += before != after
    assert flips / sims <= upper(sims), flips


def _exit_1_share(rng, factor, sims, cells=1):
    """Share of ``sims`` one-cell comparisons of B = ``factor`` x A that exit 1 (any
    ``worse``) and share of cells ``equivalent``; the draws rotate over run counts 5 and
    10, campaign SDs 1 % and 3 %, and 0, 2 and 5 earlier comparable campaigns."""
    exits = equivalent = 0.0
    for i in range(sims):
        kw = {"cells": cells, "n": (5, 10)[i % 2], "cv": 0.02, "campaign_sd": (0.01, 0.03)[i // 2 % 2]}
        a, b = campaign(rng, **kw), campaign(rng, factor=factor, **kw)
        t = _compare(a, b, [a, *(campaign(rng, **kw) for _ in range((0, 2, 5)[i // 4 % 3]))])
        exits += (t["verdict"] == "worse").any()
        equivalent += (t["verdict"] == "equivalent").mean()
    return exits / sims, equivalent / sims


def test_a_change_at_the_threshold_fails_the_gate_at_most_half_the_time():
    # worse = significant and estimated beyond the threshold: a true change exactly at
    # the 5 % threshold is estimated beyond it half the time, so at most 50 % of gates
    # fail by default; a change of half the threshold fails at most 10 % of them.
    rng = np.random.default_rng(64)
    sims = scaled(24)
    at, equivalent = _exit_1_share(rng, 1.05, sims)
    assert at <= upper(sims, 0.5), at
    assert equivalent <= upper(sims), equivalent
    half, _ = _exit_1_share(rng, 1.025, sims)
    assert half <= upper(sims, 0.1), half
