"""Summary statistics of measured runs: the rows of ``summary.csv``.

Only runs that measure the cell count: warm-up runs prime caches and control runs
watch for drift, so both stay out, as do attempts that did not end ``ok``. When a run
was re-executed, its newest ``ok`` attempt stands for it, so a rerun replaces rather
than adds a sample.

Everything is a pandas group-by over the cell id (one pass per metric), so the cost
grows linearly with the number of runs and stays well below a second per million rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from benchmatrix.errors import BenchmatrixError

#: Columns of ``summary.csv`` around the factor columns (which follow ``cell_id``).
SUMMARY_STATS = ["metric", "unit", "n", "mean", "median", "min", "max", "sd", "cv",
                 "ci_low", "ci_high"]
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


def summary_columns(factor_names: list[str]) -> list[str]:
    """The columns of ``summary.csv``, in file order, for these factors."""
    return ["cell_id", *factor_names, *SUMMARY_STATS]


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


def _t_half_width(sd: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(n >= 2, n - 1, np.nan)
        quantile = sps.t.ppf(0.5 + CONFIDENCE / 2, df)
        return quantile * sd / np.sqrt(n)


def _sort_rows(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    try:
        return table.sort_values(keys, kind="stable", na_position="last")
    except TypeError:
        # A factor whose levels mix numbers and text cannot be ordered natively;
        # fall back to text order rather than refusing to summarize.
        return table.sort_values(keys, kind="stable", na_position="last",
                                 key=lambda col: col.astype("string"))


def summarize(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
              metrics: list[str] | None = None) -> pd.DataFrame:
    """Per-cell, per-metric statistics of the effective runs (``summary.csv``).

    Statistics per (cell, metric): n, mean, median, min, max, the sample standard
    deviation ``sd`` (ddof=1), ``cv = sd / mean`` as a fraction, and the two-sided
    95 % confidence interval of the mean from Student's t with n-1 degrees of
    freedom. ``sd``, ``cv`` and the interval are NaN when n < 2; ``cv`` is NaN when
    the mean is 0. Runs whose value of a metric is missing are skipped for that
    metric only; a (cell, metric) with no value at all gives no row.

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
        numeric = {"n": "int64", **{c: "float64" for c in SUMMARY_STATS[3:]}}
        return pd.DataFrame({c: pd.Series(dtype=numeric.get(c, object)) for c in columns})
    lacking = [f for f in factor_names if f not in eff.columns]
    if lacking:
        raise BenchmatrixError(f"runs table lacks factor column(s): {', '.join(lacking)}")

    cells = eff["cell_id"]
    parts = []
    for metric in metrics:
        values = eff[metric]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            values = pd.to_numeric(values, errors="coerce")
        agg = (values.astype("float64").groupby(cells.to_numpy(), sort=False)
               .agg(["count", "mean", "median", "min", "max", "std"]))
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
    long["n"] = n
    long["sd"] = sd
    long["cv"] = cv
    long["ci_low"] = mean - half
    long["ci_high"] = mean + half
    long["unit"] = long["metric"].map(lambda m: units.get(m, "")).astype(object)

    levels = eff.drop_duplicates("cell_id", keep="first").set_index("cell_id")[factor_names]
    table = long.join(levels, on="cell_id")[columns]
    return _sort_rows(table, [*factor_names, "metric"]).reset_index(drop=True)
