"""What moved with each finding: the counters of the same runs, judged like the metric.

A finding says that a metric changed ("read_bw_kib +1342 %"); the system counters the
batch runner sampled during the same runs (``collect: [cpu, disk]``,
:mod:`benchmatrix.workloads.counters`) often say how: the device's read request size
grew from 8 to 352 KiB, its reads per second fell by 92 %. For every decided
comparison (``better``/``worse``, ``higher``/``lower``) :func:`moved_with` compares
each counter of the two cells' runs by the verdict engine
(:func:`benchmatrix.analyze.verdict.judge`): the same scale rules
(:mod:`benchmatrix.analyze.scale`: ratios of geometric means for rates, sizes and
times), the same intervals (Welch's, or Welch's on visit means where the comparison
was judged visit against visit), the report's alpha and default practical threshold.

The counters of one finding form a family of their own, Holm-adjusted within it, so
that they cost the primary metrics no power and a finding with no real cause behind
its counters lists none of them more often than alpha. A counter is listed when its
Holm-adjusted interval excludes no change and its estimate lies beyond the threshold.
Columns identical run by run (the sums over the disks where there is one disk) are one
counter, named by the device. A counter that takes one value in every run of each cell
(the request size of a device nothing else reads) has no spread to test, and no noise
gives a counter one value per cell: it is listed where the two values differ beyond the
threshold (p 0, the interval the point), outside the family.

Listed counters are ordered by their effect (the absolute log of the ratio of the
means) weighted by how closely the counter follows the metric run by run inside the
two cells (``(1 + |r|) / 2``, with ``r`` the within-cell correlation of the counter
with the metric, pooled over the two cells; 1 for a counter with one value per cell,
which has no noise of its own to move by): a counter that tracks the metric comes
before one that moved as far but independently. A workload's descriptor may name the
counters that usually explain it (``explained_by``; fio: the device's request size and
await): those of them that moved come first. The words are "moved with", never
"caused": a counter that moved is a lead, not a proof.

Everything here is pure (no file I/O): collect computes the table
(``moved_with.csv``), the report and the terminal only render it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from benchmatrix.analyze import verdict as engine
from benchmatrix.analyze.comparisons import VISIT_ANALYSES, _side_stats, level_keys
from benchmatrix.analyze.scale import LOG, metric_scales
from benchmatrix.analyze.stats import effective_runs
from benchmatrix.layout import ALL_HOSTS, HOST_COLUMN, by_column
from benchmatrix.workloads.counters import SOURCES, counter_metric_names

#: Columns of ``moved_with.csv``: one row per listed counter of a decided comparison.
#: ``comparison`` is the row's position in comparisons.csv (0-based).
COLUMNS = ["comparison", "metric", "level", "baseline", "rank", "counter", "unit", "scale", "mean_baseline",
           "mean_level", "rel_diff_pct", "ci_low_adj_pct", "ci_high_adj_pct", "p_value", "correlation", "text"]


def counter_columns(runs: pd.DataFrame) -> list[str]:
    """The counter columns of ``runs`` (the names :func:`counter_metric_names` gives), sorted."""
    names = counter_metric_names(list(SOURCES))
    return sorted(c for c in runs.columns if isinstance(c, str) and names.matches(c))


def distinct_counters(runs: pd.DataFrame, counters: Iterable[str]) -> list[str]:
    """``counters`` without the columns identical to another run by run, each kept once
    under its longest name: with one physical disk the sums over the disks
    (``disk_reads_s``) are that disk's own columns (``disk_vda_reads_s``), one counter
    and one test in the family, named by the device."""
    kept: dict[bytes, str] = {}
    for column in counters:
        values = pd.to_numeric(runs[column], errors="coerce").to_numpy(dtype="float64")
        key = np.where(np.isfinite(values), values, np.inf).tobytes()
        if key not in kept or len(column) > len(kept[key]):
            kept[key] = column
    chosen = set(kept.values())
    return [c for c in counters if c in chosen]


def _number(value: float) -> str:
    """A mean as the user reads it: three significant digits, no exponent below a million."""
    if not np.isfinite(value):
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}".replace(",", "")
    return f"{value:.2g}" if abs(value) < 10 else f"{value:.3g}"


def counter_text(counter: str, unit: str, mean_baseline: float, mean_level: float, rel_diff_pct: float) -> str:
    """One listed counter in words: ``disk_loop0_read_kib_per_io 8.0 → 352 KiB (+4300 %)``."""
    unit_text = f" {unit}" if unit else ""
    return (f"{counter} {_number(mean_baseline)} → {_number(mean_level)}{unit_text} "
            f"({rel_diff_pct:+.0f} %)")


def _keys(eff: pd.DataFrame, column: str, cache: dict[Any, Any]) -> np.ndarray:
    """:func:`level_keys` of one column, computed once per campaign."""
    key = ("keys", column)
    if key not in cache:
        cache[key] = level_keys(eff[column]).to_numpy(dtype=object)
    return cache[key]


def _sides(eff: pd.DataFrame, row: dict[str, Any], factor: str, by: list[str], host: bool,
           cache: dict[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the level's and the baseline's runs of one comparison row."""
    common = np.ones(len(eff), dtype=bool)
    for b in by:
        common &= _keys(eff, b, cache) == level_keys(pd.Series([row.get(by_column(b))])).iloc[0]
    if host and HOST_COLUMN in eff.columns and str(row.get(HOST_COLUMN)) != ALL_HOSTS:
        common &= _keys(eff, HOST_COLUMN, cache) == level_keys(pd.Series([row.get(HOST_COLUMN)])).iloc[0]
    keys = _keys(eff, factor, cache)
    level = level_keys(pd.Series([row.get("level"), row.get("baseline")]))
    return common & (keys == level.iloc[0]), common & (keys == level.iloc[1])


