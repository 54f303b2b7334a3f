"""The body of rule prepare_host: install the batch runner and report the host's facts (facts.json).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import benchmatrix
from benchmatrix import layout
from benchmatrix.execute.ansible import WHOLE_CALL, run_playbook
from benchmatrix.files import atomic_write
from benchmatrix.layout import exp_dir_of
from benchmatrix.results.campaign import campaign_id
from benchmatrix.results.records import iso
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import WORKLOADS

PACKAGE_DIR = Path(benchmatrix.__file__).resolve().parent


#: The batch runner that prepare_host installs on every host (stdlib only).
RUNNER_PATH = PACKAGE_DIR / "host" / "batch_runner.py"


#: The knob backends, installed beside the runner (it sets live knobs between runs with them).
RUNNER_KNOBS_PATH = RUNNER_PATH.parent / "knobs.py"


@functools.cache
def runner_digest() -> str:
    """SHA-256 of the batch runner: a batch replaces a copy on its host that differs."""
    return hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest()


@functools.cache
def runner_knobs_digest() -> str:
    """SHA-256 of knobs.py: a batch replaces a copy beside the runner that is missing or differs."""
    return hashlib.sha256(RUNNER_KNOBS_PATH.read_bytes()).hexdigest()


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
    cache_path = layout.host_cache_path(project_dir, host, role)
    try:
        cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    except (OSError, ValueError):
        cache = {}  # an unreadable cache only costs a full gathering
    known = cache.get("facts") or {}
    workload = WORKLOADS.get(role)
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
        log=layout.ansible_log(exp, f"prepare-{host}"), start_until=WHOLE_CALL)
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
