"""The verdict engine: one function that turns estimates into verdicts and intervals.

Every place that says "better", "worse" or "how sure" calls :func:`judge`: the report's
comparisons (:mod:`benchmatrix.analyze.comparisons`), ``bmx compare``
(:mod:`benchmatrix.campaigns.compare`), the history's steps
(:mod:`benchmatrix.campaigns.publish`), and through those tables publish and the
exports. It works on a table with one row per comparison, each holding:

* the estimate ``_est`` of the change on the row's scale (``_scale``): the
  difference of the mean **log** values for a positive metric (a ratio of geometric
  means), else the difference of the means (:mod:`benchmatrix.analyze.scale`);
* its variance ``_se2`` and degrees of freedom ``df`` (Welch's, the mixed model's,
  the least-squares fit's, or those of a comparison across campaigns that adds the
  campaign-to-campaign variance);
* ``mean_level``/``mean_baseline`` on the same scale, ``_va``/``_vb``/``_cov`` (the
  variances of the two estimated means, for Fieller's interval of a difference
  scale's ratio), ``_constant`` and ``better`` (the metric's direction).

:func:`judge` adds the p-values (unadjusted and Holm-adjusted over the family), the
95 % interval and the Holm-consistent one in percent, the smallest change the
comparison could have detected, and the verdict, with one meaning wherever it is shown (docs/report.md, "Verdicts"):

* ``better`` / ``worse``: a change that matters: significant after Holm's
  adjustment (the adjusted interval excludes no change) **and** estimated beyond
  the practical threshold, in the metric's better direction; ``higher`` / ``lower``
  when the direction is unknown. A significant change whose estimate lies inside
  the threshold is not one: it never fails a gate by default;
* ``equivalent``: the Holm-adjusted interval lies inside plus or minus the practical
  threshold (significant or not: a change too small to matter);
* ``inconclusive``: neither: the data cannot tell whether the change matters;
* ``insufficient_data``: no test was possible (a side with fewer than two values or
  visits, or no variation at all on both sides, to rounding level);
* ``descriptive``: a metric outside the family (``report.primary``).

An interval that includes a 2x change is therefore never called "no difference";
the verdict says what the data can say.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from benchmatrix.analyze.scale import LOG
from benchmatrix.analyze.stats import CONFIDENCE, fieller_ratio_ci, holm, t_ppf, t_sf

#: Every verdict a comparison may get.
VERDICTS = ("better", "worse", "higher", "lower", "equivalent", "inconclusive", "insufficient_data", "descriptive")
#: Verdicts that say a change was found.
CHANGED = frozenset({"better", "worse", "higher", "lower"})
#: Verdict of a comparison of a metric outside the family (``report.primary``).
DESCRIPTIVE = "descriptive"
#: Power at which the smallest detectable change (``detectable_pct``) is given.
DETECT_POWER = 0.80
#: Sides whose spread is below this share of their level vary only by rounding:
#: no variation to judge by (``insufficient_data``), like exactly constant ones.
ROUNDING = 1e-7


def near_constant(est_se2, mean_level, mean_baseline, scale) -> np.ndarray:
    """True where the estimate's standard error is at rounding level.

    On the log scale the standard error is already relative; on the difference scale
    it is compared with the larger of the two means.
    """
    se = np.sqrt(np.asarray(est_se2, dtype="float64"))
    ref = np.where(np.asarray(scale, dtype=object) == LOG, 1.0,
                   np.maximum(np.abs(np.asarray(mean_level, dtype="float64")),
                              np.abs(np.asarray(mean_baseline, dtype="float64"))))
    with np.errstate(invalid="ignore"):
        return np.isfinite(se) & (se <= ROUNDING * ref)


def threshold_bounds(threshold, scale, mean_baseline) -> tuple[np.ndarray, np.ndarray]:
    """The practical threshold's two bounds on each row's own scale.

    A relative change within ``[-threshold, +threshold]`` is "no change that
    matters": on the log scale ``log(1 - t)`` .. ``log(1 + t)``, on the difference
    scale ``-t |baseline|`` .. ``+t |baseline|``.
    """
    t = np.asarray(threshold, dtype="float64")
    log = np.asarray(scale, dtype=object) == LOG
    base = np.abs(np.asarray(mean_baseline, dtype="float64"))
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(log, np.log1p(-t), -t * base)
        high = np.where(log, np.log1p(t), t * base)
    return low, high


def p_values(est, se2, df) -> np.ndarray:
    """Unadjusted two-sided p-values of "no change": the interval at level ``1 - a``
    excludes no change exactly when p < a."""
    est, se2, df = (np.asarray(x, dtype="float64") for x in (est, se2, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        return 2.0 * t_sf(np.abs(est) / np.sqrt(se2), df)


def adjusted_levels(p_values, alpha: float) -> np.ndarray:
    """Confidence level of each comparison's Holm-consistent interval.

    Holm's step-down test compares the i-th smallest of m p-values with
    ``alpha / (m - i + 1)`` and stops at the first one that is not below its
    threshold; that one and every later one are kept. The interval of the i-th is
    taken at ``1 - alpha / (m - i + 1)``, and from the first kept one on at that
    one's level, so an interval excludes what the test rejects exactly when Holm's
    adjusted p-value is below alpha. Each has at least ``1 - alpha`` confidence.

    Args:
        p_values: Unadjusted p-values of the family; NaN entries are not in it.
        alpha: The family's significance level.

    Returns:
        One confidence level per p-value (NaN where the p-value is NaN).
    """
    p = np.asarray(p_values, dtype="float64")
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if not len(ok):
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    kept = p[order] >= alpha / (m - np.arange(m))
    stop = int(np.argmax(kept)) if kept.any() else m
    out[order] = 1.0 - alpha / (m - np.minimum(np.arange(m), stop))
    return out


# shape: the six statistics of Fieller's interval and the confidence level, passed on to fieller_ratio_ci unchanged
def relative_interval(mean_a, mean_b, var_a, var_b, cov_ab, df,
                      confidence: float | np.ndarray = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Interval of the relative difference ``(mean_a - mean_b) / |mean_b|`` in percent,
    for a metric on the difference scale.

    Fieller's interval of the ratio, turned into the relative difference: with a
    negative baseline the ratio runs the other way (a level of -5 against -10 is a
    ratio of 0.5 but 50 % *higher*), so its ends swap and change sign. NaN where the
    interval is unbounded (the baseline's mean could be 0).
    """
    b = np.atleast_1d(np.asarray(mean_b, dtype="float64"))
    low, high = fieller_ratio_ci(mean_a, b, var_a, var_b, cov_ab, df, confidence)
    positive = b > 0
    return (np.where(positive, low - 1.0, 1.0 - high) * 100.0,
            np.where(positive, high - 1.0, 1.0 - low) * 100.0)


