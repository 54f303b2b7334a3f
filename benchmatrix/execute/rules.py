"""The work behind each Snakemake rule (scripts/*.py are thin entry points).

Each function takes plain paths, so it can be unit-tested without Snakemake, and
raises typed errors; the ``*_main`` wrappers print the one-line message and exit 1.
"""

from __future__ import annotations

import argparse
import errno
import functools
import hashlib
import io
import json
import shutil
import signal
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

import benchmatrix
from benchmatrix import layout
from benchmatrix.errors import AnsibleError, BenchmatrixError, HostUnreachableError, Interrupted, ParseError, PlanError
from benchmatrix.execute.ansible import WHOLE_CALL, run_playbook
from benchmatrix.execute.hosts import resolve_hosts
from benchmatrix.execute.lock import same_file
from benchmatrix.files import atomic_write
from benchmatrix.layout import exp_dir_of, record_path, run_dir
from benchmatrix.plan.design import (
    DEFAULT_BATCH_MAX_RUNS,
    DEFAULT_BATCH_MAX_SECONDS,
    PlannedRun,
    assign_batches,
    make_plan,
    plan_csv_text,
    read_plan,
    run_estimates,
)
from benchmatrix.plan.reruns import append_round, plan_reruns, read_reruns
from benchmatrix.results.batch_rows import write_batch_rows
from benchmatrix.results.campaign import campaign_id, mark_progress_from_tables, update_meta
from benchmatrix.results.records import iter_records, runs_rows, write_records
from benchmatrix.spec.load import REBOOT_ROLES, Spec, load_spec, render_vars

PACKAGE_DIR = Path(benchmatrix.__file__).resolve().parent
#: The batch runner that prepare_host installs on every host (stdlib only).
RUNNER_PATH = PACKAGE_DIR / "host" / "batch_runner.py"
#: batch_runner's task that waits for a batch's runs: the batch job's Ansible start
#: phase (its start slot, execute.ansible.start_slot) ends when it starts.
RUN_TASK = "Run the batch"


@functools.cache
def runner_digest() -> str:
    """SHA-256 of the batch runner: a batch replaces a copy on its host that differs."""
    return hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest()


def iso(ts: float | None) -> str | None:
    """Epoch seconds -> ISO 8601 UTC with microseconds."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="microseconds")


# ---------------------------------------------------------------- plan

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


# ---------------------------------------------------------------- hosts

def _workload(role: str) -> Any:
    """The role's descriptor (benchmatrix.workloads.WORKLOADS), or None for a role it lacks."""
    from benchmatrix.workloads import WORKLOADS

    return WORKLOADS.get(role)


def host_cache_path(project_dir: Path, host: str, role: str) -> Path:
    """The facts benchmatrix keeps of a host across campaigns and experiments, per workload role."""
    return Path(project_dir) / "results" / ".hosts" / host / f"{role}.json"


def prepare_host(spec_path: str, project_dir: Path, host: str, out: Path, log: Path) -> dict[str, Any]:
    """Install the batch runner, report the host's facts (write facts.json).

    A host seen before (``results/.hosts/HOST/ROLE.json``) whose fingerprint (boot
    id, kernel, CPUs, memory, package databases, the workload path's file system) is
    unchanged keeps its facts, with its CPU, SMT and block-device state read again;
    only a new or changed host gets full fact gathering, device probing and, for the
    workload tool, the install check (also run while the tool's version is unknown,
    and always for roles that start services).
    """
    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    role = spec.workload["role"]
    cache_path = host_cache_path(project_dir, host, role)
    try:
        cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    except (OSError, ValueError):
        cache = {}  # an unreadable cache only costs a full gathering
    known = cache.get("facts") or {}
    workload = _workload(role)
    result = run_playbook(
        "prepare_host.yml", project_dir=Path(project_dir) / "playbooks",
        inventory=spec.inventory_path(project_dir), host=host,
        data={"bmx_cached_fingerprint": cache.get("fingerprint", "") if known else "",
              "bmx_cached_state_files": cache.get("state_files", []) if known else []},
        extravars={"bmx_host": host, "bmx_workload_role": role, "bmx_experiment": spec.name,
                   "bmx_campaign": campaign_id(exp), "batch_runner_source": str(RUNNER_PATH),
                   # "" is a known version: a command that declares no version command. A role
                   # whose install.yml only installs the tool (install_once) is skipped on a known host.
                   "bmx_install_always": not getattr(workload, "install_once", False)
                   or known.get("tool_version") is None,
                   # The host variables that hold the workload's directory and whether its
                   # finish.yml has work there (the descriptor's directory_var and cleanup_var).
                   "bmx_workload_directory_var": getattr(workload, "directory_var", ""),
                   "bmx_workload_cleanup_var": getattr(workload, "cleanup_var", "")},
        # All setup, no runs: its slot is held to its end, so that many hosts do not all
        # gather facts at once (the controller's memory peak with 16 hosts).
        log=exp / "logs" / "ansible" / f"prepare-{host}.log", start_until=WHOLE_CALL)
    published = result.payload("bmx_facts")
    if published["gathered"]:
        facts = dict(published["facts"])
        entry = {"fingerprint": published["fingerprint"], "state_files": published["state_files"],
                 "facts": dict(facts)}
        if entry["fingerprint"]:
            atomic_write(cache_path, json.dumps(entry, indent=1) + "\n")
        facts["facts_from"] = "gathered"
    else:
        facts = {**known, **published["facts"], "facts_from": "cache"}
    facts["inventory_name"] = host
    facts["gathered_at"] = iso(time.time())
    atomic_write(out, json.dumps(facts, indent=1) + "\n")
    return facts


# ---------------------------------------------------------------- batches

def _cells_by_id(spec: Spec) -> dict[str, dict[str, Any]]:
    cells = {c.cell_id: c.factors for c in spec.cells}
    ctl = spec.control_cell()
    if ctl is not None:
        cells[ctl.cell_id] = ctl.factors
    return cells


