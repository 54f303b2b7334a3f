"""The body of rule plan: expand and order the runs, append the re-run rounds, write plan.csv.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmatrix import layout
from benchmatrix.execute.hosts import resolve_hosts
from benchmatrix.files import atomic_write
from benchmatrix.layout import exp_dir_of
from benchmatrix.plan.design import (
    PlannedRun,
    assign_batches,
    make_plan,
    plan_csv_text,
    run_estimates,
)
from benchmatrix.plan.reruns import plan_reruns, read_reruns
from benchmatrix.results.campaign import campaign_id, update_meta
from benchmatrix.spec.config import DEFAULT_BATCH_MAX_SECONDS
from benchmatrix.spec.load import load_spec


def plan(spec_path: str, project_dir: Path, out: Path, batch_max_runs: int,
         batch_max_seconds: float | None = DEFAULT_BATCH_MAX_SECONDS) -> list[PlannedRun]:
    """Expand and order the runs of every host, append the re-run rounds of
    reruns.csv after them, and write plan.csv atomically.

    Batches hold at most ``batch_max_seconds`` of expected workload time (from
    ``workload.estimate_s`` or earlier runs of each cell, :func:`run_estimates`) and
    at most ``batch_max_runs`` runs.
    """
    spec = load_spec(spec_path)
    hosts = resolve_hosts(spec.inventory_path(project_dir), spec.hosts)
    exp = exp_dir_of(project_dir, spec)
    estimates = run_estimates(spec, exp) if batch_max_seconds else {}
    runs = make_plan(spec, hosts, batch_max_runs, batch_max_seconds, estimates)
    campaign_id(exp, spec_digest=spec.digest)  # made here, before any batch job of any host needs it
    # The campaign is of the spec it was last planned with; its measurement keys are
    # kept beside it, so that bmx compare can tell an edited workload from a new kernel.
    update_meta(exp, spec_digest=spec.digest)
    atomic_write(exp / layout.SPEC, json.dumps(spec.data, sort_keys=True, default=str, indent=1) + "\n")
    requests = read_reruns(exp)
    if requests:
        runs += plan_reruns(spec, runs, requests)
        for i, run in enumerate(runs, start=1):
            run.seq = i
        assign_batches(runs, spec, batch_max_runs, batch_max_seconds, estimates)
    atomic_write(out, plan_csv_text(runs, spec.factor_names))
    return runs
