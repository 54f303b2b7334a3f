"""``bmx check SPEC``: can this campaign run, on every host, before it starts?

For each host of the spec one read-only Ansible call (playbooks/check_host.yml) reads
every knob through the bmx_knob module (mode ``inspect``: nothing is written) and
tells, for each planned level, whether it can be set (the file exists, the kernel
supports it, it is writable, the value is valid, the client or driver is there); it
also looks for the workload's tool and its version. A reboot-class knob with several
levels needs ``allow_reboot``. The campaign's time is the plan's own estimate (``bmx plan``).
A blocker is anything that would fail the campaign later: one line each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import AnsibleError
from benchmatrix.execute.ansible import run_playbook
from benchmatrix.execute.hosts import resolve_hosts
from benchmatrix.spec.load import Spec


@dataclass
class HostCheck:
    """What one host said: per knob its current value and each level's problem ('' = settable)."""

    host: str
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool: str = ""
    blockers: list[str] = field(default_factory=list)


def planned_levels(spec: Spec) -> dict[str, list[Any]]:
    """Every level each knob factor takes in the spec's cells, in first-seen order."""
    out: dict[str, list[Any]] = {f: [] for f in spec.knobs}
    for cell in spec.cells:
        for f in spec.knobs:
            if cell.factors[f] not in out[f]:
                out[f].append(cell.factors[f])
    return out


def tool_of(spec: Spec, project_dir: Path) -> str:
    """The workload tool's executable: the role's ``<role>_binary`` default, the first
    argument of a workload_command argv, else the role's name without ``workload_``."""
    role = spec.workload["role"]
    if role == "workload_command":
        argv = (spec.workload.get("vars") or {}).get("argv") or []
        first = str(argv[0]) if argv else ""
        return "" if "{{" in first else first
    defaults = Path(project_dir) / "playbooks" / "roles" / role / "defaults" / "main.yml"
    text = defaults.read_text() if defaults.is_file() else ""
    match = re.search(rf"^{role}_binary:\s*['\"]?([^'\"\s#{{]+)", text, re.M)
    return match.group(1) if match else role.removeprefix("workload_")


def check_host(spec: Spec, project_dir: Path, host: str, levels: dict[str, list[Any]], log: Path) -> HostCheck:
    """One host's check (one Ansible call); never raises for the host's own problems."""
    out = HostCheck(host)
    knobs = [{"factor": f, "role": k.role, "value": levels[f][0] if levels[f] else "", "vars": k.vars,
              "cost": k.cost_class} for f, k in spec.knobs.items()]
    tool = tool_of(spec, project_dir)
    as_text = {f: [str(v) for v in ls] for f, ls in levels.items()}
    try:
        result = run_playbook(
            "check_host.yml", project_dir=Path(project_dir) / "playbooks", inventory=spec.inventory_path(project_dir),
            host=host, data={"bmx_knobs": knobs, "bmx_knob_levels": as_text},
            extravars={"bmx_host": host, "bmx_workload_role": spec.workload["role"], "bmx_check_tool": tool,
                       "bmx_allow_reboot": bool(spec.data.get("allow_reboot", False))},
            log=log, timeout=300)
    except AnsibleError as exc:
        out.blockers.append(f"{host}: cannot be checked: {str(exc).splitlines()[0]}")
        return out
    said = (result.task_result("Report the check to benchmatrix", host) or {}).get("msg")
    if not said:
        out.blockers.append(f"{host}: the check returned no result (log: {log})")
        return out
    for f, k in spec.knobs.items():
        reboot = k.cost_class == "reboot" and len(levels[f]) > 1 and not said.get("allow_reboot")
        no_reboot = f"needs a reboot of {host}: set allow_reboot: true in the spec or for this host in the inventory"
        got = said["knobs"].get(f)
        if got is None:
            out.blockers.append(f"{host}: knob {f}: the check returned no result for it")
            continue
        out.knobs[f] = got
        if got.get("blocker"):  # the host lacks what every level needs (a client, a driver): one line
            out.blockers.append(f"{host}: knob {f} ({k.role}) cannot be set: {got['blocker']}")
            continue
        out.blockers += [f"{host}: knob {f} ({k.role}) cannot be set to {lvl}: {why}"
                         for lvl, why in got["levels"].items() if why]
        out.blockers += [f"{host}: knob {f} ({k.role}) {no_reboot}"] if reboot else []
    lines = said.get("tool_out") or []
    rc = int(said.get("tool_rc", -1))
    if not tool:
        out.tool = "(not checked: the command is templated)"
    elif rc == 0:
        out.tool = f"{tool} {lines[1] if len(lines) > 1 else ''}".strip() + (f" ({lines[0]})" if lines else "")
    elif said.get("tool_installs") and spec.workload["role"] != "workload_command":
        out.tool = f"{tool} missing: the role installs it when the campaign prepares {host}"
    else:
        out.tool = f"{tool} missing"
        out.blockers.append(f"{host}: the workload tool {tool} is not installed and the role will not install it")
    return out


def check_spec(spec: Spec, project_dir: Path, log_dir: Path) -> list[HostCheck]:
    """Check every host of the spec, one after the other."""
    levels = planned_levels(spec)
    hosts = resolve_hosts(spec.inventory_path(project_dir), spec.hosts)
    return [check_host(spec, project_dir, h, levels, Path(log_dir) / f"check-{h}.log") for h in hosts]


def check_table(checks: list[HostCheck], levels: dict[str, list[Any]]) -> str:
    """The host × knob table: current value, and each planned level as ok or blocked."""
    rows = [("host", "knob", "role", "current", "planned levels")]
    for c in checks:
        for f, k in c.knobs.items():
            marks = ", ".join(f"{lvl} {'ok' if not why else 'BLOCKED'}" for lvl, why in k["levels"].items())
            rows.append((c.host, f, k["role"], str(k["current"]), marks))
        if not c.knobs:
            rows.append((c.host, "-", "-", "-", "no knobs" if not levels else "not checked"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths)) + "  " + r[4] for r in rows)