def _parser_for(role: str) -> Callable[[str], Any]:
    workload = _workload(role)
    if workload is None:
        raise BenchmatrixError(f"workload role {role} has no parser")
    return workload.parse


def _error_lines(path: Path) -> str:
    """A failed tool's first stderr line (where tools name the error: ``fio: unrecognized
    option ...``) and, when it differs, its last (often the hint or the summary)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return ""
    if not lines:
        return ""
    first, last = lines[0][:300], lines[-1][:300]
    return first if len(lines) == 1 or first == last else f"{first} ... {last}"


def _judge(spec: Spec, res: dict[str, Any], stdout: str, stderr_path: Path,
           parse: Callable[[str], Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """Status, reason, metrics and per-job metrics of one finished run."""
    outcome = res.get("outcome")
    if outcome == "interrupted":
        return "interrupted", res.get("error") or "interrupted", {}, {}
    if outcome == "timeout":
        return "timeout", res.get("error") or "timeout", {}, {}
    if outcome != "exited":
        return "failed", res.get("error") or f"runner outcome {outcome}", {}, {}
    want = spec.workload["success"].get("exit_code", 0)
    if res.get("exit_code") != want:
        tail = _error_lines(stderr_path)
        return "failed", f"exit status {res.get('exit_code')} (expected {want})" + (f": {tail}" if tail else ""), {}, {}
    from benchmatrix.workloads import check_success, load_counters

    run_files = stderr_path.parent  # stdout, stderr, counters.json, inputs/ of the run
    try:
        parsed = parse(stdout, spec.workload, run_files)
    except ParseError as exc:
        return "failed", f"parse error: {exc}", {}, {}
    metrics = {k: {"value": v, "unit": u} for k, (v, u) in parsed.metrics.items()}
    jobs = {j: {k: {"value": v, "unit": u} for k, (v, u) in m.items()} for j, m in parsed.jobs.items()}
    extra = dict(parsed.extra or {})
    details: dict[str, Any] = {"jobs": jobs, **{k: v for k, v in extra.items() if k != "jobs"}}
    if "jobs" in extra:  # fio: each job's group, runtime, start and end
        details["job_timing"] = extra["jobs"]
    if parsed.groups:
        details["groups"] = {g: {k: {"value": v, "unit": u} for k, (v, u) in m.items()}
                             for g, m in parsed.groups.items()}
    warnings = list(parsed.warnings)
    try:
        counters = load_counters(run_files)
    except ParseError as exc:
        counters = None
        warnings.append(f"system counters not usable: {exc}")
    if counters is not None:
        for k, (v, u) in counters.metrics.items():
            metrics.setdefault(k, {"value": v, "unit": u})
        details["counters"] = counters.extra
    if res.get("affinity"):
        details["affinity"] = res["affinity"]
    if warnings:
        details["warnings"] = warnings
    stderr_text = stderr_path.read_text(errors="replace") if stderr_path.is_file() else ""
    problems = check_success(spec.workload.get("success"), stdout, stderr_text, metrics)
    if problems:
        return ("failed", "success criteria not met: " + "; ".join(problems), {},
                {**details, "rejected_metrics": metrics})
    return "ok", "", metrics, details


def _rel(path: Path | str, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base))
    except ValueError:
        return str(path)


def _base_record(spec: Spec, r: PlannedRun, host: str, batch: str, factors: dict[str, Any],
                 facts: dict[str, Any]) -> dict[str, Any]:
    """The fields every record of a run attempt has, whatever its outcome."""
    return {
        "schema_version": benchmatrix.RECORD_SCHEMA_VERSION,
        "benchmatrix_version": benchmatrix.__version__,
        "experiment": spec.name, "spec_digest": spec.digest,
        "run_id": r.run_id, "attempt": r.attempt, "seq": r.seq, "host": host,
        "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup, "control": r.control,
        "visit": r.visit, "batch": batch, "factors": factors,
        "status": None, "reason": "", "exit_code": None, "started_at": None, "ended_at": None,
        "duration_s": None, "phases": {}, "workload": {"role": spec.workload["role"]},
        "knobs": {}, "host_facts": facts, "metrics": {}, "details": {}, "raw": {}, "log": "",
    }


def run_batch(spec_path: str, project_dir: Path, plan_path: Path, batch: str, marker: Path,
              log: Path, facts_path: Path | None = None) -> dict[str, Any]:
    """Execute one batch through Ansible and write a record.json per finished run.

    Runs that already have a record are left out; if none is left, no Ansible call
    is made. The marker (the Snakemake output) is written last.

    Whatever makes the job fail after Ansible touched the host (a template error, a
    missing archive, any OSError such as a full disk), the host's knobs are put back
    to their baseline before the error propagates: its later batches cannot run (they
    wait on this one's marker), so its campaign-end restore would never come.

    Raises:
        BenchmatrixError: one line; an OSError becomes one naming the path (and the
            free space when the disk is full).
    """
    touched: dict[str, Any] = {"partial": []}
    try:
        return _execute_batch(spec_path, project_dir, plan_path, batch, marker, touched, facts_path)
    except Interrupted:
        raise  # the interrupt path already stopped the runner and restored the host
    except Exception as exc:
        msg = ""
        if isinstance(exc, OSError):  # described before the cleanup frees space
            where = None if exc.filename else exp_dir_of(project_dir, touched["spec"]) if "spec" in touched else None
            msg = f"batch {batch}: {describe_os_error(exc, where)}"
        _remove_partial(touched)
        if "host" in touched:
            _restore_quietly(touched["spec"], project_dir, touched["host"])
        if msg:
            raise BenchmatrixError(msg) from None
        raise


def _remove_partial(touched: dict[str, Any]) -> None:
    """After a failed batch job: remove its staging directory and every run directory it
    began to fill without writing the record (a full disk leaves truncated copies).

    The runs' results stay on the host, so the next execution of the batch fetches them.
    """
    if "staging" in touched:
        shutil.rmtree(touched["staging"], ignore_errors=True)
        try:
            touched["staging"].parent.rmdir()  # .staging itself, unless another batch uses it
        except OSError:
            pass
    for dest in touched["partial"]:
        if not (dest / layout.RECORD).is_file():
            shutil.rmtree(dest, ignore_errors=True)


def describe_os_error(exc: OSError, where: Path | None = None) -> str:
    """One line for an OSError: the path, the reason, and the free space when full.

    Args:
        where: The directory to name when the error carries no file name (a failed
            write() names none).
    """
    reason = exc.strerror or str(exc)
    msg = f"{exc.filename}: {reason}" if exc.filename else f"writing under {where}: {reason}" if where else reason
    path = exc.filename or (str(where) if where else "")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        probe = Path(path or ".").resolve()
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            usage = shutil.disk_usage(probe)
            msg += (f" ({usage.free / 2**20:.1f} MiB free of {usage.total / 2**20:.1f} MiB "
                    f"on the file system of {probe})")
        except OSError:
            pass
    return msg


def _execute_batch(spec_path: str, project_dir: Path, plan_path: Path, batch: str, marker: Path,
                   touched: dict[str, Any], facts_path: Path | None = None) -> dict[str, Any]:
    """The body of :func:`run_batch`; fills ``touched`` once Ansible may change the host."""
    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    runs, _ = read_plan(plan_path)
    mine = [r for r in runs if r.batch == batch]
    if not mine:
        raise PlanError(f"{plan_path}: no runs in batch {batch}; re-plan with 'bmx plan'")
    host = mine[0].host
    if (exp / layout.HOSTS_DIR / host / layout.BASELINE).is_file():
        touched.update(spec=spec, host=host)  # an earlier batch reconfigured the host
    todo = [r for r in mine if not record_path(exp, r.run_id, r.attempt).is_file()]
    summary: dict[str, Any] = {"batch": batch, "host": host, "runs": len(mine), "executed": 0,
                               "already_done": len(mine) - len(todo), "slices": 0}
    records: list[dict[str, Any]] = []
    if todo:
        cells = _cells_by_id(spec)
        facts = json.loads(Path(facts_path).read_text()) if facts_path and Path(facts_path).is_file() else {}
        wl = spec.workload
        bmx_runs: dict[str, dict[str, Any]] = {}  # run_id -> its manifest entry
        for r in todo:
            if r.cell_id not in cells:
                raise PlanError(f"{plan_path}: cell {r.cell_id} of run {r.run_id} is not in the spec; re-plan")
            ctx = {**cells[r.cell_id], "experiment": spec.name, "host": host, "run_id": r.run_id,
                   "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup}
            try:
                rendered = render_vars(wl["vars"], ctx)
            except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, AttributeError) as exc:
                raise BenchmatrixError(f"{spec.path}: workload.vars cannot be rendered for run {r.run_id} "
                                       f"({', '.join(f'{k}={v}' for k, v in cells[r.cell_id].items())}): "
                                       f"{type(exc).__name__}: {exc}") from None
            bmx_runs[r.run_id] = {"run_id": r.run_id, "attempt": r.attempt, "seq": r.seq,
                                  "timeout": wl["timeout"], "before_run": spec.before_run,
                                  "vars": rendered, "factors": cells[r.cell_id],
                                  "collect": spec.collect}
        touched.update(spec=spec, host=host)  # from here on, Ansible may change the host
        slice_s = slice_seconds(project_dir)
        left = todo
        # One lease for the whole batch: its renewals (and progress reads) go on across
        # the slices.
        with _lease(spec, project_dir, host, batch):
            while left:
                new, left = _run_slice(spec, project_dir, exp, host, batch, left, bmx_runs, cells, facts,
                                       slice_s, touched, summary)
                records += new
    return _finish_batch(exp, spec, batch, mine, records, marker, summary)


def _run_slice(spec: Spec, project_dir: Path, exp: Path, host: str, batch: str, todo: list[PlannedRun],
               bmx_runs: dict[str, dict[str, Any]], cells: dict[str, dict[str, Any]], facts: dict[str, Any],
               slice_s: float, touched: dict[str, Any],
               summary: dict[str, Any]) -> tuple[list[dict[str, Any]], list[PlannedRun]]:
    """One Ansible call of a batch: the runner executes ``todo`` in order until its time
    slice (``slice_s`` seconds, :func:`slice_seconds`) is over; the finished runs'
    records are written (one sync) before the next slice starts.

    Returns:
        (the records written, the runs left for the next slice).
    """
    wl = spec.workload
    summary["slices"] += 1
    staging = exp / ".staging" / batch  # the fetched archive, unpacked; removed after
    touched["staging"] = staging
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    t0 = time.time()
    batch_log = exp / "logs" / "ansible" / f"{batch}.log"
    try:
        result = run_playbook(
            "run_batch.yml", project_dir=Path(project_dir) / "playbooks",
            inventory=spec.inventory_path(project_dir), host=host,
            # One JSON text: Ansible neither checks nor templates it run by run (the
            # workload role's filter decodes it, the runner decodes the commands).
            data={"bmx_runs": json.dumps([bmx_runs[r.run_id] for r in todo]),
                  "bmx_knobs": _knob_items(spec, cells[todo[0].cell_id])},
            extravars={"bmx_host": host, "bmx_workload_role": wl["role"], "bmx_experiment": spec.name,
                       "bmx_campaign": campaign_id(exp),
                       "batch_runner_source": str(RUNNER_PATH), "batch_runner_digest": runner_digest(),
                       "batch_runner_lease_seconds": int(lease_seconds(project_dir)),
                       "bmx_allow_reboot": spec.allow_reboot,
                       "batch_runner_batch": batch, "batch_runner_fetch_dir": str(staging),
                       "batch_runner_stop_after_s": slice_s,
                       "batch_runner_timeout": int(sum(wl["timeout"] + 30 for _ in todo) + 60)},
            log=batch_log, start_until=RUN_TASK)
    except (KeyboardInterrupt, Interrupted):
        stop_runner(spec, project_dir, host)
        _restore_quietly(spec, project_dir, host)
        raise Interrupted(f"batch {batch} interrupted; the runner on {host} was stopped, "
                          "its finished runs are kept there for the next 'bmx run'") from None
    except AnsibleError as exc:
        # Keep going: the batch's runs are recorded as failed (or unreachable) with the
        # reason and the log, and the other batches go on. `bmx rerun --failed` retries.
        status = "unreachable" if isinstance(exc, HostUnreachableError) else "failed"
        records = [_base_record(spec, r, host, batch, cells[r.cell_id], facts) | {
            "status": status, "reason": str(exc).splitlines()[0][:500], "failed_task": exc.task,
            "log": _rel(exc.log or batch_log, exp), "batch_started_at": iso(t0)} for r in todo]
        write_records(exp, records)
        summary["executed"] += len(todo)
        summary["error"] = str(exc)
        shutil.rmtree(staging, ignore_errors=True)
        return records, []
    knob_states = result.payload("bmx_knobs")
    save_baseline(exp, host, spec, knob_states)
    wrong = {f: k for f, k in knob_states.items() if not k.get("ok")}
    if wrong:
        # The host is not in the configuration the runs would claim: nothing ran.
        reason = "; ".join(f"knob {f}: intended {k['intended']!r}, actual {k['actual']!r}"
                           for f, k in wrong.items())
        records = [_base_record(spec, r, host, batch, cells[r.cell_id], facts) | {
            "status": "invalid", "reason": reason, "knobs": knob_states,
            "log": _rel(batch_log, exp), "batch_started_at": iso(t0)} for r in todo]
        write_records(exp, records)
        summary["executed"] += len(todo)
        summary["error"] = reason
        shutil.rmtree(staging, ignore_errors=True)
        return records, []
    # A host reached with the local connection is the controller itself: the archive
    # is read where the runner left it (batch_runner's archive_in_place), else fetched.
    archive = Path(result.payload("bmx_archive")["path"])
    # The archive's files go straight to the runs' directories (no unpacked copy to
    # remove afterwards: a few file operations less per run).
    results = _unpack_runs(archive, exp, todo, touched)
    parse = _parser_for(wl["role"])
    workload_total = sum(res.get("duration_s") or 0.0 for res in results.values())
    overhead_share = max(result.seconds - workload_total, 0.0) / max(len(results), 1)
    resume = []
    records: list[dict[str, Any]] = []
    first = True  # a knob change happened before the slice's first run only
    log_rel = _rel(batch_log, exp)
    for r in todo:
        res = results.get(r.run_id)
        if res is None:
            continue
        dest = run_dir(exp, r.run_id, r.attempt)
        rel = f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}"  # as _rel would give, without resolving paths
        stdout = (dest / "stdout").read_text(errors="replace")
        p0 = time.monotonic()
        status, reason, metrics, details = _judge(spec, res, stdout, dest / "stderr", parse)
        parse_s = time.monotonic() - p0
        # What the runner had to kill after the workload (a timeout, or leftovers).
        details.update({k: res[k] for k in ("killed", "survivors", "containment") if res.get(k)})
        if status == "interrupted":
            resume.append((r.run_id, r.attempt + 1))
        record = _base_record(spec, r, host, batch, cells[r.cell_id], facts) | {
            "status": status, "reason": reason, "exit_code": res.get("exit_code"),
            "started_at": iso(res.get("started_at")), "ended_at": iso(res.get("ended_at")),
            "duration_s": res.get("duration_s"),
            "phases": {"before_run_s": sum(a["seconds"] for a in res.get("before_run") or []),
                       "workload_s": res.get("duration_s"), "parse_s": round(parse_s, 6),
                       "batch_overhead_share_s": round(overhead_share, 6)},
            "workload": {"role": wl["role"], "argv": res.get("argv"), "before_run": res.get("before_run"),
                         "affinity": res.get("affinity"), "affinity_applied": res.get("affinity_applied")},
            "metrics": metrics,
            "details": details,
            # A change happened before the slice's first run only.
            "knobs": {f: {**k, "changed": bool(k.get("changed")) and first}
                      for f, k in knob_states.items()},
            "raw": {"stdout": f"{rel}/stdout", "stderr": f"{rel}/stderr"},
            "log": log_rel,
            "batch_started_at": iso(t0),
            # The host's noise settings at the batch's start and its load around this run.
            "host_env": {**(res.get("host_env") or {}), "load_before": res.get("load_before"),
                         "load_after": res.get("load_after")},
        }
        records.append(record)
        first = False
        summary["executed"] += 1
    # One sync for the slice; each record is still renamed into place complete.
    write_records(exp, records)
    if resume:
        # An interrupted run is resumed as its next attempt by the next `bmx run`.
        append_round(exp, resume, "interrupted")
    shutil.rmtree(staging, ignore_errors=True)
    # The runner stopped at the end of its time slice: the rest is the next slice.
    # (A slice that brought nothing back ends the loop: no endless retries.)
    return records, [r for r in todo if r.run_id not in results] if results else []


#: What a run's directory in a batch archive may hold (the runner's layout); nothing
#: else in the archive is unpacked.
_RUN_FILES = frozenset({"stdout", "stderr", "counters.json"})


def _unpack_runs(archive: Path, exp: Path, todo: list[PlannedRun], touched: dict[str, Any]) -> dict[str, Any]:
    """Unpack a batch archive's runs into their run directories; returns their
    result.json contents by run id (read, not written: the record replaces it).

    Only the files of ``todo``'s attempts are taken (``runs/RUN_ID/ATTEMPT/`` with
    stdout, stderr, counters.json and inputs/NAME, regular files only), so no member
    can land anywhere else. Each directory is noted in ``touched["partial"]`` first:
    a failure removes the ones without a record.
    """
    wanted = {f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}": r for r in todo}
    results: dict[str, Any] = {}
    made: set[str] = set()
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                parts = member.name.split("/")
                run = wanted.get("/".join(parts[:3]))
                rest = parts[3:]
                if run is None or not member.isfile() or not (
                        (len(rest) == 1 and rest[0] in _RUN_FILES | {"result.json"})
                        or (len(rest) == 2 and rest[0] == "inputs" and rest[1] not in ("", ".", ".."))):
                    continue
                fh = tar.extractfile(member)
                assert fh is not None  # a regular file
                if rest == ["result.json"]:
                    results[run.run_id] = json.loads(fh.read())
                    continue
                dest = run_dir(exp, run.run_id, run.attempt)
                if run.run_id not in made:
                    touched["partial"].append(dest)
                    made.add(run.run_id)
                    dest.mkdir(parents=True, exist_ok=True)
                target = dest.joinpath(*rest)
                if len(rest) > 1:
                    target.parent.mkdir(exist_ok=True)
                with open(target, "wb") as out:
                    shutil.copyfileobj(fh, out)
    except OSError as exc:
        exc.filename = exc.filename or str(exp)  # a failed write() names no file
        raise
    for run in todo:  # a run without output files still gets its directory
        if run.run_id in results and run.run_id not in made:
            touched["partial"].append(run_dir(exp, run.run_id, run.attempt))
            run_dir(exp, run.run_id, run.attempt).mkdir(parents=True, exist_ok=True)
    return results


def _finish_batch(exp: Path, spec: Spec, batch: str, mine: list[PlannedRun], records: list[dict[str, Any]],
                  marker: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Write the batch's runs rows and record notes, then its marker (last).

    ``records`` are those this job wrote; the batch's other attempts (finished by an
    earlier, interrupted execution) are read back, so the rows cover the whole batch.
    """
    new = {(r["run_id"], r["attempt"]): r for r in records}
    ordered = []
    for r in mine:
        rec = new.get((r.run_id, r.attempt))
        if rec is None:
            path = record_path(exp, r.run_id, r.attempt)
            if not path.is_file():
                continue  # e.g. a run the runner never reached (interrupted): no row yet
            rec = json.loads(path.read_text())
        ordered.append(rec)
    summary.update(write_batch_rows(exp, batch, ordered, spec.factor_names))
    atomic_write(marker, json.dumps(summary) + "\n")
    # The records are in place: what the runner reported while it ran is stale now.
    (exp / "batches" / f"{batch}.progress.json").unlink(missing_ok=True)
    return summary


