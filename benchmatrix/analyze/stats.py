"""Summary statistics of measured runs: the rows of ``summary.csv``.

Only runs that measure the cell count: warm-up runs prime caches and control runs
watch for drift, so both stay out, as do attempts that did not end ``ok``. When a run
was re-executed, its newest ``ok`` attempt stands for it, so a rerun replaces rather
than adds a sample.

Everything is a pandas group-by over the cell id (one pass per metric), so the cost
grows linearly with the number of runs and stays well below a second per million rows.

Confidence interval of the mean: Student's t with n-1 degrees of freedom for every
row (``ci_method`` is ``t``; empty where n < 2 gives no interval). It is calibrated:
over normal and lognormal (CV 25 %) runs it covers the true mean 94-95 % of the time
at n = 3 to 20 (``tests/unit/analyze/test_stats.py``). A bootstrap switch for skewed samples
(n >= 10 and sample skewness above 1) was tried and removed: the sample skewness of
a small sample is mostly noise, so the switch fired on 14 % of normal cells, and
the percentile-type (BCa) bootstrap, too narrow at small n, covered only 89 % of the
cells it chose, where the t interval covers 94-97 % of those same cells. The t
interval's shortfall on strongly skewed data lies in the cells whose sample
happened to miss the long tail (they look symmetric), so no skew-triggered switch
can repair it.

The module also holds the small building blocks of comparisons (Welch's test, the
Fieller interval of a ratio of means, Holm's adjustment, metric directions), used by
:mod:`benchmatrix.analyze.comparisons`.

The t and F distributions come from :mod:`scipy.special` (:func:`t_ppf`, :func:`t_sf`,
:func:`f_sf`), not :mod:`scipy.stats`: the same functions scipy.stats calls, with its
handling of invalid arguments, so every value is bit for bit what ``scipy.stats.t``
gives, but importing scipy.stats costs about 0.7 s of every collect job and
scipy.special about 0.15 s. Even scipy.special is imported on first use, so that
importing this module (and the report's) stays cheap, and the quantile every summary
interval takes (97.5 % at a whole number of degrees of freedom) is read from scipy's own
values in :mod:`benchmatrix.analyze.t_table`: a campaign that compares nothing does not
import scipy at all. The checks that need more of
scipy.stats (the drift tests of :mod:`benchmatrix.analyze.sanity`) import it when
they run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from benchmatrix.analyze.scale import LOG, metric_scales
from benchmatrix.errors import BenchmatrixError
from benchmatrix.layout import SUMMARY_STATS, summary_by_host_columns, summary_columns
from benchmatrix.workloads import metric_direction as builtin_direction

#: Confidence level of ``ci_low`` / ``ci_high``.
CONFIDENCE = 0.95
_REQUIRED = ("run_id", "cell_id", "status", "warmup", "control", "attempt")
_TRUE_WORDS = frozenset({"true", "1", "yes", "y", "t"})


def bool_column(values: pd.Series) -> pd.Series:
    """Read a flag column as booleans, whatever way it was stored.

    ``plan.csv`` and ``runs.csv`` hold ``true``/``false`` strings, but pandas may
    already have parsed them into booleans, and a column with gaps arrives as
    objects; all of these must give the same answer. Missing values are false.

    Args:
        values: The column (``warmup`` or ``control``).

    Returns:
        A boolean Series with the same index.
    """
    if pd.api.types.is_bool_dtype(values) and not values.hasnans:
        return values.astype(bool)
    return _word_in(values, _TRUE_WORDS)


def _word_in(values: pd.Series, words: frozenset[str]) -> pd.Series:
    # Normalize each distinct value once: a million rows hold only a handful of
    # distinct flags or statuses, and per-row string methods would dominate the cost.
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    hit = np.array([str(u).strip().lower() in words for u in uniques] + [False], dtype=bool)
    return pd.Series(hit[codes], index=values.index)


def is_ok(status: pd.Series) -> pd.Series:
    """True where a run attempt's status is ``ok`` (case and blanks ignored)."""
    return _word_in(status, frozenset({"ok"}))