def _interval_pct(frame: dict[str, np.ndarray], confidence) -> tuple[np.ndarray, np.ndarray]:
    """The interval of each row at ``confidence``, in percent of the baseline."""
    log = frame["scale"] == LOG
    with np.errstate(invalid="ignore", over="ignore"):
        half = t_ppf(0.5 + np.asarray(confidence, dtype="float64") / 2, frame["df"]) * np.sqrt(frame["se2"])
        log_lo = np.expm1(frame["est"] - half) * 100.0
        log_hi = np.expm1(frame["est"] + half) * 100.0
        lin_lo, lin_hi = relative_interval(frame["ma"], frame["mb"], frame["va"], frame["vb"], frame["cov"],
                                           frame["df"], confidence)
    return np.where(log, log_lo, lin_lo), np.where(log, log_hi, lin_hi)


def relative_pct(est, scale, mean_baseline) -> np.ndarray:
    """The estimated change in percent: ``(exp(est) - 1)`` on the log scale, else
    ``est / |baseline|`` (NaN for a zero baseline)."""
    est = np.asarray(est, dtype="float64")
    base = np.abs(np.asarray(mean_baseline, dtype="float64"))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(np.asarray(scale, dtype=object) == LOG, np.expm1(est) * 100.0,
                        np.where(base > 0, est / base * 100.0, np.nan))


# shape: vectorized columns of the comparisons table, one per term of the formula
def detectable_pct(se2, df, scale, mean_baseline, alpha_each, high,
                   power: float = DETECT_POWER) -> np.ndarray:
    """The smallest change (in percent, in the worse-looking upward direction) the
    comparison would find with ``power``. A change is found when it is significant and
    its estimate lies beyond the threshold's upper bound ``high`` (on the row's scale),
    so the estimate must clear the larger of ``high`` and ``t_{1-a/2} * se``, which it
    does with ``power`` at ``t_power * se`` beyond it; ``a`` is the per-comparison level
    ``alpha_each`` (Bonferroni's share of the family, a lower bound of Holm's)."""
    se = np.sqrt(np.asarray(se2, dtype="float64"))
    df = np.asarray(df, dtype="float64")
    with np.errstate(invalid="ignore", over="ignore"):
        critical = t_ppf(1.0 - np.asarray(alpha_each, dtype="float64") / 2, df) * se
        start = np.fmax(critical, np.asarray(high, dtype="float64"))
        return relative_pct(start + t_ppf(power, df) * se, scale, mean_baseline)


