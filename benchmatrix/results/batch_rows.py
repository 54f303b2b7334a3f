"""Each batch's runs.csv rows and record notes, written by its batch job (issue 15).

The batch job has its records in hand, so it writes, beside its marker
``batches/BATCH.done``:

- ``batches/BATCH.runs.csv``: runs.csv rows of the batch's run attempts (every
  attempt of the batch that has a record, in plan order), columns ``RUN_COLUMNS``,
  the factors, then the batch's metrics in name order;
- ``batches/BATCH.notes.csv``: record_notes.csv rows of those records, except the
  host-facts changes, which span batches;
- in the marker itself (JSON): ``units`` (metric -> unit), ``facts`` (the
  records' host facts, one entry per change, :func:`benchmatrix.results.notes.facts_entries`)
  and ``run_overhead_s`` (each row's ``phases.batch_overhead_share_s``, in the rows
  file's order: with the rows, all that ``bmx status`` needs of an ok attempt).

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

from benchmatrix.files import atomic_write
from benchmatrix.layout import BATCHES_DIR, NOTE_COLUMNS, PLAN_COLUMNS, RUN_COLUMNS
from benchmatrix.results.notes import facts_change_rows, facts_entries, note_rows
from benchmatrix.results.records import runs_rows

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
        ``{"units": {metric: unit}, "facts": [...], "run_overhead_s": [...]}`` for the
        marker (written last, so a marker's rows files are complete).
    """
    rows, units = runs_rows(records, factor_names)
    directory = Path(exp_dir) / BATCHES_DIR
    atomic_write(directory / f"{batch}{ROWS_SUFFIX}",
                 rows_csv_text(RUN_COLUMNS + factor_names + sorted(units), rows))
    atomic_write(directory / f"{batch}{NOTES_SUFFIX}",
                 rows_csv_text(NOTE_COLUMNS, note_rows(records, with_facts=False)))
    return {"units": units, "facts": facts_entries(records, reduce=True),
            "run_overhead_s": [(rec.get("phases") or {}).get("batch_overhead_share_s") for rec in records]}


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
        factor_names = next(csv.reader(fh))[len(PLAN_COLUMNS):]
    first = first_positions(pd.read_csv(exp / "plan.csv", usecols=["run_id"], dtype=str)["run_id"])
    units: dict[str, str] = {}
    facts: list[list[Any]] = []
    missing: list[str] = []
    # The rows files' lines joined while consecutive files share a header (every batch of
    # a campaign with the same metrics), each run of them parsed at once: one read_csv
    # per file costs ~8 ms, ~160 s for the 20k batches of a 1M-run campaign. File order
    # is kept. Bytes, not str, so the text costs a byte a character.
    rows_text: list[tuple[bytes, io.BytesIO]] = []
    notes_text: list[tuple[bytes, io.BytesIO]] = []
    for marker in sorted((exp / BATCHES_DIR).glob(f"*{MARKER_SUFFIX}")):
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
        _add_lines(rows_text, rows_path.read_bytes())
        notes_path = marker.with_name(batch + NOTES_SUFFIX)
        if notes_path.is_file():
            _add_lines(notes_text, notes_path.read_bytes())
    columns = RUN_COLUMNS + factor_names + sorted(units)
    frames = [_read_text(buf) for _, buf in rows_text]
    rows_text.clear()
    table = (frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)) if frames \
        else pd.DataFrame(columns=columns, dtype=str)
    del frames
    # Each step copies the table only when it changes something (a 1M-run table is
    # about half a GiB).
    if list(table.columns) != columns:
        table = table.reindex(columns=columns, fill_value="")
    position = table["run_id"].map(first)
    if position.isna().any():
        table, position = table[position.notna()], position[position.notna()]
    twice = table.duplicated(subset=["run_id", "attempt"], keep="last")
    if twice.any():
        table, position = table[~twice], position[~twice]
    order = position.astype(int).to_numpy() * 1_000_000 + table["attempt"].astype(int).to_numpy()
    if len(order) > 1 and not (order[1:] >= order[:-1]).all():
        table = table.iloc[order.argsort(kind="stable")]
    del order, position, twice
    # Typed as collect's runs.csv reads back: the text goes through read_csv once.
    rows = pd.read_csv(io.StringIO(table.to_csv(index=False)), keep_default_na=True) if typed else table
    notes = [_read_text(buf) for _, buf in notes_text]
    note_frame = pd.concat(notes, ignore_index=True) if notes else pd.DataFrame(columns=NOTE_COLUMNS, dtype=str)
    note_frame = note_frame[note_frame["run_id"].map(first).notna()] if len(note_frame) else note_frame
    if facts_changes:
        extra = pd.DataFrame(facts_change_rows(facts), columns=NOTE_COLUMNS).fillna("").astype(str)
        note_frame = pd.concat([note_frame, extra], ignore_index=True) if len(extra) else note_frame
    return BatchRows(rows.reset_index(drop=True), units, note_frame.reset_index(drop=True), missing, facts)


def first_positions(run_ids: Any) -> Any:
    """Run id -> the position of its first row, as a Series indexed by run id.

    ``Series.map`` over it is a hash lookup in C: ``isin`` with a million arrow
    strings, or a dict built row by row in Python, takes seconds.
    """
    import pandas as pd

    ids = pd.Series(run_ids, dtype=str).drop_duplicates()
    return pd.Series(range(len(ids)), index=pd.Index(ids.to_numpy(dtype=object), dtype=object), dtype="int64")


def _add_lines(segments: list[tuple[bytes, io.BytesIO]], text: bytes) -> None:
    """Append a CSV file's rows to the last segment when it has the same header line,
    else start a new segment (its header, then the rows)."""
    header, _, body = text.partition(b"\n")
    if not segments or segments[-1][0] != header:
        segments.append((header, io.BytesIO()))
        segments[-1][1].write(header + b"\n")
    segments[-1][1].write(body)


def _read_text(buf: io.BytesIO) -> Any:
    """One group's CSV text as a frame of text cells (the form every rows file has)."""
    import pandas as pd

    buf.seek(0)
    frame = pd.read_csv(buf, dtype=str, keep_default_na=False, encoding="utf-8")
    buf.close()
    return frame