def effective_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The measured runs that count towards the statistics.

    A run counts when its attempt ended ``ok`` and it is neither a warm-up nor a
    control run. A run_id with several ``ok`` attempts is represented by the newest
    one (the highest ``attempt``) only.

    Args:
        runs: Rows of ``runs.csv`` (one per run attempt).

    Returns:
        The counting rows, with every column of ``runs`` and their original index,
        in their original order.

    Raises:
        BenchmatrixError: A column needed to decide (run_id, cell_id, status,
            warmup, control, attempt) is missing from a non-empty table.
    """
    if runs.empty:
        return runs.iloc[0:0].copy()
    missing = [c for c in _REQUIRED if c not in runs.columns]
    if missing:
        raise BenchmatrixError(f"runs table lacks column(s): {', '.join(missing)}")
    keep = is_ok(runs["status"]) & ~bool_column(runs["warmup"]) & ~bool_column(runs["control"])
    ok = runs.loc[keep.to_numpy(dtype=bool)]
    attempt = pd.to_numeric(ok["attempt"], errors="coerce").fillna(0).to_numpy()
    # Order by attempt, ties by file position, so the last row of a run_id in this
    # order is its newest attempt (or, for a duplicated attempt, the later line).
    order = np.lexsort((np.arange(len(ok)), attempt))
    newest = ~pd.Series(ok["run_id"].to_numpy()[order]).duplicated(keep="last").to_numpy()
    return ok.iloc[np.sort(order[newest])]


def start_ns(frame: pd.DataFrame, column: str = "started_at") -> np.ndarray:
    """Start times as int64 nanoseconds since the epoch, missing ones as the largest
    int64 (so they sort last). ``column`` may name another ISO time column
    (``ended_at``).

    Parsing a million ISO timestamps takes about half a second, so a frame may
    carry the parsed values in a ``_start_ns`` column (see
    :func:`with_start_ns`), which is used when present.
    """
    if column == "started_at" and "_start_ns" in frame.columns:
        return frame["_start_ns"].to_numpy(dtype="int64")
    if column not in frame.columns:
        return np.full(len(frame), np.iinfo("int64").max, dtype="int64")
    parsed = pd.to_datetime(frame[column], utc=True, errors="coerce", format="ISO8601")
    # pandas 3 infers the resolution from the text (microseconds for ISO times with a
    # fraction, seconds without): the integers mean nanoseconds only after an explicit
    # conversion, without which a 42 s campaign reads as 0.042 s in 1970.
    parsed = parsed.astype("datetime64[ns, UTC]")
    values = parsed.array.asi8
    return np.where(parsed.isna().to_numpy(), np.iinfo("int64").max, values).astype("int64")


def with_start_ns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its start times parsed once into ``_start_ns``."""
    if "_start_ns" in frame.columns:
        return frame
    return frame.assign(_start_ns=start_ns(frame))


def execution_order(frame: pd.DataFrame) -> np.ndarray:
    """Positions of ``frame``'s rows in execution order: start time, then ``seq``,
    then ``attempt``; runs that never started last, in plan order."""
    seq = pd.to_numeric(frame["seq"], errors="coerce").to_numpy(dtype="float64") if "seq" in frame.columns \
        else np.zeros(len(frame))
    attempt = pd.to_numeric(frame["attempt"], errors="coerce").to_numpy(dtype="float64") \
        if "attempt" in frame.columns else np.zeros(len(frame))
    seq = np.where(np.isnan(seq), np.inf, seq)
    attempt = np.where(np.isnan(attempt), np.inf, attempt)
    return np.lexsort((attempt, seq, start_ns(frame)))


def _special():
    from scipy import special

    return special


def _scalar_or_array(out: np.ndarray) -> np.ndarray | np.float64:
    # As scipy.stats returns it: a numpy scalar for scalar arguments.
    return out[()] if out.ndim == 0 else out


