"""Seconds a run will take, read from the workload's own time limit (issue 24).

A time-based workload says how long it runs: fio's ``runtime`` (plus ``ramp_time``),
pgbench's ``duration`` (``-T``, default 10 s) and sysbench's ``time`` (``--time``,
default 10 s), and the same options inside a ``workload_command`` argv. ``bmx plan``
and ``bmx check`` both take this figure when neither ``workload.estimate_s`` nor
earlier runs give one, so they agree. The figure is a floor: the tool's start,
file layout and the batch runner's own cost come on top.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from benchmatrix.spec.load import Spec, render_vars

# fio's time suffixes; a bare number is seconds (fio's default unit for runtime).
_FIO_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
              "ms": 1e-3, "us": 1e-6, "usec": 1e-6, "msec": 1e-3}
_FIO_TIME = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.I)
# pgbench and sysbench defaults when the spec gives no time (their roles' and the tools').
DEFAULT_SECONDS = {"workload_pgbench": 10.0, "workload_sysbench": 10.0}


def fio_seconds(value: Any) -> float | None:
    """fio's time value (``30``, ``30s``, ``2m``, ``500ms``) in seconds, or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _FIO_TIME.match(str(value))
    if not m or m.group(2).lower() not in _FIO_UNITS:
        return None
    return float(m.group(1)) * _FIO_UNITS[m.group(2).lower()]


def _number(value: Any) -> float | None:
    try:
        return None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _argv_seconds(argv: list[Any]) -> float | None:
    """The time limit in a command's argv: ``-T N`` / ``--time=N`` (pgbench, sysbench) or fio's ``--runtime=``."""
    args = [str(a) for a in argv]
    total = None
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in ("-T", "--time") and nxt is not None:
            total = _number(nxt)
        elif a.startswith("--time="):
            total = _number(a.split("=", 1)[1])
        elif a.startswith("-T") and len(a) > 2:
            total = _number(a[2:])
        elif a.startswith("--runtime="):
            total = fio_seconds(a.split("=", 1)[1])
        elif a.startswith("--ramp_time=") and total is not None:
            total += fio_seconds(a.split("=", 1)[1]) or 0.0
    return total


def run_seconds(role: str, run_vars: dict[str, Any]) -> float | None:
    """Seconds one run of ``role`` with these (rendered) variables takes, or None when it is not time-based."""
    if role == "workload_fio":
        if "job_file" in run_vars:
            return None  # the time is inside the job file
        runtime = fio_seconds(run_vars.get("runtime"))
        return None if runtime is None else runtime + (fio_seconds(run_vars.get("ramp_time")) or 0.0)
    if role == "workload_pgbench":
        if run_vars.get("transactions") is not None:
            return None
        return _number(run_vars.get("duration", DEFAULT_SECONDS[role]))
    if role == "workload_sysbench":
        return _number(run_vars.get("time", DEFAULT_SECONDS[role]))
    if role == "workload_command":
        argv = run_vars.get("argv")
        return _argv_seconds(argv) if isinstance(argv, list) else None
    return None


def cell_seconds(spec: Spec) -> dict[str, float]:
    """Each cell's (and the control cell's) seconds from the workload's time limit; only the cells that have one."""
    cells = list(spec.cells)
    ctl = spec.control_cell()
    if ctl is not None:
        cells.append(ctl)
    out: dict[str, float] = {}
    role = spec.workload["role"]
    for cell in cells:
        ctx = {**cell.factors, "experiment": spec.name, "host": "localhost", "run_id": "r0",
               "cell_id": cell.cell_id, "replicate": 1, "warmup": False}
        try:
            rendered = render_vars(spec.workload.get("vars") or {}, ctx)
        except Exception:  # validation rendered every template already; an estimate never fails a command
            continue
        secs = run_seconds(role, rendered if isinstance(rendered, dict) else {})
        if secs is not None and secs >= 0:
            out[cell.cell_id] = secs
    return out


def mean_seconds(per_cell: dict[str, float]) -> float | None:
    """One figure for every run: the cells' mean (each cell runs equally often)."""
    return statistics.fmean(per_cell.values()) if per_cell else None
