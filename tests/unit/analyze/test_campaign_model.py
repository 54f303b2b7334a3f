"""The model of campaign-to-campaign variation (benchmatrix.analyze.campaign_model):
a prior pooled with the history's estimate, an outlying campaign left out."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze.campaign_model import PRIOR_DOF, campaign_offsets, model, outlying, pool


def _stats(rng, series: int, n: int, noise: float, move: float, level: float = 0.0) -> pd.DataFrame:
    """count/mean/var of ``series`` series of ``n`` log values, the campaign moving
    every series' level by ``move`` plus its own N(0, noise) runs."""
    values = level + move + rng.normal(0.0, noise, (series, n))
    return pd.DataFrame({"count": n, "mean": values.mean(axis=1), "var": values.var(axis=1, ddof=1)},
                        index=pd.MultiIndex.from_arrays([[f"c{i}" for i in range(series)], ["h1"] * series],
                                                        names=["cell_id", "host"]))


def test_no_history_means_campaigns_vary_by_the_prior():
    m = model([], prior_sd=0.02)
    assert m.variance == pytest.approx(0.02 ** 2) and m.dof == PRIOR_DOF
    assert m.kind == "prior" and m.campaigns == 0 and math.isnan(m.estimate)
    # One campaign (A alone) cannot estimate anything either.
    m = model([_stats(np.random.default_rng(1), 4, 5, 0.02, 0.0)], prior_sd=0.02)
    assert m.kind == "prior" and m.sd_pct == pytest.approx(2.0)


def test_pooling_is_the_scaled_inverse_chi_square_update():
    assert pool(0.01, 4.0, 0.0009, 12.0) == pytest.approx(((4 * 0.0001 + 12 * 0.0009) / 16, 16.0))
    assert pool(0.01, 4.0, float("nan"), 0.0) == pytest.approx((0.0001, 4.0))


def test_two_campaigns_that_happen_to_agree_do_not_collapse_the_variance_to_zero():
    # The estimate from A and one more campaign rests on one degree of freedom per
    # series and is 0 in about 44 % of draws; the pooled variance keeps the prior's share.
    rng = np.random.default_rng(2)
    same = _stats(rng, 1, 5, 0.01, 0.0)
    m = model([same, same.copy()], prior_sd=0.02)
    assert m.kind == "pooled" and m.estimate == 0.0 and m.estimate_dof == 1.0
    assert m.variance == pytest.approx(PRIOR_DOF * 0.02 ** 2 / (PRIOR_DOF + 1)) and m.dof == PRIOR_DOF + 1


def test_many_campaigns_dominate_the_prior():
    # A true campaign SD of 3 % over 8 campaigns of 50 series against a prior of 1 %.
    rng = np.random.default_rng(3)
    history = [pd.concat([_stats(rng, 1, 10, 0.02, rng.normal(0.0, 0.03)) .rename(index={"c0": f"c{i}"})
                          for i in range(50)]) for _ in range(8)]
    m = model(history, prior_sd=0.01)
    # The history's weight is over 30 times the prior's (8 degrees of freedom).
    assert m.estimate_dof > 30 * PRIOR_DOF
    assert m.sd_pct == pytest.approx(3.0, rel=0.15)


def test_one_outlying_campaign_is_left_out_and_does_not_inflate_the_variance():
    # Four campaigns moving by 1 % and one that ran twice as slow (a busy host, a
    # step): counted, it would put the campaign SD near 30 %.
    rng = np.random.default_rng(4)
    moves = [0.004, -0.01, 0.008, math.log(2.0), -0.002]
    history = [_stats(rng, 8, 5, 0.02, mv, level=4.6) for mv in moves]
    offsets = campaign_offsets(history)
    assert offsets[3] == pytest.approx(math.log(2.0), abs=0.05)
    m = model(history, prior_sd=0.01)
    assert m.dropped == (3,) and m.campaigns == 4
    assert m.sd_pct < 3.0
    # Ordinary campaigns are never outlying, whatever the luck of their agreement.
    assert not outlying(np.array([0.0, 0.001, -0.001, 0.02]), floor=0.01).any()
    # Of two campaigns, neither can be told to be the odd one.
    assert not outlying(np.array([0.0, 1.0]), floor=0.01).any()


def test_an_outlier_on_the_difference_scale_is_judged_relative_to_the_level():
    rng = np.random.default_rng(5)
    history = [_stats(rng, 6, 5, 20.0, mv, level=1000.0) for mv in (0.0, 10.0, -10.0, 1000.0)]
    m = model(history, prior_sd=0.01, relative=True)
    assert m.dropped == (3,) and m.sd_pct < 3.0
