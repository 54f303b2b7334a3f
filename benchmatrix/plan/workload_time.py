"""Seconds a run will take, read from the workload's own time limit (issue 24).

A time-based workload says how long it runs, and its descriptor's ``seconds`` reads it
from a run's variables (``benchmatrix/workloads/NAME/__init__.py``): fio's ``runtime``
(plus ``ramp_time``), pgbench's ``duration`` (``-T``, default 10 s), sysbench's ``time``
(``--time``, default 10 s), stress-ng's ``timeout`` (default 10 s), and the pgbench,
sysbench and fio options inside a ``workload_command`` argv. ``bmx plan``
and ``bmx check`` both take this figure when neither ``workload.estimate_s`` nor
earlier runs give one, so they agree. The figure is a floor: the tool's start,
file layout and the batch runner's own cost come on top.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmatrix.spec.load import Spec, render_vars
from benchmatrix.workloads import WORKLOADS


def run_seconds(role: str, run_vars: dict[str, Any]) -> float | None:
    """Seconds one run of ``role`` with these (rendered) variables takes, or None when it is
    not time-based: the role descriptor's ``seconds`` (:class:`benchmatrix.workloads.Workload`)."""
    workload = WORKLOADS.get(role)
    return workload.seconds(run_vars) if workload is not None and workload.seconds is not None else None


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
