"""Planning: cells x replicates -> an ordered list of runs per host, split into batches.

The plan is a pure function of the spec and the host list: the same seed gives the
same plan, so re-planning after an unrelated edit changes nothing, and run ids are
derived from cell ids so finished results stay attached to their runs.

Every strategy first produces *visits*: stretches of measured runs that the host runs
in one setting of its costly knobs. :func:`plan_host` then adds the control and
warm-up runs the same way for every strategy, so their rules hold whatever the order.

- ``random``: all (cell, replicate) pairs shuffled together; a visit is a stretch of
  equal knob settings, wherever the shuffle happened to put one.
- ``sequential``: matrix order, every replicate of a cell in a row.
- ``restricted`` (split-plot): a whole plot is one combination of the costly knobs'
  levels (restart or reboot class). The plan is ``order.visits`` rounds; each round
  visits every whole plot once, reboot-class settings as outer plots and, inside
  each, the restart-class settings as inner plots, each level shuffled. A cell's
  measured runs are dealt over its whole plot's visits so that they land in
  different visits whenever there are at least as many visits as replicates.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmatrix.layout import PLAN_COLUMNS, RUNS, campaign_dirs
from benchmatrix.spec.config import DEFAULT_BATCH_MAX_RUNS
from benchmatrix.spec.load import COST_CLASSES, Spec
from benchmatrix.spec.matrix import Cell


@dataclass
class PlannedRun:
    """One row of plan.csv: one run (attempt) of one cell on one host."""

    seq: int
    host: str
    run_id: str
    cell_id: str
    replicate: int
    warmup: bool
    control: bool
    visit: int
    batch: str
    attempt: int
    factors: dict[str, Any] = field(default_factory=dict)
    #: 0 for planned runs, N for the runs of the N-th re-run request (not a plan.csv
    #: column: it only keeps re-runs out of planned batches when batches are assigned).
    round: int = 0

    def row(self, factor_names: list[str]) -> list[Any]:
        """The plan.csv row of this run."""
        return [self.seq, self.host, self.run_id, self.cell_id, self.replicate,
                _b(self.warmup), _b(self.control), self.visit, self.batch, self.attempt,
                *[self.factors[f] for f in factor_names]]


def run_id_of(host: str, cell_id: str, tag: str) -> str:
    """A run's id: ``HOST-CELL-TAG`` (``r3`` a measured replicate, ``w1`` a warm-up, ``k2``
    a control run); re-run rounds and adaptive rounds name theirs the same way."""
    return f"{host}-{cell_id}-{tag}"


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _host_rng(seed: int, host: str) -> random.Random:
    # Each host gets its own order, reproducible from the seed and the host name.
    return random.Random(f"benchmatrix:{seed}:{host}")


@dataclass
class Visit:
    """Measured runs a host executes in one setting of its costly knobs.

    Attributes:
        runs: (cell, replicate) pairs in execution order.
    """

    runs: list[tuple[Cell, int]]


def _setting(factors: dict[str, Any], names: Iterable[str]) -> tuple[Any, ...]:
    """The settings of these knob factors, comparable (repr keeps 1, True and "1" apart)."""
    return tuple((k, repr(factors[k])) for k in names)


def _knob_state(spec: Spec, factors: dict[str, Any]) -> tuple[Any, ...]:
    return _setting(factors, sorted(spec.knobs))


def _batch_knob_state(spec: Spec, factors: dict[str, Any]) -> tuple[Any, ...]:
    """What a batch shares: every knob setting, or with ``order.batch_live_knobs`` only
    the settings of the knobs of cost restart or reboot (the batch runner sets the
    cost-none ones between runs; Ansible sets the others once per batch)."""
    if not spec.batch_live_knobs:
        return _knob_state(spec, factors)
    return _setting(factors, sorted(spec.whole_plot_factors()))


def _plot_key(factors: dict[str, Any], names: list[str]) -> tuple[str, ...]:
    # repr keeps 1, True and "1" apart, as cell ids do.
    return tuple(repr(factors[f]) for f in names)


def _stretch_visits(spec: Spec, runs: list[tuple[Cell, int]]) -> list[Visit]:
    """Cut a measured order into visits at every change of the knob settings."""
    visits: list[Visit] = []
    prev = None
    for cell, rep in runs:
        state = _knob_state(spec, cell.factors)
        if not visits or state != prev:
            visits.append(Visit([]))
        visits[-1].runs.append((cell, rep))
        prev = state
    return visits


def _shuffle_avoiding(rng: random.Random, items: list[Any], avoid: Any) -> list[Any]:
    """A uniformly random order of ``items`` that does not start with ``avoid`` if it can.

    Swapping a forbidden first item with a uniformly chosen other position keeps the
    distribution uniform over the allowed orders.
    """
    out = list(items)
    rng.shuffle(out)
    if len(out) > 1 and out[0] == avoid:
        j = rng.randrange(1, len(out))
        out[0], out[j] = out[j], out[0]
    return out


def _restricted_visits(spec: Spec, rng: random.Random, share: dict[str, list[int]]) -> list[Visit]:
    """The visits of a split-plot plan (see the module docstring)."""
    outer_f = spec.costly_factors("reboot")
    inner_f = spec.costly_factors("restart")
    n_visits = spec.visits
    # Whole plots in matrix order: outer key -> inner key -> cells.
    plots: dict[tuple[str, ...], dict[tuple[str, ...], list[Cell]]] = {}
    for cell in spec.cells:
        inner = plots.setdefault(_plot_key(cell.factors, outer_f), {})
        inner.setdefault(_plot_key(cell.factors, inner_f), []).append(cell)

    # Deal each whole plot's measured runs over its visits round-robin, from a random
    # start and in a random cell order: a cell's runs take consecutive slots, hence
    # distinct visits while replicates <= visits (else each visit gets floor or ceil
    # of replicates/visits of them), and visit sizes differ by at most one run.
    slots: dict[tuple[tuple[str, ...], tuple[str, ...]], list[list[tuple[Cell, int]]]] = {}
    for okey, inner in plots.items():
        for ikey, cells in inner.items():
            dealt: list[list[tuple[Cell, int]]] = [[] for _ in range(n_visits)]
            order = list(cells)
            rng.shuffle(order)
            k = rng.randrange(n_visits)
            for cell in order:
                reps = share[cell.cell_id]
                picked = sorted((k + i) % n_visits for i in range(len(reps)))
                k += len(reps)
                # Replicate numbers follow time, so the lowest replicate is the earliest visit.
                for rep, v in zip(reps, picked):
                    dealt[v].append((cell, rep))
            slots[(okey, ikey)] = dealt

    visits: list[Visit] = []
    last: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    for rnd in range(n_visits):
        # Consecutive visits of one whole plot would share a setting the host never
        # left: they would not be independent visits. Only a round boundary can bring
        # that about, and there the first plot is drawn among the others.
        for okey, ikey in _plot_round(rng, plots, last):
            runs = list(slots[(okey, ikey)][rnd])
            if not runs:
                continue  # only when order.visits exceeds a plot's runs (refused by load_spec)
            rng.shuffle(runs)
            visits.append(Visit(runs))
            last = (okey, ikey)
    return visits


_PlotKey = tuple[tuple[str, ...], tuple[str, ...]]  # (outer key, inner key) of a whole plot


def _plot_round(rng: random.Random, plots: dict[tuple[str, ...], dict[tuple[str, ...], Any]],
                last: _PlotKey | None) -> Iterator[_PlotKey]:
    """One round over the whole plots: outer (reboot-class) plots in random order and,
    inside each, its inner (restart-class) plots in random order.

    The first plot is drawn among those other than ``last`` (the host's current one)
    when there is a choice. A generator, so the caller's own draws between two plots
    keep their place in the random stream.
    """
    outers = _shuffle_avoiding(rng, list(plots), last[0] if last and len(plots) > 1 else None)
    for okey in outers:
        avoid = last[1] if last and len(plots) == 1 else None
        for ikey in _shuffle_avoiding(rng, list(plots[okey]), avoid):
            yield okey, ikey


def plan_round(spec: Spec, rng: random.Random, runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """Order one host's runs of a re-run round like a plan: its visits, in execution order.

    The runs are grouped by whole plot (reboot-class settings outside, restart-class
    settings inside, as in a restricted plan), so the round pays one reconfiguration
    per whole-plot setting it touches; the plots and the runs inside each are in
    random order. A visit is a whole plot of the round in a ``restricted`` plan, a
    stretch of equal knob settings otherwise (as :func:`plan_visits` defines them).

    Args:
        rng: The round's random stream.
        runs: The runs to re-execute, in plan order.
    """
    outer_f, inner_f = spec.costly_factors("reboot"), spec.costly_factors("restart")
    plots: dict[tuple[str, ...], dict[tuple[str, ...], list[PlannedRun]]] = {}
    for run in runs:
        inner = plots.setdefault(_plot_key(run.factors, outer_f), {})
        inner.setdefault(_plot_key(run.factors, inner_f), []).append(run)
    ordered: list[PlannedRun] = []
    for okey, ikey in _plot_round(rng, plots, None):
        group = list(plots[okey][ikey])
        rng.shuffle(group)
        ordered += group
    restricted = spec.order["strategy"] == "restricted"
    visits: list[list[PlannedRun]] = []
    prev = None
    for run in ordered:
        key = _plot_key(run.factors, outer_f + inner_f) if restricted else _knob_state(spec, run.factors)
        if not visits or key != prev:
            visits.append([])
        visits[-1].append(run)
        prev = key
    return visits


def host_shares(spec: Spec, hosts: list[str]) -> dict[str, dict[str, list[int]]]:
    """Which replicates of which cell each host measures.

    ``hosts_mode: replicate`` (the default): every host measures every replicate.
    ``partition``: the replicates of each cell are dealt round-robin over the hosts,
    starting one host further for each cell, so every cell is spread over the hosts
    and their loads differ by at most one run per cell.
    """
    reps = list(range(1, spec.replicates + 1))
    if spec.hosts_mode != "partition" or len(hosts) < 2:
        return {h: {c.cell_id: list(reps) for c in spec.cells} for h in hosts}
    shares: dict[str, dict[str, list[int]]] = {h: {c.cell_id: [] for c in spec.cells} for h in hosts}
    for ci, cell in enumerate(spec.cells):
        for r in reps:
            shares[hosts[(ci + r - 1) % len(hosts)]][cell.cell_id].append(r)
    return shares


def plan_visits(spec: Spec, host: str, share: dict[str, list[int]] | None = None) -> list[Visit]:
    """The measured runs of one host, grouped into visits, in execution order.

    Args:
        share: cell id -> the replicates this host measures (default: all of them).
    """
    if share is None:
        share = host_shares(spec, [host])[host]
    strategy = spec.order["strategy"]
    if strategy == "sequential":
        return _stretch_visits(spec, [(cell, r) for cell in spec.cells for r in share[cell.cell_id]])
    rng = _host_rng(spec.order["seed"], host)
    if strategy == "restricted":
        return _restricted_visits(spec, rng, share)
    reps = spec.replicates
    runs = [(cell, r) for r in range(1, reps + 1) for cell in spec.cells if r in share[cell.cell_id]]
    rng.shuffle(runs)
    return _stretch_visits(spec, runs)


class WarmUps:
    """Which cells are warm on one host.

    ``warmup`` unmeasured runs of a cell go right before its first measured (or
    control) run after a change that cools the cells (and at the start). The spec's
    ``warmup_after`` says which: ``change`` any change of the host's knob settings,
    ``costly_change`` a change of a knob of cost restart or reboot, ``first_run`` none
    (a cell warms up once). Used by the planner for measured and control runs and by
    re-run rounds, so all follow the same rule.
    """

    def __init__(self, spec: Spec):
        self._spec = spec
        self._n = spec.warmup
        self._cooling = spec.cooling_knobs
        self._state: tuple[Any, ...] | None = None  # the cooling part of the host's knob setting
        self._warm: set[str] = set()
        self._count: dict[str, int] = {}

    def host_in(self, factors: dict[str, Any]) -> None:
        """The host runs with these factors' knob settings from now on."""
        state = _setting(factors, self._cooling)
        if state != self._state:
            self._state, self._warm = state, set()

    def needed(self, cell_id: str) -> list[int]:
        """Numbers of the warm-ups to insert before a measured run of the cell (none if warm).

        Numbers keep counting per cell over the whole plan, so warm-up run ids stay unique.
        """
        if cell_id in self._warm:
            return []
        self._warm.add(cell_id)
        first = self._count.get(cell_id, 0) + 1
        self._count[cell_id] = first + self._n - 1
        return list(range(first, first + self._n))


def plan_host(spec: Spec, host: str, share: dict[str, list[int]] | None = None) -> list[PlannedRun]:
    """The ordered runs of one host (seq, batch not yet assigned).

    Warm-ups: ``warmup`` unmeasured runs of a cell sit immediately before its first
    measured run after every change of the host's knob settings that cools it (the
    spec's ``warmup_after``, :class:`WarmUps`) and at the start.

    Control runs of ``order.control`` are due at the start and again once
    ``order.control_every`` measured runs have run since the previous one. A due
    control runs right after the next measured run whose knob settings are the
    control's, so it never costs a reconfiguration (in a restricted plan: only in
    visits of its own whole plot), never runs first after one, and follows the
    warm-up rule of measured runs: its warm-ups precede it when its cell is cold.
    Hence at most ``1 + measured // control_every`` control runs per host, all run
    in the same (warm) condition, and the measured order is that of the plan
    without a control.
    """
    out: list[PlannedRun] = []
    ctl = spec.control_cell()
    ctl_state = None if ctl is None else _knob_state(spec, ctl.factors)
    every = spec.order["control_every"]
    warm = WarmUps(spec)
    ctl_count = 0
    since_ctl = every  # due at the start

    def add(cell: Cell, tag: str, rep: int, warmup: bool, control: bool, visit: int) -> None:
        out.append(PlannedRun(0, host, run_id_of(host, cell.cell_id, tag), cell.cell_id, rep,
                              warmup, control, visit, "", 1, dict(cell.factors)))

    def add_warmups(cell: Cell, rep: int, visit: int) -> None:
        for k in warm.needed(cell.cell_id):
            add(cell, f"w{k}", rep, True, False, visit)

    for visit_no, visit in enumerate(plan_visits(spec, host, share), start=1):
        for cell, rep in visit.runs:
            warm.host_in(cell.factors)
            add_warmups(cell, rep, visit_no)
            add(cell, f"r{rep}", rep, False, False, visit_no)
            since_ctl += 1
            if ctl is not None and since_ctl >= every and _knob_state(spec, cell.factors) == ctl_state:
                add_warmups(ctl, 0, visit_no)
                ctl_count += 1
                add(ctl, f"k{ctl_count}", 0, False, True, visit_no)
                since_ctl = 0
    return out


def assign_batches(runs: list[PlannedRun], spec: Spec, max_runs: int = DEFAULT_BATCH_MAX_RUNS,
                   max_seconds: float | None = None, estimates: dict[str, float] | None = None) -> None:
    """Split each host's runs into batches of consecutive runs sharing every knob setting
    (with the spec's ``order.batch_live_knobs``: every setting of a knob of cost restart
    or reboot; the batch runner sets the cost-none knobs between runs).

    Batches are sized by time: a batch closes before the run that would take its
    expected workload time past ``max_seconds`` (a run longer than that gets a batch
    of its own), so short runs fill large batches and Ansible's per-batch cost stays
    a small share. A run whose duration is unknown (no estimate) counts as no time:
    such runs fill a batch up to ``max_runs`` (within one knob setting), and the
    execution keeps the time bound instead: the batch job has the runner stop after
    ``max_seconds`` of execution, takes that slice's results in, and starts the rest
    (:func:`benchmatrix.execute.batch.run_batch`). Guessing a duration could only err:
    too short and short runs pay Ansible's cost every few runs, too long and nothing
    is gained, since the slices bound how long results stay on the host. No batch
    holds more than ``max_runs`` runs. Without ``max_seconds`` only ``max_runs`` applies.

    A batch id is ``HOST-bNNNN-DIGEST``, the digest covering its run ids and attempts,
    so an unchanged batch keeps its id (and its finished Snakemake job) when the
    plan is extended, and a changed one gets a new id.

    Args:
        runs: Every host's runs in plan order; their ``batch`` is set.
        spec: The spec (its knobs decide which runs may share a batch).
        max_runs: Most runs in one batch.
        max_seconds: Most expected seconds of workload time in one batch.
        estimates: Expected seconds of one run per cell id (:func:`run_estimates`).
    """
    estimates = estimates or {}
    groups: list[list[PlannedRun]] = []
    prev_key = None
    seconds = 0.0
    for run in runs:
        # Re-runs (and their warm-ups) never join a planned batch: each request's runs
        # form batches of their own.
        key = (run.host, _batch_knob_state(spec, run.factors), run.round)
        expected = estimates.get(run.cell_id, 0.0)
        full = len(groups[-1]) >= max_runs if groups else True
        if max_seconds and groups and seconds + expected > max_seconds * (1 + 1e-9):
            full = True
        if not groups or key != prev_key or full:
            groups.append([])
            seconds = 0.0
        groups[-1].append(run)
        seconds += expected
        prev_key = key
    per_host: dict[str, int] = {}
    for group in groups:
        host = group[0].host
        per_host[host] = per_host.get(host, 0) + 1
        digest = hashlib.sha256("\n".join(f"{r.run_id}/{r.attempt}" for r in group).encode()).hexdigest()[:8]
        bid = f"{host}-b{per_host[host]:04d}-{digest}"
        for r in group:
            r.batch = bid


def make_plan(spec: Spec, hosts: Iterable[str], max_runs: int = DEFAULT_BATCH_MAX_RUNS,
              max_seconds: float | None = None, estimates: dict[str, float] | None = None) -> list[PlannedRun]:
    """Plan every host's runs, number them (``seq``) and split them into batches
    (:func:`assign_batches` says how ``max_runs``, ``max_seconds`` and ``estimates`` size them)."""
    runs: list[PlannedRun] = []
    hosts = list(hosts)
    shares = host_shares(spec, hosts)
    for host in hosts:
        runs.extend(plan_host(spec, host, shares[host]))
    for i, run in enumerate(runs, start=1):
        run.seq = i
    assign_batches(runs, spec, max_runs, max_seconds, estimates)
    return runs


def knob_changes(runs: list[PlannedRun], spec: Spec) -> dict[str, int]:
    """Number of knob changes per cost class over every host's plan (the first setting counts).

    Each knob counts on its own: two reboot-class knobs changed at once are two
    changes here but one reboot in :func:`reconfigurations`.
    """
    changes = {"none": 0, "restart": 0, "reboot": 0}
    for _, changed in _transitions(runs, spec):
        for knob in changed:
            changes[knob.cost_class] += 1
    return changes


def _transitions(runs: list[PlannedRun], spec: Spec) -> Iterable[tuple[str, list[Any]]]:
    """(host, knobs that change) before every run whose knob setting differs from the previous one's."""
    last: dict[str, dict[str, Any]] = {}
    for run in runs:
        prev = last.get(run.host)
        # The first setting counts: the host has to be put into it.
        changed = [k for f, k in spec.knobs.items() if prev is None or repr(prev[f]) != repr(run.factors[f])]
        if changed:
            yield run.host, changed
        last[run.host] = run.factors


def reconfigurations(runs: list[PlannedRun], spec: Spec) -> dict[str, int]:
    """Host reconfigurations per cost class, each counted once in its most expensive class.

    Knobs of one class that change together share one restart or reboot, and a reboot
    also applies the restart-class settings, so this is the number of reboots, of
    restarts outside a reboot, and of cheap changes alone.
    """
    out = {cls: 0 for cls in COST_CLASSES}
    for _, changed in _transitions(runs, spec):
        out[max((k.cost_class for k in changed), key=COST_CLASSES.index)] += 1
    return out


def reconfiguration_seconds(runs: list[PlannedRun], spec: Spec,
                            class_seconds: dict[str, float] | None = None) -> dict[str, float]:
    """Estimated reconfiguration seconds per host: each reconfiguration costs its most
    expensive changed knob's seconds (the restart or reboot it needs serves every knob).

    ``class_seconds`` (cost class -> seconds, as earlier campaigns measured them:
    :mod:`benchmatrix.plan.measured_costs`) replaces the seconds of every knob of its classes.
    """
    measured = class_seconds or {}
    out: dict[str, float] = {}
    for run in runs:
        out.setdefault(run.host, 0.0)
    for host, changed in _transitions(runs, spec):
        out[host] += max(measured.get(k.cost_class, k.cost_seconds) for k in changed)
    return out


def costly_visits(runs: list[PlannedRun], spec: Spec) -> int:
    """Visits whose costly-knob setting differs from the previous visit's on the same host.

    A visit's setting is that of its measured runs. In a restricted plan this equals
    the number of costly reconfigurations: a visit that keeps its predecessor's
    setting needs none. Zero when the spec has no restart- or reboot-class knob.
    """
    names = spec.whole_plot_factors()
    if not names:
        return 0
    count = 0
    last: dict[str, tuple[int, tuple[str, ...]]] = {}
    for run in runs:
        if run.control:
            continue
        key = _plot_key(run.factors, names)
        prev = last.get(run.host)
        if prev is None or (run.visit != prev[0] and key != prev[1]):
            count += 1
        last[run.host] = (run.visit, key)
    return count


def plan_costs(spec: Spec, runs: list[PlannedRun], per_run_s: float | None = None,
               batch_overhead_s: float = 0.0, class_seconds: dict[str, float] | None = None,
               campaign_overhead_s: float = 0.0) -> dict[str, Any]:
    """What a plan costs: runs, batches, visits, reconfigurations and time estimates.

    Args:
        spec: The spec the plan was made from.
        runs: Every host's planned runs.
        per_run_s: Estimated seconds of one run of the workload; None when unknown.
        batch_overhead_s: Fixed seconds per batch (one Ansible call).
        class_seconds: Seconds of a reconfiguration per cost class where measured,
            instead of its knobs' (:func:`reconfiguration_seconds`).
        campaign_overhead_s: Fixed seconds of the campaign's start and end (plan job,
            preparing and restoring hosts, collect, report), once per campaign.

    Returns:
        Counts over all hosts; ``campaign_s`` is the wall-clock estimate with hosts
        running in parallel (the slowest host) plus ``campaign_overhead_s``, None
        when ``per_run_s`` is unknown;
        ``orchestration_s`` the batches' fixed cost plus the reconfigurations,
        ``overhead_pct`` its share of all the hosts' time (None while the workload's
        time is unknown), ``warmup_pct`` the warm-ups' share of the runs.
    """
    reconf = reconfiguration_seconds(runs, spec, class_seconds)
    per_host: dict[str, dict[str, float]] = {}
    batches: dict[str, set[str]] = {}
    for r in runs:
        h = per_host.setdefault(r.host, {"runs": 0, "visits": 0})
        h["runs"] += 1
        h["visits"] = max(h["visits"], r.visit)
        batches.setdefault(r.host, set()).add(r.batch)
    campaign = None
    if per_run_s is not None:
        campaign = campaign_overhead_s + max((h["runs"] * per_run_s + reconf[host]
                                              + len(batches[host]) * batch_overhead_s
                                              for host, h in per_host.items()), default=0.0)
    workload = per_run_s * len(runs) if per_run_s is not None else None
    # The orchestration's own time: an Ansible call per batch and every reconfiguration.
    orchestration = sum(len(b) for b in batches.values()) * batch_overhead_s + sum(reconf.values())
    total = orchestration + (workload or 0.0)
    return {
        "runs": len(runs),
        "measured": sum(1 for r in runs if not r.warmup and not r.control),
        "warmup": sum(1 for r in runs if r.warmup),
        "warmup_pct": 100.0 * sum(1 for r in runs if r.warmup) / len(runs) if runs else 0.0,
        "orchestration_s": orchestration,
        "overhead_pct": 100.0 * orchestration / total if workload is not None and total > 0 else None,
        "control": sum(1 for r in runs if r.control),
        "batches": sum(len(b) for b in batches.values()),
        "visits": int(sum(h["visits"] for h in per_host.values())),
        "knob_changes": knob_changes(runs, spec),
        "reconfigurations": reconfigurations(runs, spec),
        "reconfiguration_s": sum(reconf.values()),
        "workload_s": workload,
        "campaign_overhead_s": campaign_overhead_s,
        "campaign_s": campaign,
    }


def visits_per_cell(runs: list[PlannedRun]) -> int:
    """The fewest distinct visits that hold one cell's measured runs on one host.

    Whole-plot effects are judged visit against visit, so this is how many
    independent observations of a costly setting a single cell contributes.
    """
    seen: dict[tuple[str, str], set[int]] = {}
    for r in runs:
        if not r.warmup and not r.control:
            seen.setdefault((r.host, r.cell_id), set()).add(r.visit)
    return min((len(v) for v in seen.values()), default=0)


def earlier_run_seconds(runs_csv: str | Path) -> tuple[float, int] | None:
    """Median ``duration_s`` of the finished runs in an earlier campaign's runs.csv.

    Returns:
        (median seconds, number of runs), or None without a usable runs.csv.
    """
    path = Path(runs_csv)
    if not path.is_file():
        return None
    durations = [d for _, d in _ok_durations(path)]
    if not durations:
        return None
    import statistics  # imported late: a batch job reads its plan and never needs it

    return statistics.median(durations), len(durations)


def _ok_durations(runs_csv: Path) -> Iterator[tuple[str, float]]:
    """(cell_id, duration_s) of every finished (``ok``) run in a runs.csv."""
    with open(runs_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row.get("status") != "ok":
                continue
            try:
                d = float(row.get("duration_s") or "")
            except ValueError:
                continue
            if d == d and d >= 0:  # d == d drops NaN
                yield row.get("cell_id") or "", d


def run_estimates(spec: Spec, exp_dir: str | Path) -> dict[str, float]:
    """Expected seconds of one run of each cell, for sizing batches by time.

    ``workload.estimate_s`` gives every cell the same figure. Else the median duration
    of the cell's finished runs in this experiment's runs.csv and its earlier
    campaigns' (``campaigns/*/runs.csv``); a cell never run yet gets the median of all
    of them. Without earlier runs, the workload's own time limit (fio ``runtime``,
    pgbench ``-T``, sysbench ``--time``: :mod:`benchmatrix.plan.workload_time`). Empty
    when nothing is known (the batches then hold up to ``batch_max_runs`` runs,
    :func:`assign_batches`).
    """
    cells = [c.cell_id for c in spec.cells]
    ctl = spec.control_cell()
    if ctl is not None:
        cells.append(ctl.cell_id)
    given = spec.workload.get("estimate_s")
    if given is not None:
        return dict.fromkeys(cells, float(given))
    exp = Path(exp_dir)
    per_cell: dict[str, list[float]] = {}
    for path in (camp / RUNS for camp in campaign_dirs(exp)):
        if path.is_file():
            try:
                for cell, d in _ok_durations(path):
                    per_cell.setdefault(cell, []).append(d)
            except (OSError, csv.Error, UnicodeDecodeError):
                continue  # an unreadable old table only loses its estimates
    if not per_cell:
        from benchmatrix.plan.workload_time import cell_seconds

        return cell_seconds(spec)
    import statistics

    everything = statistics.median([d for ds in per_cell.values() for d in ds])
    return {c: statistics.median(per_cell[c]) if c in per_cell else everything for c in cells}


def per_run_estimate(spec: Spec, runs_csv: str | Path) -> tuple[float | None, str]:
    """Seconds one run is expected to take, and where the figure comes from.

    ``workload.estimate_s`` wins (the user knows when the workload changed); else the
    median duration of this experiment's earlier finished runs (they include what the
    workload's time limit does not: start, layout, the runner); else the workload's own
    time limit, the cells' mean; else unknown.
    """
    given = spec.workload.get("estimate_s")
    if given is not None:
        return float(given), "workload.estimate_s"
    earlier = earlier_run_seconds(runs_csv)
    if earlier is not None:
        return earlier[0], f"median of {earlier[1]} earlier run(s) in {runs_csv}"
    from benchmatrix.plan.workload_time import cell_seconds, mean_seconds

    from_workload = mean_seconds(cell_seconds(spec))
    if from_workload is not None:
        return from_workload, "the workload's time limit (fio runtime, pgbench -T, sysbench --time)"
    return None, "unknown: set workload.estimate_s or run the experiment once"


def plan_csv_text(runs: list[PlannedRun], factor_names: list[str]) -> str:
    """plan.csv content."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(PLAN_COLUMNS + factor_names)
    for run in runs:
        w.writerow(run.row(factor_names))
    return buf.getvalue()


def read_plan(path: str | Path) -> tuple[list[PlannedRun], list[str]]:
    """Read plan.csv back; factor values are returned as strings.

    Returns:
        The runs and the factor column names.
    """
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        factor_names = header[len(PLAN_COLUMNS):]
        runs = []
        for row in reader:
            runs.append(PlannedRun(int(row[0]), row[1], row[2], row[3], int(row[4]),
                                   row[5] == "true", row[6] == "true", int(row[7]), row[8], int(row[9]),
                                   dict(zip(factor_names, row[len(PLAN_COLUMNS):]))))
    return runs, factor_names


@lru_cache(maxsize=8)
def _batches(plan_path: str, mtime_ns: int) -> tuple[list[str], dict[str, str]]:
    order: list[str] = []
    host_of: dict[str, str] = {}
    with open(plan_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            b = row["batch"]
            if b not in host_of:
                host_of[b] = row["host"]
                order.append(b)
    return order, host_of


def batches(plan_path: str | Path) -> tuple[list[str], dict[str, str]]:
    """Batch ids in plan order and the host of each (cached per file version)."""
    p = Path(plan_path)
    return _batches(str(p), p.stat().st_mtime_ns)