def _t975_from_table(q: np.ndarray, df: np.ndarray) -> np.ndarray | None:
    """t's 97.5 % quantile from :data:`benchmatrix.analyze.t_table.T975` when ``q`` is
    that level and every ``df`` a whole number the table holds (or NaN); else None."""
    from benchmatrix.analyze.t_table import T975

    if q.ndim or float(q) != 0.975:
        return None
    known = ~np.isnan(df)
    whole = df[known]
    if not np.all((whole >= 1) & (whole <= len(T975)) & (whole == np.floor(whole))):
        return None
    out = np.full(df.shape, np.nan)
    out[known] = np.asarray(T975)[whole.astype(np.int64) - 1]
    return out


def t_ppf(q, df) -> np.ndarray | np.float64:
    """Quantile of Student's t, exactly ``scipy.stats.t.ppf(q, df)``.

    NaN where ``df <= 0`` or is NaN or ``q`` lies outside [0, 1]; -inf at ``q = 0``
    and +inf at ``q = 1``. At ``q = 0.975`` and whole ``df`` up to 1000, from
    :data:`benchmatrix.analyze.t_table.T975` (the same numbers, without importing scipy).
    """
    q, df = np.asarray(q, dtype="float64"), np.asarray(df, dtype="float64")
    tabled = _t975_from_table(q, df)
    if tabled is not None:
        return _scalar_or_array(tabled)
    with np.errstate(invalid="ignore", divide="ignore"):
        valid = df > 0
        inside = valid & (q > 0) & (q < 1)
        out = np.where(inside, _special().stdtrit(np.where(inside, df, 1.0), np.where(inside, q, 0.5)), np.nan)
    out = np.where(valid & (q == 0), -np.inf, np.where(valid & (q == 1), np.inf, out))
    return _scalar_or_array(out)


def t_sf(x, df) -> np.ndarray | np.float64:
    """Upper tail of Student's t, exactly ``scipy.stats.t.sf(x, df)`` (NaN where
    ``df <= 0`` or either is NaN, 1 at ``x = -inf``, 0 at ``x = +inf``)."""
    x, df = np.asarray(x, dtype="float64"), np.asarray(df, dtype="float64")
    with np.errstate(invalid="ignore"):
        valid = df > 0
        finite = valid & np.isfinite(x)
        out = np.where(finite, _special().stdtr(np.where(finite, df, 1.0), -np.where(finite, x, 0.0)), 0.0)
    out = np.where(valid & (x == -np.inf), 1.0, out)
    out = np.where(~valid | np.isnan(x), np.nan, out)
    return _scalar_or_array(out)


def f_sf(x, dfn, dfd) -> np.ndarray | np.float64:
    """Upper tail of the F distribution, exactly ``scipy.stats.f.sf(x, dfn, dfd)``
    (NaN where a degree of freedom is not positive or any argument is NaN, 1 for
    ``x <= 0``, 0 at ``x = +inf``)."""
    x, dfn, dfd = (np.asarray(v, dtype="float64") for v in (x, dfn, dfd))
    with np.errstate(invalid="ignore"):
        valid = (dfn > 0) & (dfd > 0)
        inside = valid & (x > 0) & (x < np.inf)
        out = np.where(inside, _special().fdtrc(np.where(inside, dfn, 1.0), np.where(inside, dfd, 1.0),
                                             np.where(inside, x, 1.0)), 0.0)
    out = np.where(valid & (x <= 0), 1.0, out)
    out = np.where(~valid | np.isnan(x), np.nan, out)
    return _scalar_or_array(out)