def _on_scale(eff: pd.DataFrame, column: str, scale: str, cache: dict[Any, Any]) -> np.ndarray:
    """One column as floats on its scale (log values for ``log``; NaN where not above 0),
    converted once per campaign."""
    key = ("values", column, scale)
    if key not in cache:
        values = pd.to_numeric(eff[column], errors="coerce").to_numpy(dtype="float64")
        if scale == LOG:
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.where(values > 0, np.log(values), np.nan)
        cache[key] = values
    return cache[key]


def _visit_labels(eff: pd.DataFrame, cache: dict[Any, Any]) -> np.ndarray | None:
    """Each run's visit (host/visit), or None without visit numbers."""
    if ("visits",) not in cache:
        labels = None
        if "visit" in eff.columns and not pd.to_numeric(eff["visit"], errors="coerce").isna().all():
            host = eff["host"].astype(str) + "/" if "host" in eff.columns else ""
            labels = (host + eff["visit"].astype(str)).to_numpy(dtype=object)
        cache[("visits",)] = labels
    return cache[("visits",)]


def _units_of(values: np.ndarray, rows: np.ndarray, visits: np.ndarray | None) -> np.ndarray:
    """The finite values of one side's runs, averaged per visit where the comparison's unit is the visit."""
    picked = values[rows]
    ok = np.isfinite(picked)
    if visits is None:
        return picked[ok]
    return pd.Series(picked[ok]).groupby(visits[rows][ok], sort=False).mean().to_numpy()


def _within_correlation(metric: list[np.ndarray], counter: list[np.ndarray]) -> float:
    """Pearson's correlation of the two, each centred within its cell, pooled over the cells."""
    xs, ys = [], []
    for x, y in zip(metric, counter):
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() >= 2:
            xs.append(x[ok] - x[ok].mean())
            ys.append(y[ok] - y[ok].mean())
    if not xs:
        return float("nan")
    x, y = np.concatenate(xs), np.concatenate(ys)
    denom = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denom) if denom > 0 else float("nan")


