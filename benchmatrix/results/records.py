"""Result files: versioned run records, runs.csv and summary.csv.

Layout under ``results/NAME/`` (docs/architecture.md): ``plan.csv``, ``runs/RUN_ID/ATTEMPT/``
(``record.json`` plus raw outputs), ``runs.csv``, ``summary.csv``, reports.
Every file is written to a temporary name in its directory and renamed into place,
so a crash or a full disk never leaves a truncated file behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import benchmatrix
from benchmatrix.files import atomic_write, create_beside, sync_filesystem
from benchmatrix.layout import RECORD, RUN_COLUMNS, RUNS_DIR, record_path, run_dir_text
from benchmatrix.plan.design import PlannedRun
from benchmatrix.results.host_env import env_columns
from benchmatrix.spec.load import Spec


def iso(ts: float | None) -> str | None:
    """Epoch seconds -> ISO 8601 UTC with microseconds."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="microseconds")


def base_record(spec: Spec, r: PlannedRun, host: str, batch: str, factors: dict[str, Any],
                 facts: dict[str, Any]) -> dict[str, Any]:
    """The fields every record of a run attempt has, whatever its outcome."""
    return {
        "schema_version": benchmatrix.RECORD_SCHEMA_VERSION,
        "benchmatrix_version": benchmatrix.__version__,
        "experiment": spec.name, "spec_digest": spec.digest,
        "run_id": r.run_id, "attempt": r.attempt, "seq": r.seq, "host": host,
        "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup, "control": r.control,
        "visit": r.visit, "batch": batch, "factors": factors,
        "status": None, "reason": "", "exit_code": None, "started_at": None, "ended_at": None,
        "duration_s": None, "phases": {}, "workload": {"role": spec.workload["role"]},
        "knobs": {}, "host_facts": facts, "metrics": {}, "details": {}, "raw": {}, "log": "",
    }


def record_text(record: dict[str, Any]) -> str:
    """A record.json's text: one line of JSON. json's C encoder writes it (``indent=`` takes
    the pure-Python one, about 0.14 ms more a run, bench/README.md); ``python3 -m json.tool
    record.json`` shows it indented."""
    return json.dumps(record, default=str) + "\n"


def write_record(exp_dir: Path, record: dict[str, Any]) -> Path:
    """Write one record.json atomically; returns its path."""
    path = record_path(exp_dir, record["run_id"], record["attempt"])
    atomic_write(path, record_text(record))
    return path


def write_records(exp_dir: Path, records: list[dict[str, Any]]) -> list[Path]:
    """Write a batch's record.json files with one sync for all of them; returns their paths.

    Each record is written to a temporary name beside its place, the file system is
    synced once (the records, and the raw outputs taken in beside them, reach the disk),
    and only then is each renamed into place: a record still appears complete or not
    at all, as with :func:`write_record`, at the cost of one sync per batch instead of
    an fsync per run (about 2 ms a run on the reference machine, bench/README.md).
    """
    staged: list[tuple[str, str]] = []
    try:
        for record in records:
            # Text paths, the directory made only when missing (a run taken in has it):
            # pathlib's joins and a mkdir a record cost about 0.1 ms a run (bench/README.md).
            directory = run_dir_text(exp_dir, record["run_id"], record["attempt"])
            try:
                tmp, fd = create_beside(f"{directory}/{RECORD}")
            except FileNotFoundError:
                os.makedirs(directory, exist_ok=True)
                tmp, fd = create_beside(f"{directory}/{RECORD}")
            staged.append((str(tmp), f"{directory}/{RECORD}"))
            try:
                os.write(fd, record_text(record).encode())
            finally:
                os.close(fd)
        if staged:
            sync_filesystem(Path(exp_dir))
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    return [Path(path) for _, path in staged]


def load_records(exp_dir: Path, plan: Iterable[PlannedRun]) -> list[dict[str, Any]]:
    """Every existing record of the planned runs, in plan order (all attempts)."""
    return list(iter_records(exp_dir, plan))


def iter_records(exp_dir: Path, plan: Iterable[PlannedRun | str],
                 skip: set[tuple[str, int]] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`load_records` one at a time (collect keeps only what it needs of each).

    Args:
        plan: The planned runs, or their run ids.
        skip: ``(run_id, attempt)`` pairs not to read (collect has their rows already).
    """
    skip = skip or set()
    seen = set()
    for run in plan:
        run_id = run if isinstance(run, str) else run.run_id
        if run_id in seen:
            continue
        seen.add(run_id)
        base = Path(exp_dir) / RUNS_DIR / run_id
        if not base.is_dir():
            continue
        attempts = sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())
        for attempt in attempts:
            if (run_id, attempt) in skip:
                continue
            path = base / str(attempt) / RECORD
            if path.is_file():
                yield json.loads(path.read_text())


def runs_rows(records: Iterable[dict[str, Any]],
              factor_names: list[str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """runs.csv rows (one per attempt) and the unit of every metric seen."""
    units: dict[str, str] = {}
    rows = []
    for rec in records:
        row = {c: rec.get(c) for c in RUN_COLUMNS}
        row.update(env_columns(rec))
        row["warmup"] = bool(rec.get("warmup"))
        row["control"] = bool(rec.get("control"))
        for f in factor_names:
            row[f] = rec["factors"].get(f)
        for name, m in (rec.get("metrics") or {}).items():
            units.setdefault(name, m.get("unit", ""))
            row[name] = m.get("value")
        rows.append(row)
    return rows, units