def _t_half_width(sd: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(n >= 2, n - 1, np.nan)
        quantile = t_ppf(0.5 + CONFIDENCE / 2, df)
        return quantile * sd / np.sqrt(n)


def _sort_rows(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    try:
        return table.sort_values(keys, kind="stable", na_position="last")
    except TypeError:
        # A factor whose levels mix numbers and text cannot be ordered natively;
        # fall back to text order rather than refusing to summarize.
        return table.sort_values(keys, kind="stable", na_position="last",
                                 key=lambda col: col.astype("string"))


def _cox_interval(log_mean: np.ndarray, log_var: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The modified Cox interval of the mean of positive, right-skewed data.

    ``exp(m + s^2/2 +- t_{n-1} sqrt(s^2/n + s^4 / (2(n-1))))`` with m and s^2 the mean
    and variance of the log values (Olsson 2005, "Confidence intervals for the mean
    of a log-normal distribution", J. Stat. Educ. 13(1)): the interval of the
    arithmetic mean of lognormal data, always above 0. Its 95 % interval covered the
    true mean 93.7-95.2 % of lognormal samples with CV 5-100 % at n = 3-30, and 94.9-96.3 %
    of normal samples with CV 5-50 % (docs/report.md), where the t interval covered 86 %
    of lognormal samples with CV 100 % and went below 0.
    """
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        df = np.where(n >= 2, n - 1, np.nan)
        quantile = t_ppf(0.5 + CONFIDENCE / 2, df)
        half = quantile * np.sqrt(log_var / n + log_var * log_var / (2 * df))
        centre = log_mean + log_var / 2
        return np.exp(centre - half), np.exp(centre + half)


# shape: one vectorized pass: per-metric parts, then interval columns over the same long frame
def summarize(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
              metrics: list[str] | None = None, declared: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per-cell, per-metric statistics of the effective runs (``summary.csv``).

    Statistics per (cell, metric): n, mean, median, min, max, the sample standard
    deviation ``sd`` (ddof=1), ``cv = sd / mean`` as a fraction, and the two-sided
    95 % confidence interval of the mean: Student's t with n-1 degrees of freedom
    (the module docstring says why not a bootstrap); ``ci_method`` names it
    (``t``). ``sd``, ``cv`` and the interval are NaN (and ``ci_method`` empty) when
    n < 2; ``cv`` is NaN when the mean is 0. Runs whose value of a metric is missing
    are skipped for that metric only; a (cell, metric) with no value at all gives no
    row.

    Args:
        runs: Rows of ``runs.csv``; filtered through :func:`effective_runs`.
        factor_names: The spec's factors, in spec order.
        units: Metric name -> unit. With ``metrics=None`` the metrics are the
            columns of ``runs`` named here.
        metrics: Metrics to summarize; names without a column in ``runs`` are
            ignored (no run has produced them yet). Units default to "".

    Returns:
        One row per (cell, metric) with the columns of :func:`summary_columns`,
        sorted by the factor columns, then metric, and a fresh index.

    Raises:
        BenchmatrixError: ``runs`` is not empty but lacks a needed column.
    """
    columns = summary_columns(factor_names)
    if metrics is None:
        metrics = [c for c in runs.columns if c in units]
    else:
        metrics = [m for m in dict.fromkeys(metrics) if m in runs.columns]
    eff = effective_runs(runs)
    if eff.empty or not metrics:
        numeric = {"n": "int64", **{c: "float64" for c in SUMMARY_STATS[3:-1]}}
        return pd.DataFrame({c: pd.Series(dtype=numeric.get(c, object)) for c in columns})
    lacking = [f for f in factor_names if f not in eff.columns]
    if lacking:
        raise BenchmatrixError(f"runs table lacks factor column(s): {', '.join(lacking)}")

    cells = eff["cell_id"]
    scales, _ = metric_scales(eff, metrics, declared, units)
    parts = []
    for metric in metrics:
        values = eff[metric]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            values = pd.to_numeric(values, errors="coerce")
        values = values.astype("float64")
        grouped = values.groupby(cells.to_numpy(), sort=False)
        agg = grouped.agg(["count", "mean", "median", "min", "max", "std"])
        if scales[metric] == LOG:
            logs = np.log(values).groupby(cells.to_numpy(), sort=False).agg(["mean", "var"])
            agg["_log_mean"], agg["_log_var"] = logs["mean"], logs["var"]
        else:
            agg["_log_mean"] = agg["_log_var"] = np.nan
        agg = agg[agg["count"] > 0]
        agg.insert(0, "metric", metric)
        parts.append(agg)
    long = pd.concat(parts).rename(columns={"count": "n", "std": "sd"})
    long.index.name = "cell_id"
    long = long.reset_index()

    n = long["n"].to_numpy(dtype="int64")
    mean = long["mean"].to_numpy(dtype="float64")
    sd = np.where(n >= 2, long["sd"].to_numpy(dtype="float64"), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = np.where((n >= 2) & (mean != 0), sd / mean, np.nan)
    half = _t_half_width(sd, n)
    log = np.isfinite(long["_log_mean"].to_numpy(dtype="float64"))
    cox_low, cox_high = _cox_interval(long["_log_mean"].to_numpy(dtype="float64"),
                                      long["_log_var"].to_numpy(dtype="float64"), n)
    long["n"] = n
    long["sd"] = sd
    long["cv"] = cv
    long["ci_low"] = np.where(log, cox_low, mean - half)
    long["ci_high"] = np.where(log, cox_high, mean + half)
    long["ci_method"] = np.where(n >= 2, np.where(log, "cox", "t"), "").astype(object)
    long["unit"] = long["metric"].map(lambda m: units.get(m, "")).astype(object)

    levels = eff.drop_duplicates("cell_id", keep="first").set_index("cell_id")[factor_names]
    table = long.join(levels, on="cell_id")[columns]
    return _sort_rows(table, [*factor_names, "metric"]).reset_index(drop=True)


def run_hosts(runs: pd.DataFrame) -> list[str]:
    """The distinct hosts named in ``runs`` (any attempt), sorted; blanks ignored."""
    if runs.empty or "host" not in runs.columns:
        return []
    names = {str(h).strip() for h in runs["host"].dropna().unique()}
    return sorted(n for n in names if n and n.lower() != "nan")


def summarize_by_host(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
                      metrics: list[str] | None = None, declared: dict[str, Any] | None = None) -> pd.DataFrame:
    """:func:`summarize` per host: one row per (cell, host, metric) (``summary_by_host.csv``).

    The same statistics and intervals as summary.csv, computed from each host's
    effective runs alone; ``host`` follows ``cell_id``. Rows are sorted by the factor
    columns, then host, then metric.

    Args:
        runs: Rows of ``runs.csv``.
        factor_names, units, metrics: As for :func:`summarize`.

    Returns:
        The table with the columns of :func:`summary_by_host_columns`.
    """
    columns = summary_by_host_columns(factor_names)
    eff = effective_runs(runs)
    if eff.empty or "host" not in eff.columns:
        empty = summarize(runs.iloc[0:0], factor_names, units, metrics, declared)
        return empty.assign(host=pd.Series(dtype=object))[columns]
    host = eff["host"].astype(str).str.strip()
    # One pseudo-cell per (host, cell); effective_runs inside summarize keeps every row
    # (they are ok, measured and one per run_id already).
    sep = "\x1f"
    keyed = eff.assign(cell_id=host + sep + eff["cell_id"].astype(str))
    table = summarize(keyed, factor_names, units, metrics, declared)
    if table.empty:  # no metric at all (e.g. a command without declared metrics)
        return table.assign(host=pd.Series(dtype=object))[columns]
    parts = table["cell_id"].str.split(sep, n=1, expand=True)
    table = table.assign(host=parts[0].to_numpy(), cell_id=parts[1].to_numpy())[columns]
    return _sort_rows(table, [*factor_names, "host", "metric"]).reset_index(drop=True)


# ----------------------------------------------------------------- comparison blocks

def metric_direction(metric: str, declared: dict | None = None) -> str:
    """Which way a metric is better: ``higher``, ``lower`` or ``""`` (unknown).

    A metric declared under ``workload.metrics`` with ``better`` says so itself;
    a built-in workload's metrics are known from its descriptor's ``directions``
    (:data:`benchmatrix.workloads.WORKLOADS`): fio's ``*_iops``, ``*_bw_kib`` and
    ``*_io_kib`` are better higher, every ``*_clat_*`` latency is better lower.

    Args:
        metric: Metric name.
        declared: ``workload.metrics`` of the spec (name -> {better, unit, ...}).
    """
    info = (declared or {}).get(metric) or {}
    better = str(info.get("better") or "").strip().lower()
    if better in ("higher", "lower"):
        return better
    return builtin_direction(metric)


def welch_df(var_a: np.ndarray, n_a: np.ndarray, var_b: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of a difference of two means."""
    with np.errstate(invalid="ignore", divide="ignore"):
        qa, qb = var_a / n_a, var_b / n_b
        return (qa + qb) ** 2 / (qa ** 2 / (n_a - 1) + qb ** 2 / (n_b - 1))


def welch_test(mean_a, var_a, n_a, mean_b, var_b, n_b) -> tuple[np.ndarray, np.ndarray]:
    """Welch's two-sided t-test from summary statistics, vectorized.

    Returns:
        ``(p_value, df)``. The p-value is NaN where a side has fewer than 2 values,
        and where both samples have zero variance: without any run-to-run variation
        there is no noise to judge a difference by (a coarse or constant metric), so
        no test is possible, whatever the means.
    """
    mean_a, var_a, n_a, mean_b, var_b, n_b = (np.asarray(x, dtype="float64")
                                              for x in (mean_a, var_a, n_a, mean_b, var_b, n_b))
    with np.errstate(invalid="ignore", divide="ignore"):
        # scipy.stats.ttest_ind_from_stats(equal_var=False) step by step (it takes
        # standard deviations and squares them again), so p is exactly its p-value.
        va, vb = np.sqrt(var_a) ** 2 / n_a, np.sqrt(var_b) ** 2 / n_b
        df_t = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))
        df_t = np.where(np.isnan(df_t), 1.0, df_t)
        t = np.divide(mean_a - mean_b, np.sqrt(va + vb))
        p = 2 * _special().stdtr(df_t, -np.abs(t))
    p = np.atleast_1d(np.asarray(p, dtype="float64")).copy()
    df = np.atleast_1d(welch_df(var_a, n_a, var_b, n_b))
    p[((var_a == 0) & (var_b == 0)) | (n_a < 2) | (n_b < 2)] = np.nan
    return p, df


# shape: the six statistics of Fieller's formula and the confidence level, vectorized; named as in the formula
def fieller_ratio_ci(mean_a, mean_b, var_a, var_b, cov_ab, df,
                     confidence: float | np.ndarray = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Fieller's confidence interval of the ratio ``mean_a / mean_b``, vectorized.

    ``var_a``, ``var_b`` and ``cov_ab`` are the variances and covariance of the two
    *estimated means* (``s^2 / n`` for independent samples, with ``cov_ab = 0``).
    ``confidence`` may be one level per row (multiplicity-adjusted intervals).
    The interval is the set of ratios r for which ``mean_a - r * mean_b`` is not
    significantly different from 0, so with Welch's degrees of freedom it excludes
    1 exactly when Welch's test rejects equal means at the same level.

    Returns:
        ``(low, high)``; both NaN where the interval is unbounded (the
        denominator's mean is not significantly different from 0).
    """
    a, b, vaa, vbb, vab, df = (np.atleast_1d(np.asarray(x, dtype="float64"))
                               for x in (mean_a, mean_b, var_a, var_b, cov_ab, df))
    with np.errstate(invalid="ignore", divide="ignore"):
        t = t_ppf(0.5 + confidence / 2, df)
        q_a = b * b - t * t * vbb
        q_b = -2.0 * (a * b - t * t * vab)
        q_c = a * a - t * t * vaa
        disc = q_b * q_b - 4.0 * q_a * q_c
        bounded = (q_a > 0) & (disc >= 0)
        root = np.sqrt(np.where(bounded, disc, np.nan))
        r1 = (-q_b - root) / (2.0 * q_a)
        r2 = (-q_b + root) / (2.0 * q_a)
    low = np.where(bounded, np.minimum(r1, r2), np.nan)
    high = np.where(bounded, np.maximum(r1, r2), np.nan)
    return low, high


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of p-values (NaN entries stay NaN, not counted).

    The i-th smallest of m p-values becomes ``max_{j<=i} min(1, (m - j + 1) p_(j))``.
    (Written out because statsmodels' ``multipletests`` runs a full garbage
    collection per call, 80 ms, which dominates a report's comparisons.)
    """
    p = np.asarray(p_values, dtype="float64")
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if len(ok):
        order = ok[np.argsort(p[ok], kind="stable")]
        m = len(order)
        scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
        out[order] = np.maximum.accumulate(scaled)
    return out
