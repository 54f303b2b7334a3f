"""The change-point detector across campaigns: calibration and power on seeded
simulated histories (vectorised, a few seconds), and its verdict on single histories."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmatrix.analyze.changepoint import (
    MIN_CAMPAIGNS,
    detect_step,
    detect_step_in_values,
    detect_steps,
    split_statistics,
)
from benchmatrix.errors import BenchmatrixError

SERIES = 20000


def _tolerance(rate: float, n: int) -> float:
    """Three binomial standard errors: the simulation's own noise around ``rate``."""
    return 3 * math.sqrt(rate * (1 - rate) / n)


def _histories(rng, campaigns: int, runs: int, run_cv: float, campaign_cv: float = 0.0,
               step: float = 0.0, at: int | None = None) -> np.ndarray:
    """Campaign means of ``runs`` raw values each: per-run noise ``run_cv``, a
    campaign-to-campaign shift ``campaign_cv``, and a relative ``step`` from ``at`` on."""
    level = 1000.0 * (1 + campaign_cv * rng.standard_normal((SERIES, campaigns, 1)))
    raw = level * (1 + run_cv * rng.standard_normal((SERIES, campaigns, runs)))
    if step:
        raw[:, at:, :] *= 1 + step
    return raw.mean(axis=2)


@pytest.mark.parametrize("campaigns", [3, 5, 10, 25])
def test_false_alarms_at_most_five_percent_per_series_without_a_step(campaigns):
    rng = np.random.default_rng(100 + campaigns)
    detected, _, _ = detect_steps(_histories(rng, campaigns, runs=3, run_cv=0.02))
    assert detected.mean() <= 0.05 + _tolerance(0.05, SERIES)
    # ... and not by being blind: the rate is close to alpha, not far below it.
    assert detected.mean() >= 0.05 - _tolerance(0.05, SERIES)


def test_false_alarms_stay_calibrated_when_campaigns_shift_more_than_their_runs():
    # The shifting SAN: campaign-to-campaign variation four times the run noise.
    # A test on the runs' standard errors would call most of these histories steps.
    rng = np.random.default_rng(7)
    detected, _, _ = detect_steps(_histories(rng, 10, runs=5, run_cv=0.005, campaign_cv=0.02))
    assert detected.mean() <= 0.05 + _tolerance(0.05, SERIES)


def test_five_percent_step_at_cv_two_percent_found_with_five_campaigns_each_side():
    # Run-to-run CV 2 %, 3 measured runs a campaign (the quickstart's replicates).
    rng = np.random.default_rng(11)
    detected, index, _ = detect_steps(_histories(rng, 10, runs=3, run_cv=0.02, step=0.05, at=5))
    assert detected.mean() >= 0.90
    assert (index[detected] == 5).mean() >= 0.90, "the step is found where it is"


def test_power_is_documented_for_campaign_means_with_cv_two_percent():
    # docs/export.md: when the campaign means themselves scatter by 2 %, 5 + 5
    # campaigns find a 5 % step about 70 % of the time, 8 + 8 above 90 %.
    rng = np.random.default_rng(12)
    five, _, _ = detect_steps(_histories(rng, 10, runs=1, run_cv=0.02, step=0.05, at=5))
    eight, _, _ = detect_steps(_histories(rng, 16, runs=1, run_cv=0.02, step=0.05, at=8))
    assert 0.62 <= five.mean() <= 0.78
    assert eight.mean() >= 0.90


def test_a_step_is_reported_with_its_place_size_and_interval():
    step = detect_step([100, 101, 99, 100.5, 99.5, 105, 106, 104, 105.5, 104.5])
    assert step.detected and step.index == 5 and step.campaigns == 10
    assert step.p_value < 0.001
    assert step.difference == pytest.approx(5.0)
    assert step.difference_low < 5.0 < step.difference_high
    assert step.relative == pytest.approx(0.05)
    assert step.relative_low < 0.05 < step.relative_high and step.relative_low > 0


def test_a_flat_history_has_no_step():
    step = detect_step([100, 102, 99, 101, 100, 98, 101, 100])
    assert not step.detected and step.p_value > 0.05
    assert step.relative_low < 0 < step.relative_high


def test_raw_values_per_campaign_are_tested_through_their_means():
    values = [[10, 10.2, 9.8]] * 4 + [[12, 12.1, 11.9]] * 4
    step = detect_step_in_values(values)
    assert step.detected and step.index == 4
    assert step.before == pytest.approx(10.0) and step.after == pytest.approx(12.0)
    with pytest.raises(BenchmatrixError, match="campaign 1 of the history has no measured value"):
        detect_step_in_values([[1.0], [float("nan")], [1.0]])


def test_too_short_a_history_is_not_tested():
    step = detect_step([1.0, 2.0])
    assert not step.detected and step.index is None and str(MIN_CAMPAIGNS) in step.note
    with pytest.raises(BenchmatrixError, match="at least 3 campaigns"):
        detect_steps(np.ones((2, 2)))


def test_constant_segments_give_an_exact_verdict():
    assert detect_step([5.0] * 6).detected is False
    step = detect_step([5.0, 5.0, 5.0, 6.0, 6.0, 6.0])
    assert step.detected and step.index == 3 and math.isinf(step.statistic)


def test_statistic_is_invariant_to_location_and_scale():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 7))
    np.testing.assert_allclose(split_statistics(x), split_statistics(1e6 + 1e4 * x), rtol=1e-6)


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(BenchmatrixError, match="finite"):
        detect_step([1.0, float("inf"), 2.0])
    with pytest.raises(BenchmatrixError, match="alpha"):
        detect_step([1.0, 2.0, 3.0], alpha=1.5)


def test_size_interval_covers_the_true_step_when_the_step_is_clear():
    # A clear step (10 % at campaign CV 1 %) is always placed right, so the intervals
    # computed as if the split were known should cover at their nominal 95 %.
    rng = np.random.default_rng(21)
    histories = 1000.0 * (1 + 0.01 * rng.standard_normal((1000, 10)))
    histories[:, 5:] *= 1.10
    steps = [detect_step(h) for h in histories]
    assert all(s.detected and s.index == 5 for s in steps)
    covered = np.mean([s.relative_low <= 0.10 <= s.relative_high for s in steps])
    covered_abs = np.mean([s.difference_low <= 100.0 <= s.difference_high for s in steps])
    assert 0.93 <= covered <= 0.97 and 0.93 <= covered_abs <= 0.97
