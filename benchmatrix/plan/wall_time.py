"""Wall-clock seconds of what is left to run (issue 38): the time a user waits, not the
runs' own time.

One model serves three questions. ``bmx run``'s ETA: the runs not finished yet, each
at its host's own pace in this pass (the runner's progress file) or else its cell's
estimate (:func:`benchmatrix.plan.design.run_estimates`: earlier campaigns' runs, the
workload's time limit), plus each batch not started yet and each reconfiguration
(:mod:`benchmatrix.plan.measured_costs`), on the slowest host, plus the campaign's
tail (restoring the hosts, collect, the report). The until-decided budget: a round
is a Snakemake pass of its own, so it costs the campaign's fixed start and end besides
its batches and runs (counting only its runs let ``budget: 8m`` take 11 minutes).
``bmx plan``'s until-decided times: the same, look after look.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchmatrix.layout import RUNS
from benchmatrix.plan.design import (
    PlannedRun,
    assign_batches,
    per_run_estimate,
    reconfiguration_seconds,
    run_estimates,
)
from benchmatrix.plan.measured_costs import (
    OrchestrationCosts,
    completed_passes,
    orchestration_costs,
    pass_spans,
    runs_rows,
)
from benchmatrix.plan.reruns import plan_reruns, round_requests
from benchmatrix.spec.config import ProjectConfig
from benchmatrix.spec.load import Spec


@dataclass(frozen=True)
class WallModel:
    """What the parts of a campaign take on the wall clock.

    Attributes:
        per_cell: Seconds one run of each cell takes.
        per_run_s: Seconds of a run of a cell ``per_cell`` lacks; None when unknown.
        costs: A batch's, a reconfiguration's, a pass's and the tail's seconds.
    """

    per_cell: dict[str, float]
    per_run_s: float | None
    costs: OrchestrationCosts

    def run_s(self, cell_id: str) -> float | None:
        """Seconds one run of ``cell_id`` takes, or None when unknown."""
        return self.per_cell.get(cell_id, self.per_run_s)


def wall_model(spec: Spec, exp: str | Path, cfg: ProjectConfig) -> WallModel:
    """The experiment's model: its earlier campaigns' figures, else the workload's time
    limit and config.yaml's ``batch_overhead_seconds``, ``cost_seconds`` and
    ``campaign_overhead_seconds``."""
    per_run, _ = per_run_estimate(spec, Path(exp) / RUNS)
    costs = orchestration_costs(spec, exp, cfg.batch_overhead_seconds, cfg.campaign_overhead_seconds)
    return WallModel(run_estimates(spec, exp), per_run, costs)


def hosts_seconds(spec: Spec, runs: list[PlannedRun], model: WallModel, pace: dict[str, float] | None = None,
                  started: Iterable[str] = ()) -> dict[str, float] | None:
    """Seconds each host needs for ``runs`` (its part of them, in plan order).

    Args:
        spec: The experiment (its knobs price the reconfigurations).
        runs: The runs to price.
        model: The figures.
        pace: Host -> seconds per run measured in this pass; it replaces the cells' estimates.
        started: Batches already running or done: their fixed cost is paid.

    Returns:
        Host -> seconds, or None when a run's time is unknown.
    """
    pace = pace or {}
    done = set(started)
    out: dict[str, float] = {}
    batches: dict[str, set[str]] = {}
    for run in runs:
        secs = pace.get(run.host) or model.run_s(run.cell_id)
        if secs is None:
            return None
        out[run.host] = out.get(run.host, 0.0) + secs
        if run.batch not in done:
            batches.setdefault(run.host, set()).add(run.batch)
    reconf = reconfiguration_seconds(runs, spec, model.costs.class_seconds)
    return {host: secs + len(batches.get(host, ())) * model.costs.batch_s + reconf.get(host, 0.0)
            for host, secs in out.items()}


def seconds_left(spec: Spec, runs_left: list[PlannedRun], model: WallModel, pace: dict[str, float] | None = None,
                 started: Iterable[str] = ()) -> float | None:
    """``bmx run``'s ETA: the slowest host's :func:`hosts_seconds` of the runs left, plus
    the campaign's tail; None when a run's time is unknown."""
    per_host = hosts_seconds(spec, runs_left, model, pace, started)
    if per_host is None:
        return None
    return max(per_host.values(), default=0.0) + model.costs.tail_s


# shape: the spec, the plan, the round's requests, the model and the two batch limits planning uses
def round_seconds(spec: Spec, planned: list[PlannedRun], requests: list[tuple[str, int]], model: WallModel,
                  max_runs: int, max_seconds: float | None) -> float | None:
    """Wall seconds of one more until-decided round (a Snakemake pass of its own).

    The round is planned as ``bmx run`` would plan it (:func:`benchmatrix.plan.reruns.plan_reruns`:
    its warm-ups and visits; batches of its own), and costs the campaign's fixed start
    and end, then the slowest host's runs, batches and reconfigurations.

    Args:
        spec: The experiment.
        planned: plan.csv's runs so far.
        requests: The round's ``(run_id, attempt)``
            (:func:`benchmatrix.plan.reruns.round_requests`).
        model: The figures.
        max_runs: ``batch_max_runs``.
        max_seconds: ``batch_max_seconds``.

    Returns:
        Seconds, or None when a run's time is unknown.
    """
    new = plan_reruns(spec, planned, [{"round": 1, "run_id": rid, "attempt": att} for rid, att in requests])
    assign_batches(new, spec, max_runs, max_seconds, model.per_cell)
    per_host = hosts_seconds(spec, new, model)
    if per_host is None:
        return None
    return model.costs.campaign_s + max(per_host.values(), default=0.0)


# shape: the spec, the plan, the looks' schedule, the model and the two batch limits planning uses
def adaptive_seconds(spec: Spec, planned: list[PlannedRun], schedule: list[int], model: WallModel,
                     max_runs: int, max_seconds: float | None) -> list[float] | None:
    """Wall seconds of an until-decided campaign that stops after each look (``bmx plan``).

    Look 1 runs the plan; look k adds a round that brings every cell from
    ``schedule[k-2]`` to ``schedule[k-1]`` measured runs (every comparison undecided
    so far: the most a look can cost).

    Returns:
        The cumulative seconds at each look, or None when a run's time is unknown.
    """
    first = hosts_seconds(spec, planned, model)
    if first is None:
        return None
    out = [model.costs.campaign_s + max(first.values(), default=0.0)]
    keys = {(r.host, r.cell_id) for r in planned if not r.warmup and not r.control}
    for before, after in zip(schedule, schedule[1:]):
        requests = round_requests(dict.fromkeys(keys, after), dict.fromkeys(keys, before))
        more = round_seconds(spec, planned, requests, model, max_runs, max_seconds)
        if more is None:
            return None
        out.append(out[-1] + more)
    return out


def pace_of(finished: Iterable[tuple[str, str]]) -> dict[str, float]:
    """Seconds per run on each host from its runner's progress: ``(host, ended_at)`` of
    the runs it finished in the batch running now (host clock, ISO 8601). A host needs
    two finished runs; the pace is the mean interval between their ends (the runs and
    the runner's gaps between them, as the host lives them)."""
    ends: dict[str, list[float]] = {}
    for host, ended_at in finished:
        try:
            ends.setdefault(host, []).append(datetime.fromisoformat(ended_at).timestamp())
        except (TypeError, ValueError):
            continue
    out = {}
    for host, times in ends.items():
        if len(times) >= 2 and max(times) > min(times):
            out[host] = (max(times) - min(times)) / (len(times) - 1)
    return out


#: A round's overhead is taken this much larger than its slowest measured one: the next
#: round runs on a machine whose load may have grown (a spike made a round 45 % slower
#: than the one before it in the budget's end-to-end test).
ROUND_MARGIN = 1.25


def round_overhead(exp: str | Path, since: float, now: float) -> float:
    """Wall seconds an until-decided round costs besides its runs, as this ``bmx run``
    measured its own rounds (campaign.json's ``passes``, runs.csv): the slowest pass's
    wall time less its slowest host's span of runs (the plan job, the batches' Ansible
    calls, restoring the hosts, collect, the report), plus twice the longest look (the
    gap between two passes, or since the last one ended: judging the comparisons before
    the round and after it), times :data:`ROUND_MARGIN`. The budget adds it to the time
    spent, so that no round starts that would end past the budget; 0 before a pass.

    Args:
        exp: ``results/NAME`` of the running campaign.
        since: When this ``bmx run`` started (epoch seconds): earlier passes belong to a
            run of the campaign that was stopped and resumed, and the wait between is the user's.
        now: The time now (epoch seconds).
    """
    # By their end: ``since`` may come a moment late (the caller's imports), and a pass of
    # an earlier run ended before this one started.
    passes = sorted(p for p in completed_passes(exp) if p[1] > since)
    rows = runs_rows(Path(exp) / RUNS)
    fixed = []
    for window in passes:
        spans = pass_spans(window, rows)
        if spans:
            fixed.append(max(window[1] - window[0] - max(b - a for a, b in spans.values()), 0.0))
    if not fixed:
        return 0.0
    looks = [b[0] - a[1] for a, b in zip(passes, passes[1:])] + [now - passes[-1][1]]
    return ROUND_MARGIN * (max(fixed) + 2 * max(max(looks), 0.0))