DEFAULT_LEASE_SECONDS = 300


def slice_seconds(project_dir: Path) -> float:
    """Seconds of execution after which a batch's runner stops for its results to come
    back: config.yaml's ``batch_max_seconds`` (default 300), the time budget the plan
    sizes batches by where run durations are known.

    A batch of runs whose duration is unknown may hold up to ``batch_max_runs`` runs
    (:func:`benchmatrix.plan.design.assign_batches`); the slices keep their results
    from staying on the host for longer than this, whatever the runs take.
    """
    from benchmatrix.spec.load import read_planning_config

    given = read_planning_config(Path(project_dir) / "config" / "config.yaml")["batch_max_seconds"]
    return float(given) if given else DEFAULT_BATCH_MAX_SECONDS


def lease_seconds(project_dir: Path) -> float:
    """config.yaml's ``runner_lease_seconds`` (default 300; 0 turns the lease off)."""
    import yaml

    path = Path(project_dir) / "config" / "config.yaml"
    try:
        value = (yaml.safe_load(path.read_text()) or {}).get("runner_lease_seconds", DEFAULT_LEASE_SECONDS)
    except (OSError, yaml.YAMLError, AttributeError):
        return DEFAULT_LEASE_SECONDS
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise BenchmatrixError(f"{path}: runner_lease_seconds must be a number of seconds >= 0 "
                               f"(0 turns the lease off), not {value!r}")
    return float(value)


