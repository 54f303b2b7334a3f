"""Every table of a campaign from its runs, in one pure function (no file I/O).

Collect calls :func:`derive_tables` once and writes what it returns
(:func:`benchmatrix.results.tables.write_tables`); the report renders from the same
:class:`~benchmatrix.results.tables.Tables`, so no table is computed twice. That
includes the report's warnings (:func:`derive_checks`): the report renders them,
publish counts them, neither computes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from benchmatrix import layout
from benchmatrix.analyze import sanity
from benchmatrix.analyze.comparisons import Comparisons, compare
from benchmatrix.analyze.explain import consistency_warnings, moved_with, request_sizes
from benchmatrix.analyze.stats import effective_runs, run_hosts, summarize, summarize_by_host, with_start_ns
from benchmatrix.layout import summary_by_host_columns
from benchmatrix.names import shown
from benchmatrix.results.tables import Checks, Tables, metric_units

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec


def report_metrics(spec: Spec, summary: pd.DataFrame) -> list[str]:
    """The metrics the report shows and compares: ``report.metrics`` that were measured,
    else every measured metric (sorted)."""
    present = list(dict.fromkeys(summary["metric"].dropna().tolist())) if len(summary) else []
    wanted = list(dict.fromkeys(spec.report.metrics))
    return [m for m in wanted if m in present] or sorted(present)


#: Columns of plan.csv, runs.csv and summary.csv the report and the checks read (missing ones are added).
PLAN_BASE = ["seq", "host", "run_id", "cell_id", "replicate", "warmup", "control", "visit", "batch", "attempt"]
RUNS_BASE = [*PLAN_BASE, "status", "reason", "started_at", "ended_at", "duration_s"]
SUMMARY_BASE = ["cell_id", "metric", "unit", "n", "mean", "median", "min", "max", "sd", "cv", "ci_low", "ci_high",
                "ci_method"]


def with_columns(table: pd.DataFrame | None, columns: Iterable[str]) -> pd.DataFrame:
    """``table`` with every column of ``columns``, missing ones added as missing values.

    Results written by older or partial steps may lack optional columns; the report
    shows them as missing instead of failing.
    """
    table = pd.DataFrame() if table is None else table
    missing = [c for c in columns if c not in table.columns]
    if missing:
        table = table.assign(**{c: pd.Series(pd.NA, index=table.index, dtype=object) for c in missing})
    return table


def normalized(plan: pd.DataFrame, runs: pd.DataFrame,
               summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """plan, runs and summary as the report and its checks read them: every base column
    present, the runs' start times parsed once (``_start_ns``)."""
    return (with_columns(plan, PLAN_BASE), with_start_ns(with_columns(runs, RUNS_BASE)),
            with_columns(summary, SUMMARY_BASE))


