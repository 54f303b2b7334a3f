"""The fake Ansible port: a test double of the playbook call, for the tests of what the
controller does with what a playbook returned (states, re-runs, progress, caches, order).

Every playbook call of the controller goes through ``benchmatrix.execute.ansible.run_playbook``;
with ``BMX_PLAYBOOK_PORT=fake_ansible:run_playbook`` (and ``tests/`` on ``PYTHONPATH``) it calls
:func:`run_playbook` here instead, in the batch job's own process. That does what the
playbooks do for a host reached with the local connection, without ansible-playbook: the
command workload's argv filter on the batch's runs, the batch runner (the same file,
installed into the campaign's work directory as the batch_runner role installs it) started
on the same manifest on its stdin, the lease file written and the progress read, the runner
stopped. It returns a ``PlaybookResult`` whose payloads are checked against the same
``RESULT_SCHEMAS`` the real calls' are, and raises the same errors for a failed call.

What it does not do, so the tests of it stay real (docs/contributing.md, "What runs for
real"): knobs (a spec with knobs is refused), workloads other than workload_command, SSH
hosts, bmx check. The runner runs as a child process, as Ansible's command task starts it,
not inside the batch job: it takes over the signal handlers, makes its process a
subreaper and is stopped by the PID it records, which would be the job's own.

Usage: ``use_fake_port(project)`` on a ``conftest.Project`` before its ``bmx`` calls.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from benchmatrix.errors import AnsibleError, BenchmatrixError, HostUnreachableError, Interrupted, PlaybookFailedError
from benchmatrix.execute.ansible import PORT_ENV, RESULT_SCHEMAS, PlaybookResult
from benchmatrix.execute.prepare import RUNNER_KNOBS_PATH, RUNNER_PATH

TESTS = Path(__file__).resolve().parent
#: The value of ``BMX_PLAYBOOK_PORT`` that selects this port.
PORT = "fake_ansible:run_playbook"
#: The batch_runner role's default work root (roles/batch_runner/defaults/main.yml).
DEFAULT_ROOT = "/var/tmp/benchmatrix"


def port_env() -> dict[str, str]:
    """The environment a ``bmx`` process needs to call this port instead of Ansible."""
    path = os.environ.get("PYTHONPATH", "")
    return {PORT_ENV: PORT, "PYTHONPATH": str(TESTS) + (os.pathsep + path if path else "")}


def use_fake_port(project: Any) -> Any:
    """Make every later ``bmx`` call of ``project`` (a ``conftest.Project``) use this port."""
    project.extra_env.update(port_env())
    return project


def host_vars(inventory: Path, host: str) -> dict[str, Any]:
    """The variables a static YAML inventory gives ``host`` (its groups' ``vars``, then its own).

    Raises:
        HostUnreachableError: the inventory does not name the host.
    """
    found: list[dict[str, Any]] = []

    def walk(group: dict[str, Any], inherited: dict[str, Any]) -> None:
        scope = {**inherited, **(group.get("vars") or {})}
        hosts = group.get("hosts") or {}
        if host in hosts:
            found.append({**scope, **(hosts[host] or {})})
        for child in (group.get("children") or {}).values():
            walk(child or {}, scope)

    for group in (yaml.safe_load(Path(inventory).read_text()) or {}).values():
        walk(group or {}, {})
    if not found:
        raise HostUnreachableError(f"unreachable: the inventory {inventory} names no host {host}", host=host)
    merged: dict[str, Any] = {}
    for scope in found:
        merged.update(scope)
    if merged.get("ansible_connection", "local") != "local":
        raise AnsibleError(f"the fake Ansible port reaches local hosts only, not {host}: use real Ansible")
    return merged


def checked(host: str, playbook: str, payloads: dict[str, Any], log: str) -> dict[str, dict[str, Any]]:
    """``{host: payloads}``, each payload valid against its ``RESULT_SCHEMAS`` entry.

    Raises:
        AssertionError: an unknown key or a payload the schema refuses (a defect of this port).
    """
    for key, value in payloads.items():
        assert key in RESULT_SCHEMAS, f"fake port, {playbook}: {key} is not a result payload"
        jsonschema.validate(value, RESULT_SCHEMAS[key], cls=jsonschema.Draft202012Validator)
    return {host: payloads}


class _Call:
    """One playbook call: its variables, the host's work directory and its log."""

    def __init__(self, playbook: str, host: str, inventory: Path, extravars: dict[str, Any],
                 data: dict[str, Any] | None, log: Path):
        self.playbook, self.host, self.log = playbook, host, Path(log)
        self.vars = {**host_vars(inventory, host), **extravars, **(data or {})}
        self.published: dict[str, Any] = {}
        root = self.vars.get("batch_runner_root", DEFAULT_ROOT)
        experiment, campaign = self.vars.get("bmx_experiment", "default"), self.vars.get("bmx_campaign", "none")
        self.workdir = Path(root) / f"{experiment}-{campaign}"
        self.lines = [f"fake Ansible port: {playbook} on {host}"]

    def task(self, name: str) -> None:
        self.lines.append(f"TASK [{name}]")

    def fail(self, message: str, task: str) -> PlaybookFailedError:
        return PlaybookFailedError(message, host=self.host, task=task, log=str(self.log))

    def result(self) -> PlaybookResult:
        return PlaybookResult([], 0.0, str(self.log), playbook=self.playbook, host=self.host,
                              payloads=checked(self.host, self.playbook, self.published, str(self.log)))

    def write_log(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_text("\n".join(self.lines) + "\n")


def _refuse_knobs(call: _Call) -> None:
    if call.vars.get("bmx_knobs"):
        raise AssertionError(f"fake port, {call.playbook}: knobs run for real only (tests/knobkit.py, tests/e2e/)")


def _facts(call: _Call) -> dict[str, Any]:
    """What tasks/prepare.yml publishes for a new host: the facts a record keeps, from this machine."""
    uname = os.uname()
    workload_dir = call.vars.get(call.vars.get("bmx_workload_directory_var") or "", DEFAULT_ROOT + "/scratch")
    facts = {"hostname": uname.nodename, "fqdn": uname.nodename, "cpu_model": "fake port",
             "cpu_count": os.cpu_count() or 0, "sockets": 1, "cores": os.cpu_count() or 0, "threads_per_core": 1,
             "memory_mb": 0, "kernel": uname.release, "distribution": "fake port", "architecture": uname.machine,
             "python": ".".join(map(str, sys.version_info[:3])), "tool_version": "",
             "workload_path": str(workload_dir), "filesystem": "", "filesystem_source": "", "mount_point": "",
             "block_device": "", "workload_cleanup": False, "online_cpus": "unknown", "smt": "absent",
             "read_ahead_kb": "unknown", "io_scheduler": "unknown"}
    return {"gathered": True, "fingerprint": "", "state_files": [], "facts": facts}


def _install_runner(call: _Call) -> str:
    """The runner and its knob backends in the work directory (roles/batch_runner/tasks/install.yml)."""
    call.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for src in (RUNNER_PATH, RUNNER_KNOBS_PATH):
        dest = call.workdir / src.name
        if not dest.is_file() or dest.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dest)
    return str(call.workdir / RUNNER_PATH.name)


def _commands(call: _Call) -> str:
    """The workload role's commands (roles/workload_command/tasks/main.yml's filter)."""
    role = call.vars.get("bmx_workload_role")
    if role != "workload_command":
        raise AssertionError(f"fake port: {role} runs for real only; the port builds workload_command's argv")
    from benchmatrix.workloads.base import runs_filter
    from benchmatrix.workloads.command.argv import workload_command_argv

    # The role's filter without its Ansible wrapper (which turns the error into Ansible's).
    build = runs_filter(workload_command_argv, commands="")
    try:
        return build(call.vars.get("bmx_runs", "[]"), call.vars.get("workload_command_env") or {})
    except BenchmatrixError as exc:
        raise call.fail(str(exc), "Build every run's argv") from None


def _manifest(call: _Call, runs: Any, collect_only: bool) -> dict[str, Any]:
    """The runner's manifest, as roles/batch_runner/defaults/main.yml makes it."""
    v, batch = call.vars, call.vars.get("batch_runner_batch", "")
    return {"experiment": v.get("bmx_experiment", "default"), "batch": batch, "workdir": str(call.workdir),
            "archive": f"{call.workdir}/batches/{batch}.tar.gz",
            "containment": v.get("batch_runner_containment", "auto"),
            "kill_grace_s": float(v.get("batch_runner_kill_grace_s", 5)),
            "stop_after_s": float(v.get("batch_runner_stop_after_s", 0) or 0), "collect_only": collect_only,
            "keep_going": bool(v.get("batch_runner_keep_going", True)),
            "runner_digest": v.get("batch_runner_digest", ""),
            "lease_seconds": int(v.get("batch_runner_lease_seconds", 300)), "runs": runs,
            "run_settings": {}, "knobs_digest": v.get("batch_runner_knobs_digest", ""), "knobs": [],
            "knob_settings": {}, "knob_baseline_dir": f"{v.get('batch_runner_root', DEFAULT_ROOT)}/knob_baselines",
            "host": call.host}


def _start_runner(call: _Call, manifest: dict[str, Any], on_started: Callable[[], None] | None) -> None:
    """The runner on ``manifest`` (roles/batch_runner/tasks/main.yml) in a session of its own,
    as ansible-runner's: a Ctrl-C of the controller reaches the job, which stops it (stop_batch)."""
    runner = _install_runner(call)
    call.task("Run the batch")
    if on_started is not None:
        on_started()
    timeout = int(call.vars.get("batch_runner_timeout") or 0) or None
    proc = subprocess.Popen([sys.executable, runner, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(json.dumps(manifest), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise call.fail(f"The command action failed to execute in the expected time frame ({timeout}) "
                        "and was terminated", "Run the batch") from None
    except KeyboardInterrupt:
        stopped = Interrupted(f"host {call.host}: playbook {call.playbook} interrupted")
        stopped.payloads = checked(call.host, call.playbook, call.published, str(call.log))
        raise stopped from None
    call.lines += [out, err]
    if proc.returncode != 0:
        # The command module's message (ansible.py's _failure_message takes msg first).
        failure = call.fail("non-zero return code", "Run the batch")
        failure.payloads = checked(call.host, call.playbook, call.published, str(call.log))
        raise failure
    call.published["bmx_archive"] = {"in_place": True, "path": manifest["archive"]}


def _run_batch(call: _Call, on_started: Callable[[], None] | None) -> None:
    _refuse_knobs(call)
    if call.vars.get("bmx_prepare"):
        call.task("Prepare the host for the campaign")
        call.published["bmx_facts"] = _facts(call)
    call.published["bmx_knobs"] = {}
    call.task("Build the workload commands")
    _start_runner(call, _manifest(call, _commands(call), False), on_started)


def _collect_batch(call: _Call, on_started: Callable[[], None] | None) -> None:
    _start_runner(call, _manifest(call, json.loads(call.vars["bmx_runs"]), True), on_started)


def _restore_host(call: _Call, on_started: Callable[[], None] | None) -> None:
    _refuse_knobs(call)
    call.published["bmx_knobs"] = {}


def _renew_lease(call: _Call, on_started: Callable[[], None] | None) -> None:
    batches = call.workdir / "batches"
    batch = call.vars["batch_runner_batch"]
    call.task("Renew the lease")
    if batches.is_dir():  # the copy module makes no directory either: the call fails
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        (batches / f"{batch}.lease").write_text(f"{call.vars['batch_runner_lease_seconds']} {stamp}\n")
    else:
        raise call.fail(f"Destination directory {batches} does not exist", "Renew the lease")
    progress = batches / f"{batch}.progress"
    content = base64.b64encode(progress.read_bytes()).decode() if progress.is_file() else ""
    call.published["bmx_progress"] = {"content": content}


def _stop_batch(call: _Call, on_started: Callable[[], None] | None) -> None:
    runner = call.workdir / RUNNER_PATH.name
    call.task("End the runner and its workload")
    if runner.is_file():
        done = subprocess.run([sys.executable, str(runner), "--stop", str(call.workdir)], capture_output=True,
                              text=True, check=False)
        call.lines.append(done.stdout)
        if done.returncode != 0:
            raise call.fail("non-zero return code", "End the runner and its workload")


PLAYBOOKS: dict[str, Callable[[_Call, Callable[[], None] | None], None]] = {
    "run_batch.yml": _run_batch, "collect_batch.yml": _collect_batch, "restore_host.yml": _restore_host,
    "renew_lease.yml": _renew_lease, "stop_batch.yml": _stop_batch,
}


# shape: benchmatrix.execute.ansible.run_playbook's signature, which this stands in for
def run_playbook(playbook: str, *, project_dir: Path, inventory: Path, host: str, extravars: dict[str, Any],
                 log: Path, data: dict[str, Any] | None = None, timeout: int | None = None, start_tag: str = "",
                 on_started: Callable[[], None] | None = None) -> PlaybookResult:
    """Stand in for ``run_playbook``: do what ``playbook`` does on a local host, without Ansible.

    Raises:
        PlaybookFailedError, HostUnreachableError, Interrupted: as the real call.
        AssertionError: a playbook, workload or knob this port leaves to the real tests.
    """
    if playbook not in PLAYBOOKS:
        raise AssertionError(f"fake port: {playbook} runs for real only")
    if not Path(inventory).is_file():
        raise AnsibleError(f"inventory {Path(inventory).resolve()} does not exist")
    call = _Call(playbook, host, Path(inventory), extravars, data, Path(log))
    t0 = time.monotonic()
    try:
        PLAYBOOKS[playbook](call, on_started)
    finally:
        call.write_log()
    result = call.result()
    result.seconds = time.monotonic() - t0
    return result