@contextmanager
def _lease(spec: Spec, project_dir: Path, host: str, batch: str) -> Iterator[None]:
    """Renew the controller's lease on the batch while it runs on ``host``.

    The batch runner stops before its next run once the lease is older than
    ``runner_lease_seconds``: when the whole controller is gone (machine lost, every
    process killed), nothing is left measuring on the host for hours. A thread renews
    it every quarter lease through a small playbook; a failed renewal is retried. The
    runner takes the lease itself as it starts (the manifest's ``lease_seconds``), so
    the first renewal comes a quarter lease in: a batch shorter than that costs no
    second ansible-playbook at all (on many hosts at once, half the batches' Ansible
    processes, memory and CPU).
    """
    seconds = lease_seconds(project_dir)
    if not seconds:
        yield
        return
    exp = exp_dir_of(project_dir, spec)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(seconds / 4):
            try:
                result = run_playbook(
                    "renew_lease.yml", project_dir=Path(project_dir) / "playbooks",
                    inventory=spec.inventory_path(project_dir), host=host,
                    extravars={"bmx_host": host, "bmx_experiment": spec.name,
                               "bmx_campaign": campaign_id(exp), "batch_runner_batch": batch,
                               "batch_runner_lease_seconds": int(max(seconds, 1))},
                    log=exp / "logs" / "ansible" / f"lease-{batch}.log", timeout=int(seconds) + 60)
                if not stop.is_set():  # the batch's own results may be in already
                    save_progress(exp, batch, host, result.payload("bmx_progress"))
            except (BenchmatrixError, OSError):
                pass  # e.g. the batch's directory is not made yet: the next renewal comes soon

    thread = threading.Thread(target=renew, name=f"lease-{batch}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


def save_progress(exp: Path, batch: str, host: str, slurped: dict[str, Any] | None) -> None:
    """Keep what the runner reported finished (``batches/BATCH.progress`` on the host) as
    ``results/NAME/batches/BATCH.progress.json``, for ``bmx status`` while the batch runs.

    The file goes when the batch's marker is written (its records are then in place).
    """
    import base64

    if not slurped or not slurped.get("content"):
        return
    finished = []
    for line in base64.b64decode(slurped["content"]).decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line the runner is still writing
        if isinstance(item, dict) and "run_id" in item:
            finished.append(item)
    atomic_write(exp / "batches" / f"{batch}.progress.json",
                 json.dumps({"batch": batch, "host": host, "read_at": iso(time.time()), "finished": finished}) + "\n")


def _knob_items(spec: Spec, factors: dict[str, Any]) -> list[dict[str, Any]]:
    """The knobs of a batch as the playbooks take them (``bmx_knobs``)."""
    return _reboots_first([{"factor": f, "role": k.role, "value": factors[f], "vars": k.vars, "cost": k.cost_class}
                           for f, k in spec.knobs.items()])


def _reboots_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Knobs of rebooting roles first, the others in spec order: a reboot undoes live
    settings (CPU hotplug, sysctl, read-ahead) made before it, and their recorded
    state would then be false."""
    return sorted(items, key=lambda item: item["role"] not in REBOOT_ROLES)


def save_baseline(exp: Path, host: str, spec: Spec, knob_states: dict[str, Any]) -> None:
    """Remember each knob's state before the campaign first touched it (first seen wins)."""
    if not knob_states:
        return
    path = Path(exp) / layout.HOSTS_DIR / host / layout.BASELINE
    baseline = json.loads(path.read_text()) if path.is_file() else {}
    new = {f: {"role": k["role"], "value": k["baseline"], "vars": spec.knobs[f].vars if f in spec.knobs else {},
               "cost": spec.knobs[f].cost_class if f in spec.knobs else "none"}
           for f, k in knob_states.items() if f not in baseline and k.get("baseline") not in (None, "")}
    if new:
        atomic_write(path, json.dumps({**baseline, **new}, indent=1) + "\n")


def restore_host(spec: Spec, project_dir: Path, host: str, out: Path | None = None) -> dict[str, Any]:
    """Put the host's knobs back to their baseline and read them back.

    Raises:
        AnsibleError: the host is unreachable or a knob role failed.
        BenchmatrixError: a knob did not return to its baseline.
    """
    exp = exp_dir_of(project_dir, spec)
    path = exp / layout.HOSTS_DIR / host / layout.BASELINE
    baseline = json.loads(path.read_text()) if path.is_file() else {}
    states: dict[str, Any] = {}
    # A workload without anything to clean up and no knob to restore needs no Ansible call.
    if baseline or _needs_cleanup(spec, exp / layout.HOSTS_DIR / host / layout.FACTS):
        knobs = _reboots_first([{"factor": f, "role": b["role"], "value": b["value"], "vars": b.get("vars", {}),
                                 "cost": b.get("cost", "none")} for f, b in baseline.items()])
        result = run_playbook(
            "restore_host.yml", project_dir=Path(project_dir) / "playbooks",
            inventory=spec.inventory_path(project_dir), host=host,
            data={"bmx_knobs": knobs},
            extravars={"bmx_host": host, "bmx_experiment": spec.name,
                       "bmx_workload_role": spec.workload["role"],
                       "bmx_allow_reboot": spec.allow_reboot},
            log=exp / "logs" / "ansible" / f"restore-{host}.log")
        states = result.payload("bmx_knobs")
    summary = {"host": host, "restored_at": iso(time.time()), "knobs": states}
    if out is not None:
        atomic_write(out, json.dumps(summary, indent=1) + "\n")
    wrong = [f"{f}: baseline {k['intended']!r}, actual {k['actual']!r}" for f, k in states.items() if not k.get("ok")]
    if wrong:
        raise BenchmatrixError(f"host {host}: knobs not back at their baseline: {'; '.join(wrong)}")
    return summary


def _needs_cleanup(spec: Spec, facts_path: Path) -> bool:
    """Whether the workload role's finish.yml has work on the host: a role that cleans
    up, unless prepare_host found nothing to undo (facts.json ``workload_cleanup``
    false: the descriptor's ``cleanup_var`` is 0 on the host, fio without its loop file
    system). Without facts, clean up."""
    if not getattr(_workload(spec.workload["role"]), "cleanup", False):
        return False
    try:
        facts = json.loads(facts_path.read_text())
    except (OSError, ValueError):
        return True
    return not (isinstance(facts, dict) and facts.get("workload_cleanup") in (False, "False", "false"))


def _restore_quietly(spec: Spec, project_dir: Path, host: str) -> bool:
    """Restore ``host`` after a failure or an interrupt; a failure to do so is reported, not raised."""
    try:
        done = restore_host(spec, project_dir, host)
    except (BenchmatrixError, OSError) as exc:
        sys.stderr.write(f"benchmatrix: could not restore {host}'s baseline: {exc}\n")
        return False
    knobs = ", ".join(f"{f}={k['actual']}" for f, k in done["knobs"].items())
    sys.stderr.write(f"benchmatrix: host {host} is back at its baseline{' (' + knobs + ')' if knobs else ''}\n")
    return True


def restore_touched_hosts(spec: Spec, project_dir: Path) -> list[str]:
    """After a failed workflow: restore every host a batch touched since its last restore.

    A host counts as touched when it has a recorded baseline (some knob was changed)
    and one of its batch jobs started (its Snakemake log) after its last restore
    (``restored.json``). Called from the Snakefile's ``onerror``, so that both
    ``bmx run`` and a plain ``snakemake`` leave no host reconfigured, whatever failed.

    Returns:
        The hosts it restored.
    """
    from benchmatrix.plan.design import batches

    exp = exp_dir_of(project_dir, spec)
    plan_path = exp / layout.PLAN
    if not plan_path.is_file():
        return []
    order, host_of = batches(plan_path)
    done = []
    for host in sorted(set(host_of.values())):
        if not (exp / layout.HOSTS_DIR / host / layout.BASELINE).is_file():
            continue
        started = [p.stat().st_mtime for b in order if host_of[b] == host
                   for p in [exp / "logs" / "batches" / f"{b}.log"] if p.is_file()]
        restored = exp / layout.HOSTS_DIR / host / layout.RESTORED
        if started and restored.is_file() and restored.stat().st_mtime >= max(started):
            continue
        if _restore_quietly(spec, project_dir, host):
            done.append(host)
    return done


def stop_runner(spec: Spec, project_dir: Path, host: str) -> None:
    """End the batch runner and its workload on ``host`` (after an interrupt).

    ansible-runner starts ansible-playbook in a session of its own, so a Ctrl-C on
    the controller never reaches the host: the runner is stopped explicitly.
    """
    exp = exp_dir_of(project_dir, spec)
    try:
        run_playbook("stop_batch.yml", project_dir=Path(project_dir) / "playbooks",
                     inventory=spec.inventory_path(project_dir), host=host,
                     extravars={"bmx_host": host, "bmx_experiment": spec.name,
                                "bmx_campaign": campaign_id(exp)},
                     log=exp / "logs" / "ansible" / f"stop-{host}.log",
                     timeout=120)
    except AnsibleError as exc:
        sys.stderr.write(f"benchmatrix: could not stop the runner on {host}: {exc}\n")


# ---------------------------------------------------------------- collect and report

def collect(spec_path: str, project_dir: Path, plan_path: Path, *, render: bool = True,
            template_dir: Path | None = None) -> list[Path]:
    """Compute every table from the records, write them, and render the reports from them.

    The one place a campaign's tables are computed (:func:`benchmatrix.analyze.tables.derive_tables`):
    runs.csv, summary.csv, summary_by_host.csv, comparisons.csv, record_notes.csv,
    analysis.json and runs_long.parquet (:data:`benchmatrix.layout.COLLECTED`),
    then report.html and report.md rendered from the same tables in memory.

    Args:
        render: Also render the reports (the Snakemake rule and ``bmx report`` do).
        template_dir: Jinja2 templates overriding the built-in ones (docs/report.md).

    Returns:
        The paths written.
    """
    import pandas as pd

    from benchmatrix.analyze.sanity import RecordNotes
    from benchmatrix.analyze.tables import derive_tables
    from benchmatrix.campaigns.export import write_long_table
    from benchmatrix.results.batch_rows import read_batch_rows, rows_csv_text
    from benchmatrix.results.tables import read_table, write_tables

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    # Frames, not a Python object per run or record: at 1M runs those take gigabytes.
    plan = read_table(Path(plan_path).parent, Path(plan_path).name)
    # Every finished batch wrote its runs.csv rows and record notes beside its marker:
    # concatenate those, and read record.json only for the runs with a planned attempt
    # no rows file holds (a batch cut short, a campaign of an older benchmatrix), one
    # at a time, none kept whole.
    done = read_batch_rows(exp, typed=False, facts_changes=False)
    open_ids, skip = _runs_to_read(plan, done.rows)
    notes = RecordNotes()

    def each_record() -> Iterator[dict[str, Any]]:
        for rec in iter_records(exp, open_ids, skip=skip):
            notes.add(rec)
            yield rec

    rows, units = runs_rows(each_record(), spec.factor_names)
    units = {**done.units, **units}
    columns = layout.RUN_COLUMNS + spec.factor_names + sorted(units)
    if rows or list(done.rows.columns) != columns:
        mine = pd.read_csv(io.StringIO(rows_csv_text(columns, rows)), dtype=str, keep_default_na=False)
        text = pd.concat([done.rows, mine], ignore_index=True).reindex(columns=columns).fillna("")
        del mine
        ids = plan["run_id"].astype(str).drop_duplicates() if len(plan) else pd.Series([], dtype=str)
        first = pd.Series(range(len(ids)), index=ids.to_numpy())
        order = text["run_id"].map(first).fillna(len(first)).astype(int) * 1_000_000 + text["attempt"].astype(int)
        text = text.iloc[order.argsort(kind="stable")]
    else:
        text = done.rows  # every record in a rows file: already in plan order, one row per attempt
    done.rows = None
    # As UTF-8 bytes: io.StringIO would hold the text at 4 bytes a character (1.3 GB
    # for a 1M-run runs.csv), BytesIO shares the bytes.
    runs_text = text.to_csv(index=False).encode("utf-8")
    del text, rows
    # runs.csv as a reader of the file sees it (types as read back), so that the report
    # renders the same from memory here as from disk under `bmx report`.
    read_back = pd.read_csv(io.BytesIO(runs_text), encoding="utf-8")
    # The notes as the report reads record_notes.csv back: text.
    # Host-fact changes are found over the batches' entries and these records together.
    mine_notes = pd.read_csv(io.StringIO(notes.frame(done.facts).to_csv(index=False)), dtype=str,
                             keep_default_na=False)
    record_notes = pd.concat([done.notes, mine_notes], ignore_index=True).reindex(columns=layout.NOTE_COLUMNS)
    from benchmatrix.analyze.adaptive import settings_of
    from benchmatrix.results.campaign import read_meta

    meta = read_meta(exp)
    tables = derive_tables(spec, plan, read_back, units, record_notes=record_notes,
                           adaptive=settings_of(spec, meta), stopped_by=str(meta.get("until_decided_stop") or ""))
    written = write_tables(exp, tables, runs_text=runs_text)
    del runs_text
    # The tidy long table (runs_long.parquet) that export, compare and publish read.
    written.append(write_long_table(exp, read_back, spec.factor_names, units, spec.workload.get("metrics"), spec.name))
    # campaign.json: its hosts, and ended_at once no planned run is pending.
    mark_progress_from_tables(exp, plan, read_back)
    if render:
        written += _render(spec, exp, tables, template_dir)
    return written


def _runs_to_read(plan: Any, rows: Any) -> tuple[list[str], set[tuple[str, int]]]:
    """The run ids with a planned attempt that no batch rows file holds, and the
    attempts of those runs that one does (collect reads neither twice).

    Args:
        plan: plan.csv's rows.
        rows: The batches' runs rows as text (:func:`benchmatrix.results.batch_rows.read_batch_rows`).
    """
    import numpy as np
    import pandas as pd

    from benchmatrix.results.batch_rows import first_positions

    if not len(plan):
        return [], set()
    # (run id, attempt) pairs as one key; Index.get_indexer is a hash lookup in C.
    held = pd.Index((rows["run_id"].astype(str) + "#" + rows["attempt"].astype(str)).to_numpy(dtype=object)
                    if len(rows) else [], dtype=object).drop_duplicates()
    planned = (plan["run_id"].astype(str) + "#" + plan["attempt"].astype(str)).to_numpy(dtype=object)
    missing = held.get_indexer(planned) < 0 if len(held) else np.ones(len(planned), dtype=bool)
    open_ids = list(dict.fromkeys(plan["run_id"].astype(str).to_numpy(dtype=object)[missing]))
    if not open_ids or not len(rows):
        return open_ids, set()
    mine = rows[rows["run_id"].map(first_positions(open_ids)).notna()]
    return open_ids, set(zip(mine["run_id"], mine["attempt"].astype(int)))


def _render(spec: Spec, exp: Path, tables: Any, template_dir: Path | None) -> list[Path]:
    from benchmatrix.report.render import render_report

    facts = {path.parent.name: json.loads(path.read_text())
             for path in sorted((exp / layout.HOSTS_DIR).glob(f"*/{layout.FACTS}"))}
    return list(render_report(spec, tables.plan, tables.runs, tables.summary, facts, exp,
                              template_dir=template_dir, tables=tables))


def report(spec_path: str, project_dir: Path, template_dir: Path | None = None) -> tuple[Path, Path]:
    """Render report.html and report.md from the tables collect wrote (no table is recomputed).

    ``scripts/report.py`` calls it: no rule does (rule collect renders in the same job);
    it re-renders a campaign whose templates changed, and bench/report.py times
    rendering apart from collect with it.

    Args:
        template_dir: Jinja2 templates overriding the built-in ones (docs/report.md).
    """
    from benchmatrix.results.tables import read_tables

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    html, md = _render(spec, exp, read_tables(exp), template_dir)
    return html, md


# ---------------------------------------------------------------- entry points

def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _main(fn: Callable[[argparse.Namespace], Any], parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    # SIGTERM (Snakemake cancelling a job) cleans up like Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        fn(args)
    except KeyboardInterrupt:
        sys.stderr.write("benchmatrix: interrupted\n")
        return 130
    except (BenchmatrixError, OSError) as exc:
        line = f"benchmatrix: {describe_os_error(exc) if isinstance(exc, OSError) else exc}\n"
        sys.stderr.write(line)
        if not isinstance(exc, Interrupted) and not same_file(1, 2):
            # Also on stdout, which reaches the terminal (bmx) when the job's log cannot:
            # a full disk swallows the log's last line.
            sys.stdout.write(line)
        return exc.exit_code if isinstance(exc, Interrupted) else 1
    return 0


def _plan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--batch-max-runs", type=int, default=DEFAULT_BATCH_MAX_RUNS)
    p.add_argument("--batch-max-seconds", type=float, default=DEFAULT_BATCH_MAX_SECONDS)


def _prepare_host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--log", required=True, type=Path)


def _run_batch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path)
    p.add_argument("--batch", required=True)
    p.add_argument("--marker", required=True, type=Path)
    p.add_argument("--facts", type=Path)
    p.add_argument("--log", required=True, type=Path)


def _no_options(p: argparse.ArgumentParser) -> None:
    pass


def _restore_host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", required=True)
    p.add_argument("--out", required=True, type=Path)


def _collect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path)
    p.add_argument("--no-render", action="store_true", help="write the tables only (bench/report.py)")