def judge(table: pd.DataFrame, family: set[str] | frozenset[str], alpha: float,
          thresholds: Mapping[str, float] | float) -> None:
    """P-values, intervals, smallest detectable change and verdicts of every row, in place.

    Args:
        table: One row per comparison with the columns the module docstring names
            (``metric``, ``better``, ``mean_level``, ``mean_baseline``, ``df``, ``_est``,
            ``_se2``, ``_scale``, ``_va``, ``_vb``, ``_cov``, ``_constant``; ``_p``
            optional: a p-value of its own test). ``mean_level``/``mean_baseline`` are given on
            the row's scale and come out as the user reads them (geometric means for
            the log scale).
        family: Metrics in Holm's family; the others are descriptive.
        alpha: The family's significance level.
        thresholds: The practical threshold (a fraction) per metric, or one for all.

    Adds ``scale, threshold_pct, rel_diff_pct, ci_low_pct, ci_high_pct, ci_low_adj_pct,
    ci_high_adj_pct, p_value_unadjusted, p_value, detectable_pct, verdict``.
    """
    n = len(table)
    metric = table["metric"].astype(str).to_numpy()
    if isinstance(thresholds, Mapping):
        thr = np.array([float(thresholds.get(m, thresholds.get("default", 0.05))) for m in metric])
    else:
        thr = np.full(n, float(thresholds))
    f = {"scale": table["_scale"].astype(str).to_numpy(dtype=object),
         "est": table["_est"].to_numpy(dtype="float64"), "se2": table["_se2"].to_numpy(dtype="float64"),
         "df": table["df"].to_numpy(dtype="float64"), "ma": table["mean_level"].to_numpy(dtype="float64"),
         "mb": table["mean_baseline"].to_numpy(dtype="float64"), "va": table["_va"].to_numpy(dtype="float64"),
         "vb": table["_vb"].to_numpy(dtype="float64"), "cov": table["_cov"].to_numpy(dtype="float64")}
    constant = table["_constant"].to_numpy(dtype=bool) | near_constant(f["se2"], f["ma"], f["mb"], f["scale"])
    tested = np.isfinite(f["est"]) & np.isfinite(f["se2"]) & (f["se2"] > 0) & (f["df"] >= 1) & ~constant
    low, high = threshold_bounds(thr, f["scale"], f["mb"])
    p_raw = np.where(tested, p_values(f["est"], f["se2"], f["df"]), np.nan)
    if "_p" in table.columns:
        # A test of its own (the history's max-over-splits step test): its calibrated
        # p-value replaces the t-test's; the interval stays the estimate's.
        given = table["_p"].to_numpy(dtype="float64")
        p_raw = np.where(tested & np.isfinite(given), given, p_raw)
    primary = np.isin(metric, list(family))
    p_family = np.where(primary, p_raw, np.nan)
    p_adj = holm(p_family)
    lo95, hi95 = _interval_pct(f, CONFIDENCE)
    levels = adjusted_levels(p_family, alpha)
    lo_adj, hi_adj = _interval_pct(f, np.where(np.isfinite(levels), levels, CONFIDENCE))
    m_family = max(1, int(np.isfinite(p_family).sum()))
    alpha_each = np.where(primary, alpha / m_family, alpha)

    verdict = np.full(n, "inconclusive", dtype=object)
    inside = tested & (lo_adj >= -thr * 100.0) & (hi_adj <= thr * 100.0)
    verdict[inside] = "equivalent"
    up = f["est"] > 0
    better = table["better"].fillna("").astype(str).to_numpy(dtype=object)
    # A change that matters: significant and estimated beyond the threshold. A
    # significant estimate inside it stays equivalent or inconclusive, as the interval says.
    beyond = (f["est"] > high) | (f["est"] < low)
    hit = tested & primary & (p_adj < alpha) & beyond
    verdict[hit & (better == "higher")] = np.where(up, "better", "worse")[hit & (better == "higher")]
    verdict[hit & (better == "lower")] = np.where(up, "worse", "better")[hit & (better == "lower")]
    unknown = hit & ~np.isin(better, ["higher", "lower"])
    verdict[unknown] = np.where(up, "higher", "lower")[unknown]
    verdict[~tested] = "insufficient_data"
    verdict[~primary] = DESCRIPTIVE

    log = f["scale"] == LOG
    with np.errstate(over="ignore", invalid="ignore"):
        table["mean_level"] = np.where(log, np.exp(f["ma"]), f["ma"])
        table["mean_baseline"] = np.where(log, np.exp(f["mb"]), f["mb"])
    table["scale"] = f["scale"]
    table["threshold_pct"] = thr * 100.0
    table["rel_diff_pct"] = relative_pct(f["est"], f["scale"], f["mb"])
    table["ci_low_pct"], table["ci_high_pct"] = np.where(tested, lo95, np.nan), np.where(tested, hi95, np.nan)
    table["ci_low_adj_pct"] = np.where(tested & primary, lo_adj, np.nan)
    table["ci_high_adj_pct"] = np.where(tested & primary, hi_adj, np.nan)
    table["p_value_unadjusted"] = p_raw
    table["p_value"] = p_adj
    table["detectable_pct"] = np.where(tested, detectable_pct(f["se2"], f["df"], f["scale"], f["mb"], alpha_each,
                                                              high), np.nan)
    table["_constant"] = constant
    table["verdict"] = verdict


