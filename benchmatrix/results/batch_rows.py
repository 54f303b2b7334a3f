"""Each batch's runs.csv rows and record notes, written by its batch job (issue 15).

The batch job has its records in hand, so it writes, beside its marker
``batches/BATCH.done``:

- ``batches/BATCH.runs.csv``: runs.csv rows of the batch's run attempts (every
  attempt of the batch that has a record, in plan order), columns ``RUN_COLUMNS``,
  the factors, then the batch's metrics in name order;
- ``batches/BATCH.notes.csv``: record_notes.csv rows of those records, except the
  host-facts changes, which span batches;
- in the marker itself (JSON): ``units`` (metric -> unit) and ``facts`` (the
  records' host facts, one entry per change, :func:`benchmatrix.results.notes.facts_entries`).

:func:`read_batch_rows` concatenates them into what collect derives from every
record.json, reading a few files per batch instead of one per run. This module
imports pandas only in the reader: the writer runs in every batch job.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.results.layout import NOTE_COLUMNS, PLAN_COLUMNS, RUN_COLUMNS
from benchmatrix.results.notes import facts_change_rows, facts_entries, note_rows
from benchmatrix.results.records import atomic_write, runs_rows

ROWS_SUFFIX = ".runs.csv"
NOTES_SUFFIX = ".notes.csv"
MARKER_SUFFIX = ".done"


def rows_csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """Rows as CSV text, each value as str() writes it (the form of every rows file)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def write_batch_rows(exp_dir: Path, batch: str, records: list[dict[str, Any]],
                     factor_names: list[str]) -> dict[str, Any]:
    """Write the batch's runs rows and record notes; returns what goes into its marker.

    Args:
        exp_dir: ``results/NAME``.
        batch: The batch id.
        records: The records of the batch's run attempts, in plan order.
        factor_names: The spec's factors (runs.csv's factor columns).

    Returns:
        ``{"units": {metric: unit}, "facts": [...]}`` for the marker (written last,
        so a marker's rows files are complete).
    """
    rows, units = runs_rows(records, factor_names)
    directory = Path(exp_dir) / "batches"
    atomic_write(directory / f"{batch}{ROWS_SUFFIX}",
                 rows_csv_text(RUN_COLUMNS + factor_names + sorted(units), rows))
    atomic_write(directory / f"{batch}{NOTES_SUFFIX}",
                 rows_csv_text(NOTE_COLUMNS, note_rows(records, with_facts=False)))
    return {"units": units, "facts": facts_entries(records, reduce=True)}


@dataclass
class BatchRows:
    """What :func:`read_batch_rows` returns.

    Attributes:
        rows: runs.csv as collect writes it: one row per run attempt of the plan's
            runs, in plan order (a run's attempts together), columns ``RUN_COLUMNS``,
            factors, metrics in name order.
        units: Metric -> unit over every batch.
        notes: record_notes.csv rows (``NOTE_COLUMNS``), host-facts changes included.
        missing: Finished batches (a marker) without rows files, e.g. run by an older
            benchmatrix: their records must be read as before.
        facts: The batches' host-facts entries (:func:`benchmatrix.results.notes.facts_entries`),
            for a caller that adds records of its own before finding the changes.
    """

    rows: Any
    units: dict[str, str] = field(default_factory=dict)
    notes: Any = None
    missing: list[str] = field(default_factory=list)
    facts: list[list[Any]] = field(default_factory=list)


def read_batch_rows(exp_dir: str | Path, typed: bool = True, facts_changes: bool = True) -> BatchRows:
    """Concatenate every finished batch's rows and notes of ``results/NAME``.

    Only runs of the current plan.csv count (as in collect); an attempt written by two
    batches (a batch re-planned under a new id) appears once.

    Args:
        exp_dir: ``results/NAME``.
        typed: Rows typed as runs.csv reads back; False: every cell the text the batch
            wrote (collect adds rows of its own before typing them once).
        facts_changes: Add the host-facts change notes found over every batch; False:
            leave them to a caller that adds records of its own (``BatchRows.facts``).
    """
    import pandas as pd

    exp = Path(exp_dir)
    with open(exp / "plan.csv", newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        factor_names = next(reader)[len(PLAN_COLUMNS):]
        first: dict[str, int] = {}
        for i, row in enumerate(reader):
            first.setdefault(row[2], i)
    units: dict[str, str] = {}
    facts: list[list[Any]] = []
    frames, notes, missing = [], [], []
    for marker in sorted((exp / "batches").glob(f"*{MARKER_SUFFIX}")):
        batch = marker.name[:-len(MARKER_SUFFIX)]
        rows_path = marker.with_name(batch + ROWS_SUFFIX)
        try:
            meta = json.loads(marker.read_text())
        except (OSError, ValueError):
            meta = {}
        if not rows_path.is_file() or "units" not in meta:
            missing.append(batch)
            continue
        for k, v in meta["units"].items():
            units.setdefault(k, v)
        facts += meta.get("facts") or []
        frames.append(pd.read_csv(rows_path, dtype=str, keep_default_na=False))
        notes_path = marker.with_name(batch + NOTES_SUFFIX)
        if notes_path.is_file():
            notes.append(pd.read_csv(notes_path, dtype=str, keep_default_na=False))
    columns = RUN_COLUMNS + factor_names + sorted(units)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns, dtype=str)
    table = table.reindex(columns=columns, fill_value="")
    table = table[table["run_id"].isin(first.keys())]
    table = table.drop_duplicates(subset=["run_id", "attempt"], keep="last")
    order = table["run_id"].map(first).astype(int) * 1_000_000 + table["attempt"].astype(int)
    table = table.iloc[order.argsort(kind="stable")]
    # Typed as collect's runs.csv reads back: the text goes through read_csv once.
    rows = pd.read_csv(io.StringIO(table.to_csv(index=False)), keep_default_na=True) if typed else table
    note_frame = pd.concat(notes, ignore_index=True) if notes else pd.DataFrame(columns=NOTE_COLUMNS, dtype=str)
    note_frame = note_frame[note_frame["run_id"].isin(first.keys())] if len(note_frame) else note_frame
    if facts_changes:
        extra = pd.DataFrame(facts_change_rows(facts), columns=NOTE_COLUMNS).fillna("").astype(str)
        note_frame = pd.concat([note_frame, extra], ignore_index=True) if len(extra) else note_frame
    return BatchRows(rows.reset_index(drop=True), units, note_frame.reset_index(drop=True), missing, facts)
