"""A campaign factory for tests: the *synthetic results* grade (issue 36).

Builds an experiment's results tree the way a campaign leaves it on disk, without
Snakemake, Ansible or a workload: ``bmx run``'s own steps are called in-process with
made-up measurements. Each campaign is started by the real
:func:`benchmatrix.campaigns.store.start_campaign` (so a label or an edited workload keeps
the previous one in ``campaigns/ID/``, as ``bmx run --campaign`` does), planned by
:func:`benchmatrix.plan.design.make_plan` (plan.csv, spec.json and campaign.json written
as the plan rule writes them), its runs recorded batch by batch through
:func:`benchmatrix.results.records.base_record` / ``write_records`` and
:func:`benchmatrix.results.batch_rows.write_batch_rows` with the batch's marker, each
host's facts.json beside them, and every table made by the real
:func:`benchmatrix.execute.collect.collect` (runs.csv, summary.csv, comparisons.csv,
analysis.json, runs_long.parquet, the reports when ``render``).

Metric values come from a seeded generator: a mean per cell and metric (from ``means``
or drawn), a coefficient of variation, and a relative shift per campaign. Use it for
tests of what *reads* results (compare, history, export, publish, status, the terminal,
the report); a test of how results are *made* runs a real campaign (docs/contributing.md,
"Which grade a test should use").
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.campaigns.store import start_campaign
from benchmatrix.execute.batch import cells_by_id
from benchmatrix.execute.collect import collect
from benchmatrix.files import atomic_write
from benchmatrix.plan.design import PlannedRun, make_plan, plan_csv_text
from benchmatrix.results.batch_rows import MARKER_SUFFIX, write_batch_rows
from benchmatrix.results.campaign import read_meta, update_meta
from benchmatrix.results.records import base_record, write_records
from benchmatrix.spec.load import Spec, load_spec, render_vars
from benchmatrix.workloads import WORKLOADS

#: A spec whose experiment the factory can build as it is: two cells, one metric.
SPEC = """\
name: {name}
description: a synthetic experiment (tests/campaign_factory.py)
inventory: config/inventory/test.yml
factors:
  size: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "print('v=%.4f' % (100 * {{{{ size }}}}))"]
  metrics:
    v: {{regex: 'v=(?P<value>[0-9.]+)', unit: ms, better: lower}}
  timeout: 60
before_run: [sync]
replicates: 3
warmup: 0
order: {{strategy: random, seed: 5}}
"""

#: What the preparation publishes of a host (playbooks/tasks/prepare.yml, bmx_facts).
FACTS = {"hostname": "{host}", "fqdn": "{host}", "cpu_model": "Synthetic CPU @ 2.0GHz", "cpu_count": 2,
         "sockets": 1, "cores": 2, "threads_per_core": 1, "memory_mb": 4096, "kernel": "6.1.0-synthetic",
         "distribution": "Debian 12", "architecture": "x86_64", "python": "3.11.2", "tool_version": "",
         "workload_path": "/var/tmp/benchmatrix", "filesystem": "ext4", "filesystem_source": "/dev/vda1",
         "mount_point": "/", "block_device": "vda"}

#: What the batch runner reports of a host's noise settings (host_environment()).
HOST_ENV = {"governor": "performance", "turbo": "off", "thp": "madvise", "mitigations": "12 mitigated, 0 vulnerable",
            "numa_nodes": 1, "cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet"}


@dataclass
class Campaign:
    """One campaign to make.

    Attributes:
        label: ``bmx run --campaign LABEL``; None continues (or starts) the current one
            unless the spec's measurement changed.
        shift: Relative change of every mean in this campaign (0.1: 10 % higher), or
            per metric ``{metric: fraction}``.
        spec: Spec text that replaces the experiment's spec file before this campaign
            (an edited workload); None keeps the file as it is.
        failed: Measured runs (by their position in plan order, 0-based) recorded
            ``failed`` with a reason and no metrics.
        failed_cells: Cells whose every run fails, each given by some of its levels
            (``{"loops": 0}``), compared as text.
        pending: The last runs of the plan left without a record (a campaign cut
            short): their batches have records of the runs before them but no rows
            file or marker, as a batch job that did not finish leaves them.
        facts: Facts that differ from :data:`FACTS` on every host (a new kernel).
        host_env: Noise settings that differ from :data:`HOST_ENV`.
        seconds: Each run's duration in seconds (before a small random spread).
        before_run_s: What each run's before_run actions took in all, in seconds (before
            a random spread: 0.5 to 2 times).
    """

    label: str | None = None
    shift: float | dict[str, float] = 0.0
    spec: str | None = None
    failed: Iterable[int] = ()
    failed_cells: Iterable[dict[str, Any]] = ()
    pending: int = 0
    facts: dict[str, Any] = field(default_factory=dict)
    host_env: dict[str, Any] = field(default_factory=dict)
    seconds: float = 1.0
    before_run_s: float = 0.005


@dataclass
class Made:
    """What the factory made: the project root, the spec file and the experiment's results."""

    root: Path
    spec_path: Path
    exp: Path
    ids: list[str]

    def campaign_dir(self, index: int) -> Path:
        """The directory of the ``index``-th campaign made (the last one is the current one)."""
        cid = self.ids[index]
        return self.exp if read_meta(self.exp).get("id") == cid else self.exp / layout.CAMPAIGNS_DIR / cid