def describe(verdict: str) -> str:
    """A verdict as words: ``insufficient_data`` -> ``insufficient data``."""
    return str(verdict).replace("_", " ")


def campaign_variance(per_campaign: list[pd.DataFrame], relative: bool = False) -> tuple[float, float]:
    """The campaign-to-campaign variance of a metric, from the campaigns of a history.

    Two campaigns of one unchanged experiment differ by more than their runs' noise:
    a reboot, the day's load or a shifting SAN moves every campaign's level a little.
    Each series (a cell on a host) gives, over the K campaigns that measured it, the
    variance of its campaign means, of which the runs' noise explains the average
    ``var / n``; the rest is the campaign-to-campaign variance (the method of moments
    of the one-way random-effects model), pooled over the series with K - 1 degrees
    of freedom each and floored at 0.

    Args:
        per_campaign: One frame per campaign, indexed by series, with columns
            ``count``, ``mean`` and ``var`` of the values on the comparison's scale
            (log values for a positive metric).
        relative: Divide each series' spread by the square of its mean level (a
            metric on the difference scale, so that series of different sizes pool);
            the result is then a relative variance.

    Returns:
        ``(variance, degrees of freedom)``; ``(nan, 0)`` when no series has two campaigns.
    """
    frames = [f for f in per_campaign if len(f)]
    if len(frames) < 2:
        return float("nan"), 0.0
    stacked = pd.concat(frames, keys=range(len(frames)), names=["_campaign"])
    stacked = stacked[np.isfinite(stacked["mean"].to_numpy(dtype="float64"))]
    series = stacked.groupby(level=list(range(1, stacked.index.nlevels)), sort=False)
    k = series["mean"].count()
    between = series["mean"].var(ddof=1)
    within = (stacked["var"] / stacked["count"]).groupby(level=list(range(1, stacked.index.nlevels)),
                                                          sort=False).mean()
    within = within.reindex(between.index).fillna(0.0)
    if relative:
        level = series["mean"].mean().abs()
        with np.errstate(divide="ignore", invalid="ignore"):
            between, within = between / level ** 2, within / level ** 2
    keep = (k >= 2) & np.isfinite(between) & np.isfinite(within)
    dof = (k - 1)[keep].astype("float64")
    if not dof.sum():
        return float("nan"), 0.0
    b = float((between[keep] * dof).sum() / dof.sum())
    w = float((within[keep] * dof).sum() / dof.sum())
    excess = max(b - w, 0.0)
    # Satterthwaite's degrees of freedom of the difference of the two mean squares:
    # fewer than the between part's own, since the within part is subtracted. The
    # within part rests on every run (n - 1 per campaign and series).
    runs_dof = float((stacked["count"] - 1).clip(lower=0).sum())
    denom = b * b / dof.sum() + (w * w / runs_dof if runs_dof > 0 else 0.0)
    effective = excess * excess / denom if denom > 0 else float(dof.sum())
    return excess, (float(max(min(effective, dof.sum()), 1.0)) if excess > 0 else float(dof.sum()))


def add_campaign_variance(se2, df, variance: float, dof: float, scale_sq=1.0) -> tuple[np.ndarray, np.ndarray]:
    """The variance of a difference of two campaigns' means and its degrees of freedom
    when each campaign also moves by ``variance`` (times ``scale_sq`` on the
    difference scale): ``se2 + 2 variance``, Welch-Satterthwaite's degrees of freedom
    of the sum (the campaign part with ``dof``)."""
    se2, df = np.asarray(se2, dtype="float64"), np.asarray(df, dtype="float64")
    extra = 2.0 * variance * np.asarray(scale_sq, dtype="float64")
    total = se2 + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        combined = total ** 2 / (se2 ** 2 / df + (extra ** 2 / dof if dof > 0 else 0.0))
    return total, np.where(extra > 0, combined, df)