# shape: one comparison row and what it needs of the campaign, keyword-only after the runs
def explain_comparison(runs: pd.DataFrame, row: dict[str, Any], *, factor: str, by: list[str], scale: str,
                       units: dict[str, str], alpha: float, threshold: float,
                       counters: Iterable[str] | None = None, cache: dict[Any, Any] | None = None,
                       first: Iterable[str] = ()) -> pd.DataFrame:
    """The counters that moved with one comparison, largest first (any verdict).

    Args:
        runs: The effective runs of the campaign.
        row: The comparison (a comparisons.csv row: metric, level, baseline, the
            ``by`` columns, host, analysis).
        factor: The compared factor.
        by: The ``by`` factors of ``report.compare``.
        scale: The metric's scale (``log`` or ``linear``), for the correlation.
        units: Metric -> unit (the counters' units decide their scale).
        alpha: The significance level of the counters' family.
        threshold: The practical threshold (a fraction) a counter's change must pass.
        counters: The counter columns (default: every one of ``runs``).
        cache: Level keys and numeric columns of ``runs`` already computed (the same
            ``runs`` for every comparison of a campaign); filled in here.
        first: Regexes of the counters that usually explain the workload
            (:attr:`benchmatrix.workloads.base.Workload.explained_by`): those listed come
            before the others, each group in its own order.

    Returns:
        The listed counters with the columns of :data:`COLUMNS` but ``comparison``,
        ``metric``, ``level`` and ``baseline``; empty when none moved.
    """
    out_cols = COLUMNS[4:]
    counters = [c for c in (counter_columns(runs) if counters is None else counters)
                if c in runs.columns and c != row.get("metric")]
    if not counters or row.get("metric") not in runs.columns:
        return pd.DataFrame(columns=out_cols)
    cache = {} if cache is None else cache
    a, b = _sides(runs, row, factor, by, HOST_COLUMN in row, cache)
    if a.sum() < 2 or b.sum() < 2:
        return pd.DataFrame(columns=out_cols)
    missing = [c for c in counters if ("scale", c) not in cache]
    if missing:
        # One scale per counter for the whole campaign, as the comparisons decide theirs.
        cache.update({("scale", c): v for c, v in metric_scales(runs, missing, {}, units)[0].items()})
    scales = {c: cache[("scale", c)] for c in counters}
    by_visit = str(row.get("analysis") or "") in VISIT_ANALYSES
    ia, ib = np.flatnonzero(a), np.flatnonzero(b)
    visits = _visit_labels(runs, cache) if by_visit else None
    metric = _on_scale(runs, row["metric"], scale, cache)
    rows, corr = [], {}
    for counter in counters:
        values = _on_scale(runs, counter, scales[counter], cache)
        va, vb = _units_of(values, ia, visits), _units_of(values, ib, visits)
        if len(va) < 2 or len(vb) < 2:
            continue
        stats = _side_stats(float(va.mean()), float(va.var(ddof=1)), len(va), float(vb.mean()),
                            float(vb.var(ddof=1)), len(vb))
        rows.append({"metric": counter, "better": "", "_scale": scales[counter], **stats})
        corr[counter] = _within_correlation([metric[ia], metric[ib]], [values[ia], values[ib]])
    if not rows:
        return pd.DataFrame(columns=out_cols)
    table = pd.DataFrame(rows)
    # Their own family: Holm over this finding's counters only.
    engine.judge(table, set(table["metric"]), alpha, threshold)
    beyond = table["rel_diff_pct"].abs() >= threshold * 100.0
    # A counter that takes one value in every run of a cell (the request size of a device
    # nothing else reads) has no spread for a test, and no noise gives such a counter one
    # value per cell: where the two values differ beyond the threshold it moved, with
    # certainty (p 0, the interval the point), outside the family.
    fixed = table["_constant"].to_numpy(dtype=bool) & beyond.to_numpy()
    table.loc[fixed, "p_value"] = 0.0
    table.loc[fixed, "ci_low_adj_pct"] = table.loc[fixed, "rel_diff_pct"]
    table.loc[fixed, "ci_high_adj_pct"] = table.loc[fixed, "rel_diff_pct"]
    moved = (table["verdict"].isin(engine.CHANGED) & beyond).to_numpy() | fixed
    table = table[moved].copy()
    if not len(table):
        return pd.DataFrame(columns=out_cols)
    # A counter with one value per cell varies run by run only in its last bits: no correlation.
    table["correlation"] = np.where(table["_constant"].to_numpy(dtype=bool), np.nan,
                                    [corr[c] for c in table["metric"]])
    with np.errstate(divide="ignore", invalid="ignore"):
        effect = np.abs(np.log1p(table["rel_diff_pct"].to_numpy(dtype="float64") / 100.0))
    effect = np.where(np.isfinite(effect), effect, np.abs(table["rel_diff_pct"].to_numpy(dtype="float64")) / 100.0)
    # A counter with one value per cell has no run-to-run noise that could show it moving
    # on its own: it follows the cells exactly, weight 1.
    weight = np.where(table["_constant"].to_numpy(dtype=bool), 1.0,
                      (1.0 + np.nan_to_num(np.abs(table["correlation"].to_numpy(dtype="float64")))) / 2.0)
    table["_score"] = effect * weight
    patterns = list(first)
    table["_named"] = [any(re.fullmatch(p, c) for p in patterns) for c in table["metric"]]
    table = table.sort_values(["_named", "_score", "metric"], ascending=[False, False, True], kind="stable")
    table["rank"] = range(1, len(table) + 1)
    table["counter"] = table["metric"]
    table["unit"] = [units.get(c, "") for c in table["counter"]]
    table["text"] = [counter_text(c, u, mb, ml, d) for c, u, mb, ml, d in
                     zip(table["counter"], table["unit"], table["mean_baseline"], table["mean_level"],
                         table["rel_diff_pct"])]
    return table.reindex(columns=out_cols).reset_index(drop=True)


