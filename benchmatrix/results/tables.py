"""The tables collect writes under ``results/NAME/``, and reading them back.

Collect (:func:`benchmatrix.execute.collect.collect`) computes every table once
(:func:`benchmatrix.analyze.tables.derive_tables`) and writes it here; the report,
``bmx export`` and the campaign tools read them back and compute none of them again.
Data flows one way: records -> tables -> report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmatrix import layout
from benchmatrix.files import atomic_write


@dataclass
class Checks:
    """The report's warnings and the tables behind its drift and host sections, as
    collect computes them (:func:`benchmatrix.analyze.tables.derive_checks`).

    Attributes:
        warnings: Every warning and notice, in the report's order: dicts with check,
            title, message, severity (``warning`` or ``notice``), runs, runs_total,
            details, more and plot (:func:`benchmatrix.analyze.sanity.warning`).
        drift: The drift tests of the control cell, per host and metric.
        host_differences: How much the hosts disagree per cell and metric; None with
            one host.
        control_runs: (run_id, attempt) of the control runs the drift test used, in
            execution order (what the report's control plot draws).
    """

    warnings: list[dict[str, Any]] = field(default_factory=list)
    drift: pd.DataFrame = field(default_factory=pd.DataFrame)
    host_differences: pd.DataFrame | None = None
    control_runs: list[tuple[str, int]] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        """As JSON-ready values (analysis.json's ``checks``)."""
        return {"warnings": self.warnings, "drift": _split(self.drift),
                "host_differences": None if self.host_differences is None else _split(self.host_differences),
                "control_runs": [list(k) for k in self.control_runs]}

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Checks:
        hosts = meta.get("host_differences")
        return cls(warnings=list(meta.get("warnings") or []), drift=_unsplit(meta.get("drift")),
                   host_differences=None if hosts is None else _unsplit(hosts),
                   control_runs=[(str(r), int(a)) for r, a in meta.get("control_runs") or []])


def _split(frame: pd.DataFrame) -> dict[str, Any]:
    return frame.to_dict(orient="split", index=False)


def _unsplit(data: dict[str, Any] | None) -> pd.DataFrame:
    return pd.DataFrame(data["data"], columns=data["columns"]) if data else pd.DataFrame()


@dataclass
class Tables:
    """Every table of a campaign, as collect computes it.

    Attributes:
        plan: Rows of plan.csv.
        runs: Rows of runs.csv (one per attempt).
        summary: Rows of summary.csv.
        units: Metric -> unit, for every metric of ``runs``.
        comparisons: Rows of comparisons.csv.
        analysis: What the comparisons' table cannot hold (``report.compare`` as used,
            alpha, the explanation of each analysis, notes, warnings, Holm's family and
            the descriptive metrics): :meth:`benchmatrix.analyze.comparisons.Comparisons.meta`.
        summary_by_host: Rows of summary_by_host.csv (header only with one host).
        record_notes: Rows of record_notes.csv; None when the records were not checked.
        checks: The report's warnings and the drift and host tables behind them; None
            for a campaign collected before analysis.json held them.
        moved_with: Rows of moved_with.csv: the counters that moved with each decided
            comparison (:func:`benchmatrix.analyze.explain.moved_with`).
    """

    plan: pd.DataFrame
    runs: pd.DataFrame
    summary: pd.DataFrame
    units: dict[str, str] = field(default_factory=dict)
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    analysis: dict[str, Any] = field(default_factory=dict)
    summary_by_host: pd.DataFrame = field(default_factory=pd.DataFrame)
    record_notes: pd.DataFrame | None = None
    checks: Checks | None = None
    moved_with: pd.DataFrame = field(default_factory=pd.DataFrame)


def metric_units(declared: dict[str, Any] | None, *observed: dict[str, str] | pd.DataFrame) -> dict[str, str]:
    """Metric -> unit, the one rule: a unit measured wins, the spec's declared unit fills in.

    Args:
        declared: ``workload.metrics`` of the spec (``{name: {unit: ...}}``), or None.
        observed: Units seen, earliest first and each overriding the ones before
            where it names a unit: mappings (a record's or runs_rows' units) or
            frames with ``metric`` and ``unit`` columns (summary.csv).

    Returns:
        Every declared or observed metric with its unit ("" when none is known).
    """
    units = {str(m): str((d or {}).get("unit") or "") for m, d in (declared or {}).items() if isinstance(d, dict)
             or d is None}
    for seen in observed:
        if isinstance(seen, pd.DataFrame):
            if seen.empty or not {"metric", "unit"} <= set(seen.columns):
                continue
            pairs = seen[["metric", "unit"]].drop_duplicates("metric").itertuples(index=False)
        else:
            pairs = seen.items()
        for metric, unit in pairs:
            text = "" if unit is None or (isinstance(unit, float) and unit != unit) else str(unit)
            if text or str(metric) not in units:
                units[str(metric)] = text
    return units


def read_table(exp: str | Path, name: str, **kwargs: Any) -> pd.DataFrame:
    """One CSV table of ``exp`` (an empty frame when the file is missing or empty)."""
    path = Path(exp) / name
    return pd.read_csv(path, **kwargs) if path.is_file() and path.stat().st_size else pd.DataFrame()


def load_tables(exp: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """plan, runs and summary tables of an experiment directory (empty when missing)."""
    return read_table(exp, layout.PLAN), read_table(exp, layout.RUNS), read_table(exp, layout.SUMMARY)


def read_analysis(exp: str | Path) -> dict[str, Any]:
    """``analysis.json`` of a campaign ({} when missing or unreadable: a campaign collected
    before it existed)."""
    try:
        data = json.loads((Path(exp) / layout.ANALYSIS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_tables(exp: str | Path) -> Tables:
    """Every table collect wrote in ``exp``, for the report.

    ``record_notes`` is None when record_notes.csv is absent (the report then says the
    records were not checked); ``units``, ``analysis`` and ``checks`` come from analysis.json.
    """
    exp = Path(exp)
    plan, runs, summary = load_tables(exp)
    meta = read_analysis(exp)
    notes_path = exp / layout.RECORD_NOTES
    notes = None
    if notes_path.is_file():
        notes = read_table(exp, layout.RECORD_NOTES, dtype=str, keep_default_na=False)
        notes = notes if len(notes.columns) else pd.DataFrame(columns=layout.NOTE_COLUMNS)
    checks = Checks.from_meta(meta["checks"]) if isinstance(meta.get("checks"), dict) else None
    return Tables(plan=plan, runs=runs, summary=summary, units=dict(meta.get("units") or {}),
                  comparisons=read_table(exp, layout.COMPARISONS), analysis=dict(meta.get("comparisons") or {}),
                  summary_by_host=read_table(exp, layout.SUMMARY_BY_HOST), record_notes=notes, checks=checks,
                  moved_with=read_table(exp, layout.MOVED_WITH))


def write_tables(exp: str | Path, tables: Tables, runs_text: str | bytes | None = None) -> list[Path]:
    """Write every table collect computes (not plan.csv, not runs_long.parquet), atomically.

    Each is written whatever the campaign holds (a header-only file when there is
    nothing to say), so that each is a Snakemake output of collect.

    Args:
        runs_text: runs.csv's content (text or UTF-8 bytes) when already serialized
            (a million rows take seconds to write out again).

    Returns:
        The paths written, in :data:`benchmatrix.layout.COLLECTED` order (moved_with.csv
        after record_notes.csv).
    """
    exp = Path(exp)
    notes = tables.record_notes if tables.record_notes is not None else pd.DataFrame(columns=layout.NOTE_COLUMNS)
    frames = {layout.RUNS: tables.runs, layout.SUMMARY: tables.summary,
              layout.SUMMARY_BY_HOST: tables.summary_by_host, layout.COMPARISONS: tables.comparisons,
              layout.RECORD_NOTES: notes, layout.MOVED_WITH: tables.moved_with}
    written = []
    for name, frame in frames.items():
        text = runs_text if name == layout.RUNS and runs_text is not None else frame.to_csv(index=False)
        atomic_write(exp / name, text)
        written.append(exp / name)
    meta = {"units": tables.units, "comparisons": tables.analysis}
    if tables.checks is not None:
        meta["checks"] = tables.checks.meta()
    atomic_write(exp / layout.ANALYSIS, json.dumps(meta, indent=1, sort_keys=True, default=str) + "\n")
    written.append(exp / layout.ANALYSIS)
    return written