def campaign_hosts(plan: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Every host of the plan or the runs, sorted."""
    return sorted(set(run_hosts(plan)) | set(run_hosts(runs)))


def cell_labels(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Every cell with its factor values and label (:func:`benchmatrix.layout.cell_label`):
    the spec's cells in matrix order, then any unknown to the spec (results of an older
    matrix) with factor values taken from the data."""
    factors = spec.factor_names
    known = pd.DataFrame([{"cell_id": c.cell_id, **c.factors} for c in spec.cells],
                         columns=["cell_id", *factors])
    known["label"] = [c.label() for c in spec.cells]
    seen = [t[["cell_id", *[f for f in factors if f in t.columns]]]
            for t in (runs, plan, summary) if "cell_id" in t.columns]
    others = pd.concat(seen, ignore_index=True) if seen else pd.DataFrame(columns=["cell_id"])
    others = others.dropna(subset=["cell_id"]).drop_duplicates("cell_id")
    others = with_columns(others[~others["cell_id"].isin(known["cell_id"])], factors)
    if len(others):
        others = others.assign(label=[layout.cell_label(zip(factors, vals))
                                      for vals in others[factors].itertuples(index=False)])
        known = pd.concat([known, others[["cell_id", *factors, "label"]]], ignore_index=True)
    return known


def threshold_key_warnings(spec: Spec, measured: set[str]) -> list[dict[str, Any]]:
    """A report warning for each ``report.threshold`` key that names no metric of the
    runs, where ``bmx validate`` could not check the keys: the spec names no metrics
    (``report.metrics``, declared ``metrics``) and the workload's names come from its
    output (a project's own role; :func:`benchmatrix.workloads.metric_names`).
    A misspelt key would leave its metric at the default threshold without a word.

    Args:
        spec: The loaded spec.
        measured: Every metric name the runs hold.
    """
    from benchmatrix.workloads import metric_names

    report = spec.report
    keys = [key for key, _ in report.thresholds if key not in measured]
    if not keys or report.metrics or spec.declared_metrics \
            or metric_names(str(spec.workload.get("role") or ""), spec.collect).complete:
        return []
    return [sanity.warning("threshold_key", f"report.threshold names {shown(key)}, which no run's metrics hold",
                           f"If it means a metric of the runs, the default threshold ({report.threshold * 100:g}%) "
                           "applies to it: check the spelling against runs.csv's metrics.")
            for key in keys]


# shape: a campaign's tables and comparisons, keyword-only after the first four
def derive_checks(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame, *,
                  comparisons: Comparisons, summary_by_host: pd.DataFrame | None = None,
                  record_notes: pd.DataFrame | None = None) -> Checks:
    """The report's warnings and what its drift and host sections show, from the tables.

    Args:
        spec: The loaded spec.
        plan, runs, summary: The campaign's tables (normalized here: :func:`normalized`).
        comparisons: The comparisons (their alpha, and the warnings they raise).
        summary_by_host: The per-host summary (several hosts).
        record_notes: The record notes; None: the records were not checked.

    Returns:
        :class:`~benchmatrix.results.tables.Checks`: every warning and notice in the
        report's order (:func:`benchmatrix.analyze.sanity.sanity_warnings`, then the
        comparisons' own), the drift table, the hosts' differences (several hosts) and the
        control runs the drift test used, in execution order.
    """
    plan, runs, summary = normalized(plan, runs, summary)
    metrics = report_metrics(spec, summary)
    cells = cell_labels(spec, plan, runs, summary)
    effective = effective_runs(runs)
    alpha = comparisons.alpha
    by_host = host_table = None
    if len(campaign_hosts(plan, runs)) > 1 and len(effective):
        by_host = summary_by_host
        host_table = sanity.host_differences(effective, metrics, alpha, spec.report.drift_threshold)
    warnings, drift_table = sanity.sanity_warnings(spec, plan, runs, summary, metrics, record_notes, cells, alpha,
                                                   summary_by_host=by_host, host_table=host_table,
                                                   comparisons=comparisons.table)
    # Comparisons that rest on too few visits or runs to decide.
    warnings += [sanity.warning(w["check"], w["title"], w["message"]) for w in comparisons.warnings]
    warnings += threshold_key_warnings(spec, set(summary["metric"].dropna()) if len(summary) else set())
    # The bytes and request sizes the workload reports against what its device saw.
    warnings += consistency_warnings(runs, request_sizes(spec))
    # The drift test's own control runs, so that the report draws a flagged shift where it was found.
    controls = sanity.control_runs(runs, spec.cooling_knobs, spec.warmup)
    keys = [(str(r), int(a)) for r, a in zip(controls["run_id"], pd.to_numeric(controls["attempt"]).fillna(0))]
    return Checks(warnings=warnings, drift=drift_table, host_differences=host_table, control_runs=keys)


# shape: a campaign's tables and inputs, the optional ones keyword-only (collect passes what it has)
def derive_tables(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, units: dict[str, str], *,
                  records: Iterable[dict[str, Any]] | None = None, summary: pd.DataFrame | None = None,
                  record_notes: pd.DataFrame | None = None, adaptive: Any = None,
                  stopped_by: str = "") -> Tables:
    """summary, summary by host, comparisons, record notes, the report's checks and the
    counters that moved with each finding (moved_with.csv) of a campaign.

    Args:
        spec: The loaded spec.
        plan: Rows of plan.csv.
        runs: Rows of runs.csv (one per attempt).
        units: Metric -> unit of every measured metric (the records' units); the
            spec's declared metrics fill in the rest.
        records: The run records (all attempts), for the record notes.
        summary: summary.csv rows when already at hand (else computed).
        record_notes: The notes when already at hand and ``records`` is not given;
            None: the records were not checked.
        adaptive: The campaign's adaptive replication settings
            (:class:`benchmatrix.analyze.adaptive.Settings`), None for a fixed design: its
            verdicts are judged at the sequential level alpha / looks, and analysis.json
            gets the rounds (why each comparison stopped).
        stopped_by: ``budget`` when the run loop stopped adding rounds for the budget.

    Returns:
        The :class:`~benchmatrix.results.tables.Tables`.
    """
    measured = dict(units)
    if summary is None:
        summary = summarize(runs, spec.factor_names, measured, declared=spec.declared_metrics)
    units = metric_units(spec.declared_metrics, measured, summary)
    alpha = spec.report.alpha if adaptive is None else adaptive.level(spec.report.alpha)
    comparisons = compare(spec, runs, report_metrics(spec, summary), units, alpha)
    if adaptive is not None:
        from benchmatrix.analyze.adaptive import rounds_summary

        comparisons.adaptive = rounds_summary(spec, plan, runs, adaptive, units, stopped_by, judged=comparisons)
        comparisons.notes.append(
            f"replicates until decided: the design allows {adaptive.looks} looks, so every verdict is judged at "
            f"{adaptive.level_words(spec.report.alpha)} (repeated confidence intervals: the error rates hold "
            "whenever the campaign stopped; docs/spec.md)")
    if len(runs) and len(run_hosts(runs)) > 1:
        metrics = [m for m in sorted(measured) if m in runs.columns]
        by_host = summarize_by_host(runs, spec.factor_names, units, metrics, spec.declared_metrics)
    else:
        by_host = pd.DataFrame(columns=summary_by_host_columns(spec.factor_names))
    notes = sanity.record_notes(records) if records is not None else record_notes
    checks = derive_checks(spec, plan, runs, summary, comparisons=comparisons, summary_by_host=by_host,
                           record_notes=notes)
    factor = (comparisons.config or {}).get("factor")
    from benchmatrix.workloads import WORKLOADS

    workload = WORKLOADS.get(str(spec.workload.get("role") or ""))
    moved = moved_with(runs, comparisons.table, factor=factor, by=list((comparisons.config or {}).get("by") or []),
                       scales=comparisons.scales, units=units, alpha=alpha, threshold=spec.report.threshold,
                       first=workload.explained_by if workload is not None else ())
    return Tables(plan=plan, runs=runs, summary=summary, units=units, comparisons=comparisons.table,
                  analysis=comparisons.meta(), summary_by_host=by_host, record_notes=notes, checks=checks,
                  moved_with=moved)
