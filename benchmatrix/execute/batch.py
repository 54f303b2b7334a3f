"""The body of rule run_batch: one batch through Ansible and the batch runner, in time slices,
and a record per finished run.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from benchmatrix import layout
from benchmatrix.errors import (
    AnsibleError,
    BenchmatrixError,
    HostUnreachableError,
    Interrupted,
    PlanError,
    ResultChannelError,
    describe_os_error,
)
from benchmatrix.execute import wave
from benchmatrix.execute.ansible import START_TAG, run_playbook
from benchmatrix.execute.lease import lease
from benchmatrix.execute.prepare import (
    RUNNER_KNOBS_PATH,
    RUNNER_PATH,
    Preparation,
    any_role_vars,
    cached_role_vars,
    preparation,
    role_var_names,
    runner_digest,
    runner_knobs_digest,
    save_role_vars,
    workload_cleanup,
    workload_path,
    write_facts,
)
from benchmatrix.execute.restore import knob_items, restore_quietly, save_baseline
from benchmatrix.files import atomic_write
from benchmatrix.host.batch_runner import ArchiveError, finished_runs, old_run_dir, read_archive, run_file
from benchmatrix.layout import exp_dir_of, record_path, run_dir
from benchmatrix.plan.design import (
    PlannedRun,
    read_plan,
)
from benchmatrix.plan.reruns import append_round
from benchmatrix.results.batch_rows import write_batch_rows
from benchmatrix.results.campaign import campaign_id
from benchmatrix.results.judge import Kept, judge, run_file_text
from benchmatrix.results.records import base_record, iso, write_records
from benchmatrix.spec.config import project_config
from benchmatrix.spec.load import Spec, load_spec, render_failures, render_vars
from benchmatrix.workloads import WORKLOADS


def cells_by_id(spec: Spec) -> dict[str, dict[str, Any]]:
    """Factor values of every cell a plan of ``spec`` can hold, by cell id (the control cell too)."""
    cells = {c.cell_id: c.factors for c in spec.cells}
    ctl = spec.control_cell()
    if ctl is not None:
        cells[ctl.cell_id] = ctl.factors
    return cells


def _parser_for(role: str) -> Callable[[str], Any]:
    workload = WORKLOADS.get(role)
    if workload is None:
        raise BenchmatrixError(f"workload role {role} has no parser")
    return workload.parse


def _rel(path: Path | str, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base))
    except ValueError:
        return str(path)


# shape: one parameter per command-line argument of the batch job (entry.py passes each)
def run_batch(spec_path: str, project_dir: Path, plan_path: Path, batch: str, marker: Path,
              log: Path) -> dict[str, Any]:
    """Execute one batch through Ansible and write a record.json per finished run.

    Runs that already have a record are left out; if none is left, no Ansible call
    is made. The marker (the Snakemake output) is written last. The host's first batch
    of a campaign (no ``hosts/HOST/facts.json`` yet) prepares the host in the same call:
    its facts, the workload tool's install check and the batch runner's install.

    Whatever makes the job fail after Ansible touched the host (a template error, a
    missing archive, any OSError such as a full disk), the host's knobs are put back
    to their baseline before the error propagates: its later batches cannot run (they
    wait on this one's marker), so its campaign-end restore would never come.

    Raises:
        BenchmatrixError: one line; an OSError becomes one naming the path (and the
            free space when the disk is full).
    """
    touched: dict[str, Any] = {"partial": []}
    wave.hello()  # first: the broker's wave waits for the jobs on their way
    try:
        return _execute_batch(spec_path, project_dir, plan_path, batch, marker, touched)
    except Interrupted:
        raise  # the interrupt path already stopped the runner and restored the host
    except Exception as exc:
        msg = ""
        if isinstance(exc, OSError):  # described before the cleanup frees space
            where = None if exc.filename else exp_dir_of(project_dir, touched["spec"]) if "spec" in touched else None
            msg = f"batch {batch}: {describe_os_error(exc, where)}"
        _remove_partial(touched)
        if "host" in touched:
            restore_quietly(touched["spec"], project_dir, touched["host"])
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


@dataclass
class _Batch:
    """One batch job's state across its time slices."""

    spec: Spec
    project_dir: Path
    exp: Path
    host: str
    batch: str
    cells: dict[str, dict[str, Any]]
    facts: dict[str, Any]
    touched: dict[str, Any]
    summary: dict[str, Any]
    #: The host's preparation while facts.json is missing: the first call does it.
    prepare: Preparation | None = None
    #: Called as the runner starts (the lease is renewed from then on).
    on_started: Callable[[], None] | None = None
    #: run id -> its entry in the runner's manifest
    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Whether the current slice's call reached the runner (its run task started).
    runner_reached: bool = False
    #: False once a one-call batch found the host changed (or its commands need the role's
    #: tasks): the job's other slices take run_batch.yml.
    one_call: bool = True

    def record(self, r: PlannedRun, **fields: Any) -> dict[str, Any]:
        """A run's record: the fields every record has, then ``fields``."""
        return base_record(self.spec, r, self.host, self.batch, self.cells[r.cell_id], self.facts) | fields

    def unrun(self, todo: list[PlannedRun], status: str, reason: str, log: Path, t0: float,
              **fields: Any) -> tuple[list[dict[str, Any]], list[PlannedRun]]:
        """A slice whose runs did not run (Ansible failed, a knob missed its value): a
        record of ``status`` for each, nothing left for another slice."""
        log_rel = _rel(log, self.exp)
        records = [self.record(r, status=status, reason=reason, log=log_rel,
                               batch_started_at=iso(t0), **fields) for r in todo]
        write_records(self.exp, records)
        self.summary["executed"] += len(todo)
        self.summary["error"] = reason
        shutil.rmtree(self.touched["staging"], ignore_errors=True)
        return records, []


# shape: run_batch's arguments plus the touched dict it reads after an error to restore the host
def _execute_batch(spec_path: str, project_dir: Path, plan_path: Path, batch: str, marker: Path,
                   touched: dict[str, Any]) -> dict[str, Any]:
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
    todo = [r for r in mine if not os.path.isfile(f"{layout.run_dir_text(exp, r.run_id, r.attempt)}/{layout.RECORD}")]
    summary: dict[str, Any] = {"batch": batch, "host": host, "runs": len(mine), "executed": 0,
                               "already_done": len(mine) - len(todo), "slices": 0}
    records: list[dict[str, Any]] = []
    if todo:
        facts_path = layout.host_file(exp, host, layout.FACTS)
        facts = json.loads(facts_path.read_text()) if facts_path.is_file() else {}
        job = _Batch(spec, Path(project_dir), exp, host, batch, cells_by_id(spec), facts, touched, summary,
                     prepare=None if facts else preparation(spec, Path(project_dir), host))
        for r in todo:
            if r.cell_id not in job.cells:
                raise PlanError(f"{plan_path}: cell {r.cell_id} of run {r.run_id} is not in the spec; re-plan")
            job.manifest[r.run_id] = _manifest_entry(job, r)
        touched.update(spec=spec, host=host)  # from here on, Ansible may change the host
        left = todo
        # One lease for the whole batch: its renewals (and progress reads) go on across
        # the slices.
        with lease(spec, project_dir, host, batch) as runner_started:
            job.on_started = runner_started.set
            while left:
                new, left = _run_slice(job, left)
                records += new
                _stop_if_doomed(batch, host, records, left)
    return _finish_batch(exp, spec, batch, mine, records, marker, summary)


def _keep_going() -> bool:
    """Whether ``bmx run --keep-going-on-failures`` goes on after a doomed slice (the
    runner then ends a batch's slice early for failing alike only once)."""
    import os

    from benchmatrix.results.status import KEEP_GOING_ENV

    return bool(os.environ.get(KEEP_GOING_ENV))


def _stop_if_doomed(batch: str, host: str, records: list[dict[str, Any]], left: list[PlannedRun]) -> None:
    """Start no further slice when the batch's first runs all failed the same way
    (:func:`benchmatrix.results.status.doomed_reason`; the runner ends its slice there):
    ``bmx run`` stops the campaign as it sees their records, and a next slice started
    meanwhile would run the rest of the batch in vain. Not with --keep-going-on-failures.

    Raises:
        BenchmatrixError: the batch is doomed (run_batch restores the host; the runs
            left stay pending).
    """
    from benchmatrix.results.status import doomed_reason

    if not left or _keep_going():
        return
    reason = doomed_reason(records)
    if reason is not None:
        raise BenchmatrixError(f"batch {batch} on {host}: its first {len(records)} runs all failed the same way "
                               f"({reason}); its other {len(left)} runs are not started "
                               "(bmx run --keep-going-on-failures runs them)")


def _manifest_entry(job: _Batch, r: PlannedRun) -> dict[str, Any]:
    """A run's entry in the runner's manifest: its workload variables rendered for its cell."""
    spec, cell = job.spec, job.cells[r.cell_id]
    ctx = {**cell, "experiment": spec.name, "host": job.host, "run_id": r.run_id,
           "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup}
    try:
        rendered = render_vars(spec.workload["vars"], ctx)
    except render_failures() as exc:  # Jinja2's errors once a template needed Jinja2
        raise BenchmatrixError(f"{spec.path}: workload.vars cannot be rendered for run {r.run_id} "
                               f"({', '.join(f'{k}={v}' for k, v in cell.items())}): "
                               f"{type(exc).__name__}: {exc}") from None
    # cell_id: the runner ends a slice whose first runs, over 2 or more cells, all failed alike.
    entry = {"run_id": r.run_id, "attempt": r.attempt, "seq": r.seq, "cell_id": r.cell_id,
             "timeout": spec.workload["timeout"],
             "before_run": spec.before_run, "vars": rendered, "factors": cell, "collect": spec.collect}
    if spec.knobs:
        # The runner sets the live knobs of a run whose items differ from the last
        # applied (a batch may span settings of cost-none knobs: plan.design.assign_batches).
        entry["knobs"] = knob_items(spec, cell)
    workload = WORKLOADS.get(spec.workload["role"])
    if workload is not None and workload.measure is not None and workload.measure(spec.workload):
        entry["measure"] = True  # the runner times the command itself (usage.json)
    return entry


def batch_call_items(spec: Spec, factors: dict[str, Any]) -> list[dict[str, Any]]:
    """The knob items of a slice's Ansible call: the slice's first run's. With live knobs
    (``order.batch_live_knobs``) the cost-none ones are marked ``live``: the call only
    reads them (their baselines, for the restore) and the runner checks and sets them
    before each run, so a value the host refuses or misses makes only those runs invalid."""
    items = knob_items(spec, factors)
    if not spec.batch_live_knobs:
        return items
    return [{**k, "live": True} if k["cost"] == "none" else k for k in items]


def _runner_vars(job: _Batch) -> dict[str, Any]:
    """The extra variables every call that starts the batch runner passes (run_batch.yml,
    collect_batch.yml): the host, the campaign's work directory, the runner to install
    or check, the batch and where its archive is fetched to (an emptied staging directory)."""
    staging = job.touched["staging"]
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return {"bmx_host": job.host, "bmx_experiment": job.spec.name, "bmx_campaign": campaign_id(job.exp),
            "batch_runner_source": str(RUNNER_PATH), "batch_runner_digest": runner_digest(),
            "batch_runner_knobs_digest": runner_knobs_digest(),
            "batch_runner_batch": job.batch, "batch_runner_fetch_dir": str(staging)}


def _start_slice(job: _Batch, todo: list[PlannedRun], batch_log: Path) -> Any:
    """The Ansible call of a slice: set the knobs, start the runner on ``todo`` and
    fetch its archive; the runner stops starting runs after ``batch_max_seconds``.

    Raises:
        Interrupted: Ctrl-C or SIGTERM; the runner was stopped and the host restored.
        AnsibleError: the call failed (the caller records the runs).
    """
    spec, host, batch = job.spec, job.host, job.batch
    config = project_config(job.project_dir)
    prep = job.prepare
    job.runner_reached = False

    def started() -> None:
        job.runner_reached = True
        if job.on_started is not None:
            job.on_started()

    def call(playbook: str, data: dict[str, Any], extravars: dict[str, Any]) -> Any:
        # The one call of a known host goes with the other hosts' of its wave (wave.py).
        return (wave.call if wave.joins(playbook) else run_playbook)(
            playbook, project_dir=job.project_dir / "playbooks", inventory=spec.inventory_path(job.project_dir),
            host=host, data={"bmx_knobs": batch_call_items(spec, job.cells[todo[0].cell_id]), **data},
            extravars={**extravars, **_runner_vars(job), "bmx_workload_role": spec.workload["role"],
                       "batch_runner_lease_seconds": int(config.runner_lease_seconds),
                       "batch_runner_stop_after_s": config.batch_max_seconds,
                       "batch_runner_keep_going": _keep_going(),
                       "batch_runner_timeout": int(sum(spec.workload["timeout"] + 30 for _ in todo) + 60)},
            log=batch_log, start_tag=START_TAG, on_started=started)

    try:
        result = _one_call(job, todo, call)
        if result is not None:
            return result
        return call("run_batch.yml",
                    # One JSON text: Ansible neither checks nor templates it run by run (the
                    # workload role's filter decodes it, the runner decodes the commands).
                    {"bmx_runs": json.dumps([job.manifest[r.run_id] for r in todo]), **(prep.data if prep else {})},
                    {**(prep.extravars if prep else {}), "bmx_allow_reboot": spec.allow_reboot,
                     "bmx_role_var_names": role_var_names(spec.workload["role"])})
    except (KeyboardInterrupt, Interrupted) as exc:
        stop_runner(spec, job.project_dir, host)
        # The knob call may have run (and the runner set live knobs): its baselines first.
        save_baseline(job.exp, host, spec, (getattr(exc, "payloads", {}).get(host) or {}).get("bmx_knobs") or {})
        restore_quietly(spec, job.project_dir, host)
        raise Interrupted(f"batch {batch} interrupted; the runner on {host} was stopped, "
                          "its finished runs are kept there for the next 'bmx run'") from None


def _one_call_knob(item: dict[str, Any]) -> bool:
    """Whether the one call can set this knob: its backend needs no service started by a
    role and no reboot (tasks/knobs.yml does both)."""
    from benchmatrix.host.knobs import BACKENDS, Backend

    cls = BACKENDS.get(item.get("role"))
    return cls is not None and not cls.reboot and cls.services is Backend.services


def _one_call(job: _Batch, todo: list[PlannedRun], call: Callable[..., Any]) -> Any:
    """The slice as one module call (run_known_batch.yml): the commands built here by the
    workload's descriptor (``build``) from the role variables the host's last
    run_batch.yml call published; on the host's first batch of the campaign the call also
    installs the runner and probes the host against its cached fingerprint. A host new
    to the controller takes the role variables of another host of the project (the first
    that has them) and its call gathers its facts and checks the tool's install first.
    Returns the call's result, or None when the slice takes run_batch.yml: the
    workload's commands need its role's tasks, a knob a service or a reboot, the host
    changed, no host of the project has role variables yet, or the host's differ from
    those the commands were built with.
    """
    spec, role = job.spec, job.spec.workload["role"]
    workload = WORKLOADS.get(role)
    prep = job.prepare
    if not job.one_call or workload is None or workload.build is None:
        return None
    if not all(_one_call_knob(k) for k in batch_call_items(spec, job.cells[todo[0].cell_id])):
        return None
    # A host new to the controller is built with another host's role variables (most come
    # from group variables and the role's defaults): the call checks them on the host.
    new_host = prep is not None and not prep.known
    role_vars = cached_role_vars(job.project_dir, job.host, role) if not new_host else \
        any_role_vars(job.project_dir, role)
    if role_vars is None:
        return None
    bmx_call: dict[str, Any] = {"role_vars": role_vars}
    if new_host:
        # Its facts, the tool's install check and the runner's install in the same call.
        bmx_call.update(describe=True, probe_path=workload_path(role, role_vars), sources=_runner_sources())
    elif prep is not None:
        if not prep.cache.get("fingerprint") or prep.extravars["bmx_install_always"]:
            return None
        bmx_call.update(fingerprint=prep.cache["fingerprint"], probe_path=workload_path(role, role_vars),
                        state_files=list(prep.cache.get("state_files") or []),
                        sources=_runner_sources())
    from benchmatrix.errors import WorkloadVarsError

    try:
        built = workload.build([job.manifest[r.run_id] for r in todo], role_vars)
    except WorkloadVarsError:
        job.one_call = False  # the role's filter fails the call with the same message, recorded per run
        return None
    bmx_call.update(dirs=built["dirs"], files=built["files"], secret=any("env" in c for c in built["commands"]))
    data = {"bmx_runs": json.dumps(built["commands"]), "bmx_call": bmx_call}
    extravars = {"bmx_workload_env_var": workload.env_var, "bmx_workload_version_var": workload.version_var,
                 # The playbook's first play (facts, the tool's install check) is for new hosts only.
                 **({"bmx_new_hosts": job.host} if new_host else {})}
    result = call("run_known_batch.yml", data, extravars)
    status = (result.payloads.get(job.host) or {}).get("bmx_call") or {}
    if status.get("missing") and "sources" not in bmx_call:
        # Someone cleaned the host, or another benchmatrix installed its own runner.
        bmx_call["sources"] = _runner_sources()
        result = call("run_known_batch.yml", data, extravars)
        status = (result.payloads.get(job.host) or {}).get("bmx_call") or {}
    if status:
        job.one_call = False
        return None
    facts = (result.payloads.get(job.host) or {}).get("bmx_facts")
    if facts is not None:
        facts["facts"]["workload_cleanup"] = workload_cleanup(role, role_vars)
    return result


def _runner_sources() -> dict[str, str]:
    """The batch runner and its knob backends, as the one call installs them."""
    return {RUNNER_PATH.name: RUNNER_PATH.read_text(), "knobs.py": RUNNER_KNOBS_PATH.read_text()}


def _run_slice(job: _Batch, todo: list[PlannedRun]) -> tuple[list[dict[str, Any]], list[PlannedRun]]:
    """One Ansible call of a batch: the runner executes ``todo`` in order until its time
    slice (config.yaml's ``batch_max_seconds``) is over; the finished runs' records are
    written (one sync) before the next slice starts.

    Returns:
        (the records written, the runs left for the next slice).
    """
    exp = job.exp
    job.summary["slices"] += 1
    # The fetched archive, unpacked; emptied by each call (_runner_vars), removed after.
    job.touched["staging"] = layout.staging_dir(exp, job.batch)
    t0 = time.time()
    batch_log = layout.ansible_log(exp, job.batch)
    try:
        result = _start_slice(job, todo, batch_log)
    except AnsibleError as exc:
        published = exc.payloads.get(job.host) or {}
        _prepared(job, published.get("bmx_facts"))
        # The knob call may have changed the host before the failure (the runner may
        # have set live knobs too): keep the baselines it read, for the restore.
        save_baseline(exp, job.host, job.spec, published.get("bmx_knobs") or {})
        # Keep going: the batch's runs are recorded as failed (or unreachable) with the
        # reason and the log, and the other batches go on. `bmx rerun --failed` retries.
        # The runs the runner finished before the call failed (it was killed on the
        # host, the call timed out) are taken in first: nothing measured is thrown away.
        unreachable = isinstance(exc, HostUnreachableError)
        collected = [] if unreachable or not job.runner_reached else \
            _collect_finished(job, todo, published.get("bmx_knobs") or {}, batch_log, t0)
        done = {rec["run_id"] for rec in collected}
        status = "unreachable" if unreachable else "failed"
        records, left = job.unrun([r for r in todo if r.run_id not in done], status,
                                  str(exc).splitlines()[0][:500], exc.log or batch_log, t0, failed_task=exc.task)
        job.summary["error"] = str(exc)
        return collected + records, left
    if job.prepare is not None:
        _prepared(job, result.payload("bmx_facts"))
    role_vars = (result.payloads.get(job.host) or {}).get("bmx_role_vars")
    if role_vars is not None:  # after the facts: a gathering rewrites the host cache
        save_role_vars(job.project_dir, job.host, job.spec.workload["role"], role_vars)
    knob_states = result.payload("bmx_knobs")
    save_baseline(exp, job.host, job.spec, knob_states)
    wrong = {f: k for f, k in knob_states.items() if not k.get("ok") and not k.get("live")}
    if wrong:
        # The host is not in the configuration the runs would claim: nothing ran.
        reason = "; ".join(f"knob {f}: intended {k['intended']!r}, actual {k['actual']!r}"
                           for f, k in wrong.items())
        return job.unrun(todo, "invalid", reason, batch_log, t0, knobs=knob_states)
    records, results = _take_in(job, todo, result, knob_states, batch_log, t0)
    # The runner stopped at the end of its time slice: the rest is the next slice.
    # (A slice that brought nothing back ends the loop: no endless retries.)
    return records, [r for r in todo if r.run_id not in results] if results else []


# shape: a slice's call result and the facts each record takes (knob states, log, start)
def _take_in(job: _Batch, todo: list[PlannedRun], result: Any, knob_states: dict[str, Any], batch_log: Path,
             t0: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Record the runs of ``todo`` whose results came back in the call's archive.

    Returns:
        (the records written, the runner's result of each run id taken in).
    """
    exp = job.exp
    info = result.payload("bmx_archive")
    if info.get("direct"):  # a local-connection host: its runner's files, no archive
        results, kept = _copy_runs(info["path"], exp, todo, job.touched)
    else:
        # The archive's files go straight to the runs' directories (no unpacked copy to
        # remove afterwards: a few file operations less per run).
        results, kept = _unpack_runs(_archive(job, todo, result), exp, todo, job.touched)
    workload_total = sum(res.get("duration_s") or 0.0 for res in results.values())
    overhead_share = max(result.seconds - workload_total, 0.0) / max(len(results), 1)
    save_run_baselines(exp, job.host, job.spec, (results[r.run_id] for r in todo if r.run_id in results))
    parse = _parser_for(job.spec.workload["role"])
    log_rel = _rel(batch_log, exp)  # once: resolving a path is a few system calls
    records: list[dict[str, Any]] = []
    for r in todo:
        if r.run_id in results:
            # The batch call's knob change happened before the slice's first run only;
            # a run whose knobs the runner set carries its own states.
            records.append(_judged_record(job, r, results[r.run_id], parse, knob_states, first=not records,
                                          overhead_share=overhead_share, log_rel=log_rel, t0=t0,
                                          kept=kept.get(r.run_id, {})))
    job.summary["executed"] += len(records)
    # One sync for the slice; each record is still renamed into place complete.
    write_records(exp, records)
    resume = [(rec["run_id"], rec["attempt"] + 1) for rec in records if rec["status"] == "interrupted"]
    if resume:
        # An interrupted run is resumed as its next attempt by the next `bmx run`.
        append_round(exp, resume, "interrupted")
    shutil.rmtree(job.touched["staging"], ignore_errors=True)
    return records, results


def _archive(job: _Batch, todo: list[PlannedRun], result: Any) -> Path:
    """Where the slice's archive is on the controller. A host reached with the local
    connection is the controller itself: the archive is read where the runner left it
    (batch_runner's archive_in_place); else it came in the one call's result (base64), or
    was fetched; one too large for the result is fetched now (collect_batch.yml)."""
    info = result.payload("bmx_archive")
    if "content" in info:
        path = job.touched["staging"] / f"{job.batch}.tar.gz"
        path.write_bytes(base64.b64decode(info["content"]))
        return path
    if info.get("remote"):
        fetched = run_playbook(
            "collect_batch.yml", project_dir=job.project_dir / "playbooks",
            inventory=job.spec.inventory_path(job.project_dir), host=job.host,
            data={"bmx_runs": json.dumps([{"run_id": r.run_id, "attempt": r.attempt} for r in todo])},
            extravars={**_runner_vars(job), "batch_runner_timeout": 120},
            log=layout.ansible_log(job.exp, f"{job.batch}-fetch"))
        return Path(fetched.payload("bmx_archive")["path"])
    return Path(info["path"])


def _collect_finished(job: _Batch, todo: list[PlannedRun], knob_states: dict[str, Any], batch_log: Path,
                      t0: float) -> list[dict[str, Any]]:
    """After a slice's call failed once its runner had started: the records of the runs
    the runner finished on the host before it (or the call) died, through one more call
    (collect_batch.yml) that runs nothing; ``[]`` when that call fails too (the slice's
    runs are then all recorded failed, as before).

    Its log is ``logs/ansible/BATCH-collect.log``.
    """
    spec = job.spec
    try:
        result = run_playbook(
            "collect_batch.yml", project_dir=job.project_dir / "playbooks",
            inventory=spec.inventory_path(job.project_dir), host=job.host,
            data={"bmx_runs": json.dumps([{"run_id": r.run_id, "attempt": r.attempt} for r in todo])},
            extravars={**_runner_vars(job), "batch_runner_timeout": 120},
            log=layout.ansible_log(job.exp, f"{job.batch}-collect"))
        result.payload("bmx_archive")  # a call that published no archive collected nothing
    except (KeyboardInterrupt, Interrupted):
        restore_quietly(spec, job.project_dir, job.host)
        raise Interrupted(f"batch {job.batch} interrupted; its finished runs are kept on {job.host} "
                          "for the next 'bmx run'") from None
    except AnsibleError as exc:
        print(f"benchmatrix: batch {job.batch}: the runs finished on {job.host} could not be collected: "
              f"{str(exc).splitlines()[0]}", file=sys.stderr)
        return []
    records, _ = _take_in(job, todo, result, knob_states, batch_log, t0)
    return records


def _prepared(job: _Batch, published: dict[str, Any] | None) -> None:
    """After the call that prepared the host: facts.json (and the host cache) from its
    ``bmx_facts`` payload; the batch's records carry these facts. A call that failed
    before publishing them leaves the preparation to the host's next batch."""
    if job.prepare is None or not published:
        return
    job.facts = write_facts(job.prepare, published, layout.host_file(job.exp, job.host, layout.FACTS))
    job.prepare = None


def _judged_record(job: _Batch, r: PlannedRun, res: dict[str, Any], parse: Callable[..., Any],
                   knob_states: dict[str, Any], *, first: bool, overhead_share: float, log_rel: str,
                   t0: float, kept: Kept) -> dict[str, Any]:  # shape: the slice's facts one run's record takes
    """The record of a run the runner finished: judged from its output and result
    (``kept``: its files as unpacked, :data:`benchmatrix.results.judge.Kept`)."""
    rel = f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}"  # as _rel would give, without resolving paths
    dest = layout.run_dir_text(job.exp, r.run_id, r.attempt)
    stdout = run_file_text(kept, "stdout", f"{dest}/stdout") or ""
    p0 = time.monotonic()
    status, reason, metrics, details = judge(job.spec, res, stdout, Path(f"{dest}/stderr"), parse, kept)
    parse_s = time.monotonic() - p0
    # What the runner had to kill after the workload (a timeout, or leftovers).
    details.update({k: res[k] for k in ("killed", "survivors", "containment") if res.get(k)})
    return job.record(
        r, status=status, reason=reason, exit_code=res.get("exit_code"),
        started_at=iso(res.get("started_at")), ended_at=iso(res.get("ended_at")),
        duration_s=res.get("duration_s"),
        phases={"before_run_s": sum(a["seconds"] for a in res.get("before_run") or []),
                "workload_s": res.get("duration_s"), "parse_s": round(parse_s, 6),
                "batch_overhead_share_s": round(overhead_share, 6)},
        workload={"role": job.spec.workload["role"], "argv": res.get("argv"), "before_run": res.get("before_run"),
                  "affinity": res.get("affinity"), "affinity_applied": res.get("affinity_applied")},
        metrics=metrics, details=details, knobs=run_knobs(res, knob_states, first),
        raw={"stdout": f"{rel}/stdout", "stderr": f"{rel}/stderr"},
        log=log_rel, batch_started_at=iso(t0),
        # The host's noise settings at the batch's start and its load around this run.
        host_env={**(res.get("host_env") or {}), "load_before": res.get("load_before"),
                  "load_after": res.get("load_after")})


def run_knobs(res: dict[str, Any], knob_states: dict[str, Any], first: bool) -> dict[str, Any]:
    """A run's knob states for its record: the runner's (result.json ``knobs``) when it
    set the run's knobs itself, intended vs actual of that run with ``changed`` where
    that run's apply changed something; else the slice's Ansible call's, ``changed``
    on the slice's first run only. A run the runner refused before reading any knob
    (``invalid`` without states) claims none. The runner only reads the costly knobs
    Ansible set: on the slice's first run, ``changed`` is the Ansible call's for them."""
    if res.get("outcome") == "invalid" and not res.get("knobs"):
        return {}
    if res.get("knobs"):
        return {f: {**k, "changed": bool(k.get("changed")) or (first and _set_by_call(knob_states.get(f)))}
                for f, k in res["knobs"].items()}
    return {f: {**k, "changed": bool(k.get("changed")) and first} for f, k in knob_states.items()}


def _set_by_call(state: dict[str, Any] | None) -> bool:
    """Whether the slice's Ansible call changed this knob (a live one it only read)."""
    return bool(state and state.get("changed") and not state.get("live"))


def save_run_baselines(exp: Path, host: str, spec: Spec, results: Iterable[dict[str, Any]]) -> None:
    """Keep the first-seen baselines of the knob states the runner recorded (in run
    order; baseline.json's first-seen values win, so the batch call's stay)."""
    first: dict[str, Any] = {}
    for res in results:
        for factor, state in (res.get("knobs") or {}).items():
            first.setdefault(factor, state)
    save_baseline(exp, host, spec, first)


#: What a run's directory in a batch archive may hold (the runner's layout); nothing
#: else in the archive is unpacked.
_RUN_FILES = frozenset({"stdout", "stderr", "counters.json", "usage.json"})
#: The files judging a run reads, kept in memory as they are unpacked ...
_JUDGED_FILES = frozenset({"stdout", "stderr", "counters.json"})
#: ... up to this size each (a larger one is read back from its file) ...
KEEP_MAX_BYTES = 1 << 20
#: ... and up to this much in all a slice (a slice of many runs with large outputs
#: holds no more than this in memory; the rest is read back).
KEEP_TOTAL_BYTES = 64 << 20


def _unpack_runs(archive: Path, exp: Path, todo: list[PlannedRun],
                 touched: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, bytes | None]]]:
    """Unpack a batch archive's runs into their run directories; returns their
    result.json contents by run id (read, not written: the record replaces it), and
    by run id the files judging reads, as :data:`benchmatrix.results.judge.Kept`.

    Only the files of ``todo``'s attempts are taken (``runs/RUN_ID/ATTEMPT/`` with
    stdout, stderr, counters.json, usage.json and inputs/NAME, regular files only), so no member
    can land anywhere else. Each directory is noted in ``touched["partial"]`` first:
    a failure removes the ones without a record.
    """
    wanted = {f"{layout.RUNS_DIR}/{r.run_id}/{r.attempt}": r for r in todo}
    results: dict[str, Any] = {}
    kept: dict[str, dict[str, bytes | None]] = {}
    made: dict[str, str] = {}  # run id -> its directory, made
    budget = [KEEP_TOTAL_BYTES]
    try:
        with gzip.open(archive, "rb") as stream:
            for name, regular, chunk in read_archive(stream):
                parts = name.split("/")
                run = wanted.get("/".join(parts[:3]))
                rest = parts[3:]
                if run is None or not regular or not (
                        (len(rest) == 1 and rest[0] in _RUN_FILES | {"result.json"})
                        or (len(rest) == 2 and rest[0] == "inputs" and rest[1] not in ("", ".", ".."))):
                    continue
                if rest == ["result.json"]:
                    results[run.run_id] = json.loads(b"".join(iter(chunk, b"")))
                    continue
                dest = made.get(run.run_id)
                if dest is None:
                    dest = made[run.run_id] = layout.run_dir_text(exp, run.run_id, run.attempt)
                    touched["partial"].append(Path(dest))
                    os.makedirs(dest, exist_ok=True)
                target = f"{dest}/{'/'.join(rest)}"
                if len(rest) > 1:
                    os.makedirs(f"{dest}/{rest[0]}", exist_ok=True)
                judged = len(rest) == 1 and rest[0] in _JUDGED_FILES
                with open(target, "wb") as out:
                    data = _write_keeping(iter(chunk, b""), out, budget if judged else None)
                if judged:
                    kept.setdefault(run.run_id, {})[rest[0]] = data
    except (ArchiveError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ResultChannelError(f"the batch archive {archive} cannot be read: {exc}") from None
    except OSError as exc:
        exc.filename = exc.filename or str(exp)  # a failed write() names no file
        raise
    for run in todo:  # a run without output files still gets its directory
        if run.run_id in results and run.run_id not in made:
            touched["partial"].append(run_dir(exp, run.run_id, run.attempt))
            run_dir(exp, run.run_id, run.attempt).mkdir(parents=True, exist_ok=True)
    return results, kept


def _copy_runs(workdir: str, exp: Path, todo: list[PlannedRun],
               touched: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, bytes | None]]]:
    """:func:`_unpack_runs` for a host reached with the local connection: the controller is
    that host, so its runner packs no archive and the finished runs' files are taken from
    its work directory ``workdir`` (issue 34: packing and unpacking cost about 0.13 ms a
    run), as links where they can be (:func:`_take_file`). A run is finished as the runner
    judges it (``finished_runs``: its result line parses and its outputs have the sizes it
    records); the same files are taken as from
    an archive: stdout, stderr, counters.json and usage.json when its result has them,
    and the regular files of its inputs directory.
    """
    done = finished_runs(workdir, [{"run_id": r.run_id, "attempt": r.attempt} for r in todo])
    results: dict[str, Any] = {}
    kept: dict[str, dict[str, bytes | None]] = {}
    budget = [KEEP_TOTAL_BYTES]
    try:
        for run in todo:
            entry = done.get((run.run_id, str(run.attempt)), False)
            if entry is False:
                continue
            if entry is None:  # a run of the runner's layout before (runs/RUN_ID/ATTEMPT/)
                src = old_run_dir(workdir, run.run_id, run.attempt)
                with open(f"{src}/result.json", "rb") as fh:
                    result = json.loads(fh.read())
                names = [n for n in sorted(os.listdir(src)) if n in _RUN_FILES]
                files = {n: f"{src}/{n}" for n in names}
                inputs = f"{src}/inputs"
            else:
                result = entry[1]
                names = ["stdout", "stderr"] + [n for n, key in (("counters.json", "counters"), ("usage.json", "usage"))
                                                if result.get(key)]
                files = {n: run_file(workdir, run.run_id, run.attempt, n) for n in names}
                inputs = run_file(workdir, run.run_id, run.attempt, "inputs")
            results[run.run_id] = result
            dest = layout.run_dir_text(exp, run.run_id, run.attempt)
            touched["partial"].append(Path(dest))
            os.makedirs(dest, exist_ok=True)
            for name, path in files.items():
                data = _take_file(path, f"{dest}/{name}", budget if name in _JUDGED_FILES else None)
                if name in _JUDGED_FILES:
                    kept.setdefault(run.run_id, {})[name] = data
            if os.path.isdir(inputs):
                with os.scandir(inputs) as entries:
                    regular = sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
                if regular:
                    os.makedirs(f"{dest}/inputs", exist_ok=True)
                for name in regular:
                    _take_file(f"{inputs}/{name}", f"{dest}/inputs/{name}", None)
    except OSError as exc:
        exc.filename = exc.filename or str(exp)  # a failed write() names no file
        raise
    return results, kept


def _take_file(src: str, dst: str, budget: list[int] | None) -> bytes | None:
    """:func:`_copy_file`, as a hard link where ``src`` and ``dst`` share a file system: a
    new file costs about 0.1 ms on ext4 here, a link a tenth of it (bench/README.md). The
    runner never writes into a finished run's files (it makes a run's outputs anew,
    batch_runner._open_outputs), so the link keeps the run's bytes as a copy would. A
    ``dst`` already there (a take-in whose records were never written) is replaced, not
    written through."""
    try:
        try:
            os.link(src, dst)
        except FileExistsError:
            os.unlink(dst)
            os.link(src, dst)
    except OSError:  # another file system, or links refused (EPERM, EMLINK): a copy
        return _copy_file(src, dst, budget)
    if budget is None:
        return None
    with open(src, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > KEEP_MAX_BYTES or size > budget[0]:
            return None
        data = fh.read()
    budget[0] -= len(data)
    return data


def _copy_file(src: str, dst: str, budget: list[int] | None) -> bytes | None:
    """Copy ``src`` to ``dst`` in chunks; its bytes as :func:`_write_keeping` keeps them."""
    with open(src, "rb") as fh, open(dst, "wb") as out:
        return _write_keeping(iter(lambda: fh.read(1 << 20), b""), out, budget)


def _write_keeping(chunks: Iterable[bytes], out: BinaryIO, budget: list[int] | None) -> bytes | None:
    """Write ``chunks`` to ``out``; returns their bytes when ``budget`` (a one-item list:
    the bytes the slice may still keep, lowered by what is kept) allows keeping them, up
    to :data:`KEEP_MAX_BYTES` a file; else None (None too when ``budget`` is None)."""
    keep: list[bytes] | None = [] if budget is not None else None
    size = 0
    for data in chunks:
        out.write(data)
        size += len(data)
        if keep is not None:
            if size > KEEP_MAX_BYTES or size > budget[0]:
                keep = None
            else:
                keep.append(data)
    if keep is None or budget is None:
        return None
    budget[0] -= size
    return b"".join(keep)


# shape: the batch's exp, spec, runs, records, marker, summary the caller holds; _execute_batch's last step
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
    layout.progress_path(exp, batch).unlink(missing_ok=True)
    return summary


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
                     log=layout.ansible_log(exp, f"stop-{host}"),
                     timeout=120)
    except AnsibleError as exc:
        sys.stderr.write(f"benchmatrix: could not stop the runner on {host}: {exc}\n")
