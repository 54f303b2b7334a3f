"""Run states, the one rule: what is ok, failed or pending, per run and per cell.

Every attempt of a run ends with a :class:`Status` (``record.json``'s ``status``).
A run's :class:`State` over all its attempts is decided here, by :func:`decide_runs`
(:func:`decide` on frames), for ``bmx status``, ``bmx rerun --failed`` and the report alike:

* ``ok`` when any attempt is ok (statistics use its newest ok attempt);
* ``pending`` when it has no record yet, when a requested attempt (a re-run round in
  plan.csv) has no record yet, or when its newest attempt was ``interrupted`` (the
  next ``bmx run`` resumes it);
* ``failed`` otherwise: its newest attempt is ``failed``, ``timeout``,
  ``unreachable`` or ``invalid`` (an unknown status counts as ``failed``), and
  nothing is waiting to run. ``bmx status`` counts failed runs by that status.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmatrix import layout
from benchmatrix.layout import BATCHES_DIR, FAILED_STATES, State, Status
from benchmatrix.plan.design import PlannedRun, read_plan
from benchmatrix.results.records import iter_records, load_records

if TYPE_CHECKING:
    import pandas as pd


def _attempt_number(value: Any) -> int:
    """An attempt as the rule counts it (a record's or a table's cell): 0 when not a number."""
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number) if number == number and abs(number) != float("inf") else 0


def _status_word(value: Any) -> str:
    """A status as the rule compares it: stripped, lower case; "" when missing."""
    return "" if value is None or value != value else str(value).strip().lower()


def decide_runs(plan: list[tuple[str, int]], attempts: list[tuple[str, int, str]]) -> list[tuple[str, str, str,
                                                                                                  str | None]]:
    """The one rule on plain values: what :func:`decide` does to its frames, without pandas
    (``bmx run``'s end and ``bmx status`` need no more, and pandas costs a process about
    0.45 CPU-s to import).

    Args:
        plan: (run id, attempt) per plan.csv row, in plan order.
        attempts: (run id, attempt, status) per recorded attempt, in file order; the
            status lowercased and stripped ("" when missing).

    Returns:
        (run id, state, outcome, latest) per run id: the plan's in order, then those only
        in ``attempts``; as :func:`decide`'s columns.
    """
    ids = dict.fromkeys(run_id for run_id, _ in plan)
    ids.update(dict.fromkeys(run_id for run_id, _, _ in attempts))
    newest: dict[str, tuple[int, str]] = {}
    has_ok: set[str] = set()
    for run_id, attempt, status in attempts:
        # The newest attempt: the highest number, ties by file position (the later line).
        if run_id not in newest or attempt >= newest[run_id][0]:
            newest[run_id] = (attempt, status)
        if status == Status.OK.value:
            has_ok.add(run_id)
    recorded = {(run_id, attempt) for run_id, attempt, _ in attempts}
    # A requested attempt (planned, or appended by a re-run round) without a record.
    waiting = {run_id for run_id, attempt in plan if (run_id, attempt) not in recorded}
    out = []
    for run_id in ids:
        latest = newest[run_id][1] if run_id in newest else None
        if run_id in has_ok:
            state = State.OK.value
        elif latest is None or run_id in waiting or latest == Status.INTERRUPTED.value:
            state = State.PENDING.value
        else:
            state = State.FAILED.value
        outcome = state if state != State.FAILED.value else latest if latest in FAILED_STATES else \
            Status.FAILED.value
        out.append((run_id, state, outcome, latest))
    return out


def decide(plan: pd.DataFrame | None, runs: pd.DataFrame) -> pd.DataFrame:
    """The state of every run: the run ids of ``plan``, then any only in ``runs``.

    Args:
        plan: Rows of plan.csv (``run_id`` and ``attempt`` are used; a re-run round
            adds a row with the next attempt of the same run id), or None to judge
            the recorded attempts alone.
        runs: One row per attempt with a record (``run_id``, ``attempt``,
            ``status``): rows of runs.csv, or of the records themselves.

    Returns:
        One row per run id in that order (index 0..n-1) with ``run_id``, ``state``
        (a :class:`State` value), ``outcome`` (``ok``, ``pending`` or, for a failed
        run, its newest attempt's status: what ``bmx status`` counts) and ``latest``
        (the newest attempt's status, None before any).
    """
    import pandas as pd

    planned = [] if plan is None or not len(plan) else \
        list(zip(plan["run_id"].astype(str).tolist(), map(_attempt_number, plan["attempt"].tolist())))
    # The frames' cells read by the same two rules as run_states' records (NA as missing).
    recorded = [] if not len(runs) else list(zip(
        runs["run_id"].astype(str).tolist(), map(_attempt_number, runs["attempt"].tolist()),
        map(_status_word, runs["status"].astype("string").fillna("").tolist())))
    rows = decide_runs(planned, recorded)
    return pd.DataFrame({"run_id": pd.Series([r[0] for r in rows], dtype=object),
                         **{col: pd.Series([r[i] for r in rows], dtype=object)
                            for i, col in enumerate(("state", "outcome", "latest"), start=1)}})


@dataclass
class RunState:
    """The state of one run id over all its attempts."""

    run: PlannedRun
    #: ``ok``, ``pending`` or the failing status of the newest attempt (``outcome``
    #: of :func:`decide`).
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
        runs, _ = read_plan(Path(exp_dir) / layout.PLAN)
    if records is None:
        records = load_records(exp_dir, runs)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_run.setdefault(rec["run_id"], []).append(rec)
    decided = decide_runs([(str(r.run_id), _attempt_number(r.attempt)) for r in runs],
                          [(str(rec["run_id"]), _attempt_number(rec["attempt"]), _status_word(rec.get("status")))
                           for rec in records])
    outcome = {run_id: out for run_id, _, out, _ in decided}
    first: dict[str, PlannedRun] = {}
    for r in runs:
        first.setdefault(r.run_id, r)
    return [RunState(run, outcome[run_id], sorted(by_run.get(run_id, []), key=lambda rec: rec["attempt"]))
            for run_id, run in first.items()]


def select_reruns(exp: Path, factor_names: list[str], failed: bool, where: str | None) -> list[tuple[str, int]]:
    """(run_id, next attempt) of the runs ``bmx rerun`` selects.

    ``failed`` picks every run whose state is failed, timeout, unreachable or invalid;
    ``where`` is an expression of :mod:`benchmatrix.spec.where` over one row per run (its
    newest attempt): the factor columns, run_id, cell_id, host, status, attempt,
    replicate, warmup, control and the metrics of that attempt.

    Raises:
        benchmatrix.spec.where.WhereError: ``where`` is outside the language (one line).
    """
    from benchmatrix.spec.where import Where

    states = [s for s in run_states(exp) if s.attempts]
    picked = []
    if failed:
        picked += [s for s in states if s.state in FAILED_STATES]
    if where:
        rows = []
        for s in states:
            row = {"run_id": s.run.run_id, "cell_id": s.run.cell_id, "host": s.run.host, "status": s.state,
                   "attempt": s.latest["attempt"], "replicate": s.run.replicate, "warmup": s.run.warmup,
                   "control": s.run.control}
            # Metrics first, so that a factor or a run column of the same name wins.
            metrics = {k: (m or {}).get("value") for k, m in (s.latest.get("metrics") or {}).items()}
            rows.append({**metrics, **{f: s.run.factors.get(f) for f in factor_names}, **row})
        columns = set(factor_names) | {"run_id", "cell_id", "host", "status", "attempt", "replicate",
                                       "warmup", "control"}
        columns |= {k for r in rows for k in r}
        expr = Where(where, columns)  # parsed before anything is selected: a bad one never half-runs
        hit = {r["run_id"] for r in rows if expr.matches(r)}
        picked += [s for s in states if s.run.run_id in hit and s not in picked]
    # Warm-ups are never re-run on their own: the planner adds the ones a re-run needs.
    return [(s.run.run_id, max(a["attempt"] for a in s.attempts) + 1) for s in picked if not s.run.warmup]


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def host_progress(exp_dir: Path) -> list[dict[str, Any]]:
    """The runs that batches still running reported finished on their hosts
    (``batches/BATCH.progress.json``, refreshed with each lease renewal): the runner's
    items (``run_id``, ``attempt`` an int, ``ended_at`` on the host's clock) with ``host``."""
    import json

    out: list[dict[str, Any]] = []
    for path in Path(exp_dir).glob(f"{BATCHES_DIR}/*.progress.json"):
        try:
            doc = json.loads(path.read_text())
            out += [{**item, "attempt": int(item["attempt"]), "host": doc.get("host")}
                    for item in doc.get("finished", []) if "run_id" in item]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # being replaced, or not ours: progress is a courtesy
    return out


def finished_on_hosts(exp_dir: Path) -> dict[str, set[int]]:
    """run_id -> attempts that batches still running reported finished on their hosts
    (:func:`host_progress`)."""
    done: dict[str, set[int]] = {}
    for item in host_progress(exp_dir):
        done.setdefault(str(item["run_id"]), set()).add(item["attempt"])
    return done


def status_attempts(exp_dir: Path, runs: list[PlannedRun]) -> list[dict[str, Any]]:
    """What :func:`campaign_status` needs of every attempt of ``runs``: each finished
    batch's rows file and marker (``batches/``, :mod:`benchmatrix.results.batch_rows`),
    then the records of the runs with a planned attempt no rows file holds, as collect
    reads them: a few files a batch rather than one a run.

    An attempt from a rows file is a dict of its record's keys ``run_id``, ``attempt``,
    ``status``, ``reason``, ``started_at``, ``ended_at``, ``duration_s`` and ``phases``
    (``batch_overhead_share_s`` only), with ``log`` None: the rows hold no log
    (:func:`campaign_status` reads a failed attempt's record for it).
    """
    from benchmatrix.results.batch_rows import MARKER_SUFFIX, ROWS_SUFFIX

    exp = Path(exp_dir)
    planned = {r.run_id for r in runs}
    held: dict[tuple[str, int], dict[str, Any]] = {}
    for marker in sorted(exp.glob(f"{BATCHES_DIR}/*{MARKER_SUFFIX}")):
        try:
            shares = json.loads(marker.read_text()).get("run_overhead_s")
            with open(marker.with_name(marker.name[:-len(MARKER_SUFFIX)] + ROWS_SUFFIX), newline="",
                      encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except (OSError, ValueError, AttributeError):
            continue  # no rows file (an older benchmatrix's batch): its records are read
        if not isinstance(shares, list) or len(shares) != len(rows):
            continue  # a marker of a benchmatrix before the shares: the records are read
        for row, share in zip(rows, shares):
            if row.get("run_id") not in planned:
                continue
            attempt = _attempt_number(row.get("attempt"))
            # A later batch's rows win (a batch re-planned under a new id), as in collect.
            held[(row["run_id"], attempt)] = {
                "run_id": row["run_id"], "attempt": attempt, "status": row.get("status") or None,
                "reason": row.get("reason") or "", "started_at": row.get("started_at") or None,
                "ended_at": row.get("ended_at") or None,
                "duration_s": float(row["duration_s"]) if row.get("duration_s") else None,
                "phases": {"batch_overhead_share_s": share}, "log": None}
    open_ids = dict.fromkeys(r.run_id for r in runs if (r.run_id, r.attempt) not in held)
    return [*held.values(), *iter_records(exp, open_ids, skip={key for key in held if key[0] in open_ids})]


def campaign_status(exp_dir: Path, factor_names: list[str]) -> dict[str, Any]:
    """Counts per cell and overall, the failed runs, elapsed and remaining time.

    ``totals.finished_on_host`` counts pending runs that a running batch's runner has
    finished on its host (their results come back with the batch).
    """
    runs, _ = read_plan(Path(exp_dir) / layout.PLAN)
    states = run_states(exp_dir, runs, status_attempts(exp_dir, runs))
    on_hosts = finished_on_hosts(exp_dir)
    cells: dict[str, dict[str, Any]] = {}
    totals = {"planned": 0, "ok": 0, "pending": 0, **{s: 0 for s in FAILED_STATES}, "finished_on_host": 0}
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
        newest = st.latest["attempt"] if st.latest else 0
        if st.state == State.PENDING and any(a > newest for a in on_hosts.get(st.run.run_id, ())):
            totals["finished_on_host"] += 1
        for rec in st.attempts:
            if rec.get("duration_s") is not None:
                durations.append(float(rec["duration_s"]) + float(
                    (rec.get("phases") or {}).get("batch_overhead_share_s") or 0))
            if rec.get("started_at"):
                starts.append(_ts(rec["started_at"]))
                ends.append(_ts(rec["ended_at"]) or _ts(rec["started_at"]))
        if st.state in FAILED_STATES and st.latest:
            rec = st.latest
            if rec.get("log") is None:  # from a rows file: its record says the log
                rec = _record_or(exp_dir, rec)
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


def _record_or(exp_dir: Path, attempt: dict[str, Any]) -> dict[str, Any]:
    """The record of ``attempt`` (a rows file's), or ``attempt`` with no log when unreadable."""
    try:
        return json.loads(layout.record_path(exp_dir, attempt["run_id"], attempt["attempt"]).read_text())
    except (OSError, ValueError):
        return {**attempt, "log": ""}


#: A pass is doomed when its first finished attempts all failed the same way: at least
#: this many attempts ...
DOOMED_RUNS = 5
#: ... over at least this many cells (one broken cell is not a broken campaign).
DOOMED_CELLS = 2

#: Set (to anything but "") in the environment of the Snakemake of ``bmx run
#: --keep-going-on-failures``: its batch jobs then go on after a doomed slice.
KEEP_GOING_ENV = "BMX_KEEP_GOING_ON_FAILURES"

# A word holding a digit (a number, a run or cell id, a pid, pytest-12's 12): what differs
# between runs that failed for the same cause.
_RUN_SPECIFIC = re.compile(r"[0-9A-Za-z_]*[0-9][0-9A-Za-z_]*")


def reason_key(reason: str | None) -> str:
    """A failure reason with its run-specific words (any word holding a digit: numbers,
    run and cell ids, pids, numbered paths) replaced by ``#``: equal for the same cause."""
    return _RUN_SPECIFIC.sub("#", str(reason or "").strip())


def same_reason(a: str | None, b: str | None) -> bool:
    """Whether two failure reasons name the same cause (:func:`reason_key`)."""
    return reason_key(a) == reason_key(b)


def doomed_reason(attempts: list[dict[str, Any]]) -> str | None:
    """The reason that dooms a pass, or None: the rule ``bmx run`` stops a campaign by.

    A pass is doomed when no attempt it finished is ok, at least :data:`DOOMED_RUNS`
    failed (failed, timeout, unreachable, invalid) over at least :data:`DOOMED_CELLS`
    cells, and every one of them failed for the same reason (:func:`same_reason`).
    Interrupted attempts are left out: a stop, not a failure of the run.

    Args:
        attempts: The attempts the pass finished so far, dicts with ``cell_id``,
            ``status`` and ``reason`` (record.json's keys).

    Returns:
        The first failed attempt's reason as it was recorded, or None.
    """
    failed = [a for a in attempts if a.get("status") != Status.INTERRUPTED.value]
    if any(a.get("status") == Status.OK.value for a in failed):
        return None
    if len(failed) < DOOMED_RUNS or len({a.get("cell_id") for a in failed}) < DOOMED_CELLS:
        return None
    if len({reason_key(a.get("reason")) for a in failed}) != 1:
        return None
    return str(failed[0].get("reason") or "")


def group_failures(failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failed runs grouped by status and reason (:func:`reason_key`), in order of first sight.

    Returns:
        One dict per group: ``first`` (its first failed run, as given), ``count`` and
        ``runs`` (every failed run of the group).
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for f in failed:
        g = groups.setdefault((str(f.get("status")), reason_key(f.get("reason"))), {"first": f, "count": 0, "runs": []})
        g["count"] += 1
        g["runs"].append(f)
    return list(groups.values())


def exit_code(status: dict[str, Any]) -> int:
    """0 when every planned run is ok, 1 when some failed, 3 when some are pending."""
    t = status["totals"]
    if any(t[s] for s in FAILED_STATES):
        return 1
    if t["pending"]:
        return 3
    return 0
