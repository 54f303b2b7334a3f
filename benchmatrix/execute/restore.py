"""The body of rule restore_host, and the knob items every playbook takes: put a host's knobs
back to their baseline (also after a failure or an interrupt).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.errors import (
    BenchmatrixError,
)
from benchmatrix.execute.ansible import run_playbook
from benchmatrix.files import atomic_write
from benchmatrix.host.knobs import BACKENDS
from benchmatrix.layout import exp_dir_of
from benchmatrix.results.records import iso
from benchmatrix.spec.load import REBOOT_ROLES, Spec
from benchmatrix.workloads import WORKLOADS


def knob_items(spec: Spec, factors: dict[str, Any]) -> list[dict[str, Any]]:
    """The knobs of a batch as the playbooks take them (``bmx_knobs``)."""
    return reboots_first([{"factor": f, "role": k.role, "value": factors[f], "vars": k.vars, "cost": k.cost_class}
                           for f, k in spec.knobs.items()])


def reboots_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
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

    The baseline a host keeps itself (the value before the knob's first change, kept by
    the bmx_knob module and the batch runner before they write) wins over baseline.json;
    without baseline.json the spec's knobs are restored where the host keeps one.

    Raises:
        AnsibleError: the host is unreachable or a knob role failed.
        BenchmatrixError: a knob did not return to its baseline.
    """
    exp = exp_dir_of(project_dir, spec)
    path = exp / layout.HOSTS_DIR / host / layout.BASELINE
    baseline = json.loads(path.read_text()) if path.is_file() else {}
    states: dict[str, Any] = {}
    knobs = [{"factor": f, "role": b["role"], "value": b["value"], "vars": b.get("vars", {}),
              "cost": b.get("cost", "none")} for f, b in baseline.items()]
    if not baseline:
        # No baseline recorded (the controller died during the host's first batch): the
        # host may still keep one for a knob the runner changed; without a value the
        # module restores only such a knob.
        knobs = [{"factor": f, "role": k.role, "value": None, "vars": k.vars, "cost": k.cost_class}
                 for f, k in spec.knobs.items() if getattr(BACKENDS.get(k.role), "writes", True)]
    # A workload without anything to clean up and no knob to restore needs no Ansible call.
    if knobs or _needs_cleanup(spec, exp / layout.HOSTS_DIR / host / layout.FACTS):
        knobs = reboots_first(knobs)
        result = run_playbook(
            "restore_host.yml", project_dir=Path(project_dir) / "playbooks",
            inventory=spec.inventory_path(project_dir), host=host,
            data={"bmx_knobs": knobs},
            extravars={"bmx_host": host, "bmx_experiment": spec.name,
                       "bmx_workload_role": spec.workload["role"],
                       "bmx_allow_reboot": spec.allow_reboot},
            log=layout.ansible_log(exp, f"restore-{host}"))
        states = result.payload("bmx_knobs")
    summary = {"host": host, "restored_at": iso(time.time()), "knobs": states}
    if out is not None:
        atomic_write(out, json.dumps(summary, indent=1) + "\n")
    wrong = [f"{f}: baseline {k['intended']!r}, actual {k['actual']!r}" for f, k in states.items() if not k.get("ok")]
    if wrong:
        raise BenchmatrixError(f"host {host}: knobs not back at their baseline: {'; '.join(wrong)}")
    return summary


def may_be_reconfigured(spec: Spec, exp: Path, host: str) -> bool:
    """Whether ``host`` may hold a knob this experiment changed: it has a recorded
    baseline, or one of its batches started (a controller killed during the host's
    first batch recorded none, and the host keeps the baseline itself)."""
    from benchmatrix.plan.design import batches

    if (exp / layout.HOSTS_DIR / host / layout.BASELINE).is_file():
        return True
    if not any(getattr(BACKENDS.get(k.role), "writes", True) for k in spec.knobs.values()):
        return False
    if not (exp / layout.PLAN).is_file():
        return False
    order, host_of = batches(exp / layout.PLAN)
    return any(host_of[b] == host and layout.batch_log(exp, b).is_file() for b in order)


def restore_needed(spec: Spec, exp: Path, host: str) -> bool:
    """Whether ``host`` may have anything to put back at the campaign's end: the spec has
    a knob (a batch may change it and record its baseline), or the workload's finish.yml
    has work there (:func:`_needs_cleanup`; a host not prepared yet counts as having
    work). Without either, rule restore_host does not run for the host (the Snakefile's
    ``restore_markers``): :func:`restore_host` would call nothing and only write
    restored.json.
    """
    return bool(spec.knobs) or _needs_cleanup(spec, Path(exp) / layout.HOSTS_DIR / host / layout.FACTS)


def _needs_cleanup(spec: Spec, facts_path: Path) -> bool:
    """Whether the workload role's finish.yml has work on the host: a role that cleans
    up, unless the host's preparation found nothing to undo (facts.json ``workload_cleanup``
    false: the descriptor's ``cleanup_var`` is 0 on the host, fio without its loop file
    system). Without facts, clean up."""
    if not getattr(WORKLOADS.get(spec.workload["role"]), "cleanup", False):
        return False
    try:
        facts = json.loads(facts_path.read_text())
    except (OSError, ValueError):
        return True
    return not (isinstance(facts, dict) and facts.get("workload_cleanup") in (False, "False", "false"))


def restore_quietly(spec: Spec, project_dir: Path, host: str) -> bool:
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

    A host counts as touched when it may hold a changed knob (:func:`may_be_reconfigured`:
    a recorded baseline, or a baseline the host keeps itself) and one of its batch jobs
    started (its Snakemake log) after its last restore (``restored.json``). Called from
    the Snakefile's ``onerror``, so that both ``bmx run`` and a plain ``snakemake`` leave
    no host reconfigured, whatever failed.

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
        if not may_be_reconfigured(spec, exp, host):
            continue
        started = [p.stat().st_mtime for b in order if host_of[b] == host
                   for p in [layout.batch_log(exp, b)] if p.is_file()]
        restored = exp / layout.HOSTS_DIR / host / layout.RESTORED
        if started and restored.is_file() and restored.stat().st_mtime >= max(started):
            continue
        if restore_quietly(spec, project_dir, host):
            done.append(host)
    return done
