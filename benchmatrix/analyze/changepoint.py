"""A step in a cell's history: change-point detection across campaigns.

The input is one cell's metric over campaigns in time order: the campaign means
(``summary.csv``'s ``mean``), or the raw measured values of each campaign. The
question is whether the level stepped once somewhere in the history, where, and
by how much.

Method (docs/export.md, "Change points"): at every split k (campaigns before k
against campaigns from k on) a two-sample Student's t statistic of the campaign
means with the pooled within-segment variance (K - 2 degrees of freedom). Its
largest absolute value over the splits is the likelihood-ratio statistic of "one
step in the mean" against "no step" for normal campaign means of unknown common
variance. Under no step that maximum depends on the number of campaigns K only
(it is invariant to location and scale), so its null distribution is simulated
once per K (seeded, :data:`NULL_DRAWS` standard normal histories) and the p-value
is the share of simulated maxima at least as large (beyond every simulated maximum,
the Bonferroni bound over the splits when it is smaller, so that a p-value can go
below 1/(draws + 1)). A step is reported when p <= alpha (0.05 by default): the
false-alarm rate per history is alpha, whatever K, the number of splits tried
included. The history pages adjust these p-values with Holm's method across every
series of a page (:func:`benchmatrix.campaigns.publish.build_history`).
``tests/unit/analyze/test_changepoint.py`` checks the calibration and the power on
simulated histories.

Why campaign means and not the runs: two campaigns differ by more than their
run-to-run noise (a SAN's load, a reboot, the day's temperature; see "Beware of
Shifting SAN"). The scatter of campaign means around their segment's level holds
that campaign-to-campaign variation; a test built on the runs' standard errors
would call every ordinary shift between campaigns a step. Each campaign counts
once, whatever its number of runs.

The reported size is the difference of the two segments' means, absolute and
relative to the earlier segment, with a 95 % interval (Student's t, and Fieller's
interval for the ratio). The interval is conditional on the split found: it is
computed as if the split had been fixed in advance, so it is somewhat too narrow
when the step is small.

Pure functions, no file I/O; everything is vectorised over many histories at
once (:func:`detect_steps`), which is what the calibration tests use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from benchmatrix.analyze.stats import CONFIDENCE, fieller_ratio_ci, t_ppf, t_sf
from benchmatrix.errors import BenchmatrixError

#: Simulated null histories per number of campaigns.
NULL_DRAWS = 20000
#: Seed of the null simulation (the p-values are reproducible).
NULL_SEED = 20261130
#: Fewest campaigns the test works with (the pooled variance needs K - 2 >= 1).
MIN_CAMPAIGNS = 3
_CHUNK = 2000


def split_statistics(histories: np.ndarray) -> np.ndarray:
    """|t| of the step at every split of every history.

    Args:
        histories: Shape ``(S, K)``: S histories of K campaign means, time order.

    Returns:
        Shape ``(S, K - 1)``; column ``k - 1`` compares campaigns ``[:k]`` with
        ``[k:]``. A history whose segments are all flat gives 0 where the two
        means agree and ``inf`` where they differ.
    """
    x = np.asarray(histories, dtype="float64")
    s, k_all = x.shape
    # Centre and scale each history first: the statistic is invariant to both, and
    # it keeps the sums of squares below free of cancellation.
    x = x - x.mean(axis=1, keepdims=True)
    scale = np.sqrt((x * x).mean(axis=1, keepdims=True))
    x = np.divide(x, scale, out=np.zeros_like(x), where=scale > 0)
    k = np.arange(1, k_all, dtype="float64")
    left = np.cumsum(x, axis=1)[:, :-1]
    total_sq = (x * x).sum(axis=1, keepdims=True)
    m1 = left / k
    m2 = -left / (k_all - k)          # the centred history sums to 0
    within = total_sq - k * m1 * m1 - (k_all - k) * m2 * m2
    var = np.maximum(within, 0.0) / (k_all - 2)
    diff = np.abs(m2 - m1)
    se = np.sqrt(var * (1.0 / k + 1.0 / (k_all - k)))
    # Rounding leaves ~1e-16 where a segment is flat: compare against it, not 0.
    flat = se <= 1e-12 * np.maximum(diff, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(flat, np.where(diff > 1e-9, np.inf, 0.0), diff / np.where(flat, 1.0, se))
    return t


@lru_cache(maxsize=64)
def null_maxima(k_all: int) -> np.ndarray:
    """Sorted maxima of :func:`split_statistics` over :data:`NULL_DRAWS` seeded
    histories of ``k_all`` independent standard normal campaign means."""
    rng = np.random.default_rng([NULL_SEED, k_all])
    parts = [split_statistics(rng.standard_normal((min(_CHUNK, NULL_DRAWS - i), k_all))).max(axis=1)
             for i in range(0, NULL_DRAWS, _CHUNK)]
    return np.sort(np.concatenate(parts))


def detect_steps(histories: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step test on many histories of the same length at once.

    Args:
        histories: Shape ``(S, K)`` campaign means, K >= :data:`MIN_CAMPAIGNS`.
        alpha: False-alarm rate per history.

    Returns:
        ``(detected, index, p_value)``, each of shape ``(S,)``: ``index`` is the
        position of the first campaign after the most likely step (1..K-1).
    """
    x = np.atleast_2d(np.asarray(histories, dtype="float64"))
    if x.shape[1] < MIN_CAMPAIGNS:
        raise BenchmatrixError(f"a step test needs at least {MIN_CAMPAIGNS} campaigns, got {x.shape[1]}")
    if not np.isfinite(x).all():
        raise BenchmatrixError("campaign means must be finite numbers")
    t = split_statistics(x)
    best = t.argmax(axis=1)
    stat = t[np.arange(len(t)), best]
    null = null_maxima(x.shape[1])
    exceed = len(null) - np.searchsorted(null, stat, side="left")
    p = (1.0 + exceed) / (1.0 + len(null))
    # Beyond every simulated maximum the simulation only says p < 1/(draws + 1), which
    # Holm's adjustment over a page of thousands of series could never use. There the
    # Bonferroni bound over the K - 1 splits (each |t| with K - 2 degrees of freedom),
    # never below the true p-value, takes over when it is smaller.
    bound = np.minimum(1.0, (x.shape[1] - 1) * 2.0 * t_sf(stat, x.shape[1] - 2))
    p = np.where(exceed == 0, np.minimum(p, bound), p)
    return p <= alpha, best + 1, p


