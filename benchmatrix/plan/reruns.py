"""Re-runs: new attempts of existing runs, appended to the plan after the planned runs.

A re-run request (``bmx rerun``, or an interrupted run found by ``bmx run``) is a
*round*: its rows go to ``results/NAME/reruns.csv`` (``round, run_id, attempt,
reason, requested_at``). Planning appends each round after the planned runs, per
host grouped by whole plot like a plan and randomized within (seeded), with
warm-ups as the design requires and visit numbers of its own, in batches of its
own. Earlier attempts are never overwritten: a re-run is attempt N+1. A round may also
ask for new replicates of a cell (``HOST-CELL-rN`` beyond the plan's; adaptive
replication, :mod:`benchmatrix.analyze.adaptive`): they are planned the same way.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import random
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmatrix.files import atomic_write
from benchmatrix.layout import RERUN_COLUMNS, RERUNS
from benchmatrix.plan.design import PlannedRun, WarmUps, plan_round, run_id_of
from benchmatrix.spec.load import Spec


def reruns_path(exp_dir: Path) -> Path:
    """``results/NAME/reruns.csv``."""
    return Path(exp_dir) / RERUNS


def read_reruns(exp_dir: Path) -> list[dict[str, Any]]:
    """Every re-run request row, in file order (``round`` and ``attempt`` as ints)."""
    path = reruns_path(exp_dir)
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        row["round"] = int(row["round"])
        row["attempt"] = int(row["attempt"])
    return rows


def reruns_digest(exp_dir: Path) -> str:
    """Digest of reruns.csv (empty string when there is none): a re-plan trigger."""
    path = reruns_path(exp_dir)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else ""


def append_round(exp_dir: Path, requests: Iterable[tuple[str, int]], reason: str) -> int:
    """Append one round of re-run requests ``(run_id, attempt)``; returns its number.

    Safe against concurrent callers (batch jobs of several hosts): the file is
    rewritten atomically under an exclusive lock. Requests already present are
    skipped; returns 0 when nothing new was requested.
    """
    exp_dir = Path(exp_dir)
    exp_dir.mkdir(parents=True, exist_ok=True)
    with open(exp_dir / ".reruns.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = read_reruns(exp_dir)
        seen = {(r["run_id"], r["attempt"]) for r in rows}
        new = [(rid, att) for rid, att in requests if (rid, att) not in seen]
        if not new:
            return 0
        rnd = max((r["round"] for r in rows), default=0) + 1
        now = datetime.now(UTC).isoformat(timespec="seconds")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(RERUN_COLUMNS)
        for r in rows:
            w.writerow([r[c] for c in RERUN_COLUMNS])
        for rid, att in new:
            w.writerow([rnd, rid, att, reason, now])
        atomic_write(reruns_path(exp_dir), buf.getvalue())
        return rnd


def plan_reruns(spec: Spec, planned: list[PlannedRun], requests: list[dict[str, Any]]) -> list[PlannedRun]:
    """The runs of every re-run round, to be appended after ``planned``.

    Each round is planned per host like a plan (:func:`benchmatrix.plan.design.plan_round`):
    grouped by whole plot, so it adds one reconfiguration per whole-plot setting it
    touches, in an order drawn from the seed, the host and the round number. Its
    visits get new numbers after the host's last visit (the plan's, then earlier
    rounds'), so the analysis groups re-runs by the visits they actually run in.
    A round starts cold (hosts are put back to their baseline between campaigns):
    ``warmup`` warm-up runs of a cell (new run ids ``...-w<k>-rr<round>``) precede its
    first run in the round and its first one after each knob change; a requested
    warm-up (one an interrupt cut short) counts as the first of them. Requests for
    runs that are no longer in the plan (the spec changed) are dropped.
    """
    base = {r.run_id: r for r in planned}
    # New replicates of a cell (adaptive replication's rounds: ``HOST-CELL-rN`` beyond the
    # plan's N) are made from the cell's planned measured runs on that host.
    templates = {run_id_of(r.host, r.cell_id, ""): r for r in reversed(planned) if not r.warmup and not r.control}
    seed = spec.order["seed"]
    last_visit: dict[str, int] = {}
    for r in planned:
        last_visit[r.host] = max(last_visit.get(r.host, 0), r.visit)
    out: list[PlannedRun] = []
    rounds: dict[int, list[dict[str, Any]]] = {}
    for req in requests:
        rounds.setdefault(req["round"], []).append(req)
    for rnd in sorted(rounds):
        by_host: dict[str, list[PlannedRun]] = {}
        for req in rounds[rnd]:
            run = base.get(req["run_id"]) or _new_replicate(templates, req["run_id"])
            if run is None:
                continue
            base.setdefault(run.run_id, run)  # a later round may re-run it
            by_host.setdefault(run.host, []).append(
                replace(run, attempt=req["attempt"], batch="", round=rnd, factors=dict(run.factors)))
        for host in sorted(by_host):
            runs = sorted(by_host[host], key=lambda r: r.seq)  # plan order before the shuffle
            rng = random.Random(f"benchmatrix:{seed}:{host}:rerun:{rnd}")
            warm = WarmUps(spec)
            for visit in plan_round(spec, rng, runs):
                last_visit[host] = last_visit.get(host, 0) + 1
                # Requested warm-ups first (stable: the drawn order otherwise stays).
                for run in sorted(visit, key=lambda r: not r.warmup):
                    run.visit = last_visit[host]
                    warm.host_in(run.factors)
                    # A warm-up's own next attempt (one cut short by an interrupt) is the
                    # first of the warm-ups its cell needs, not an extra run after them.
                    for k in warm.needed(run.cell_id)[1 if run.warmup else 0:]:
                        out.append(replace(run, run_id=run_id_of(host, run.cell_id, f"w{k}-rr{rnd}"),
                                           warmup=True, control=False, attempt=1, factors=dict(run.factors)))
                    out.append(run)
    return out


def _new_replicate(templates: dict[str, PlannedRun], run_id: str) -> PlannedRun | None:
    """The planned run ``HOST-CELL-rN`` would be, as a new replicate of its cell, or None."""
    prefix, sep, rep = run_id.rpartition("r")
    template = templates.get(prefix) if sep and rep.isdigit() else None
    if template is None:
        return None
    return replace(template, run_id=run_id, replicate=int(rep), attempt=1, factors=dict(template.factors))


def round_requests(extend: dict[tuple[str, str], int], counts: dict[tuple[str, str], int]) -> list[tuple[str, int]]:
    """New run ids (attempt 1) that bring each ``(host, cell)`` to its new total of
    measured runs: replicates after the highest it has, named as the plan names runs."""
    out = []
    for (host, cell), total in sorted(extend.items()):
        have = counts.get((host, cell), 0)
        out += [(run_id_of(host, cell, f"r{rep}"), 1) for rep in range(have + 1, total + 1)]
    return out


def replicate_counts(plan: Any) -> dict[tuple[str, str], int]:
    """The highest measured replicate of every (host, cell) in plan.csv's rows (a frame)."""
    if plan.empty:
        return {}
    flags = {c: plan[c].astype(str).str.lower().isin(["true", "1"]) for c in ("warmup", "control")}
    measured = plan[~flags["warmup"] & ~flags["control"]]
    reps = measured["replicate"].astype(int)
    return {(str(h), str(c)): int(r) for (h, c), r in reps.groupby([measured["host"], measured["cell_id"]]).max()
            .items()}