def project_root(root: Path, inventory_hosts: Iterable[str] = ("localhost",)) -> Path:
    """A minimal project at ``root``: config/experiments/ and config/config.yaml from the
    repository, and an inventory naming ``inventory_hosts`` (nothing connects to them)."""
    repo = Path(__file__).resolve().parent.parent
    (root / "config" / "experiments").mkdir(parents=True, exist_ok=True)
    (root / "config" / "inventory").mkdir(parents=True, exist_ok=True)
    if (repo / "config" / "config.yaml").is_file():
        shutil.copy2(repo / "config" / "config.yaml", root / "config" / "config.yaml")
    hosts = "".join(f"    {h}:\n      ansible_connection: local\n" for h in inventory_hosts)
    (root / "config" / "inventory" / "test.yml").write_text(f"all:\n  hosts:\n{hosts}")
    return root


def make_experiment(root: Path, spec_text: str | None = None, campaigns: Iterable[Campaign] = (Campaign(),), *,
                    name: str = "synth", hosts: Iterable[str] = ("localhost",), seed: int = 1, cv: float = 0.02,
                    means: Callable[[dict[str, Any], str], float] | None = None,
                    metrics: dict[str, str] | None = None, batch_max_runs: int = 10,
                    start: datetime | None = None, render: bool = False) -> Made:
    """Make an experiment's results under ``root/results/NAME`` as ``bmx run`` would, one
    call per campaign (the last one is the current campaign).

    Args:
        root: The project directory (made by :func:`project_root` when it has no config/).
        spec_text: The spec (default :data:`SPEC` with ``name``), written to
            ``config/experiments/NAME.yaml``.
        campaigns: The campaigns, in the order they run.
        hosts: The hosts every campaign runs on.
        seed: Seeds every value drawn (means, noise, durations).
        cv: The runs' coefficient of variation around their cell's mean.
        means: ``means(factors, metric)`` -> the cell's mean; drawn between 50 and 150 when None.
        metrics: ``{metric: unit}``; the spec's declared metrics by default, else the
            workload's catalogue's first metric.
        batch_max_runs: Runs per batch (plan.csv's batches).
        start: When the first campaign starts (its runs' times follow one another).
        render: Also render report.html and report.md (slow: plots).

    Returns:
        The root, spec file, results directory and the campaigns' ids in order.
    """
    root = Path(root)
    if not (root / "config").is_dir():
        project_root(root, hosts)
    spec_path = root / "config" / "experiments" / f"{name}.yaml"
    spec_path.write_text(spec_text if spec_text is not None else SPEC.format(name=name))
    rng = random.Random(seed)
    hosts = list(hosts)
    clock = start or datetime.fromisoformat("2026-01-05T09:00:00+00:00")
    drawn: dict[tuple[str, str], float] = {}
    ids, exp = [], None
    for campaign in campaigns:
        if campaign.spec is not None:
            spec_path.write_text(campaign.spec)
        spec = load_spec(spec_path)
        exp = layout.exp_dir_of(root, spec)
        exp.mkdir(parents=True, exist_ok=True)
        what, _ = start_campaign(exp, spec, campaign.label)
        if what == "continue" and (exp / layout.PLAN).is_file():
            raise ValueError(f"campaign {campaign.label!r} would continue the current one: give it a label")
        runs = _plan(spec, exp, hosts, batch_max_runs)
        update_meta(exp, created_at=clock.isoformat(timespec="microseconds"))
        units = metrics or _metric_units(spec)

        def mean(factors: dict[str, Any], metric: str) -> float:
            key = (json.dumps(factors, sort_keys=True, default=str), metric)
            if key not in drawn:
                drawn[key] = means(factors, metric) if means else rng.uniform(50, 150)
            return drawn[key]

        clock = _record_runs(spec, exp, runs, campaign, units, mean, rng, cv, clock)
        _side_files(spec, exp, runs, clock)
        collect(str(spec_path), root, exp / layout.PLAN, render=render)
        ids.append(read_meta(exp)["id"])
        clock += timedelta(hours=1)
    assert exp is not None, "no campaign given"
    return Made(root, spec_path, exp, ids)