@dataclass(frozen=True)
class Step:
    """The verdict on one history.

    Attributes:
        detected: A step at the chosen false-alarm rate.
        index: Position (0-based) of the first campaign after the most likely
            step; None when the history is too short to test.
        p_value: Calibrated p-value of the max-statistic (1.0 when untested).
        statistic: The largest |t| over the splits.
        before, after: Mean of the campaign means before and after ``index``.
        difference, difference_low, difference_high: ``after - before`` and its
            95 % interval.
        relative, relative_low, relative_high: ``after / before - 1`` and its
            95 % Fieller interval (NaN bounds when ``before`` is not clearly
            away from 0).
        campaigns: Number of campaigns in the history.
        note: Why no test was made, else "".
    """

    detected: bool
    index: int | None
    p_value: float
    statistic: float
    before: float
    after: float
    difference: float
    difference_low: float
    difference_high: float
    relative: float
    relative_low: float
    relative_high: float
    campaigns: int
    note: str = ""


def detect_step(means: Sequence[float], alpha: float = 0.05) -> Step:
    """Test one cell's history of campaign means for a single step.

    Args:
        means: The campaigns' means of one metric, oldest first.
        alpha: False-alarm rate per history (0 < alpha < 1).

    Returns:
        A :class:`Step`; with fewer than :data:`MIN_CAMPAIGNS` campaigns
        ``detected`` is False and ``note`` says why.

    Raises:
        BenchmatrixError: alpha out of range, or a mean that is not finite.
    """
    if not 0 < alpha < 1:
        raise BenchmatrixError(f"alpha must lie between 0 and 1, got {alpha}")
    x = np.asarray(means, dtype="float64").ravel()
    k_all = len(x)
    nan = float("nan")
    if k_all < MIN_CAMPAIGNS:
        return Step(False, None, 1.0, nan, nan, nan, nan, nan, nan, nan, nan, nan, k_all,
                    note=f"{k_all} campaign(s): a step test needs at least {MIN_CAMPAIGNS}")
    detected, index, p = detect_steps(x[None, :], alpha)
    k = int(index[0])
    before, after = x[:k], x[k:]
    m1, m2 = float(before.mean()), float(after.mean())
    df = k_all - 2
    var = (((before - m1) ** 2).sum() + ((after - m2) ** 2).sum()) / df
    half = float(t_ppf(0.5 + CONFIDENCE / 2, df) * np.sqrt(var * (1 / k + 1 / (k_all - k))))
    low, high = fieller_ratio_ci(m2, m1, var / (k_all - k), var / k, 0.0, df)
    stat = float(split_statistics(x[None, :])[0, k - 1])
    relative = float(m2 / m1 - 1) if m1 != 0 else nan
    return Step(bool(detected[0]), k, float(p[0]), stat, m1, m2, m2 - m1, m2 - m1 - half, m2 - m1 + half,
                relative, float(low[0]) - 1, float(high[0]) - 1, k_all)


def detect_step_in_values(values: Sequence[Sequence[float]], alpha: float = 0.05) -> Step:
    """:func:`detect_step` on each campaign's raw measured values (their means).

    Raises:
        BenchmatrixError: A campaign without any finite value (say which).
    """
    means = []
    for i, vals in enumerate(values):
        v = np.asarray(vals, dtype="float64").ravel()
        v = v[np.isfinite(v)]
        if not len(v):
            raise BenchmatrixError(f"campaign {i} of the history has no measured value")
        means.append(v.mean())
    return detect_step(means, alpha)