# shape: the campaign's comparisons and what they were judged with, keyword-only after the tables
def moved_with(runs: pd.DataFrame, comparisons: pd.DataFrame, *, factor: str | None, by: list[str],
               scales: dict[str, str], units: dict[str, str], alpha: float, threshold: float,
               first: Iterable[str] = ()) -> pd.DataFrame:
    """Every decided comparison's counters that moved with it (``moved_with.csv``).

    Args:
        runs: Rows of runs.csv (every attempt; the effective runs are used).
        comparisons: Rows of comparisons.csv, judged.
        factor: The compared factor (``report.compare.factor``); None: no comparisons.
        by: The ``by`` factors.
        scales: Metric -> scale of the compared metrics.
        units: Metric -> unit of every metric.
        alpha: The report's alpha.
        threshold: The report's default practical threshold (a fraction).
        first: Regexes of the counters the workload names as its usual explanation:
            listed first (:func:`explain_comparison`).

    Returns:
        One row per listed counter (:data:`COLUMNS`), by comparison then rank.
    """
    if factor is None or not len(comparisons) or "verdict" not in comparisons.columns or not len(runs):
        return pd.DataFrame(columns=COLUMNS)
    eff = effective_runs(runs)
    counters = distinct_counters(eff, counter_columns(eff))
    if not counters or factor not in eff.columns:
        return pd.DataFrame(columns=COLUMNS)
    parts, cache = [], {}
    for position, row in enumerate(comparisons.to_dict("records")):
        if row.get("verdict") not in engine.CHANGED:
            continue
        found = explain_comparison(eff, row, factor=factor, by=by, scale=scales.get(str(row["metric"]), ""),
                                   units=units, alpha=alpha, threshold=threshold, counters=counters,
                                   cache=cache, first=first)
        if len(found):
            parts.append(found.assign(comparison=position, metric=row["metric"], level=row.get("level"),
                                      baseline=row.get("baseline")))
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(parts, ignore_index=True).reindex(columns=COLUMNS)


#: Counters bmx compare prints beside a worse or better row.
SHOWN = 3
#: The column of the combined runs that tells campaign A's runs from B's.
_CAMPAIGN = "_campaign"


