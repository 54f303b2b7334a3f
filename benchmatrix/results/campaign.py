"""The current campaign's ``campaign.json``: its id, its metadata and its progress.

``results/NAME/campaign.json`` (and every kept campaign's, under ``campaigns/ID/``)
holds ``id`` (always), ``created_at`` and, when known, ``label``, ``ended_at``,
``spec_digest``, ``hosts`` and ``passes``. The plan job makes the id, collect records
the hosts and the end (:func:`mark_progress_from_tables`), ``bmx run`` and ``bmx
rerun`` each Snakemake pass (:func:`start_pass`, :func:`end_pass`); keeping and naming
campaigns is :mod:`benchmatrix.campaigns.store`'s.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmatrix.files import atomic_write
from benchmatrix.layout import CAMPAIGN, PLAN


def _now() -> str:
    """Now, as campaign.json writes its times (UTC, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def read_meta(exp_dir: str | Path) -> dict[str, Any]:
    """``campaign.json`` of a campaign directory ({} when missing or unreadable)."""
    try:
        meta = json.loads((Path(exp_dir) / CAMPAIGN).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def campaign_id(exp: str | Path, label: str | None = None, spec_digest: str | None = None) -> str:
    """The id of the campaign whose results live in ``exp`` (made on first use).

    It names the batch runner's work directory on the hosts, so that raw outputs a
    deleted or other results directory left there are never taken for this one's.
    A new campaign also gets ``label`` and ``spec_digest`` when given (an existing
    one keeps its campaign.json).
    """
    path = Path(exp) / CAMPAIGN
    if path.is_file():
        return json.loads(path.read_text())["id"]
    import uuid  # imported late: most processes read a campaign's id, one makes it

    cid = uuid.uuid4().hex[:12]
    meta = {"id": cid, "created_at": _now(),
            "label": label or None, "spec_digest": spec_digest}
    atomic_write(path, json.dumps({k: v for k, v in meta.items() if v is not None}) + "\n")
    return cid


def update_meta(exp_dir: str | Path, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into an existing ``campaign.json`` (atomically); a None value
    removes its key. Returns the new content; does nothing without a campaign.json."""
    meta = read_meta(exp_dir)
    if not meta.get("id"):
        return meta
    new = {k: v for k, v in {**meta, **fields}.items() if v is not None}
    if new != meta:
        atomic_write(Path(exp_dir) / CAMPAIGN, json.dumps(new) + "\n")
    return new


def mark_progress(exp_dir: str | Path, runs: list[Any] | None = None,
                  records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Record in campaign.json the hosts and, once every planned run has a final state,
    ``ended_at`` (the end of its last run); an open campaign has no ``ended_at``.

    Called by collect, after every batch and re-run round, with the plan's runs and
    their records already in memory (read here when not given).
    """
    from benchmatrix.plan.design import read_plan
    from benchmatrix.results.status import run_states

    exp_dir = Path(exp_dir)
    if runs is None:
        runs = read_plan(exp_dir / PLAN)[0]
    states = run_states(exp_dir, runs, records)
    hosts = sorted({r.host for r in runs})
    done = bool(states) and all(s.state != "pending" for s in states)
    ends = [str(rec.get("ended_at") or rec.get("started_at") or "") for s in states for rec in s.attempts]
    ended = max((e for e in ends if e), default=None) if done else None
    return update_meta(exp_dir, hosts=hosts or None, ended_at=ended)


def mark_progress_from_tables(exp_dir: str | Path, plan: Any, runs: Any) -> dict[str, Any]:
    """:func:`mark_progress` from the plan and runs tables collect has in memory.

    The same hosts and ``ended_at``, decided the same way
    (:func:`benchmatrix.results.status.decide`), without a Python object per run: a
    1M-run campaign's plan and records as objects take gigabytes.

    Args:
        exp_dir: ``results/NAME``.
        plan: plan.csv's rows (``host``, ``run_id``, ``attempt``).
        runs: runs.csv's rows of the plan's runs (``run_id``, ``attempt``, ``status``,
            ``started_at``, ``ended_at``), as read back from the file.
    """
    import pandas as pd

    from benchmatrix.results.batch_rows import first_positions
    from benchmatrix.results.status import decide

    hosts = sorted(plan["host"].astype(str).unique()) if len(plan) else []
    first = first_positions(plan["run_id"] if len(plan) else pd.Series([], dtype=str))
    # decide() lists the plan's run ids first, in plan order, then those only in runs.
    outcome = decide(plan, runs)["outcome"].iloc[:len(first)] if len(plan) else []
    done = len(outcome) > 0 and bool((outcome != "pending").all())
    ended = None
    if done and len(runs):
        mine = runs[runs["run_id"].astype(str).map(first).notna()]
        # A record's end, else its start (what mark_progress takes), as text: ISO 8601
        # stamps of one campaign order as text.
        ends = mine["ended_at"].where(mine["ended_at"].notna() & (mine["ended_at"].astype(str) != ""),
                                      mine["started_at"]).dropna().astype(str)
        ends = ends[ends != ""]
        ended = ends.max() if len(ends) else None
    return update_meta(exp_dir, hosts=hosts or None, ended_at=ended)


def start_pass(exp_dir: str | Path) -> int | None:
    """Record that a Snakemake pass of ``bmx run`` or ``bmx rerun`` starts now.

    Appends ``{"started_at": ...}`` to campaign.json's ``passes`` (atomically, under
    the experiment lock the caller holds; no job of the pass writes campaign.json yet).
    A pass killed before :func:`end_pass` keeps no ``ended_at``, and a resume appends
    its own: each entry is one Snakemake invocation. The estimates take a campaign's
    fixed start and end from these (:func:`benchmatrix.plan.measured_costs.campaign_overhead`).

    Returns:
        The entry's index, for :func:`end_pass`; None without a campaign.json.
    """
    passes = read_meta(exp_dir).get("passes")
    passes = list(passes) if isinstance(passes, list) else []
    passes.append({"started_at": _now()})
    if not update_meta(exp_dir, passes=passes).get("passes"):
        return None
    return len(passes) - 1


def end_pass(exp_dir: str | Path, index: int | None, outcome: str) -> None:
    """Record the end of the pass :func:`start_pass` began: ``ended_at`` and ``outcome``
    (``ok``: Snakemake finished the workflow; ``failed``: it stopped on a failed job;
    ``interrupted``: Ctrl-C, or bmx stopped it itself)."""
    passes = read_meta(exp_dir).get("passes")
    if index is None or not isinstance(passes, list) or not 0 <= index < len(passes):
        return
    entry = passes[index] if isinstance(passes[index], dict) else {}
    passes = [*passes[:index], {**entry, "ended_at": _now(), "outcome": outcome}, *passes[index + 1:]]
    update_meta(exp_dir, passes=passes)
