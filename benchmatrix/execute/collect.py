"""The body of rule collect: every table of a campaign from its records, and the reports
rendered from them; report() re-renders from the tables on disk.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.layout import exp_dir_of
from benchmatrix.results.campaign import mark_progress_from_tables
from benchmatrix.results.records import iter_records, runs_rows
from benchmatrix.spec.load import Spec, load_spec


def collect(spec_path: str, project_dir: Path, plan_path: Path, *, render: bool = True,
            template_dir: Path | None = None) -> list[Path]:
    """Compute every table from the records, write them, and render the reports from them.

    The one place a campaign's tables are computed (:func:`benchmatrix.analyze.tables.derive_tables`):
    runs.csv, summary.csv, summary_by_host.csv, comparisons.csv, record_notes.csv,
    analysis.json and runs_long.parquet (:data:`benchmatrix.layout.COLLECTED`), and
    moved_with.csv (the counters that moved with each finding), then report.html and
    report.md rendered from the same tables in memory.

    Args:
        render: Also render the reports (the Snakemake rule and ``bmx report`` do).
        template_dir: Jinja2 templates overriding the built-in ones (docs/report.md).

    Returns:
        The paths written.
    """
    import pandas  # noqa: F401 (before the fork below: the plot worker shares it)

    from benchmatrix.report.plot_worker import PlotWorker

    # Forked now: it imports matplotlib while this process reads the records and computes
    # the tables, then draws the plots (report/plot_worker.py).
    worker = PlotWorker.start(plan_bytes=_size(plan_path)) if render else None
    try:
        return _collect(spec_path, project_dir, plan_path, render, template_dir, worker)
    finally:
        if worker is not None:
            worker.close()


# shape: one sequence: rows, runs.csv bytes, every table, render; large frames are freed as soon as used
def _collect(spec_path: str, project_dir: Path, plan_path: Path, render: bool, template_dir: Path | None,
             worker: Any) -> list[Path]:
    import pandas as pd

    from benchmatrix.analyze.sanity import RecordNotes
    from benchmatrix.analyze.tables import derive_tables
    from benchmatrix.campaigns.export import write_long_table
    from benchmatrix.results.batch_rows import read_batch_rows, rows_csv_text
    from benchmatrix.results.tables import read_table, write_tables

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    # Frames, not a Python object per run or record: at 1M runs those take gigabytes.
    plan = read_table(Path(plan_path).parent, Path(plan_path).name)
    # Every finished batch wrote its runs.csv rows and record notes beside its marker:
    # concatenate those, and read record.json only for the runs with a planned attempt
    # no rows file holds (a batch cut short, a campaign of an older benchmatrix), one
    # at a time, none kept whole.
    done = read_batch_rows(exp, typed=False, facts_changes=False)
    open_ids, skip = _runs_to_read(plan, done.rows)
    notes = RecordNotes()

    def each_record() -> Iterator[dict[str, Any]]:
        for rec in iter_records(exp, open_ids, skip=skip):
            notes.add(rec)
            yield rec

    rows, units = runs_rows(each_record(), spec.factor_names)
    units = {**done.units, **units}
    columns = layout.RUN_COLUMNS + spec.factor_names + sorted(units)
    if rows or list(done.rows.columns) != columns:
        mine = pd.read_csv(io.StringIO(rows_csv_text(columns, rows)), dtype=str, keep_default_na=False)
        text = pd.concat([done.rows, mine], ignore_index=True).reindex(columns=columns).fillna("")
        del mine
        ids = plan["run_id"].astype(str).drop_duplicates() if len(plan) else pd.Series([], dtype=str)
        first = pd.Series(range(len(ids)), index=ids.to_numpy())
        order = text["run_id"].map(first).fillna(len(first)).astype(int) * 1_000_000 + text["attempt"].astype(int)
        text = text.iloc[order.argsort(kind="stable")]
    else:
        text = done.rows  # every record in a rows file: already in plan order, one row per attempt
    done.rows = None
    # As UTF-8 bytes: io.StringIO would hold the text at 4 bytes a character (1.3 GB
    # for a 1M-run runs.csv), BytesIO shares the bytes.
    runs_text = text.to_csv(index=False).encode("utf-8")
    del text, rows
    # runs.csv as a reader of the file sees it (types as read back), so that the report
    # renders the same from memory here as from disk under `bmx report`.
    read_back = pd.read_csv(io.BytesIO(runs_text), encoding="utf-8")
    # The notes as the report reads record_notes.csv back: text.
    # Host-fact changes are found over the batches' entries and these records together.
    mine_notes = pd.read_csv(io.StringIO(notes.frame(done.facts).to_csv(index=False)), dtype=str,
                             keep_default_na=False)
    record_notes = pd.concat([done.notes, mine_notes], ignore_index=True).reindex(columns=layout.NOTE_COLUMNS)
    from benchmatrix.analyze.adaptive import settings_of
    from benchmatrix.results.campaign import read_meta

    meta = read_meta(exp)
    # A gate's rounds (bmx run --against) decide B against campaign A, not the report's
    # own comparisons: those are judged as a fixed design's, and bmx run says the gate's.
    adaptive = None if meta.get("against") else settings_of(spec, meta)
    tables = derive_tables(spec, plan, read_back, units, record_notes=record_notes,
                           adaptive=adaptive, stopped_by=str(meta.get("until_decided_stop") or ""))
    # The report's context and plots begun now: its worker draws while the tables are written.
    finish_report = _begin_render(spec, exp, tables, template_dir, worker) if render else None
    written = write_tables(exp, tables, runs_text=runs_text)
    del runs_text
    # The tidy long table (runs_long.parquet) that export, compare and publish read.
    written.append(write_long_table(exp, read_back, spec.factor_names, units, spec.workload.get("metrics"), spec.name))
    # campaign.json: its hosts, and ended_at once no planned run is pending.
    mark_progress_from_tables(exp, plan, read_back)
    if finish_report is not None:
        written += finish_report()
    return written


def _size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0  # read (and its error said) with the records


def _runs_to_read(plan: Any, rows: Any) -> tuple[list[str], set[tuple[str, int]]]:
    """The run ids with a planned attempt that no batch rows file holds, and the
    attempts of those runs that one does (collect reads neither twice).

    Args:
        plan: plan.csv's rows.
        rows: The batches' runs rows as text (:func:`benchmatrix.results.batch_rows.read_batch_rows`).
    """
    import numpy as np
    import pandas as pd

    from benchmatrix.results.batch_rows import first_positions

    if not len(plan):
        return [], set()
    # (run id, attempt) pairs as one key; Index.get_indexer is a hash lookup in C.
    held = pd.Index((rows["run_id"].astype(str) + "#" + rows["attempt"].astype(str)).to_numpy(dtype=object)
                    if len(rows) else [], dtype=object).drop_duplicates()
    planned = (plan["run_id"].astype(str) + "#" + plan["attempt"].astype(str)).to_numpy(dtype=object)
    missing = held.get_indexer(planned) < 0 if len(held) else np.ones(len(planned), dtype=bool)
    open_ids = list(dict.fromkeys(plan["run_id"].astype(str).to_numpy(dtype=object)[missing]))
    if not open_ids or not len(rows):
        return open_ids, set()
    mine = rows[rows["run_id"].map(first_positions(open_ids)).notna()]
    return open_ids, set(zip(mine["run_id"], mine["attempt"].astype(int)))


def _begin_render(spec: Spec, exp: Path, tables: Any, template_dir: Path | None,
                  worker: Any = None) -> Callable[[], list[Path]]:
    """The reports of ``tables`` begun (context computed, plots under way); called, the
    returned function writes them and returns their paths."""
    from benchmatrix.report.render import begin_render

    facts = {path.parent.name: json.loads(path.read_text())
             for path in sorted((exp / layout.HOSTS_DIR).glob(f"*/{layout.FACTS}"))}
    finish = begin_render(spec, tables.plan, tables.runs, tables.summary, facts, exp,
                          template_dir=template_dir, tables=tables, plot_worker=worker)
    return lambda: list(finish())


def report(spec_path: str, project_dir: Path, template_dir: Path | None = None) -> tuple[Path, Path]:
    """Render report.html and report.md from the tables collect wrote (no table is recomputed).

    ``scripts/report.py`` calls it: no rule does (rule collect renders in the same job);
    it re-renders a campaign whose templates changed, and bench/report.py times
    rendering apart from collect with it.

    Args:
        template_dir: Jinja2 templates overriding the built-in ones (docs/report.md).
    """
    from benchmatrix.results.tables import read_tables

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    html, md = _begin_render(spec, exp, read_tables(exp), template_dir)()
    return html, md
