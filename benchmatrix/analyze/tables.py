"""Every table of a campaign from its runs, in one pure function (no file I/O).

Collect calls :func:`derive_tables` once and writes what it returns
(:func:`benchmatrix.results.tables.write_tables`); the report renders from the same
:class:`~benchmatrix.results.tables.Tables`, so no table is computed twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from benchmatrix.analyze import sanity
from benchmatrix.analyze.comparisons import compare
from benchmatrix.analyze.stats import run_hosts, summarize, summarize_by_host
from benchmatrix.layout import summary_by_host_columns
from benchmatrix.results.tables import Tables, metric_units

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec


def report_metrics(spec: Spec, summary: pd.DataFrame) -> list[str]:
    """The metrics the report shows and compares: ``report.metrics`` that were measured,
    else every measured metric (sorted)."""
    present = list(dict.fromkeys(summary["metric"].dropna().tolist())) if len(summary) else []
    wanted = list(dict.fromkeys(spec.report.metrics))
    return [m for m in wanted if m in present] or sorted(present)


def derive_tables(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, units: dict[str, str], *,
                  records: Iterable[dict[str, Any]] | None = None, summary: pd.DataFrame | None = None,
                  record_notes: pd.DataFrame | None = None, adaptive: Any = None,
                  stopped_by: str = "") -> Tables:
    """summary, summary by host, comparisons and record notes of a campaign.

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
            f"alpha / {adaptive.looks} = {alpha:.4g} (repeated confidence intervals: the error rates hold whenever "
            "the campaign stopped; docs/spec.md)")
    if len(runs) and len(run_hosts(runs)) > 1:
        metrics = [m for m in sorted(measured) if m in runs.columns]
        by_host = summarize_by_host(runs, spec.factor_names, units, metrics, spec.declared_metrics)
    else:
        by_host = pd.DataFrame(columns=summary_by_host_columns(spec.factor_names))
    notes = sanity.record_notes(records) if records is not None else record_notes
    return Tables(plan=plan, runs=runs, summary=summary, units=units, comparisons=comparisons.table,
                  analysis=comparisons.meta(), summary_by_host=by_host, record_notes=notes)