def _plan(spec: Spec, exp: Path, hosts: list[str], batch_max_runs: int) -> list[PlannedRun]:
    """The plan rule's writes (benchmatrix/execute/planning.py) for these hosts, without
    resolving an inventory."""
    runs = make_plan(spec, hosts, batch_max_runs)
    update_meta(exp, spec_digest=spec.digest)
    atomic_write(exp / layout.SPEC, json.dumps(spec.data, sort_keys=True, default=str, indent=1) + "\n")
    atomic_write(exp / layout.PLAN, plan_csv_text(runs, spec.factor_names))
    return runs


def _side_files(spec: Spec, exp: Path, runs: list[PlannedRun], clock: datetime) -> None:
    """What else a ``bmx run`` leaves: the experiment lock, the jobs' logs and each
    host's restored.json (the restore at the campaign's end)."""
    (exp / layout.LOCK).touch()
    logs = exp / layout.LOGS_DIR
    for name in ("snakemake.log", "plan.log", "collect.log"):
        atomic_write(logs / name, f"synthetic campaign of {spec.name} (tests/campaign_factory.py)\n")
    for batch in dict.fromkeys(r.batch for r in runs):
        atomic_write(layout.ansible_log(exp, batch), f"PLAY [Run a batch of {spec.name}] synthetic\n")
        atomic_write(layout.batch_log(exp, batch), f"batch {batch}: synthetic\n")
    for host in sorted({r.host for r in runs}):
        atomic_write(layout.host_file(exp, host, layout.RESTORED), json.dumps(
            {"host": host, "restored_at": clock.isoformat(timespec="microseconds"),
             "knobs": {}}, indent=1) + "\n")


def _metric_units(spec: Spec) -> dict[str, str]:
    declared = spec.workload.get("metrics") or {}
    if declared:
        return {m: str((d or {}).get("unit", "")) for m, d in declared.items()}
    catalogue = WORKLOADS[spec.workload["role"]].metrics
    first = next(iter(catalogue))
    unit = catalogue[first]
    return {first: unit if isinstance(unit, str) else getattr(unit, "unit", "")}


def _argv(spec: Spec, run: PlannedRun, host: str, factors: dict[str, Any], root: str) -> list[str] | None:
    """The run's command as its workload role builds it (the descriptor's ``command``,
    from the variables rendered for the run as the batch's manifest renders them)."""
    ctx = {**factors, "experiment": spec.name, "host": host, "run_id": run.run_id, "cell_id": run.cell_id,
           "replicate": run.replicate, "warmup": run.warmup}
    entry = {"run_id": run.run_id, "cell_id": run.cell_id, "factors": factors,
             "vars": render_vars(spec.workload.get("vars") or {}, ctx)}
    workload = WORKLOADS.get(spec.workload["role"])
    if workload is None or workload.command is None:
        return None
    argv = workload.command(entry, workload.binary or "tool", root).get("argv")
    return [str(a) for a in argv] if argv else None


def _knob_states(spec: Spec, factors: dict[str, Any], first: bool) -> dict[str, Any]:
    """Every knob at its intended value, as the runner reads it back."""
    return {f: {"role": k.role, "intended": str(factors.get(f)), "actual": str(factors.get(f)),
                "changed": first, "baseline": "DEFAULT", "rebooted": False, "seconds": 0.01, "ok": True}
            for f, k in (spec.knobs or {}).items()}


