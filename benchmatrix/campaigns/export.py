"""Export a campaign to the ecosystem: the tidy long table and three exchange formats.

The **long table** (``results/NAME/runs_long.parquet``) holds one row per run
attempt and metric: the store later features (compare, history, publish) read, and
what ``bmx export --format csv|parquet`` writes. Its columns and their meaning are
fixed by :data:`LONG_COLUMNS` and versioned by :data:`SCHEMA_VERSION` (a column,
and the Parquet file's ``benchmatrix`` key-value metadata); docs/export.md is the
reference. Every attempt appears, failed ones too: an attempt that produced no
metric value at all has one row with an empty ``metric`` and ``value``, so
``status`` can be counted from the table alone.

The exchange formats are built from the same inputs as the report:

* ``bmf`` -- Bencher Metric Format: per cell label, per metric, the mean of
  ``summary.csv`` as ``value`` and its 95 % confidence interval as
  ``lower_value``/``upper_value``.
* ``pyperf`` -- a pyperf suite that ``python -m pyperf compare_to`` reads: one
  benchmark per cell and metric, one pyperf run per measured benchmatrix run.
  pyperf takes smaller as better ("faster") and only positive values, so values
  are oriented before they are written (:func:`pyperf_mapping`).
* ``csv`` / ``parquet`` -- the long table.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmatrix import layout
from benchmatrix.analyze.stats import bool_column, effective_runs, metric_direction
from benchmatrix.campaigns.store import find_campaign
from benchmatrix.errors import BenchmatrixError
from benchmatrix.files import atomic_write, write_synced
from benchmatrix.layout import ENV_COLUMNS, RUN_COLUMNS
from benchmatrix.results.campaign import read_meta
from benchmatrix.results.tables import metric_units, read_analysis

#: Version of the long table's schema; bumped whenever a column changes meaning.
SCHEMA_VERSION = 1
#: File name of the long table under results/NAME/.
LONG_TABLE_NAME = layout.RUNS_LONG
#: The formats of ``bmx export``.
FORMATS = ("bmf", "pyperf", "csv", "parquet")
#: Default output file of each format under results/NAME/.
DEFAULT_NAMES = {"bmf": "bmf.json", "pyperf": "pyperf.json", "csv": "runs_long.csv", "parquet": LONG_TABLE_NAME}
_HEAD = ["schema_version", "experiment", "campaign", "run_id", "cell_id"]
_TAIL = ["host", "visit", "replicate", "attempt", "warmup", "control", "status", "started_at", *ENV_COLUMNS,
         "metric", "unit", "direction", "value"]
_ENV_NUMBERS = {"env_load_before", "env_load_after"}
#: Seconds per unit of the time units metrics come in (fio's µs, declared ms ...).
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0,
              "seconds": 1.0, "min": 60.0}


def long_columns(factor_names: list[str]) -> list[str]:
    """Columns of the long table, in file order: the factors follow ``cell_id``."""
    return [*_HEAD, *factor_names, *_TAIL]


def _check_factor_names(factor_names: list[str]) -> None:
    clash = [f for f in factor_names if f in _HEAD or f in _TAIL]
    if clash:
        raise BenchmatrixError(f"factor(s) {', '.join(clash)} share a name with a long-table column; "
                               f"rename them in the spec to export")


def _int_column(values: pd.Series) -> pd.Series:
    return pd.to_numeric(values, errors="coerce").astype("Int64")


def _factor_column(values: pd.Series) -> pd.Series:
    # Parquet needs one type per column: numbers and booleans stay typed, anything
    # mixed becomes text, so a factor like [1, auto] still exports.
    # The same factor must get the same type whether it comes from the records
    # (Python objects, in collect) or from runs.csv (parsed by pandas, in export).
    if values.dtype == object:
        values = values.infer_objects()
        if values.dtype == object:
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.notna().sum() == values.notna().sum():
                values = numbers
    if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
        return values
    return values.astype("string")


def long_table(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
               declared: dict[str, Any] | None = None, *, experiment: str = "", campaign: str = "") -> pd.DataFrame:
    """The tidy long table of one campaign: one row per run attempt and metric.

    Args:
        runs: Rows of ``runs.csv`` (one per attempt, metric columns wide).
        factor_names: The spec's factors, in spec order.
        units: Metric name -> unit, as :func:`benchmatrix.results.records.runs_rows` gives
            them; exactly these columns of ``runs`` are metrics.
        declared: ``workload.metrics`` of the spec, for each metric's direction.
        experiment: The spec's name.
        campaign: The campaign id (``campaign.json``), empty when unknown.

    Returns:
        A DataFrame with the columns of :func:`long_columns`, attempts in the order
        of ``runs`` and metrics in name order within an attempt. ``value`` is a
        float (NaN where absent); an attempt without any metric value keeps one row
        whose ``metric``, ``unit`` and ``direction`` are missing.

    Raises:
        BenchmatrixError: A factor shares its name with a column of the table.
    """
    return _expand(*_long_parts(runs, factor_names, units, experiment, campaign), factor_names, units, declared)


def _long_parts(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str], experiment: str,
                campaign: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """One row per attempt (the long table's per-attempt columns), the metric values
    (attempts x metrics) and the metric names: what :func:`_expand` turns into rows.
    Typed over every attempt at once, so that slices of it share one schema."""
    _check_factor_names(factor_names)
    metrics = sorted(m for m in units if m in runs.columns)
    n = len(runs)
    base = pd.DataFrame(index=pd.RangeIndex(n))
    base["schema_version"] = np.full(n, SCHEMA_VERSION, dtype="int32")
    base["experiment"] = pd.Series([experiment] * n, dtype="string")
    base["campaign"] = pd.Series([campaign] * n, dtype="string")
    for col in ("run_id", "cell_id", "host", "status"):
        base[col] = (runs[col].astype("string").to_numpy() if col in runs.columns
                     else pd.Series([pd.NA] * n, dtype="string"))
    for f in factor_names:
        base[f] = _factor_column(runs[f].reset_index(drop=True)) if f in runs.columns \
            else pd.Series([pd.NA] * n, dtype="string")
    for col in ("visit", "replicate", "attempt"):
        base[col] = _int_column(runs[col]).to_numpy() if col in runs.columns else pd.array([pd.NA] * n, "Int64")
    for col in ("warmup", "control"):
        base[col] = bool_column(runs[col]).to_numpy() if col in runs.columns else np.zeros(n, dtype=bool)
    base["started_at"] = (pd.to_datetime(runs["started_at"], utc=True, errors="coerce", format="ISO8601").to_numpy()
                          if "started_at" in runs.columns else pd.NaT)
    base["started_at"] = pd.to_datetime(base["started_at"], utc=True)
    for col in ENV_COLUMNS:  # absent in tables collected before issue 24: empty
        have = runs[col].reset_index(drop=True) if col in runs.columns else pd.Series([pd.NA] * n, dtype=object)
        # Typed even when every value is missing (no cpufreq): slices share one schema.
        if col in _ENV_NUMBERS:
            base[col] = pd.to_numeric(have, errors="coerce").astype("float64")
        elif col == "env_numa_nodes":
            base[col] = _int_column(have)
        else:
            base[col] = have.astype("string")
    if metrics:
        values = np.column_stack([pd.to_numeric(runs[m], errors="coerce").to_numpy(dtype="float64")
                                  for m in metrics])
    else:
        values = np.empty((n, 0))
    return base, values, metrics


def _expand(base: pd.DataFrame, values: np.ndarray, metrics: list[str], factor_names: list[str],
            units: dict[str, str], declared: dict[str, Any] | None) -> pd.DataFrame:
    """The long table's rows of some attempts (``base`` rows and their ``values``)."""
    have = ~np.isnan(values)
    # One row per (attempt, metric with a value), plus one empty row for an attempt
    # that has none, so failed attempts stay visible.
    none = ~have.any(axis=1)
    rows, cols = np.nonzero(have)
    rows = np.concatenate([rows, np.flatnonzero(none)])
    cols = np.concatenate([cols, np.full(int(none.sum()), -1)])
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    out = base.iloc[rows].reset_index(drop=True)
    # Per-metric text as categorical codes: one lookup per metric, not per row.
    codes = np.where(cols >= 0, cols, -1)
    for col, labels in (("metric", metrics), ("unit", [units.get(m) or "" for m in metrics]),
                        ("direction", [metric_direction(m, declared) for m in metrics])):
        uniq = list(dict.fromkeys(labels))
        remap = np.array([uniq.index(v) for v in labels] + [-1], dtype="int64")
        out[col] = pd.Categorical.from_codes(remap[codes], categories=uniq).astype("string")
    out["value"] = np.where(cols >= 0, values[rows, np.maximum(cols, 0)] if len(metrics) else np.nan, np.nan)
    return out[long_columns(factor_names)]


def _schema_metadata(factor_names: list[str], experiment: str, campaign: str) -> dict[bytes, bytes]:
    meta = {"schema_version": SCHEMA_VERSION, "experiment": experiment, "campaign": campaign,
            "factors": factor_names, "reference": "docs/export.md"}
    return {b"benchmatrix": json.dumps(meta).encode()}


def parquet_bytes(table: pd.DataFrame, factor_names: list[str], experiment: str = "", campaign: str = "") -> bytes:
    """The long table as a Parquet file (zstd) whose schema metadata key
    ``benchmatrix`` holds JSON with ``schema_version``, ``experiment``,
    ``campaign`` and ``factors``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}),
                                           **_schema_metadata(factor_names, experiment, campaign)})
    sink = pa.BufferOutputStream()
    pq.write_table(arrow, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


# shape: the runs, what names their columns, and the chunk size; collect has each at hand
def write_long_table(exp: Path, runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
                     declared: dict[str, Any] | None, experiment: str, chunk: int = 100_000) -> Path:
    """Write ``results/NAME/runs_long.parquet`` atomically (called by collect).

    The table is built and written ``chunk`` attempts at a time (one Parquet row group
    each), so collect never holds the whole long table (about four rows per attempt)
    in memory; the file reads back as :func:`long_table` of every attempt.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    campaign = str(read_meta(exp).get("id") or "")
    base, values, metrics = _long_parts(runs, factor_names, units, experiment, campaign)
    sink, writer = pa.BufferOutputStream(), None
    for start in range(0, max(len(base), 1), max(int(chunk), 1)):
        part = _expand(base.iloc[start:start + chunk], values[start:start + chunk], metrics, factor_names, units,
                       declared)
        arrow = pa.Table.from_pandas(part, preserve_index=False)
        if writer is None:
            schema = arrow.schema.with_metadata({**(arrow.schema.metadata or {}),
                                                 **_schema_metadata(factor_names, experiment, campaign)})
            writer = pq.ParquetWriter(sink, schema, compression="zstd")
        writer.write_table(arrow.cast(schema))
    writer.close()
    path = Path(exp) / LONG_TABLE_NAME
    atomic_write(path, sink.getvalue().to_pybytes())
    return path


# ---------------------------------------------------------------- formats

def _cell_labels(frame: pd.DataFrame, factor_names: list[str]) -> pd.Series:
    """:func:`benchmatrix.layout.cell_label` per row (the cell id without factors)."""
    if not factor_names:
        return frame["cell_id"].astype(str)
    return pd.Series([layout.cell_label(zip(factor_names, vals))
                      for vals in frame[factor_names].itertuples(index=False)], index=frame.index)


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def to_bmf(summary: pd.DataFrame, factor_names: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format from ``summary.csv`` rows.

    Returns:
        ``{cell label: {metric: {"value": mean, "lower_value": ci_low,
        "upper_value": ci_high}}}``; the bounds are left out where the row has no
        interval (n < 2), a row without a mean is left out.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    if summary.empty:
        return out
    labels = _cell_labels(summary, factor_names)
    for label, row in zip(labels, summary.itertuples(index=False)):
        value = _finite(row.mean)
        if value is None:
            continue
        measure = {"value": value}
        low, high = _finite(row.ci_low), _finite(row.ci_high)
        if low is not None and high is not None:
            measure["lower_value"], measure["upper_value"] = low, high
        out.setdefault(label, {})[str(row.metric)] = measure
    return out


def pyperf_mapping(metric: str, unit: str, direction: str) -> tuple[str, str, float | None]:
    """How one metric is written for pyperf: ``(name suffix, pyperf unit, scale)``.

    pyperf reads every benchmark as "smaller is faster" and accepts only values
    above 0, in seconds, bytes or plain numbers ("integer"). So:

    * a lower-is-better metric in a time unit becomes seconds (``scale`` converts);
    * a higher-is-better metric is written as its reciprocal (``scale`` None),
      named ``1/METRIC``: seconds per I/O, per KiB or per transaction when the
      metric is a rate per second (unit ending in ``/s``), a plain number otherwise;
      pyperf's "faster" then means "better";
    * any other metric keeps its value as a plain number, and "faster"/"slower"
      only mean smaller/larger.
    """
    unit = (unit or "").strip()
    if direction == "higher":
        per_second = unit.endswith("/s") or unit.endswith("/sec") or unit.lower() in ("iops", "ops/s")
        return f"1/{metric}", "second" if per_second else "integer", None
    if direction == "lower" and unit in TIME_UNITS:
        return metric, "second", TIME_UNITS[unit]
    return metric, "integer", 1.0


def to_pyperf(runs: pd.DataFrame, factor_names: list[str], units: dict[str, str],
              declared: dict[str, Any] | None = None, experiment: str = "") -> dict[str, Any]:
    """A pyperf JSON suite (format version 1.0) of a campaign's measured runs.

    One pyperf benchmark per cell and metric, named ``LABEL :: METRIC`` (or
    ``LABEL :: 1/METRIC``, see :func:`pyperf_mapping`); one pyperf run per measured
    run (the runs ``summary.csv`` counts: ok, neither warm-up nor control, newest
    attempt) holding its single value. Values that are missing or not above 0 after
    the mapping are left out (pyperf refuses them); a benchmark left without a
    value is left out.

    Raises:
        BenchmatrixError: No measured run has a value pyperf can hold.
    """
    import pyperf

    eff = effective_runs(runs)
    metrics = sorted(m for m in units if m in eff.columns)
    benchmarks = []
    if not eff.empty and metrics:
        cells = eff.drop_duplicates("cell_id")[["cell_id", *[f for f in factor_names if f in eff.columns]]]
        label_of = dict(zip(cells["cell_id"], _cell_labels(cells, [f for f in factor_names if f in eff.columns])))
        run_meta = [_pyperf_run_metadata(row) for row in eff.to_dict("records")]
        for metric in metrics:
            unit = units.get(metric) or ""
            direction = metric_direction(metric, declared)
            suffix, pyperf_unit, scale = pyperf_mapping(metric, unit, direction)
            raw = pd.to_numeric(eff[metric], errors="coerce").to_numpy(dtype="float64")
            with np.errstate(divide="ignore", invalid="ignore"):
                mapped = 1.0 / raw if scale is None else raw * scale
            keep = np.isfinite(mapped) & (mapped > 0)
            for cell_id, idx in eff.loc[keep, "cell_id"].groupby(eff.loc[keep, "cell_id"], sort=False).groups.items():
                meta = {"name": f"{label_of[cell_id]} :: {suffix}", "unit": pyperf_unit,
                        "benchmatrix_cell_id": str(cell_id), "benchmatrix_metric": metric,
                        "benchmatrix_unit": unit or "none", "benchmatrix_direction": direction or "unknown",
                        "benchmatrix_transform": ("reciprocal" if scale is None else
                                                  "identity" if scale == 1.0 else f"scale {scale:g}")}
                # pyperf's own classes check every value and metadata item as pyperf reads them.
                benchmarks.append(pyperf.Benchmark([
                    pyperf.Run([float(mapped[p])], metadata={**meta, **run_meta[p]}, collect_metadata=False)
                    for p in eff.index.get_indexer(idx)]))
    if not benchmarks:
        raise BenchmatrixError(f"{experiment or 'campaign'}: no measured run has a positive value to export "
                               f"for pyperf")
    suite = pyperf.BenchmarkSuite(benchmarks)
    buf = io.StringIO()
    suite.dump(buf)
    data = json.loads(buf.getvalue())
    if experiment:
        data.setdefault("metadata", {})["description"] = f"benchmatrix experiment {experiment}"
    return data


def _pyperf_run_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """One run's pyperf metadata: its id, host, start date and wall-clock duration (what
    ``pyperf show``'s dates and total duration read), where runs.csv has them."""
    meta: dict[str, Any] = {"benchmatrix_run_id": str(row["run_id"])}
    if isinstance(row.get("host"), str) and row["host"]:
        meta["hostname"] = row["host"]
    started = pd.to_datetime(row.get("started_at"), errors="coerce", utc=True)
    if not pd.isna(started):
        meta["date"] = started.isoformat()
    duration = _finite(row.get("duration_s"))
    if duration is not None and duration > 0:
        meta["duration"] = duration
    return meta


# ---------------------------------------------------------------- bmx export

def _units(exp: Path, summary: pd.DataFrame, runs: pd.DataFrame, factor_names: list[str],
           declared: dict[str, Any] | None, plan_path: Path) -> dict[str, str]:
    """Metric -> unit of every metric column of runs.csv, as collect computed them
    (analysis.json); for a campaign collected before analysis.json existed, by the same
    rule (:func:`benchmatrix.results.tables.metric_units`) from the records and summary.csv."""
    units = read_analysis(exp).get("units")
    if not units:
        record_units: dict[str, str] = {}
        if plan_path.is_file():
            from benchmatrix.plan.design import read_plan
            from benchmatrix.results.records import load_records, runs_rows

            _, record_units = runs_rows(load_records(exp, read_plan(plan_path)[0]), factor_names)
        units = metric_units(declared, record_units, summary)
    fixed = set(RUN_COLUMNS) | set(factor_names)
    return {m: u for m, u in units.items() if m in runs.columns and m not in fixed}


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}


def _own(parts: tuple[str, ...], fmt: str) -> bool:
    """Whether the file at ``parts`` under an experiment's (or a kept campaign's) directory
    is one the experiment owns; the export's own default file for ``fmt`` is not."""
    if len(parts) == 1:
        if parts[0] == DEFAULT_NAMES.get(fmt):
            return False  # what the export writes without --out (Parquet: the same long table collect wrote)
        return parts[0] in layout.OWNED_FILES or parts[0].startswith(".")
    if parts[0] == layout.CAMPAIGNS_DIR and len(parts) > 2:
        return _own(parts[2:], fmt)
    return parts[0] in layout.OWNED_DIRS


def _refuse_own(out: Path, real_dir: str, results: Path | None, fmt: str) -> None:
    """Refuse an ``out`` (in the directory whose real path is ``real_dir``) that would
    replace a file of the project's results: bmx run and bmx status read them back, and
    a CSV over plan.csv ended both in a traceback."""
    if results is None:
        return
    top = os.path.realpath(results)
    where = os.path.join(real_dir, out.name)
    if os.path.commonpath([top, where]) != top or where == top:
        return
    parts = Path(os.path.relpath(where, top)).parts
    if len(parts) == 1 and not parts[0].startswith("."):
        return  # a file beside the experiments, none of theirs
    if parts[0].startswith("."):  # .hosts/: the host cache every experiment shares
        raise BenchmatrixError(f"--out {out}: {Path(*parts)} is a file of the project's own results "
                               "(bmx run and bmx status read them); choose another file")
    if _own(parts[1:], fmt):
        raise BenchmatrixError(f"--out {out}: {Path(*parts[1:])} is a file of the experiment {parts[0]}'s own "
                               "results (bmx run and bmx status read them); choose another file")


def _refuse_kind(out: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "no regular file")
        raise BenchmatrixError(f"--out {out}: is {kind}, not a regular file; give a new or regular file's "
                               "path, or - for stdout")


def _refuse_dir(out: Path) -> None:
    """Why ``out``'s directory cannot be written in, as one line (it is no directory one may open)."""
    parent = out.parent
    try:
        mode = os.lstat(parent).st_mode
    except FileNotFoundError:
        raise BenchmatrixError(f"--out {out}: the directory {parent} does not exist (--mkdir creates it)") from None
    except OSError as exc:  # e.g. a parent that is a file: one line naming it
        raise BenchmatrixError(f"--out {out}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        # A link may be swapped after any check: the write never goes through one.
        raise BenchmatrixError(f"--out {out}: its directory {parent} is a symbolic link; give the directory "
                               "it points to")
    if not stat.S_ISDIR(mode):
        raise BenchmatrixError(f"--out {out}: {parent} is not a directory")


def check_out_path(out: Path, make_parents: bool = False, results: Path | None = None, fmt: str = "") -> None:
    """Refuse an ``--out`` the export's rename must not go over, before any work is done.

    The export is written beside ``out`` and renamed onto it, which replaces whatever
    name is there: a device node (as root, ``--out /dev/null`` would have turned the
    machine's /dev/null into a JSON file), a symbolic link (instead of the file it points
    to), a FIFO. Only a missing name or a regular file is taken, in a directory that is
    no symbolic link, and never a file of the project's results (``plan.csv``,
    ``hosts/``, ...); ``-`` is the way to write to stdout. :func:`write_out` checks all of
    it again where it writes, so a change between the two is refused too.

    Args:
        out: The file asked for.
        make_parents: Create missing parent directories (``--mkdir``) instead of refusing.
        results: The project's results directory, whose own files are refused.
        fmt: The export's format: its own default file under results/NAME is taken.

    Raises:
        BenchmatrixError: ``out`` exists and is not a regular file, its directory is missing
            or a symbolic link, or it is a file of the results.
    """
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:  # e.g. a parent that is a file: one line naming it
        raise BenchmatrixError(f"--out {out}: {exc.strerror}") from None
    if mode is not None:
        _refuse_kind(out, mode)
    if make_parents and not os.path.lexists(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
    if not out.parent.is_dir() or out.parent.is_symlink():
        _refuse_dir(out)
    _refuse_own(out, os.path.realpath(out.parent), results, fmt)


def write_out(out: Path, data: str | bytes, results: Path | None = None, fmt: str = "") -> None:
    """Write ``data`` to ``out`` through a synced temporary file and a rename, both
    relative to ``out``'s directory opened once.

    The directory is opened without following a link (``O_NOFOLLOW``): a directory
    swapped for a link after :func:`check_out_path` is refused, not followed. In the
    opened directory the target is checked again (a missing name or a regular file), the
    temporary file is created there and renamed onto the target there: what was checked
    is where the file goes. Whatever fails, the temporary file is removed and the old
    file stays. The file gets the permissions of any new file under the umask; text is
    UTF-8 with ``\n`` line ends.

    Args:
        out: The file to create or replace.
        data: The whole content.
        results: The project's results directory, whose own files are refused.
        fmt: The export's format (:func:`check_out_path`).

    Raises:
        BenchmatrixError: As :func:`check_out_path`, checked on the opened directory.
    """
    out = Path(out)
    try:
        dfd = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        _refuse_dir(out)
        raise BenchmatrixError(f"--out {out}: {exc.strerror}") from None
    try:
        try:
            real_dir = os.readlink(f"/proc/self/fd/{dfd}")  # the directory opened, whatever its path is now
        except OSError:
            real_dir = os.path.realpath(out.parent)
        _refuse_own(out, real_dir, results, fmt)
        name = out.name

        def check_target() -> None:
            try:
                _refuse_kind(out, os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                pass

        check_target()
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666, dir_fd=dfd)
        try:
            write_synced(fd, data)
            check_target()  # once more after the write, the longest wait
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dfd)


def export(spec_path: str, project_dir: Path, fmt: str, out: str | Path | None = None,
           make_parents: bool = False, campaign_ref: str | None = None) -> Path | None:
    """``bmx export``: write a campaign in one of :data:`FORMATS`.

    Args:
        spec_path: The experiment spec.
        project_dir: The project (results/ lives there).
        fmt: ``bmf``, ``pyperf``, ``csv`` or ``parquet``.
        out: Output file (a new or regular file: :func:`check_out_path`); ``-`` writes to
            stdout (Parquet only when stdout is no terminal); default ``results/NAME/`` +
            :data:`DEFAULT_NAMES`.
        make_parents: Create ``out``'s missing directories instead of refusing them.
        campaign_ref: A kept campaign to export (id, unique id prefix, label or
            directory, as ``bmx compare`` takes them); default the current one. The
            default file then goes into that campaign's directory.

    Returns:
        The path written, or None for stdout.

    Raises:
        BenchmatrixError: Unknown format, no runs.csv yet, Parquet to a terminal, an
            ``out`` that is no regular file or whose directory is missing.
    """
    from benchmatrix.results.tables import load_tables
    from benchmatrix.spec.load import load_spec

    if fmt not in FORMATS:
        raise BenchmatrixError(f"unknown export format '{fmt}'; use one of {', '.join(FORMATS)}")
    to_stdout = str(out) == "-"
    if to_stdout and fmt == "parquet" and sys.stdout.isatty():
        raise BenchmatrixError("parquet is binary; give --out FILE, or send - to a file or a pipe")
    results = layout.exp_dir(project_dir, "_").parent
    if out and not to_stdout:
        check_out_path(Path(out), make_parents, results, fmt)
    spec = load_spec(spec_path)
    exp = layout.exp_dir(project_dir, spec.name)
    if campaign_ref is not None:
        exp = find_campaign(exp, campaign_ref).path
    runs_csv = exp / layout.RUNS
    if not runs_csv.is_file():
        raise BenchmatrixError(f"{runs_csv}: no runs yet; run 'bmx run {spec_path}' first")
    _, runs, summary = load_tables(exp)
    factors = spec.factor_names
    declared = spec.workload.get("metrics")
    campaign = str(read_meta(exp).get("id") or "")

    if fmt == "bmf":
        data: str | bytes = json.dumps(to_bmf(summary, factors), indent=1) + "\n"
    else:
        units = _units(exp, summary, runs, factors, declared, exp / layout.PLAN)
        if fmt == "pyperf":
            data = json.dumps(to_pyperf(runs, factors, units, declared, spec.name)) + "\n"
        else:
            table = long_table(runs, factors, units, declared, experiment=spec.name, campaign=campaign)
            data = (parquet_bytes(table, factors, spec.name, campaign) if fmt == "parquet"
                    else table.to_csv(index=False))
    if to_stdout:
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
        return None
    path = Path(out) if out else exp / DEFAULT_NAMES[fmt]
    write_out(path, data, results, fmt)
    return path
