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

With few campaigns that scatter is a poor estimate (2 degrees of freedom from 4
campaigns), and a slide over several campaigns reads as scatter. :func:`detect_change`
(what the history pages and compare's history choice use) therefore adds each campaign
mean's noise from its runs and the prior campaign variance of
:mod:`benchmatrix.analyze.campaign_model` (``report.campaign_sd``, worth
:data:`~benchmatrix.analyze.campaign_model.PRIOR_DOF` degrees of freedom) to the
history's own scatter, and tests a step (max over splits, its null simulated per number
of campaigns and prior degrees of freedom) and a slide (the slope of the level over the
campaigns, Student's t); docs/export.md, "Steps and slides with the campaign variance".

Pure functions, no file I/O; everything is vectorised over many histories at
once (:func:`detect_steps`, :func:`detect_changes`), which is what the calibration
tests use.
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


def _history(values: Sequence[float], alpha: float) -> tuple[np.ndarray, str]:
    """One history as a flat array, and why it is too short to test ("" when it is not).

    Raises:
        BenchmatrixError: alpha outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise BenchmatrixError(f"alpha must lie between 0 and 1, got {alpha}")
    x = np.asarray(values, dtype="float64").ravel()
    short = f"{len(x)} campaign(s): a step test needs at least {MIN_CAMPAIGNS}" if len(x) < MIN_CAMPAIGNS else ""
    return x, short


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
    x, short = _history(means, alpha)
    k_all = len(x)
    nan = float("nan")
    if short:
        return Step(False, None, 1.0, nan, nan, nan, nan, nan, nan, nan, nan, nan, k_all, note=short)
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


# ------------------------------------------------------------ steps and slides on the runs
#
# The max-over-splits test above estimates the campaign-to-campaign variance from the
# history alone: with 4 campaigns it rests on 2 degrees of freedom, and a slide over
# several campaigns (88 -> 27 -> 14 -> 7.5 MiB/s) is read as "campaigns wobble". The
# tests below add what is known besides the campaign means: each campaign mean's noise
# from its runs, and the campaign variance's prior (report.campaign_sd, the model of
# benchmatrix.analyze.campaign_model). The variance of a campaign mean around its
# segment's level (or the trend line) is then
#
#     (ν0 · (s0² + mean run variance of a mean) + residual sum of squares) / (ν0 + K - 2)
#
# on ν0 + K - 2 degrees of freedom: the prior counts as ν0 observations (the
# scaled-inverse-χ² update of campaign_model.pool), the history's own scatter adds
# K - 2, so that many campaigns dominate the prior.


@dataclass(frozen=True)
class Change:
    """The step test and the slide test of one history, on the runs with the campaign
    variance (:func:`detect_change`).

    Attributes:
        detected: A step or a slide at the chosen false-alarm rate (``p_value <= alpha``).
        kind: ``step`` or ``slide``: the test with the smaller p-value ("" untested).
        p_value: The series' p-value: twice the smaller of ``p_step`` and ``p_slide``
            (Bonferroni over the two tests), at most 1.
        p_step: The max-over-splits step test's calibrated p-value.
        p_slide: The trend test's p-value (Student's t of the slope).
        index: Position (0-based) of the first campaign after the most likely step.
        before, after: For a step, the segments' means; for a slide, the trend line's
            value at the first and the last campaign (on the history's scale).
        var_before, var_after, cov: Their variances and covariance (what the change's
            interval needs).
        df: Degrees of freedom of the pooled variance (``prior_dof + K - 2``).
        slope, slope_low, slope_high: The trend per campaign and its 95 % interval.
        variance: The pooled variance of one campaign mean around its level.
        campaigns: Campaigns in the history.
        note: Why no test was made, else "".
    """

    detected: bool
    kind: str
    p_value: float
    p_step: float
    p_slide: float
    index: int | None
    before: float
    after: float
    var_before: float
    var_after: float
    cov: float
    df: float
    slope: float
    slope_low: float
    slope_high: float
    variance: float
    campaigns: int
    note: str = ""

    @property
    def difference(self) -> float:
        """``after - before``: the step, or the slide's change over the whole history."""
        return self.after - self.before


def pooled_split_statistics(histories: np.ndarray, prior_ss: np.ndarray, prior_dof: float) -> np.ndarray:
    """|t| of the step at every split, each split's segments' residual sum of squares
    pooled with the prior's ``prior_ss`` (ν0 times the prior variance of a campaign mean).

    Args:
        histories: Shape ``(S, K)`` campaign levels, oldest first.
        prior_ss: Shape ``(S,)``.
        prior_dof: ν0.

    Returns:
        Shape ``(S, K - 1)``, column ``k - 1`` comparing ``[:k]`` with ``[k:]``.
    """
    x = np.asarray(histories, dtype="float64")
    s, k_all = x.shape
    x = x - x.mean(axis=1, keepdims=True)  # centred: the sums of squares below stay free of cancellation
    k = np.arange(1, k_all, dtype="float64")
    left = np.cumsum(x, axis=1)[:, :-1]
    m1, m2 = left / k, -left / (k_all - k)
    within = np.maximum((x * x).sum(axis=1, keepdims=True) - k * m1 * m1 - (k_all - k) * m2 * m2, 0.0)
    var = (np.asarray(prior_ss, dtype="float64").reshape(s, 1) + within) / (prior_dof + k_all - 2)
    diff = np.abs(m2 - m1)
    se = np.sqrt(var * (1.0 / k + 1.0 / (k_all - k)))
    flat = se <= 1e-12 * np.maximum(diff, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(flat, np.where(diff > 1e-9, np.inf, 0.0), diff / np.where(flat, 1.0, se))


@lru_cache(maxsize=256)
def pooled_null_maxima(k_all: int, prior_dof: float) -> np.ndarray:
    """Sorted maxima of :func:`pooled_split_statistics` over :data:`NULL_DRAWS` seeded
    histories of ``k_all`` standard normal campaign levels, the prior's sum of squares
    drawn as χ² on ``prior_dof`` degrees of freedom (the prior counted as ν0 campaigns
    of the same variance, as the pooled variance counts it)."""
    rng = np.random.default_rng([NULL_SEED, k_all, int(round(prior_dof * 1000))])
    parts = []
    for i in range(0, NULL_DRAWS, _CHUNK):
        size = min(_CHUNK, NULL_DRAWS - i)
        prior = rng.chisquare(prior_dof, size) if prior_dof > 0 else np.zeros(size)
        parts.append(pooled_split_statistics(rng.standard_normal((size, k_all)), prior, prior_dof).max(axis=1))
    return np.sort(np.concatenate(parts))


def detect_changes(histories: np.ndarray, se2: np.ndarray | None, prior_var: np.ndarray | float,
                   prior_dof: float) -> dict[str, np.ndarray]:
    """The step and slide tests on many histories of the same length at once.

    Args:
        histories: Shape ``(S, K)`` campaign levels (log means for a positive metric),
            oldest first, K >= :data:`MIN_CAMPAIGNS`.
        se2: Shape ``(S, K)``: each campaign mean's variance from its runs (its SE²);
            None or NaN entries count as 0.
        prior_var: The prior campaign variance ``s0²`` on the levels' scale, per history
            or one for all.
        prior_dof: ν0, what the prior is worth (:data:`benchmatrix.analyze.campaign_model.PRIOR_DOF`).

    Returns:
        Arrays of shape ``(S,)``: ``p_step``, ``index`` (first campaign after the most
        likely step, 1..K-1), ``p_slide``, ``slope``, ``slope_se2``, ``prior_ss``, ``df``.
    """
    x = np.atleast_2d(np.asarray(histories, dtype="float64"))
    s, k_all = x.shape
    if k_all < MIN_CAMPAIGNS:
        raise BenchmatrixError(f"a step test needs at least {MIN_CAMPAIGNS} campaigns, got {k_all}")
    if not np.isfinite(x).all():
        raise BenchmatrixError("campaign means must be finite numbers")
    noise = np.zeros_like(x) if se2 is None else np.nan_to_num(np.asarray(se2, dtype="float64"), nan=0.0)
    prior_ss = prior_dof * (np.broadcast_to(np.asarray(prior_var, dtype="float64"), (s,)) + noise.mean(axis=1))
    df = prior_dof + k_all - 2
    # The step: the max over splits, calibrated by its simulated null for (K, ν0).
    t = pooled_split_statistics(x, prior_ss, prior_dof)
    best = t.argmax(axis=1)
    stat = t[np.arange(s), best]
    null = pooled_null_maxima(k_all, float(prior_dof))
    exceed = len(null) - np.searchsorted(null, stat, side="left")
    p_step = (1.0 + exceed) / (1.0 + len(null))
    bound = np.minimum(1.0, (k_all - 1) * 2.0 * t_sf(stat, df))  # as detect_steps: beyond every simulated maximum
    p_step = np.where(exceed == 0, np.minimum(p_step, bound), p_step)
    # The slide: least squares of the level on the campaign's place in time.
    c = np.arange(k_all, dtype="float64") - (k_all - 1) / 2
    sxx = float((c * c).sum())
    xc = x - x.mean(axis=1, keepdims=True)
    slope = (xc * c).sum(axis=1) / sxx
    rss = np.maximum((xc * xc).sum(axis=1) - slope * slope * sxx, 0.0)
    slope_se2 = (prior_ss + rss) / df / sxx
    with np.errstate(divide="ignore", invalid="ignore"):
        ts = np.where(slope_se2 > 0, np.abs(slope) / np.sqrt(np.where(slope_se2 > 0, slope_se2, 1.0)),
                      np.where(np.abs(slope) > 1e-12, np.inf, 0.0))
    p_slide = np.minimum(1.0, 2.0 * t_sf(ts, df))
    return {"p_step": p_step, "index": best + 1, "p_slide": np.asarray(p_slide, dtype="float64"), "slope": slope,
            "slope_se2": slope_se2, "prior_ss": prior_ss, "df": np.full(s, df)}


def combined_p(p_step: np.ndarray, p_slide: np.ndarray) -> np.ndarray:
    """One p-value per history for "a step or a slide": Bonferroni over the two tests."""
    return np.minimum(1.0, 2.0 * np.minimum(p_step, p_slide))


def detect_change(levels: Sequence[float], se2: Sequence[float] | None, prior_var: float, prior_dof: float,
                  alpha: float = 0.05) -> Change:
    """Test one history for a step or a slide, on the runs with the campaign variance.

    Args:
        levels: The campaigns' levels of one series (log means for a positive metric),
            oldest first.
        se2: Each campaign mean's variance from its runs (SE²), same order.
        prior_var: The prior campaign variance on the levels' scale (``s0²``).
        prior_dof: ν0.
        alpha: False-alarm rate per history (0 < alpha < 1), both tests together.

    Returns:
        A :class:`Change`; with fewer than :data:`MIN_CAMPAIGNS` campaigns nothing is
        detected and ``note`` says why.

    Raises:
        BenchmatrixError: alpha out of range, a level that is not finite.
    """
    x, short = _history(levels, alpha)
    if short:
        nan = float("nan")
        return Change(False, "", 1.0, 1.0, 1.0, None, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, len(x),
                      note=short)
    return detect_change_many(x[None, :], None if se2 is None else np.asarray(se2, dtype="float64")[None, :],
                              prior_var, prior_dof, alpha)[0]


def detect_change_many(levels: np.ndarray, se2: np.ndarray | None, prior_var: np.ndarray | float,
                       prior_dof: float, alpha: float = 0.05) -> list[Change]:
    """:func:`detect_change` on many histories of the same length at once (a history
    page's series: one pass instead of one per series).

    Args:
        levels: Shape ``(S, K)``, K >= :data:`MIN_CAMPAIGNS`.
        se2: Shape ``(S, K)`` or None.
        prior_var: Per history, or one for all.
        prior_dof: ν0.
        alpha: False-alarm rate per history.

    Returns:
        One :class:`Change` per history.
    """
    x = np.atleast_2d(np.asarray(levels, dtype="float64"))
    s, k_all = x.shape
    r = detect_changes(x, se2, prior_var, prior_dof)
    p = combined_p(r["p_step"], r["p_slide"])
    half = t_ppf(0.5 + CONFIDENCE / 2, r["df"]) * np.sqrt(r["slope_se2"])
    # The slide: the trend line at the first and the last campaign (the last one's
    # centred place is minus the first one's), their variances and covariance.
    c = np.arange(k_all, dtype="float64") - (k_all - 1) / 2
    sxx, ends = float((c * c).sum()), float(c[0])
    mean = x.mean(axis=1)
    slide_var = r["slope_se2"] * sxx
    # The step: the segments' means at the split found, with the pooled variance.
    k = r["index"]
    xc = x - mean[:, None]
    left = np.cumsum(xc, axis=1)[np.arange(s), k - 1]
    m1, m2 = left / k, -left / (k_all - k)
    within = np.maximum((xc * xc).sum(axis=1) - k * m1 * m1 - (k_all - k) * m2 * m2, 0.0)
    step_var = (r["prior_ss"] + within) / r["df"]
    out = []
    for i in range(s):
        common = {"detected": bool(p[i] <= alpha), "p_value": float(p[i]), "p_step": float(r["p_step"][i]),
                  "p_slide": float(r["p_slide"][i]), "index": int(k[i]), "df": float(r["df"][i]),
                  "slope": float(r["slope"][i]), "slope_low": float(r["slope"][i] - half[i]),
                  "slope_high": float(r["slope"][i] + half[i]), "campaigns": k_all}
        if r["p_slide"][i] < r["p_step"][i]:
            var, b = float(slide_var[i]), float(r["slope"][i]) * ends
            end_var = var * (1 / k_all + ends * ends / sxx)
            out.append(Change(kind="slide", before=float(mean[i] + b), after=float(mean[i] - b), var_before=end_var,
                              var_after=end_var, cov=var * (1 / k_all - ends * ends / sxx), variance=var, **common))
        else:
            var = float(step_var[i])
            split = int(k[i])
            out.append(Change(kind="step", before=float(mean[i] + m1[i]), after=float(mean[i] + m2[i]),
                              var_before=var / split, var_after=var / (k_all - split), cov=0.0, variance=var,
                              **common))
    return out
