"""Campaign status: what is ok, failed or pending, per run and per cell.

A run's state comes from its attempts' records: ``ok`` when any attempt is ok;
``pending`` when it has no record yet, when a requested re-run has not run yet, or
when its newest attempt was ``interrupted`` (the next ``bmx run`` resumes it);
otherwise the newest attempt's status (``failed``, ``timeout``, ``unreachable``,
``invalid``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmatrix.design import PlannedRun, read_plan
from benchmatrix.results import load_records

FAILED_STATES = ("failed", "timeout", "unreachable", "invalid")


@dataclass
class RunState:
    """The state of one run id over all its attempts."""

    run: PlannedRun
    state: str
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.attempts[-1] if self.attempts else None


def run_states(exp_dir: Path, runs: list[PlannedRun] | None = None,
               records: list[dict[str, Any]] | None = None) -> list[RunState]:
    """One :class:`RunState` per run id of plan.csv, in plan order.

    ``runs`` and ``records`` (the plan and its records) are read when not given.
    """
    if runs is None:
        runs, _ = read_plan(Path(exp_dir) / "plan.csv")
    if records is None:
        records = load_records(exp_dir, runs)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_run.setdefault(rec["run_id"], []).append(rec)
    planned_attempts: dict[str, set[int]] = {}
    first: dict[str, PlannedRun] = {}
    for r in runs:
        planned_attempts.setdefault(r.run_id, set()).add(r.attempt)
        first.setdefault(r.run_id, r)
    out = []
    for run_id, run in first.items():
        attempts = sorted(by_run.get(run_id, []), key=lambda rec: rec["attempt"])
        done = {rec["attempt"] for rec in attempts}
        if any(rec["status"] == "ok" for rec in attempts):
            state = "ok"
        elif not attempts or planned_attempts[run_id] - done or attempts[-1]["status"] == "interrupted":
            state = "pending"
        else:
            state = attempts[-1]["status"]
        out.append(RunState(run, state, attempts))
    return out


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def campaign_status(exp_dir: Path, factor_names: list[str]) -> dict[str, Any]:
    """Counts per cell and overall, the failed runs, elapsed and remaining time."""
    states = run_states(exp_dir)
    cells: dict[str, dict[str, Any]] = {}
    totals = {"planned": 0, "ok": 0, "pending": 0, **{s: 0 for s in FAILED_STATES}}
    durations, starts, ends = [], [], []
    failed = []
    for st in states:
        kind = "warmup" if st.run.warmup else "control" if st.run.control else "measured"
        c = cells.setdefault(st.run.cell_id, {"cell_id": st.run.cell_id,
                                              "factors": {f: st.run.factors.get(f) for f in factor_names},
                                              "planned": 0, "ok": 0, "pending": 0,
                                              **{s: 0 for s in FAILED_STATES}, "reruns": 0})
        if kind == "measured":
            c["planned"] += 1
            c[st.state] += 1
            c["reruns"] += max(len(st.attempts) - 1, 0)
        totals["planned"] += 1
        totals[st.state] += 1
        for rec in st.attempts:
            if rec.get("duration_s") is not None:
                durations.append(float(rec["duration_s"]) + float(
                    (rec.get("phases") or {}).get("batch_overhead_share_s") or 0))
            if rec.get("started_at"):
                starts.append(_ts(rec["started_at"]))
                ends.append(_ts(rec["ended_at"]) or _ts(rec["started_at"]))
        if st.state in FAILED_STATES and st.latest:
            rec = st.latest
            failed.append({"run_id": st.run.run_id, "cell_id": st.run.cell_id, "host": st.run.host,
                           "attempt": rec["attempt"], "status": rec["status"], "reason": rec.get("reason", ""),
                           "log": rec.get("log", "")})
    per_run = statistics.median(durations) if durations else None
    return {
        "totals": totals,
        "cells": list(cells.values()),
        "failed": failed,
        "elapsed_s": (max(ends) - min(starts)) if starts else 0.0,
        "remaining_s": per_run * totals["pending"] if per_run is not None else None,
        "median_run_s": per_run,
    }


def exit_code(status: dict[str, Any]) -> int:
    """0 when every planned run is ok, 1 when some failed, 3 when some are pending."""
    t = status["totals"]
    if any(t[s] for s in FAILED_STATES):
        return 1
    if t["pending"]:
        return 3
    return 0
