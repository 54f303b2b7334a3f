"""Drift of the control cell and sanity checks: the report's warnings.

"Question results that don't make sense": every check here names the runs it
concerns, so a reader can open their raw output. The checks:

* ``drift``: the control cell (``order.control``) runs again and again through the
  campaign; its values should not move. Only comparable control runs count: those
  that ran warm (:func:`comparable_controls`); cold ones are listed in a notice. Per
  host and metric, two tests on the control runs in execution order: a **trend** (Kendall's tau of value against
  order) and a **level shift** (Pettitt's rank-based changepoint test: the split
  that maximises the Mann-Whitney statistic between before and after, with a
  permutation p-value for up to ``PERMUTATION_MAX_N`` runs and Pettitt's
  approximation beyond). The p-values are Holm-adjusted across all drift tests; a
  drift is reported when an adjusted p-value is below alpha **and** the change is
  at least ``report.drift_threshold`` (default 1 %) of the level, so that a huge
  campaign does not cry wolf over a 0.1 % wobble.
* ``cv``: a cell whose coefficient of variation exceeds ``report.cv_threshold``
  (default 5 %).
* ``outlier``: a run more than 3.5 robust standard deviations from its cell's
  median (modified z-score ``0.6745 * |x / median - 1| / MAD > 3.5``, Iglewicz and
  Hoaglin, on relative deviations; the MAD is the cell's own or, when larger, the
  one pooled over all cells of the metric: see :func:`outliers`).
* ``warmup``: the first measured run after the warm-up runs (or, without warm-ups,
  each cell's first measured run) differs from the cell's other runs: per run by the
  outlier rule, and over the campaign when the first runs' relative deviations are
  systematically on one side (Wilcoxon signed-rank test, at least 6 cells, median
  deviation at least the drift threshold).
* ``failed`` / ``rerun``: attempts that did not end ``ok`` and never recovered;
  runs executed more than once.
* ``missing``: cells with fewer successful measured runs than planned.
* ``hosts`` (campaigns on several hosts): a cell whose hosts disagree: a one-way
  analysis of variance of the cell's runs by host, Holm-adjusted across every cell
  and metric, below alpha **and** host means spread by at least the drift threshold
  of their average (:func:`host_differences`). One machine's numbers do not speak
  for another's.
* ``host_effects`` (``hosts_mode: replicate``): a comparison whose verdict differs
  between hosts (better on one, equivalent, inconclusive or worse on another).
* From the run records (:func:`record_notes`): ``knob`` (verified state differs
  from the intended one), ``host_facts`` (a host's facts changed mid-campaign),
  ``fio_overlap`` (jobs of one fio run overlapped in time, e.g. a missing
  ``stonewall``), ``tool`` (warnings the parser attached to a run) and ``killed``
  (processes the batch runner had to kill at a run's timeout or after it ended).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from benchmatrix.analyze.stats import bool_column, effective_runs, execution_order, f_sf, holm, is_ok, run_hosts
from benchmatrix.analyze.verdict import CHANGED
from benchmatrix.layout import ALL_HOSTS, HOST_COLUMN, NOTE_COLUMNS, RECORD_NOTES, State, by_column
from benchmatrix.results.notes import facts_change_rows, facts_entries, note_rows
from benchmatrix.results.status import decide
from benchmatrix.spec.load import DEFAULT_DRIFT_THRESHOLD

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Modified z-score above which a run is an outlier.
OUTLIER_Z = 3.5
#: Fewest control runs for drift tests.
DRIFT_MIN_RUNS = 6
#: Up to this many control runs the changepoint p-value comes from permutations.
PERMUTATION_MAX_N = 500
PERMUTATIONS = 2000
#: Run ids listed per warning; the count says how many there are in all.
RUNS_LISTED = 12
#: Items (cells, runs) detailed per check before "and N more".
ITEMS_LISTED = 20


# shape: the fields of one report warning, the optional ones keyword-only with defaults
def warning(check: str, title: str, message: str, runs: Iterable[str] = (), *,
            severity: str = "warning", items: list[str] | None = None, more: int = 0,
            plot: str | None = None) -> dict[str, Any]:
    """One warning of the report, as the templates expect it.

    Args:
        check: Machine name of the check (drift, cv, outlier, ...).
        title: Short headline.
        message: One or two plain sentences.
        runs: Every run id concerned (the first ``RUNS_LISTED`` are shown).
        severity: ``warning`` or ``notice``.
        items: Detail lines (cells or runs with numbers).
        more: Detail lines left out of ``items``.
        plot: Name of a plot that shows the problem.
    """
    ids = pd.unique(pd.Series(list(runs) if not isinstance(runs, pd.Series) else runs, dtype=object))
    return {"check": check, "title": title, "message": message, "severity": severity,
            "runs": [str(r) for r in ids[:RUNS_LISTED]], "runs_total": len(ids), "details": items or [],
            "more": more, "plot": plot}


def _cap(items: list[str]) -> tuple[list[str], int]:
    return items[:ITEMS_LISTED], max(len(items) - ITEMS_LISTED, 0)


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _num(x: float) -> str:
    # Thousands grouped, never scientific for everyday magnitudes (the tables' style).
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


# ----------------------------------------------------------------- drift

#: Statuses of attempts that never ran the workload: they warm nothing.
_NOT_RUN = frozenset({"invalid", "unreachable"})


def comparable_controls(runs: pd.DataFrame, knobs: Iterable[str], warmup: int) -> pd.Series:
    """Boolean mask (on ``runs``' index) of the control runs that ran warm.

    Control runs are comparable with each other only when they ran in the same
    condition: not cold right after a reconfiguration while others ran warm. Per
    host, in execution order, a knob change (or the host's first run) starts a new
    stretch; a control run is comparable when, earlier in its stretch, a run of its
    own cell ran (its warm-ups, a measured run or an earlier control run) or, with
    ``warmup: 0``, when any run did. Plans since issue 12 make every control run so;
    older plans opened a visit with a cold control run.

    Args:
        runs: Rows of ``runs.csv`` (every attempt).
        knobs: The knob factors whose change cools a cell (:attr:`Spec.cooling_knobs`: by
            the spec's ``warmup_after``, every knob or the costly ones).
        warmup: The spec's ``warmup``.
    """
    if runs.empty or "control" not in runs.columns:
        return pd.Series(False, index=runs.index)
    ordered = _execution_order(runs)
    status = ordered["status"].astype(str).str.strip().str.lower() if "status" in ordered.columns \
        else pd.Series("ok", index=ordered.index)
    ran = ordered.loc[~status.isin(_NOT_RUN).to_numpy()]
    host = ran["host"].astype(str) if "host" in ran.columns else pd.Series("", index=ran.index)
    cols = [k for k in knobs if k in ran.columns]
    state = host.str.cat([ran[k].astype(str) for k in cols], sep="\x1f") if cols else host
    # Stretch ids: a new stretch at every change of host or knob setting.
    stretch = (state != state.shift()).cumsum()
    if warmup > 0:
        earlier = ran.groupby([stretch.to_numpy(), ran["cell_id"].astype(str).to_numpy()]).cumcount() > 0
    else:
        earlier = ran.groupby(stretch.to_numpy()).cumcount() > 0
    warm = bool_column(ran["control"]) & earlier
    return warm.reindex(runs.index, fill_value=False).astype(bool)


def control_runs(runs: pd.DataFrame, knobs: Iterable[str] | None = None, warmup: int = 0) -> pd.DataFrame:
    """The ok control runs (newest ok attempt per run), in execution order.

    Args:
        runs: Rows of ``runs.csv``.
        knobs: The spec's knob factors: keep only the comparable control runs
            (:func:`comparable_controls`). None keeps every control run.
        warmup: The spec's ``warmup`` (with ``knobs``).
    """
    if runs.empty or "control" not in runs.columns:
        return runs.iloc[0:0]
    mask = bool_column(runs["control"]).to_numpy() & is_ok(runs["status"]).to_numpy()
    if knobs is not None:
        mask &= comparable_controls(runs, knobs, warmup).to_numpy()
    ctl = runs.loc[mask]
    if ctl.empty:
        return ctl
    ctl = ctl.assign(_attempt=pd.to_numeric(ctl["attempt"], errors="coerce").fillna(0))
    ctl = ctl.sort_values("_attempt", kind="stable").drop_duplicates("run_id", keep="last")
    return _execution_order(ctl).drop(columns="_attempt")


def _execution_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.iloc[execution_order(frame)]


def _sps():
    # scipy.stats costs about 0.7 s to import: only the checks that run need it (a
    # campaign without a control cell or warm-up runs never does).
    from scipy import stats

    return stats


#: Up to this many differences (without zeros or ties) scipy's Wilcoxon test is exact.
WILCOXON_EXACT_MAX_N = 50


def _wilcoxon_tail(pmf: np.ndarray, k: int, mean: float, upper: bool) -> float:
    # scipy.stats' WilcoxonDistribution: the shorter sum of the two, the same slices.
    if upper:
        return float(pmf[k:].sum()) if k <= mean else float(1 - pmf[:k].sum())
    return float(pmf[:k + 1].sum()) if k <= mean else float(1 - pmf[k + 1:].sum())


def wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test of ``d``, exactly
    ``scipy.stats.wilcoxon(d).pvalue``.

    The common case (at most :data:`WILCOXON_EXACT_MAX_N` differences, no zero, no
    tie: scipy's exact null distribution) is computed here with scipy's own steps,
    so a collect job need not import scipy.stats (0.7 s) for the warm-up check;
    anything else is left to scipy.
    """
    d = np.asarray(d, dtype="float64")
    n = len(d)
    a = np.abs(d)
    if not (1 <= n <= WILCOXON_EXACT_MAX_N) or not np.all(np.isfinite(d)) or np.any(a == 0) \
            or len(np.unique(a)) < n:
        return float(_sps().wilcoxon(d).pvalue)
    ranks = np.empty(n, dtype="float64")
    ranks[np.argsort(a, kind="stable")] = np.arange(1, n + 1, dtype="float64")
    r_plus = float(np.sum((d > 0).astype("float64") * ranks))  # an integer: exact in any order
    # The null distribution of r_plus: scipy.stats._hypotests._get_wilcoxon_distr.
    pmf = np.ones(1, dtype=np.float64)
    for k in range(1, n + 1):
        prev = pmf
        pmf = np.zeros(k * (k + 1) // 2 + 1, dtype=np.float64)
        pmf[:len(prev)] = prev * 0.5
        pmf[-len(prev):] += prev * 0.5
    mean = n * (n + 1) / 4
    p = 2 * min(_wilcoxon_tail(pmf, math.floor(r_plus), mean, upper=True),
                _wilcoxon_tail(pmf, math.ceil(r_plus), mean, upper=False))
    return float(min(max(p, 0.0), 1.0))


def _pettitt_k(x: np.ndarray, axis: int = -1) -> np.ndarray:
    # Pettitt's statistic from ranks: U_k = 2 * (sum of the first k ranks) - k (n + 1).
    r = _sps().rankdata(x, axis=axis)
    n = x.shape[axis]
    u = 2 * np.cumsum(r, axis=axis) - np.arange(1, n + 1) * (n + 1)
    return np.max(np.abs(u[..., :-1]), axis=axis)


def changepoint(values: np.ndarray) -> tuple[int, float]:
    """Pettitt's test for one level shift.

    Returns:
        ``(k, p)``: the shift happens after the first ``k`` values; the p-value is
        from a permutation test (n <= ``PERMUTATION_MAX_N``) or Pettitt's
        approximation ``2 exp(-6 K^2 / (n^3 + n^2))``.
    """
    sps = _sps()
    n = len(values)
    r = sps.rankdata(values)
    u = 2 * np.cumsum(r) - np.arange(1, n + 1) * (n + 1)
    k = int(np.argmax(np.abs(u[:-1]))) + 1
    stat = float(np.max(np.abs(u[:-1])))
    if stat == 0:
        return k, 1.0
    if n <= PERMUTATION_MAX_N:
        res = sps.permutation_test((values,), _pettitt_k, permutation_type="pairings",
                                   n_resamples=PERMUTATIONS, alternative="greater", vectorized=True,
                                   random_state=np.random.default_rng(n))
        return k, float(res.pvalue)
    return k, float(min(1.0, 2 * math.exp(-6 * stat * stat / (n ** 3 + n ** 2))))


def drift(runs: pd.DataFrame, metrics: list[str], alpha: float = 0.05,
          threshold: float = DEFAULT_DRIFT_THRESHOLD, *, knobs: Iterable[str] | None = None,
          warmup: int = 0) -> pd.DataFrame:
    """Trend and level-shift tests of the control cell, per host and metric.

    Args:
        runs: Rows of ``runs.csv``.
        metrics: Metrics to test.
        alpha: Significance level (after Holm's adjustment over all drift tests).
        threshold: Smallest relative change (fraction) worth a warning.
        knobs, warmup: The spec's knob factors and ``warmup``: only comparable
            control runs are tested (:func:`control_runs`).

    Returns:
        One row per (host, metric) with n, trend (Kendall's tau, its p-value, the
        fitted change over the campaign as a fraction), shift (position, p-value,
        relative change of the median), adjusted p-values and ``flagged``.
    """
    columns = ["host", "metric", "n", "tau", "p_trend", "trend_change", "shift_after", "shift_run_id",
               "p_shift", "shift_change", "p_trend_adj", "p_shift_adj", "trend_flagged", "shift_flagged", "flagged"]
    ctl = control_runs(runs, knobs, warmup)
    rows = []
    hosts = ctl["host"].astype(str) if "host" in ctl.columns else pd.Series("", index=ctl.index)
    for host, part in ctl.groupby(hosts.to_numpy(), sort=True):
        for metric in metrics:
            if metric not in part.columns:
                continue
            values = pd.to_numeric(part[metric], errors="coerce")
            keep = values.notna().to_numpy()
            y = values.to_numpy(dtype="float64")[keep]
            ids = part["run_id"].to_numpy()[keep]
            n = len(y)
            if n < DRIFT_MIN_RUNS or np.all(y == y[0]):
                if n >= 1:
                    rows.append({"host": host, "metric": metric, "n": n})
                continue
            order = np.arange(n)
            sps = _sps()
            tau, p_trend = sps.kendalltau(order, y)
            level = float(np.median(y)) or float(np.mean(np.abs(y))) or 1.0
            slope = sps.linregress(order, y).slope
            k, p_shift = changepoint(y)
            before, after = np.median(y[:k]), np.median(y[k:])
            rows.append({"host": host, "metric": metric, "n": n, "tau": float(tau), "p_trend": float(p_trend),
                         "trend_change": float(slope * (n - 1) / abs(level)), "shift_after": k,
                         "shift_run_id": ids[k] if k < n else None, "p_shift": p_shift,
                         "shift_change": float((after - before) / abs(before)) if before else float("nan")})
    table = pd.DataFrame(rows, columns=columns[:10])
    if table.empty:
        return pd.DataFrame(columns=columns)
    p = np.concatenate([table["p_trend"].to_numpy(dtype="float64"), table["p_shift"].to_numpy(dtype="float64")])
    adj = holm(p)
    table["p_trend_adj"] = adj[: len(table)]
    table["p_shift_adj"] = adj[len(table):]
    with np.errstate(invalid="ignore"):
        table["trend_flagged"] = (table["p_trend_adj"] < alpha) & (table["trend_change"].abs() >= threshold)
        table["shift_flagged"] = (table["p_shift_adj"] < alpha) & (table["shift_change"].abs() >= threshold)
    table["flagged"] = table["trend_flagged"] | table["shift_flagged"]
    return table


def drift_warnings(table: pd.DataFrame, runs: pd.DataFrame, control_label: str | None, *,
                   knobs: Iterable[str] | None = None, warmup: int = 0) -> list[dict[str, Any]]:
    """Warnings (and notices when there is too little to test, or when control runs
    were left out as not comparable) from :func:`drift`, given the same ``knobs`` and
    ``warmup``."""
    out = []
    ctl = control_runs(runs, knobs, warmup)
    if control_label is None:
        return out
    if knobs is not None:
        every = control_runs(runs)
        left = every.loc[~every.index.isin(ctl.index), "run_id"]
        if len(left):
            out.append(warning(
                "drift", "control runs left out of the drift test",
                f"{len(left)} control run(s) of {control_label} ran cold (the first run after a knob change, or "
                "without a warm-up of their cell) and are not comparable with the warm ones, so the drift test "
                "leaves them out. Current plans warm every control run up; a plan made by an older benchmatrix "
                "did not.",
                left, severity="notice"))
    if table.empty or table["n"].max() < DRIFT_MIN_RUNS:
        n = 0 if table.empty else int(table["n"].max())
        out.append(warning("drift", "drift not tested",
                           f"only {n} control run(s) of {control_label} so far; the drift tests need "
                           f"{DRIFT_MIN_RUNS}.", severity="notice"))
        return out
    flagged = table[table["flagged"].fillna(False).astype(bool)]
    for host, part in flagged.groupby("host", sort=True):
        items = []
        for r in part.to_dict("records"):
            bits = []
            if r["shift_flagged"]:
                bits.append(f"level shift of {_pct(r['shift_change'])} after control run {r['shift_after']} "
                            f"of {r['n']} ({r['shift_run_id']}; Pettitt, adjusted p={r['p_shift_adj']:.3g})")
            if r["trend_flagged"]:
                bits.append(f"trend of {_pct(r['trend_change'])} over the campaign "
                            f"(Kendall tau={r['tau']:.2f}, adjusted p={r['p_trend_adj']:.3g})")
            items.append(f"{r['metric']}: " + "; ".join(bits))
        ids = ctl.loc[ctl["host"].astype(str) == str(host), "run_id"] if "host" in ctl.columns else ctl["run_id"]
        out.append(warning(
            "drift", f"drift on {host}",
            f"The control cell ({control_label}) did not stay put on {host}: the host, not only the factors, "
            "changed during the campaign. Effects measured across the change are suspect; randomized order "
            "spreads the damage, but check what changed (firmware, SAN, other tenants, thermal state).",
            ids, items=items, plot="control"))
    return out


# ----------------------------------------------------------------- per-run checks

def _cell_labels(cells: pd.DataFrame | None) -> dict[str, str]:
    if cells is None or cells.empty:
        return {}
    return dict(zip(cells["cell_id"], cells["label"]))


def cv_warnings(summary: pd.DataFrame, eff: pd.DataFrame, metrics: list[str], threshold: float,
                labels: dict[str, str]) -> list[dict[str, Any]]:
    """Cells whose CV exceeds the threshold.

    A ``summary`` with a ``host`` column (summary_by_host.csv) is judged per cell and
    host, so differences between hosts do not count as run-to-run noise.
    """
    if summary.empty:
        return []
    rows = summary[summary["metric"].isin(metrics)]
    cv = pd.to_numeric(rows["cv"], errors="coerce")
    high = rows[(cv.abs() > threshold).to_numpy()].assign(_cv=cv.abs())
    if high.empty:
        return []
    per_host = "host" in high.columns
    items = []
    for key, part in high.groupby(["cell_id", "host"] if per_host else "cell_id", sort=False):
        cell = key[0] if isinstance(key, tuple) else key
        desc = ", ".join(f"{m} {c * 100:.1f}%" for m, c in zip(part["metric"], part["_cv"]))
        items.append(f"{labels.get(cell, cell)} ({cell}){f' on {key[1]}' if per_host else ''}: {desc}")
    cells = set(high["cell_id"])
    if eff.empty:
        ids = []
    elif per_host:
        flagged = pd.MultiIndex.from_arrays([high["cell_id"].astype(str), high["host"].astype(str)])
        pairs = pd.MultiIndex.from_arrays([eff["cell_id"].astype(str), eff["host"].astype(str).str.strip()])
        ids = eff.loc[pairs.isin(flagged), "run_id"]
    else:
        ids = eff.loc[eff["cell_id"].isin(cells), "run_id"]
    shown, more = _cap(items)
    return [warning("cv", f"{len(items) if per_host else len(cells)} cell(s){' (per host)' if per_host else ''} "
                          f"vary more than {threshold * 100:g}%",
                    f"The coefficient of variation of these cells exceeds {threshold * 100:g}% (report.cv_threshold): "
                    "the runs disagree more than a stable benchmark should. More replicates narrow the "
                    "intervals; a noisy host or a too short run length may be the cause.",
                    ids, items=shown, more=more)]


def _robust_scale(rel: pd.Series, cells: np.ndarray) -> tuple[pd.Series, float]:
    """Per-cell MAD of relative deviations, and the MAD pooled over every cell."""
    absdev = rel.abs()
    return absdev.groupby(cells).transform("median"), float(np.nanmedian(absdev)) if absdev.notna().any() else np.nan


def outliers(eff: pd.DataFrame, metrics: list[str], by_host: bool = False) -> pd.DataFrame:
    """Runs whose modified z-score within their cell exceeds ``OUTLIER_Z``.

    Deviations are relative to the cell's median. The scale is the larger of the
    cell's own MAD and the MAD pooled over all cells of the metric: with five runs a
    cell's MAD alone is so unstable that a fifth of perfectly normal cells would
    show an "outlier"; the pooled floor keeps that near the normal tail rate, while
    a genuinely noisy cell is still judged by its own spread. Cells with fewer than
    three values are skipped.

    With ``by_host`` a cell's runs on each host are judged apart (every host ran
    the whole plan, so a host's offset is no outlier).

    Returns:
        Columns run_id, cell_id, metric, value, median, z.
    """
    parts = []
    cells = eff["cell_id"].to_numpy()
    groups = ((eff["cell_id"].astype(str) + "\x1f" + eff["host"].astype(str)).to_numpy()
              if by_host and "host" in eff.columns else cells)
    for metric in metrics:
        if metric not in eff.columns:
            continue
        x = pd.to_numeric(eff[metric], errors="coerce").astype("float64")
        g = x.groupby(groups)
        med, count = g.transform("median"), g.transform("count")
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = (x / med - 1).where((med != 0) & (count >= 3))
            cell_mad, pooled = _robust_scale(rel, groups)
            z = 0.6745 * rel.abs() / np.fmax(cell_mad, pooled)
        hit = (z > OUTLIER_Z).to_numpy()
        if hit.any():
            parts.append(pd.DataFrame({"run_id": eff["run_id"].to_numpy()[hit], "cell_id": cells[hit],
                                       "metric": metric, "value": x.to_numpy()[hit],
                                       "median": med.to_numpy()[hit], "z": z.to_numpy()[hit]}))
    if not parts:
        return pd.DataFrame(columns=["run_id", "cell_id", "metric", "value", "median", "z"])
    return pd.concat(parts, ignore_index=True)


def outlier_warnings(eff: pd.DataFrame, metrics: list[str], labels: dict[str, str],
                     by_host: bool = False) -> list[dict[str, Any]]:
    out = outliers(eff, metrics, by_host)
    if out.empty:
        return []
    items = [f"{r.run_id} in {labels.get(r.cell_id, r.cell_id)}: {r.metric} = {_num(r.value)} "
             f"vs median {_num(r.median)} ({_pct(r.value / r.median - 1) if r.median else ''})"
             for r in out.sort_values("z", ascending=False).itertuples()]
    shown, more = _cap(items)
    return [warning("outlier", f"{out['run_id'].nunique()} outlying run(s)",
                    f"These runs lie more than {OUTLIER_Z:g} robust standard deviations (median/MAD rule) from "
                    "their cell's median. They are kept in the statistics; look at their raw output before "
                    "trusting or discarding them.", out["run_id"], items=shown, more=more)]


def first_measured(runs: pd.DataFrame, warmup: int) -> pd.Series:
    """Boolean mask (on ``runs``' index) of the first measured run after warm-ups.

    With warm-ups, that is a measured ok run whose predecessor on the same host is a
    warm-up run of the same cell; without, each cell's first measured run.
    """
    if runs.empty:
        return pd.Series(False, index=runs.index)
    ordered = _execution_order(runs)
    host = ordered["host"].astype(str).to_numpy() if "host" in ordered.columns else np.zeros(len(ordered))
    warm = bool_column(ordered["warmup"]).to_numpy()
    ctl = bool_column(ordered["control"]).to_numpy()
    measured = ~warm & ~ctl & is_ok(ordered["status"]).to_numpy()
    cell = ordered["cell_id"].astype(str).to_numpy()
    if warmup > 0:
        prev_same = np.r_[False, (host[1:] == host[:-1]) & (cell[1:] == cell[:-1]) & warm[:-1]]
        hit = measured & prev_same
    else:
        seen = pd.Series(cell).where(measured).duplicated(keep="first").to_numpy()
        hit = measured & ~seen
    return pd.Series(hit, index=ordered.index).reindex(runs.index, fill_value=False)


def _group_key(frame: pd.DataFrame, by_host: bool) -> pd.Series:
    # The cell, or the cell on its host when every host ran the whole plan.
    if by_host and "host" in frame.columns:
        return frame["cell_id"].astype(str) + "\x1f" + frame["host"].astype(str)
    return frame["cell_id"]


# shape: the tables and thresholds the warm-up check needs, as sanity_warnings passes them
def warmup_warnings(runs: pd.DataFrame, eff: pd.DataFrame, metrics: list[str], warmup: int, alpha: float,
                    threshold: float, labels: dict[str, str], by_host: bool = False) -> list[dict[str, Any]]:
    """Warm-up effect still visible in the first measured run (compared with the
    cell's other runs on the same host when ``by_host``)."""
    if eff.empty:
        return []
    first = first_measured(runs, warmup).reindex(eff.index, fill_value=False).to_numpy()
    if not first.any():
        return []
    rest = eff.loc[~first]
    if rest.empty:  # one measured run per cell: nothing to compare the first ones with
        return []
    firsts = eff.loc[first]
    rkey, fkey = _group_key(rest, by_host), _group_key(firsts, by_host)
    items, flagged_ids, systematic = [], [], []
    for metric in metrics:
        if metric not in eff.columns:
            continue
        x = pd.to_numeric(rest[metric], errors="coerce")
        g = x.groupby(rkey.to_numpy())
        med, cnt = g.median(), g.count()
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = x / rkey.map(med) - 1
        mad = rel.abs().groupby(rkey.to_numpy()).median()
        pooled = float(np.nanmedian(rel.abs())) if rel.notna().any() else np.nan
        fx = pd.to_numeric(firsts[metric], errors="coerce").to_numpy(dtype="float64")
        fmed = fkey.map(med).to_numpy(dtype="float64")
        fmad = np.fmax(fkey.map(mad).to_numpy(dtype="float64"), pooled)
        fcnt = fkey.map(cnt).fillna(0).to_numpy()
        ok = np.isfinite(fx) & np.isfinite(fmed) & (fcnt >= 2) & (fmed != 0)
        if not ok.any():
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            dev = (fx - fmed) / np.abs(fmed)
            z = 0.6745 * np.abs(dev) / fmad
        out = ok & (fmad > 0) & (z > OUTLIER_Z)
        for i in np.flatnonzero(out):
            rid, cell = firsts["run_id"].iloc[i], firsts["cell_id"].iloc[i]
            items.append(f"{rid} ({labels.get(cell, cell)}): {metric} {_pct(dev[i])} vs the cell's other runs")
            flagged_ids.append(rid)
        d = dev[ok]
        if len(d) >= 6 and np.any(d != 0):
            p = wilcoxon_p(d)
            if p < alpha and abs(np.median(d)) >= threshold:
                systematic.append(f"{metric}: first runs {_pct(float(np.median(d)))} in median over {len(d)} "
                                  f"cells (Wilcoxon p={p:.3g})")
                flagged_ids.extend(firsts["run_id"].to_numpy()[ok].tolist())
    if not items and not systematic:
        return []
    shown, more = _cap(systematic + items)
    return [warning("warmup", "warm-up effect in the first measured run",
                    "The first measured run after the warm-up still differs from the cell's later runs: caches, "
                    "JIT or power states were not yet settled. Consider more warm-up runs (spec: warmup).",
                    flagged_ids, items=shown, more=more)]


# ----------------------------------------------------------------- hosts

def host_differences(eff: pd.DataFrame, metrics: list[str], alpha: float = 0.05,
                     threshold: float = DEFAULT_DRIFT_THRESHOLD) -> pd.DataFrame:
    """How much the hosts disagree about each cell: one row per (cell, metric).

    For every cell measured on at least two hosts: the mean on each host, their
    relative spread ``(largest - smallest host mean) / |average of the host means|``
    and a one-way analysis of variance of the cell's runs by host (F test, pooled
    within-host variance). The p-values are Holm-adjusted across every cell and
    metric; ``flagged`` when the adjusted p-value is below ``alpha`` and the spread is
    at least ``threshold``. Cells with a single value per host have no within-host
    variance to judge by (p-value missing, never flagged).

    Args:
        eff: The effective runs, with a ``host`` column.
        metrics: Metrics to check.
        alpha: Significance level after Holm's adjustment.
        threshold: Smallest relative spread worth a warning.

    Returns:
        Columns cell_id, metric, hosts (number), n, mean (average of the host means),
        host_means and host_n (dicts host -> value), spread, p_value_unadjusted,
        p_value, flagged.
    """
    columns = ["cell_id", "metric", "hosts", "n", "mean", "host_means", "host_n", "spread",
               "p_value_unadjusted", "p_value", "flagged"]
    if eff.empty or "host" not in eff.columns:
        return pd.DataFrame(columns=columns)
    host = eff["host"].astype(str).str.strip().to_numpy()
    cell = eff["cell_id"].astype(str).to_numpy()
    parts = []
    for metric in metrics:
        if metric not in eff.columns:
            continue
        x = pd.to_numeric(eff[metric], errors="coerce").astype("float64")
        keep = x.notna().to_numpy()
        if not keep.any():
            continue
        g = x[keep].groupby([cell[keep], host[keep]], sort=True).agg(["count", "mean", "var"])
        g.index.names = ["cell_id", "host"]
        g = g.reset_index()
        g["ss"] = np.nan_to_num(g["var"].to_numpy(dtype="float64")) * (g["count"] - 1)
        g["sum"] = g["count"] * g["mean"]
        per = g.groupby("cell_id", sort=False).agg(
            hosts=("host", "size"), n=("count", "sum"), total=("sum", "sum"), ssw=("ss", "sum"),
            avg=("mean", "mean"), high=("mean", "max"), low=("mean", "min"))
        per = per[per["hosts"] >= 2]
        if per.empty:
            continue
        g = g[g["cell_id"].isin(per.index)]
        grand = (per["total"] / per["n"]).reindex(g["cell_id"]).to_numpy()
        ssb = pd.Series(g["count"].to_numpy() * (g["mean"].to_numpy() - grand) ** 2).groupby(
            g["cell_id"].to_numpy(), sort=False).sum().reindex(per.index).to_numpy()
        df1 = per["hosts"].to_numpy(dtype="float64") - 1
        df2 = per["n"].to_numpy(dtype="float64") - per["hosts"].to_numpy(dtype="float64")
        ssw = per["ssw"].to_numpy(dtype="float64")
        with np.errstate(invalid="ignore", divide="ignore"):
            f = (ssb / df1) / (ssw / df2)
            p = f_sf(f, df1, df2)
        p = np.where(df2 < 1, np.nan, p)
        p = np.where((df2 >= 1) & (ssw == 0), np.where(ssb > 0, 0.0, 1.0), p)
        avg = per["avg"].to_numpy(dtype="float64")
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = (per["high"] - per["low"]).to_numpy(dtype="float64") / np.abs(avg)
        means = {c: dict(zip(part["host"], part["mean"])) for c, part in g.groupby("cell_id", sort=False)}
        counts = {c: dict(zip(part["host"], part["count"].astype(int))) for c, part in g.groupby("cell_id", sort=False)}
        parts.append(pd.DataFrame({
            "cell_id": per.index.to_numpy(), "metric": metric, "hosts": per["hosts"].to_numpy(),
            "n": per["n"].to_numpy(), "mean": avg, "host_means": [means[c] for c in per.index],
            "host_n": [counts[c] for c in per.index], "spread": spread, "p_value_unadjusted": p}))
    if not parts:
        return pd.DataFrame(columns=columns)
    table = pd.concat(parts, ignore_index=True)
    table["p_value"] = holm(table["p_value_unadjusted"].to_numpy(dtype="float64"))
    with np.errstate(invalid="ignore"):
        table["flagged"] = ((table["p_value"] < alpha) & (table["spread"].abs() >= threshold)).fillna(False)
    return table[columns]


def host_warnings(table: pd.DataFrame, eff: pd.DataFrame, labels: dict[str, str], mode: str,
                  threshold: float) -> list[dict[str, Any]]:
    """A warning naming the cells whose hosts disagree (:func:`host_differences`)."""
    if table.empty:
        return []
    flagged = table[table["flagged"].astype(bool)]
    if flagged.empty:
        return []
    flagged = flagged.assign(_s=flagged["spread"].abs()).sort_values("_s", ascending=False)
    items = []
    for r in flagged.itertuples():
        means = ", ".join(f"{h} {_num(v)}" for h, v in sorted(r.host_means.items()))
        items.append(f"{labels.get(r.cell_id, r.cell_id)} ({r.cell_id}): {r.metric} hosts differ by "
                     f"{r.spread * 100:.1f}% ({means}; adjusted p={r.p_value:.3g})")
    shown, more = _cap(items)
    cells = set(flagged["cell_id"])
    ids = eff.loc[eff["cell_id"].isin(cells), "run_id"] if len(eff) else []
    if mode == "partition":
        why = ("The runs of a cell were spread over hosts meant to be identical, but these hosts give different "
               "results for the same cell. The comparisons remove each host's offset (blocked by host), yet the "
               "hosts are not interchangeable: find out why (hardware, firmware, settings, neighbours).")
    else:
        why = ("The hosts give different results for the same cell: what one machine measures does not speak "
               "for another. Comparisons are made within each host; check whether the effects agree before "
               "generalizing from one machine.")
    return [warning("hosts", f"hosts disagree in {len(cells)} cell(s)",
                    why + f" (One-way analysis of variance by host, Holm-adjusted, and a spread of at least "
                    f"{threshold * 100:g}%.)", ids, items=shown, more=more)]


def host_effect_warnings(comparisons: pd.DataFrame | None, by: list[str]) -> list[dict[str, Any]]:
    """Comparisons whose verdict differs between hosts (``hosts_mode: replicate``)."""
    if comparisons is None or comparisons.empty or HOST_COLUMN not in comparisons.columns:
        return []
    table = comparisons[comparisons["verdict"] != "insufficient_data"]
    if table.empty or table[HOST_COLUMN].astype(str).eq(ALL_HOSTS).all():
        return []
    keys = ["metric", "level", *[by_column(b) for b in by]]
    items = []
    for key, part in table.groupby(keys, sort=False, dropna=False):
        # "equivalent" on one host and "inconclusive" on another is no effect found anywhere.
        if part["verdict"].nunique() < 2 or not part["verdict"].isin(CHANGED).any():
            continue
        key = key if isinstance(key, tuple) else (key,)
        r0 = part.iloc[0]
        at = ", ".join(f"{b}={v}" for b, v in zip(by, key[2:]))
        verdicts = ", ".join(f"{str(v).replace('_', ' ')} on {h} ({rel:+.1f}%)"
                             for h, v, rel in zip(part["host"], part["verdict"], part["rel_diff_pct"]))
        items.append(f"{r0['factor']}={r0['level']} vs {r0['baseline']}: {r0['metric']}"
                     f"{' at ' + at if at else ''}: {verdicts}")
    if not items:
        return []
    shown, more = _cap(items)
    return [warning("host_effects", f"{len(items)} effect(s) differ between hosts",
                    "These comparisons reach different verdicts on different hosts: an effect found on one "
                    "machine did not show (or went the other way) on another. A difference in significance is "
                    "not by itself a significant difference, but it is reason enough not to generalize from one "
                    "machine.", items=shown, more=more)]


def failure_warnings(runs: pd.DataFrame, labels: dict[str, str],
                     plan: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Failed runs (by the run-state rule of :func:`benchmatrix.results.status.decide`: no ok
    attempt, nothing waiting to run) and runs executed more than once."""
    if runs.empty:
        return []
    out = []
    # The one run-state rule (benchmatrix.results.status): an interrupted run is pending, not failed.
    decided = decide(plan if plan is not None and len(plan) else None, runs)
    failed_ids = decided.loc[decided["state"] == State.FAILED.value, "run_id"]
    lost = runs[runs["run_id"].astype(str).isin(failed_ids).to_numpy()].drop_duplicates("run_id", keep="last")
    if len(lost):
        items = [f"{r.run_id} ({labels.get(r.cell_id, r.cell_id)}): {r.status}"
                 + (f" – {r.reason}" if isinstance(r.reason, str) and r.reason else "")
                 for r in lost.iloc[:ITEMS_LISTED].itertuples()]
        out.append(warning("failed", f"{len(lost)} run(s) failed",
                           "These runs have no successful attempt; their cells have fewer values than planned. "
                           "'bmx rerun SPEC --failed' re-executes them.", lost["run_id"], items=items,
                           more=max(len(lost) - ITEMS_LISTED, 0)))
    # Hash the ids once; only the duplicated ones are counted.
    repeated = runs.loc[runs["run_id"].duplicated(keep=False).to_numpy(), "run_id"]
    if len(repeated):
        again = repeated.value_counts(sort=False)
        items = [f"{rid}: {n} attempts" for rid, n in again.iloc[:ITEMS_LISTED].items()]
        out.append(warning("rerun", f"{len(again)} run(s) executed more than once",
                           "A re-run's newest successful attempt stands for the run; earlier attempts are kept "
                           "in runs.csv.", again.index, severity="notice", items=items,
                           more=max(len(again) - ITEMS_LISTED, 0)))
    return out


def missing_warnings(plan: pd.DataFrame, eff: pd.DataFrame, labels: dict[str, str]) -> list[dict[str, Any]]:
    """Cells with fewer successful measured runs than planned."""
    if plan.empty or "cell_id" not in plan.columns:
        return []
    measured = plan[~bool_column(plan["warmup"]) & ~bool_column(plan["control"])].drop_duplicates("run_id")
    lacking = measured[~measured["run_id"].isin(eff["run_id"])] if len(eff) else measured
    if lacking.empty:
        return []
    planned = measured["cell_id"].value_counts(sort=False)
    short = lacking["cell_id"].value_counts(sort=False)
    items = [f"{labels.get(cell, cell)} ({cell}): {planned[cell] - n} of {planned[cell]}"
             for cell, n in short.items()]
    shown, more = _cap(items)
    return [warning("missing", f"{len(items)} cell(s) with fewer successful runs than planned",
                    "Pending or failed runs leave these cells short; their intervals are wider and "
                    "comparisons involving them weaker.", lacking["run_id"], items=shown, more=more)]


# ----------------------------------------------------------------- record notes

def record_notes(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Findings that only the run records hold, one row per (run attempt, finding).

    The rows come from :func:`benchmatrix.results.notes.note_rows` (no pandas there,
    so every batch job writes its own notes cheaply).

    Returns:
        Columns of ``NOTE_COLUMNS``: run_id, attempt, host, started_at, check, detail.
    """
    notes = RecordNotes()
    for rec in records:
        notes.add(rec)
    return notes.frame()


class RecordNotes:
    """:func:`record_notes` one record at a time, keeping none of them: collect reads a
    million records once and lets each go (the host facts are kept once per distinct value)."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._facts: list[list[Any]] = []
        self._distinct: dict[str, dict[str, Any]] = {}

    def add(self, rec: dict[str, Any]) -> None:
        """Take the notes of one record."""
        self._rows += note_rows([rec], with_facts=False)
        for entry in facts_entries([rec]):
            entry[3] = self._distinct.setdefault(json.dumps(entry[3], sort_keys=True, default=str), entry[3])
            self._facts.append(entry)

    def frame(self, earlier_facts: list[list[Any]] | None = None) -> pd.DataFrame:
        """The notes so far, host-fact changes included (in each host's time order).

        Args:
            earlier_facts: Host-facts entries of records read elsewhere (the batches'
                rows files), so that a change between those and these is found too.
        """
        return pd.DataFrame(self._rows + facts_change_rows([*(earlier_facts or []), *self._facts]),
                            columns=NOTE_COLUMNS)


_NOTE_TEXT = {
    "knob": ("verified knob state differs from the intended",
             "The host did not end up in the state the plan asked for: these runs measured another "
             "configuration than their cell claims."),
    "host_facts": ("host facts changed mid-campaign",
                   "A host's facts (kernel, CPU, memory, tool version ...) changed between runs: results before "
                   "and after may not be comparable."),
    "fio_overlap": ("fio jobs overlapped",
                    "Jobs of one fio run ran at the same time, so each job's numbers are shares of a contended "
                    "device (the seed's missing stonewall)."),
    "tool": ("warnings from the workload", "The workload's parser attached warnings to these runs."),
    "host_busy": ("the host was busy",
                  "The host's load average before these runs was above the CPUs they use: something else "
                  "competed with them (docs/hosts.md, \"A noisy host\")."),
    "host_untuned": ("the host's CPU clock was not fixed",
                     "A cpufreq governor other than performance, or turbo/boost on, lets the clock follow load and "
                     "temperature: runs vary more (pyperf system tune sets both)."),
    "killed": ("processes killed after runs",
               "The batch runner had to kill processes these runs started (at their timeout, or left running "
               "after the workload ended) before the next run could start: a workload that leaves processes "
               "behind may disturb its own measurement."),
}


def note_warnings(notes: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Warnings from :func:`record_notes`, one per check."""
    if notes is None:
        return [warning("records", "run records not checked",
                        f"Knob state, host facts and tool warnings come from the run records, which were not "
                        f"checked: {RECORD_NOTES} is absent (collect writes it).", severity="notice")]
    out = []
    for check in ("knob", "host_facts", "fio_overlap", "tool", "killed", "host_busy", "host_untuned"):
        part = notes[notes["check"] == check]
        if part.empty:
            continue
        title, message = _NOTE_TEXT[check]
        items = [f"{r.run_id} (attempt {r.attempt}, {r.host}): {r.detail}" for r in part.itertuples()]
        shown, more = _cap(items)
        out.append(warning(check, title, message, part["run_id"], items=shown, more=more))
    return out


# shape: every campaign table the checks read, the optional ones defaulted; derive_checks calls it
def sanity_warnings(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                    metrics: list[str], notes: pd.DataFrame | None, cells: pd.DataFrame | None = None,
                    alpha: float = 0.05, *, summary_by_host: pd.DataFrame | None = None,
                    host_table: pd.DataFrame | None = None,
                    comparisons: pd.DataFrame | None = None) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Every warning of the report, drift first.

    Args:
        spec: The loaded spec (``report.cv_threshold``, ``report.drift_threshold``,
            ``warmup``, ``order.control``).
        plan: Rows of ``plan.csv``.
        runs: Rows of ``runs.csv``.
        summary: Rows of ``summary.csv``.
        metrics: Metrics to check.
        notes: :func:`record_notes` (``None``: records were not checked).
        cells: cell_id -> label table, for readable messages.
        alpha: Significance level of drift and warm-up tests.
        summary_by_host: Per-host summary (several hosts); with ``hosts_mode:
            replicate`` the CV check uses it.
        host_table: :func:`host_differences`, if already computed.
        comparisons: comparisons.csv rows, for the ``host_effects`` check.

    Returns:
        ``(warnings, drift table)``.
    """
    cfg = spec.report
    cv_threshold, threshold = cfg.cv_threshold, cfg.drift_threshold
    labels = _cell_labels(cells)
    eff = effective_runs(runs) if len(runs) else runs
    ctl = spec.control_cell()
    knobs, warmup = spec.cooling_knobs, spec.warmup
    drift_table = drift(runs, metrics, alpha, threshold, knobs=knobs, warmup=warmup) if len(runs) else pd.DataFrame()
    out = drift_warnings(drift_table, runs, ctl.label() if ctl is not None else None, knobs=knobs, warmup=warmup)
    if len(runs):
        out += failure_warnings(runs, labels, plan)
    out += missing_warnings(plan, eff if len(runs) else pd.DataFrame(columns=["run_id"]), labels)
    multi = len(run_hosts(runs)) > 1 if len(runs) else False
    mode = spec.hosts_mode
    # Every host ran the whole plan: judge run-to-run noise within each host.
    per_host = multi and mode != "partition"
    if len(eff):
        cv_source = summary_by_host if per_host and summary_by_host is not None else summary
        out += cv_warnings(cv_source, eff, metrics, cv_threshold, labels)
        out += outlier_warnings(eff, metrics, labels, by_host=per_host)
        out += warmup_warnings(runs, eff, metrics, warmup, alpha, threshold, labels,
                               by_host=per_host)
        if multi:
            if host_table is None:
                host_table = host_differences(eff, metrics, alpha, threshold)
            out += host_warnings(host_table, eff, labels, mode, threshold)
    if multi and comparisons is not None:
        out += host_effect_warnings(comparisons, list(cfg.compare.by) if cfg.compare else [])
    out += note_warnings(notes)
    return out, drift_table