# shape: the two campaigns' runs and compare's rows, then what they were judged with, keyword-only
def moved_between(runs_a: pd.DataFrame, runs_b: pd.DataFrame, table: pd.DataFrame, *, units: dict[str, str],
                  alpha: float, threshold: float, shown: int = SHOWN) -> list[str]:
    """For each row of bmx compare's table, the counters that moved between campaign A
    and campaign B in its cell and host, as :func:`explain_comparison` lists them for a
    finding (B the level, A the baseline; the runs' noise only: no campaign variance),
    the first ``shown`` in words joined by ", "; "" for a row that is not ``worse`` or
    ``better`` (``higher``/``lower``) and where none moved.

    Args:
        runs_a: Rows of A's runs.csv (every attempt; the effective runs are used).
        runs_b: Rows of B's runs.csv.
        table: compare's rows (``cell_id``, ``host``, ``metric``, ``scale``, ``verdict``).
        units: Metric -> unit.
        alpha: The significance level of each row's counters' family.
        threshold: The practical threshold (a fraction) a counter's change must pass.
        shown: How many counters a row names.
    """
    out = [""] * len(table)
    if not len(table) or "verdict" not in table.columns:
        return out
    both = pd.concat([effective_runs(runs_a).assign(**{_CAMPAIGN: "A"}),
                      effective_runs(runs_b).assign(**{_CAMPAIGN: "B"})], ignore_index=True)
    counters = distinct_counters(both, counter_columns(both))
    if not counters:
        return out
    cache: dict[Any, Any] = {}
    for i, row in enumerate(table.to_dict("records")):
        if row.get("verdict") not in engine.CHANGED:
            continue
        judged = {"metric": row["metric"], "level": "B", "baseline": "A", by_column("cell_id"): row["cell_id"],
                  HOST_COLUMN: row.get("host"), "analysis": "welch"}
        found = explain_comparison(both, judged, factor=_CAMPAIGN, by=["cell_id"], scale=str(row.get("scale") or ""),
                                   units=units, alpha=alpha, threshold=threshold, counters=counters, cache=cache)
        out[i] = ", ".join(found["text"].astype(str).tolist()[:shown])
    return out


def decided_positions(comparisons: pd.DataFrame) -> list[int]:
    """The rows of comparisons.csv (0-based) that are findings (``better``/``worse``,
    ``higher``/``lower``), in the findings' order: largest effect first, ties in table order."""
    if not len(comparisons) or "verdict" not in comparisons.columns:
        return []
    decided = [i for i, v in enumerate(comparisons["verdict"]) if v in engine.CHANGED]
    size = pd.to_numeric(comparisons["rel_diff_pct"], errors="coerce").abs().fillna(0.0).to_numpy()
    decided.sort(key=lambda i: -size[i])
    return decided


def finding_runs(runs: pd.DataFrame, row: dict[str, Any], *, factor: str, by: list[str]) -> pd.DataFrame:
    """The effective runs of one comparison's two cells, with a column ``side``
    (``baseline`` or ``level``): what the report's plot of a finding shows run by run.

    Args:
        runs: Rows of runs.csv (every attempt; the effective runs are used).
        row: The comparison (a comparisons.csv row).
        factor: The compared factor.
        by: The ``by`` factors of ``report.compare``.
    """
    eff = effective_runs(runs)
    level, baseline = _sides(eff, row, factor, by, HOST_COLUMN in row, {})
    side = np.where(level, "level", np.where(baseline, "baseline", ""))
    return eff.assign(side=side)[level | baseline].reset_index(drop=True)


def finding_lists(comparisons: pd.DataFrame, table: pd.DataFrame | None) -> list[list[dict[str, Any]]]:
    """The listed counters of each decided comparison, in the findings' order (largest
    effect first, as the report lists them): one list of ``{counter, unit,
    mean_baseline, mean_level, rel_diff_pct, ci_low_pct, ci_high_pct, p_value,
    correlation, text}`` per finding (empty where none moved)."""
    decided = decided_positions(comparisons)
    by_position: dict[int, list[dict[str, Any]]] = {}
    if table is not None and len(table) and "comparison" in table.columns:
        for r in table.sort_values(["comparison", "rank"], kind="stable").to_dict("records"):
            by_position.setdefault(int(r["comparison"]), []).append({
                "counter": r["counter"], "unit": None if pd.isna(r["unit"]) else r["unit"],
                **{k: _plain(r[k]) for k in ("mean_baseline", "mean_level", "rel_diff_pct", "p_value",
                                             "correlation")},
                "ci_low_pct": _plain(r["ci_low_adj_pct"]), "ci_high_pct": _plain(r["ci_high_adj_pct"]),
                "text": r["text"]})
    return [by_position.get(i, []) for i in decided]


