"""A host's preparation, done by its first batch call of a campaign: the batch runner's
install and the host's facts (facts.json).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchmatrix
from benchmatrix import layout
from benchmatrix.files import atomic_write
from benchmatrix.results.records import iso
from benchmatrix.spec.load import Spec
from benchmatrix.workloads import WORKLOADS

PACKAGE_DIR = Path(benchmatrix.__file__).resolve().parent


#: The batch runner the first batch call installs on every host (stdlib only).
RUNNER_PATH = PACKAGE_DIR / "host" / "batch_runner.py"


#: The knob backends, installed beside the runner (it sets live knobs between runs with them).
RUNNER_KNOBS_PATH = RUNNER_PATH.parent / "knobs.py"


#: The workload path when neither the inventory nor the workload's descriptor names one.
SCRATCH_DIR = "/var/tmp/benchmatrix/scratch"


@functools.cache
def runner_digest() -> str:
    """SHA-256 of the batch runner: a batch replaces a copy on its host that differs."""
    return hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest()


@functools.cache
def runner_knobs_digest() -> str:
    """SHA-256 of knobs.py: a batch replaces a copy beside the runner that is missing or differs."""
    return hashlib.sha256(RUNNER_KNOBS_PATH.read_bytes()).hexdigest()


@dataclass
class Preparation:
    """What the host's first batch call adds to prepare it (tasks/prepare.yml), and what
    it needs to write facts.json from the call's ``bmx_facts`` payload."""

    host: str
    #: The host cache (``results/.hosts/HOST/ROLE.json``) and what it held.
    cache_path: Path
    known: dict[str, Any]
    #: The whole cache entry (fingerprint, state_files, facts, role_vars).
    cache: dict[str, Any]
    #: ansible-runner's data (the cached fingerprint and state files) and extra vars.
    data: dict[str, Any]
    extravars: dict[str, Any]


def preparation(spec: Spec, project_dir: Path, host: str) -> Preparation:
    """The variables of the prepare tasks for ``host`` (run_batch.yml, ``bmx_prepare``).

    A host seen before (``results/.hosts/HOST/ROLE.json``) whose fingerprint (boot
    id, kernel, CPUs, memory, package databases, the workload path's file system) is
    unchanged keeps its facts, with its CPU, SMT and block-device state read again;
    only a new or changed host gets full fact gathering, device probing and, for the
    workload tool, the install check (also run while the tool's version is unknown,
    and always for roles that start services).
    """
    role = spec.workload["role"]
    cache_path = layout.host_cache_path(project_dir, host, role)
    try:
        cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    except (OSError, ValueError):
        cache = {}  # an unreadable cache only costs a full gathering
    known = cache.get("facts") or {}
    workload = WORKLOADS.get(role)
    return Preparation(
        host=host, cache_path=cache_path, known=known, cache=cache,
        data={"bmx_cached_fingerprint": cache.get("fingerprint", "") if known else "",
              "bmx_cached_state_files": cache.get("state_files", []) if known else []},
        extravars={"bmx_prepare": True,
                   # "" is a known version: a command that declares no version command. A role
                   # whose install.yml only installs the tool (install_once) is skipped on a known host.
                   "bmx_install_always": not getattr(workload, "install_once", False)
                   or known.get("tool_version") is None,
                   # The host variables that hold the workload's directory and whether its
                   # finish.yml has work there (the descriptor's directory_var and cleanup_var).
                   "bmx_workload_directory_var": getattr(workload, "directory_var", ""),
                   # The fact the role's install.yml sets to the tool's version (a project's
                   # own role: <role>_version, as docs/workloads.md asks of a role).
                   "bmx_workload_version_var": workload.version_var if workload else f"{role}_version",
                   "bmx_workload_cleanup_var": getattr(workload, "cleanup_var", "")})


def write_facts(prep: Preparation, published: dict[str, Any], out: Path) -> dict[str, Any]:
    """Write facts.json (``out``) from the call's ``bmx_facts`` payload, and the host
    cache when the facts were gathered; returns the facts."""
    if published["gathered"]:
        facts = dict(published["facts"])
        entry = {"fingerprint": published["fingerprint"], "state_files": published["state_files"],
                 "facts": dict(facts)}
        if entry["fingerprint"]:
            atomic_write(prep.cache_path, json.dumps(entry, indent=1) + "\n")
        facts["facts_from"] = "gathered"
    else:
        facts = {**prep.known, **published["facts"], "facts_from": "cache"}
    facts["inventory_name"] = prep.host
    facts["gathered_at"] = iso(time.time())
    atomic_write(out, json.dumps(facts, indent=1) + "\n")
    return facts


def role_var_names(role: str) -> list[str]:
    """The host variables a one-call batch of ``role`` depends on: the workload path
    (``bmx_workload_path``, the descriptor's ``directory_var``), ``cleanup_var`` and the
    variables its commands are built with (``build_vars``). run_batch.yml publishes
    their values (``bmx_role_vars``), the one call checks they still hold."""
    workload = WORKLOADS.get(role)
    names = ["bmx_workload_path"] + ([workload.directory_var, workload.cleanup_var, *workload.build_vars]
                                     if workload else [])
    return [n for i, n in enumerate(names) if n and n not in names[:i]]


def cached_role_vars(project_dir: Path, host: str, role: str) -> dict[str, Any] | None:
    """The role variables run_batch.yml last published for ``host`` (the host cache), or None."""
    try:
        cache = json.loads(layout.host_cache_path(project_dir, host, role).read_text())
    except (OSError, ValueError):
        return None
    found = cache.get("role_vars") if isinstance(cache, dict) else None
    return found if isinstance(found, dict) and set(found) == set(role_var_names(role)) else None


def any_role_vars(project_dir: Path, role: str) -> dict[str, Any] | None:
    """The role variables run_batch.yml or a first one-call batch last published for some
    host of the project (the first host in name order that has them), or None: the guess
    a new host's first batch is built with, and checked by, in one call."""
    for path in sorted((Path(project_dir) / layout.RESULTS_DIR / layout.HOST_CACHE_DIR).glob(f"*/{role}.json")):
        found = cached_role_vars(project_dir, path.parent.name, role)
        if found is not None:
            return found
    return None


def save_role_vars(project_dir: Path, host: str, role: str, role_vars: dict[str, Any]) -> None:
    """Keep the role variables run_batch.yml published in the host cache (for the one call)."""
    path = layout.host_cache_path(project_dir, host, role)
    try:
        cache = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        cache = {}
    if cache.get("role_vars") != role_vars:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({**cache, "role_vars": role_vars}, indent=1) + "\n")


def workload_path(role: str, role_vars: dict[str, Any]) -> str:
    """The workload path tasks/prepare.yml probes, from the host's role variables."""
    workload = WORKLOADS.get(role)
    directory = role_vars.get(workload.directory_var) if workload and workload.directory_var else None
    return str(role_vars.get("bmx_workload_path") or directory or SCRATCH_DIR)


def workload_cleanup(role: str, role_vars: dict[str, Any]) -> bool:
    """Whether the role's finish.yml has work on the host (tasks/prepare.yml's ``workload_cleanup``)."""
    workload = WORKLOADS.get(role)
    var = workload.cleanup_var if workload else ""
    if not var:
        return True
    try:
        return int(role_vars.get(var) or 0) > 0
    except (TypeError, ValueError):
        return False  # as Ansible's int filter reads it: 0
