"""The history compare chooses (issue 33, item 2), in seeded Monte Carlo through the
package's own functions: levels by :func:`benchmatrix.campaigns.compare.campaign_level`,
the choice by :func:`benchmatrix.analyze.campaign_model.select_history`, the verdicts by
:func:`benchmatrix.campaigns.compare.compare_frames` (docs/report.md, "Across campaigns")."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled, upper

from benchmatrix.analyze.campaign_model import CampaignSummary, select_history
from benchmatrix.analyze.scale import LOG
from benchmatrix.campaigns.compare import _groups, campaign_level, compare_frames

LATENCY = {"lat": {"unit": "ms", "better": "lower"}}


def campaign(rng, cells: int, n: int, cv: float, campaign_sd: float, factor: float = 1.0) -> pd.DataFrame:
    """Effective runs of one campaign: lognormal runs (CV ``cv``) around 100 ms times
    ``factor``, each cell moved by the campaign (SD ``campaign_sd``)."""
    move = 1.0 + rng.normal(0.0, campaign_sd, cells)
    sigma = math.sqrt(math.log1p(cv * cv))
    values = np.exp(rng.normal(-sigma * sigma / 2, sigma, (cells, n))) * 100.0 * (move * factor)[:, None]
    return pd.DataFrame({"run_id": np.arange(cells * n).astype(str),
                         "cell_id": np.repeat([f"c{i:03d}" for i in range(cells)], n), "host": "h1",
                         "status": "ok", "warmup": False, "control": False, "attempt": 1, "lat": values.ravel()})


def judged(a: pd.DataFrame, b: pd.DataFrame, earlier: list[pd.DataFrame]) -> tuple[pd.DataFrame, int]:
    """Compare B with A on the history auto chooses among ``earlier`` and A; the
    number of campaigns left out."""
    ga = {"lat": _groups(a, "lat", LOG)}
    frames = [*earlier, a]
    summaries = [CampaignSummary(f"k{i}", f"k{i}", level=campaign_level(f, ga, {"lat": LOG}))
                 for i, f in enumerate(frames)]
    chosen = select_history(summaries[-1], summaries, "auto")
    history = [f for s, f in zip(summaries, frames) if s.key in chosen.used]
    table = compare_frames(a, b, ["lat"], ["lat"], LATENCY, {"lat": "ms"}, history=history)
    return table, len(chosen.left_out)


def test_an_unchanged_history_is_seldom_cut_and_aa_seldom_exits_1():
    # Five earlier campaigns and A, campaigns moving by 1 %, nothing changed: the step
    # test's false alarms (5 % per history) cut some histories; compare still exits 1
    # in at most 5 % of A/A pairs.
    rng = np.random.default_rng(331)
    sims = scaled(40)
    cut = exits = 0
    for _ in range(sims):
        kw = {"cells": 4, "n": 5, "cv": 0.02, "campaign_sd": 0.01}
        a, b = campaign(rng, **kw), campaign(rng, **kw)
        table, left = judged(a, b, [campaign(rng, **kw) for _ in range(5)])
        cut += left > 0
        exits += (table["verdict"] == "worse").any()
    assert cut / sims <= upper(sims), cut
    assert exits / sims <= upper(sims), exits


@pytest.mark.parametrize(("before", "after", "sims"), [(3, 2, 30), (2, 1, 8)])
def test_after_a_2x_step_the_history_is_cut_and_compare_sees_a_30_percent_change(before, after, sims):
    # Campaigns at twice the latency, then some and A at the present level (CV 5 %, n = 4,
    # 4 cells, campaigns moving by 1 %). The targets: a later +30 % is worse in
    # >= 90 % of cells; the A/A pair after the step exits 0 in >= 95 %. Two at 2x and one
    # after (the step right before A) need the prior in the step test
    # (tests/unit/campaigns/test_history_trends.py).
    rng = np.random.default_rng(332)
    sims = scaled(sims)
    worse_cells = aa_exits = 0
    for _ in range(sims):
        kw = {"cells": 4, "n": 4, "cv": 0.05, "campaign_sd": 0.01}
        earlier = ([campaign(rng, factor=2.0, **kw) for _ in range(before)]
                   + [campaign(rng, **kw) for _ in range(after)])
        a = campaign(rng, **kw)
        slow, _ = judged(a, campaign(rng, factor=1.3, **kw), earlier)
        worse_cells += int((slow["verdict"] == "worse").sum())
        same, _ = judged(a, campaign(rng, **kw), earlier)
        aa_exits += (same["verdict"] == "worse").any()
    assert worse_cells / (4 * sims) >= 0.9, worse_cells
    assert aa_exits / sims <= upper(sims), aa_exits
