"""Planning: cells x replicates -> an ordered list of runs per host, split into batches.

The plan is a pure function of the spec and the host list: the same seed gives the
same plan, so re-planning after an unrelated edit changes nothing, and run ids are
derived from cell ids so finished results stay attached to their runs.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from benchmatrix.matrix import Cell
from benchmatrix.spec import Spec

PLAN_COLUMNS = ["seq", "host", "run_id", "cell_id", "replicate", "warmup", "control",
                "visit", "batch", "attempt"]
#: Default cap on runs per batch: results come back to the controller at least this often.
DEFAULT_BATCH_MAX_RUNS = 50


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

    def row(self, factor_names: list[str]) -> list[Any]:
        """The plan.csv row of this run."""
        return [self.seq, self.host, self.run_id, self.cell_id, self.replicate,
                _b(self.warmup), _b(self.control), self.visit, self.batch, self.attempt,
                *[self.factors[f] for f in factor_names]]


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _host_rng(seed: int, host: str) -> random.Random:
    # Each host gets its own order, reproducible from the seed and the host name.
    return random.Random(f"benchmatrix:{seed}:{host}")


def _measured_order(spec: Spec, host: str) -> list[tuple[Cell, int]]:
    reps = spec.data["replicates"]
    strategy = spec.order["strategy"]
    if strategy == "sequential":
        return [(cell, r) for cell in spec.cells for r in range(1, reps + 1)]
    runs = [(cell, r) for r in range(1, reps + 1) for cell in spec.cells]
    _host_rng(spec.order["seed"], host).shuffle(runs)
    return runs


def _knob_state(spec: Spec, factors: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((k, repr(factors[k])) for k in sorted(spec.knobs))


def plan_host(spec: Spec, host: str) -> list[PlannedRun]:
    """The ordered runs of one host (seq, batch not yet assigned).

    Warm-ups: ``warmup`` unmeasured runs of a cell sit immediately before its first
    measured run after every change of the host's knob settings (and at the start).
    Control runs of ``order.control`` open every visit and recur every
    ``order.control_every`` runs.
    """
    out: list[PlannedRun] = []
    ctl = spec.control_cell()
    every = spec.order["control_every"]
    warm_n = spec.data["warmup"]
    visit = 0
    warmed: set[str] = set()
    warm_count: dict[str, int] = {}
    ctl_count = 0
    since_ctl = 0

    def add(cell: Cell, tag: str, rep: int, warmup: bool, control: bool) -> None:
        out.append(PlannedRun(0, host, f"{host}-{cell.cell_id}-{tag}", cell.cell_id, rep,
                              warmup, control, visit, "", 1, dict(cell.factors)))

    plot_state: tuple[Any, ...] | None = None   # knob setting of the measured runs
    host_state: tuple[Any, ...] | None = None   # knob setting the host is actually in
    ctl_state = _knob_state(spec, ctl.factors) if ctl is not None else None
    for cell, rep in _measured_order(spec, host):
        new_state = _knob_state(spec, cell.factors)
        need_ctl = False
        if new_state != plot_state:
            plot_state, visit, since_ctl = new_state, visit + 1, 0
            need_ctl = ctl is not None
        elif ctl is not None and since_ctl >= every:
            need_ctl = True
        if need_ctl:
            ctl_count += 1
            add(ctl, f"k{ctl_count}", 0, False, True)
            host_state, since_ctl = ctl_state, 0
        if new_state != host_state:
            # Any reconfiguration (including the way back from the control's setting)
            # invalidates every earlier warm-up.
            host_state, warmed = new_state, set()
        if cell.cell_id not in warmed:
            warmed.add(cell.cell_id)
            for _ in range(warm_n):
                warm_count[cell.cell_id] = warm_count.get(cell.cell_id, 0) + 1
                add(cell, f"w{warm_count[cell.cell_id]}", rep, True, False)
        add(cell, f"r{rep}", rep, False, False)
        since_ctl += 1
    return out


def assign_batches(runs: list[PlannedRun], spec: Spec, max_runs: int) -> None:
    """Split each host's runs into batches of consecutive runs sharing every knob setting.

    A batch id is ``HOST-bNNNN-DIGEST``, the digest covering its run ids and attempts,
    so an unchanged batch keeps its id (and its finished Snakemake job) when the
    plan is extended, and a changed one gets a new id.
    """
    groups: list[list[PlannedRun]] = []
    prev_key = None
    for run in runs:
        # A re-run attempt never joins a planned batch: it is a batch of its own.
        key = (run.host, _knob_state(spec, run.factors), run.attempt)
        if not groups or key != prev_key or len(groups[-1]) >= max_runs:
            groups.append([])
        groups[-1].append(run)
        prev_key = key
    per_host: dict[str, int] = {}
    for group in groups:
        host = group[0].host
        per_host[host] = per_host.get(host, 0) + 1
        digest = hashlib.sha256("\n".join(f"{r.run_id}/{r.attempt}" for r in group).encode()).hexdigest()[:8]
        bid = f"{host}-b{per_host[host]:04d}-{digest}"
        for r in group:
            r.batch = bid


def make_plan(spec: Spec, hosts: Iterable[str], max_runs: int = DEFAULT_BATCH_MAX_RUNS) -> list[PlannedRun]:
    """Plan every host's runs, number them (``seq``) and split them into batches."""
    runs: list[PlannedRun] = []
    for host in hosts:
        runs.extend(plan_host(spec, host))
    for i, run in enumerate(runs, start=1):
        run.seq = i
    assign_batches(runs, spec, max_runs)
    return runs


def knob_changes(runs: list[PlannedRun], spec: Spec) -> dict[str, int]:
    """Number of knob changes per cost class over every host's plan (the first setting counts)."""
    changes = {"none": 0, "restart": 0, "reboot": 0}
    last: dict[str, dict[str, Any]] = {}
    for run in runs:
        prev = last.get(run.host)
        for factor, knob in spec.knobs.items():
            if prev is None or prev[factor] != run.factors[factor]:
                changes[knob.cost_class] += 1
        last[run.host] = run.factors
    return changes


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