def _plain(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


# ------------------------------------------------------------- consistency checks

#: A run's device saw fewer than 1 / BYTES_SLACK or more than BYTES_SLACK times the bytes
#: its workload says it read: beyond the noise of reading the device's rate over the
#: counters' window (a second's sampling, the process's start and exit around the I/O).
BYTES_SLACK = 2.0
#: IOPS × request size departs from the bandwidth by more than this share: fio computes
#: both over one runtime, so only requests of another size move them apart.
SIZE_SLACK = 0.10
#: Runs listed under a consistency warning.
LISTED = 10
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_SIZE_KIB = {"": 1 / 1024, "k": 1.0, "m": 1024.0, "g": 1024.0 ** 2}


def _size_kib(value: Any) -> float | None:
    """fio's size notation (``8k``, ``1m``, ``4096``: bytes) in KiB; None for anything else
    (ranges, splits, per-direction lists)."""
    match = _SIZE.fullmatch(str(value).strip())
    return float(match.group(1)) * _SIZE_KIB[match.group(2).lower()] if match else None


def request_sizes(spec: Any) -> dict[str, float]:
    """Cell id -> the request size in KiB that a fio workload's ``bs`` says (a literal or
    exactly ``{{ factor }}``); empty for other workloads, a job file or another ``bs``."""
    workload = getattr(spec, "workload", None) or {}
    variables = workload.get("vars") or {}
    if workload.get("role") != "workload_fio" or "bs" not in variables or variables.get("job_file"):
        return {}
    bs = str(variables["bs"])
    from benchmatrix.spec.load import whole_variable

    name = whole_variable(bs)
    out = {}
    for cell in spec.cells:
        size = _size_kib(cell.factors.get(name) if name is not None else bs)
        if size is not None and size > 0:
            out[cell.cell_id] = size
    return out


def _numbers(runs: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(runs[column], errors="coerce").to_numpy(dtype="float64")


def _mib(kib: float) -> str:
    return f"{kib / 1024:.2g}" if kib < 10 * 1024 else f"{kib / 1024:.0f}"


def _bytes_warning(eff: pd.DataFrame) -> dict[str, Any] | None:
    """The bytes the workload read (``read_io_kib``) against those its device saw (the
    device's MiB/s over the run): the device that saw the closest amount is the workload's."""
    from benchmatrix.analyze.sanity import warning

    devices = [m.group(1) for c in eff.columns if isinstance(c, str)
               and (m := re.fullmatch(r"disk_(.+)_read_mib_s", c))]
    if not devices or "read_io_kib" not in eff.columns or "duration_s" not in eff.columns:
        return None
    read, seconds = _numbers(eff, "read_io_kib"), _numbers(eff, "duration_s")
    best = None
    for device in sorted(devices):
        seen = _numbers(eff, f"disk_{device}_read_mib_s") * 1024.0 * seconds
        ok = np.isfinite(seen) & np.isfinite(read) & (read > 0)
        if not ok.any():
            continue
        distance = abs(np.log(max(float(np.median(seen[ok] / read[ok])), 1e-9)))
        if best is None or distance < best[0]:
            best = (distance, device, seen, ok)
    if best is None:
        return None
    _, device, seen, ok = best
    ratio = np.where(ok, seen / np.where(read > 0, read, np.nan), np.nan)
    bad = ok & ((ratio < 1 / BYTES_SLACK) | (ratio > BYTES_SLACK))
    if not bad.any():
        return None
    ids = eff["run_id"].astype(str).to_numpy()[bad]
    low, high = float(np.nanmin(ratio[bad])), float(np.nanmax(ratio[bad]))
    why = ("the workload did not do what its options say (reads served from the page cache: "
           "no drop_caches before the run, direct: 0 on a file read before)" if high < 1 else
           "something else used the device, or the workload read more than it reports")
    items = [f"{i}: the workload read {_mib(r)} MiB, {device} saw {_mib(s)} MiB"
             for i, r, s in zip(ids, read[bad], seen[bad])]
    return warning("consistency_bytes", "the device did not see the bytes the workload read",
                   f"In {int(bad.sum())} of {int(ok.sum())} runs {device}, the device that saw the closest amount, "
                   f"saw {low:.2g} to {high:.2g} times the bytes the workload says it read (read_io_kib, against "
                   f"{device}'s read MiB/s over the run): {why}.", ids, items=items[:LISTED],
                   more=max(len(items) - LISTED, 0))


def _size_warning(eff: pd.DataFrame, request_kib: dict[str, float]) -> dict[str, Any] | None:
    """IOPS × the request size the options say against the bandwidth, per direction."""
    from benchmatrix.analyze.sanity import warning

    said = eff["cell_id"].astype(str).map(request_kib).to_numpy(dtype="float64") if request_kib else None
    if said is None:
        return None
    for d in ("read", "write"):
        if f"{d}_iops" not in eff.columns or f"{d}_bw_kib" not in eff.columns:
            continue
        iops, bw = _numbers(eff, f"{d}_iops"), _numbers(eff, f"{d}_bw_kib")
        ok = np.isfinite(iops) & np.isfinite(bw) & np.isfinite(said) & (iops > 0) & (bw > 0)
        per_io = np.where(ok, bw / np.where(iops > 0, iops, np.nan), np.nan)
        bad = ok & (np.abs(per_io / said - 1.0) > SIZE_SLACK)
        if not bad.any():
            continue
        ids = eff["run_id"].astype(str).to_numpy()[bad]
        items = [f"{i}: {d}_iops {n:.4g} × {s:g} KiB = {n * s:.4g} KiB/s, {d}_bw_kib {b:.4g}"
                 for i, n, s, b in zip(ids, iops[bad], said[bad], bw[bad])]
        return warning("consistency_request_size", "IOPS × request size is not the bandwidth",
                       f"In {int(bad.sum())} of {int(ok.sum())} runs {d}_iops × the request size the options say "
                       f"({_sizes(said[bad])}) is not {d}_bw_kib: the workload moved "
                       f"{_sizes(per_io[bad])} per IO. It did not do what its options say (a job file's own bs, "
                       "bsrange or bssplit).", ids, items=items[:LISTED], more=max(len(items) - LISTED, 0))
    return None


def _sizes(values: np.ndarray) -> str:
    """``8 KiB`` or ``8 to 64 KiB``."""
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    return f"{low:.3g} KiB" if f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g} to {high:.3g} KiB"


def consistency_warnings(runs: pd.DataFrame, request_kib: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """The checks the read-ahead case study made by hand, where the units allow.

    Throughput × runtime against the bytes the device saw: the workload's ``read_io_kib``
    against the device's ``disk_DEV_read_mib_s`` over the run (``duration_s``), on the
    device that saw the closest amount; a run beyond :data:`BYTES_SLACK` times either way
    is a mismatch (writes are left out: write-back lands after the run). IOPS × request
    size against bandwidth: ``read_iops``/``write_iops`` × the request size the options say
    (``request_kib``, :func:`request_sizes`) against ``read_bw_kib``/``write_bw_kib``,
    beyond :data:`SIZE_SLACK`.

    Args:
        runs: Rows of runs.csv (every attempt; the effective runs are checked).
        request_kib: Cell id -> the request size in KiB the workload's options say.

    Returns:
        The report's warnings (:func:`benchmatrix.analyze.sanity.warning`), checks
        ``consistency_bytes`` and ``consistency_request_size``; empty when the runs agree
        or lack the columns.
    """
    if not len(runs) or "run_id" not in runs.columns:
        return []
    eff = effective_runs(runs)
    if not len(eff):
        return []
    found = [_bytes_warning(eff), _size_warning(eff, request_kib or {})]
    return [w for w in found if w is not None]