# shape: the campaign's spec, paths, plan and generator, as one batch job has them
def _record_runs(spec: Spec, exp: Path, runs: list[PlannedRun], campaign: Campaign, units: dict[str, str],
                 mean: Callable[[dict[str, Any], str], float], rng: random.Random, cv: float,
                 clock: datetime) -> datetime:
    """Record every planned run batch by batch as the batch job does: records, the
    batch's rows and notes, its marker last; facts.json per host first."""
    cells = cells_by_id(spec)
    failed = set(campaign.failed)
    facts = {}
    for host in sorted({r.host for r in runs}):
        facts[host] = {k: (v.format(host=host) if isinstance(v, str) else v) for k, v in FACTS.items()}
        facts[host].update(campaign.facts, facts_from="gathered", inventory_name=host,
                           gathered_at=clock.isoformat(timespec="microseconds"))
        atomic_write(layout.host_file(exp, host, layout.FACTS), json.dumps(facts[host], indent=1) + "\n")
    measured = [r for r in runs if not r.warmup and not r.control]
    fails = {measured[i].run_id for i in failed if i < len(measured)}
    unrun = {r.run_id for r in runs[len(runs) - campaign.pending:]} if campaign.pending else set()
    by_batch: dict[str, list[PlannedRun]] = {}
    for r in runs:
        by_batch.setdefault(r.batch, []).append(r)
    host_clock = {h: clock for h in facts}
    end = clock
    for batch, mine in by_batch.items():
        host = mine[0].host
        t = host_clock[host]
        batch_started = t.isoformat(timespec="microseconds")
        records = []
        for i, r in enumerate(r for r in mine if r.run_id not in unrun):
            factors = cells[r.cell_id]
            took = round(campaign.seconds * rng.uniform(0.9, 1.1), 6)
            before = round(campaign.before_run_s * rng.uniform(0.5, 2.0), 6)
            started, t = t + timedelta(seconds=before), t + timedelta(seconds=before + took + 0.05)
            rec = base_record(spec, r, host, batch, factors, facts[host])
            rec.update(
                status="ok", exit_code=0, started_at=started.isoformat(timespec="microseconds"),
                ended_at=(started + timedelta(seconds=took)).isoformat(timespec="microseconds"),
                duration_s=took, batch_started_at=batch_started,
                phases={"before_run_s": before, "workload_s": took, "parse_s": 0.0001,
                        "batch_overhead_share_s": 0.01},
                workload={"role": spec.workload["role"], "argv": _argv(spec, r, host, factors, str(exp.parent)),
                          "before_run": [{"action": a, "seconds": before / max(len(spec.before_run), 1),
                                          "error": None} for a in spec.before_run],
                          "affinity": None, "affinity_applied": None},
                knobs=_knob_states(spec, factors, i == 0),
                raw={"stdout": f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}/stdout",
                     "stderr": f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}/stderr"},
                log=f"{layout.LOGS_DIR}/ansible/{batch}.log",
                host_env={**HOST_ENV, **campaign.host_env, "load_before": round(rng.uniform(0, 0.3), 2),
                          "load_after": round(rng.uniform(0, 0.3), 2)})
            if r.run_id in fails or any(all(str(factors.get(k)) == str(v) for k, v in cell.items())
                                        for cell in campaign.failed_cells):
                rec.update(status="failed", exit_code=1, reason="exit status 1 (expected 0): synthetic failure")
            else:
                rec["metrics"] = {m: {"value": _value(mean(factors, m), campaign.shift, m, cv, rng), "unit": u}
                                  for m, u in units.items()}
            records.append(rec)
        paths = write_records(exp, records)
        for path in paths:  # what the runner's archive leaves beside each record
            metrics = json.loads(path.read_text())["metrics"]
            (path.parent / "stdout").write_text("".join(f"{m}={v['value']:.4f}\n" for m, v in metrics.items()))
            (path.parent / "stderr").write_text("")
        host_clock[host] = t
        end = max(end, t)
        if any(r.run_id in unrun for r in mine):
            continue  # the batch job did not finish: no rows file, no marker
        summary = {"batch": batch, "host": host, "runs": len(mine), "executed": len(mine), "already_done": 0,
                   "slices": 1}
        summary.update(write_batch_rows(exp, batch, records, spec.factor_names))
        atomic_write(exp / layout.BATCHES_DIR / f"{batch}{MARKER_SUFFIX}", json.dumps(summary) + "\n")
    return end


def _value(mean: float, shift: float | dict[str, float], metric: str, cv: float, rng: random.Random) -> float:
    moved = mean * (1 + (shift.get(metric, 0.0) if isinstance(shift, dict) else shift))
    return round(max(moved * (1 + rng.gauss(0, cv)), moved * 0.01), 6)