#: ``scripts/TASK.py`` -> (adds the task's options beyond ``--spec`` and ``--project-dir``,
#: calls the rule body with the parsed arguments).
TASKS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], Any]]] = {
    "plan": (_plan_options, lambda a: plan(a.spec, a.project_dir, a.out, a.batch_max_runs, a.batch_max_seconds)),
    "prepare_host": (_prepare_host_options, lambda a: prepare_host(a.spec, a.project_dir, a.host, a.out, a.log)),
    "run_batch": (_run_batch_options,
                  lambda a: run_batch(a.spec, a.project_dir, a.plan, a.batch, a.marker, a.log, a.facts)),
    "restore_host": (_restore_host_options,
                     lambda a: restore_host(load_spec(a.spec), a.project_dir, a.host, a.out)),
    "collect": (_collect_options, lambda a: collect(a.spec, a.project_dir, a.plan, render=not a.no_render)),
    "report": (_no_options, lambda a: report(a.spec, a.project_dir)),
}


def entry(task: str, argv: list[str]) -> int:
    """Command-line entry for ``scripts/TASK.py`` (used by the Snakemake rules)."""
    if task not in TASKS:
        raise SystemExit(f"unknown task {task}")
    options, fn = TASKS[task]
    p = argparse.ArgumentParser(prog=f"scripts/{task}.py")
    p.add_argument("--spec", required=True)
    p.add_argument("--project-dir", default=".", type=Path)
    options(p)
    return _main(fn, p, argv)
