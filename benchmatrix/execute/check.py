"""``bmx check SPEC``: can this campaign run, on every host, before it starts?

For each host of the spec one read-only Ansible call (playbooks/check_host.yml) reads
every knob through the bmx_knob module (mode ``inspect``: nothing is written) and
tells, for each planned level, whether it can be set (the file exists, the kernel
supports it, it is writable, the value is valid, the client or driver is there); it
also looks for the workload's tool and its version. A reboot-class knob with several
levels needs ``allow_reboot``. The campaign's time is the plan's own estimate (``bmx plan``).
A blocker is anything that would fail the campaign later: one line each.

Each cell's workload command is built on the controller by the role's own builder and
dry-run on the host where the tool allows it (:func:`dry_runs`), both as the workload's
descriptor says (``command`` and ``dry_run``): fio parses the run's options or job file
(``fio --parse-only``), stress-ng its options and stressors (``stress-ng --dry-run``);
pgbench's and sysbench's help lists the options they know, and every option of the argv
must be among them. Distinct commands only: cells that build the same command are tried once.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import AnsibleError
from benchmatrix.execute.ansible import run_playbook
from benchmatrix.execute.hosts import resolve_hosts
from benchmatrix.execute.prepare import RUNNER_PATH
from benchmatrix.names import printable
from benchmatrix.spec.load import Spec, did_you_mean

#: Most distinct commands dry-run per host (each is a process start on the host).
MAX_DRY_RUNS = 64
_HELP_OPTION = re.compile(r"(--[A-Za-z0-9][A-Za-z0-9_-]*)")


@dataclass
class DryRun:
    """One distinct command to try on the host, and the cells that build it.

    ``kind`` is ``parse`` (the tool checks the command itself: ``argv`` runs and must
    exit 0), ``options`` (``argv`` prints the tool's help; every ``--option`` of
    ``options`` must appear in it or in a ``general`` help, such as ``sysbench --help``
    beside ``sysbench cpu help``) or ``problem`` (nothing to run: see ``problem``).
    ``stdin`` feeds a job file to ``fio --parse-only -``.
    """

    kind: str
    argv: list[str]
    cells: list[str]
    options: list[str] = field(default_factory=list)
    stdin: str | None = None
    problem: str = ""  # the controller could not build the command (the batch would fail the same way)

    def as_dict(self) -> dict[str, Any]:
        """The task's data for check_host.yml."""
        return {"argv": self.argv, **({"stdin": self.stdin} if self.stdin is not None else {})}


@dataclass
class HostCheck:
    """What one host said: per knob its current value and each level's problem ('' = settable).

    ``dry_runs`` holds one dict per distinct command tried: ``{command, cells, ok,
    error}``; ``storage`` one per directory the workload's files go to: ``{path,
    there, source, fstype, mountpoint, note}``; ``host_env`` the batch runner's
    ``host_environment()`` of the host and ``warnings`` why it is busy or untuned
    (:mod:`benchmatrix.results.host_env`), which do not block (JSON-ready, like the rest).
    """

    host: str
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool: str = ""
    blockers: list[str] = field(default_factory=list)
    dry_runs: list[dict[str, Any]] = field(default_factory=list)
    storage: list[dict[str, Any]] = field(default_factory=list)
    host_env: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def planned_levels(spec: Spec) -> dict[str, list[Any]]:
    """Every level each knob factor takes in the spec's cells, in first-seen order."""
    out: dict[str, list[Any]] = {f: [] for f in spec.knobs}
    for cell in spec.cells:
        for f in spec.knobs:
            if cell.factors[f] not in out[f]:
                out[f].append(cell.factors[f])
    return out


def tool_of(spec: Spec, project_dir: Path) -> str:
    """The workload tool's executable: the role descriptor's ``binary``, else (its binary
    is "", workload_command) the first argument of the spec's argv, else (a role without
    a descriptor) the role's name without ``workload_``. A ``vars.command`` line gives its
    first word as the role splits it (shlex); "" when that word is a template or the line
    cannot be split (the role refuses it)."""
    from benchmatrix.workloads import WORKLOADS

    role = spec.workload["role"]
    workload = WORKLOADS.get(role)
    if workload is not None and not workload.binary:
        variables = spec.workload.get("vars") or {}
        argv = variables.get("argv") or []
        if isinstance(variables.get("command"), str):
            try:
                argv = shlex.split(variables["command"])
            except ValueError:
                argv = []
        first = str(argv[0]) if argv else ""
        return "" if "{{" in first else first
    return workload.binary if workload is not None else role.removeprefix("workload_")


def _cell_runs(spec: Spec) -> list[dict[str, Any]]:
    """One run per cell, as run_batch.yml hands them to a workload role (variables rendered)."""
    from benchmatrix.spec.load import render_vars

    cells = list(spec.cells)
    ctl = spec.control_cell()
    if ctl is not None and all(c.cell_id != ctl.cell_id for c in cells):
        cells.append(ctl)
    out = []
    for cell in cells:
        ctx = {**cell.factors, "experiment": spec.name, "host": "localhost", "run_id": f"check-{cell.cell_id}",
               "cell_id": cell.cell_id, "replicate": 1, "warmup": False}
        out.append({"run_id": f"check-{cell.cell_id}", "cell_id": cell.cell_id, "label": cell.label(),
                    "vars": render_vars(spec.workload.get("vars") or {}, ctx), "factors": cell.factors})
    return out


def _commands(spec: Spec, project_dir: Path, tool: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Each cell's command as the role builds it (the descriptor's ``command``): (commands
    with argv and maybe a job file, problems by label)."""
    from benchmatrix.errors import WorkloadVarsError
    from benchmatrix.workloads import WORKLOADS

    workload = WORKLOADS.get(spec.workload["role"])
    if workload is None or workload.command is None:
        return [], {}
    built, problems = [], {}
    for run in _cell_runs(spec):
        try:
            cmd = workload.command(run, tool, str(project_dir))
        except WorkloadVarsError as exc:
            problems[run["label"]] = str(exc)
            continue
        built.append({**cmd, "label": run["label"]})
    return built, problems


def dry_runs(spec: Spec, project_dir: Path, tool: str) -> list[DryRun]:
    """The distinct dry runs of the spec's cells (at most :data:`MAX_DRY_RUNS`): each
    command tried as the ``dry_run`` of its tool's descriptor says (the descriptor whose
    binary the argv runs, else the role's: a workload_command running fio is tried as fio)."""
    from benchmatrix.workloads import WORKLOADS

    built, problems = _commands(spec, project_dir, tool)
    out: dict[tuple[Any, ...], DryRun] = {}
    for label, why in problems.items():
        out[("problem", why)] = out.get(("problem", why)) or DryRun("problem", [], [], problem=why)
        out[("problem", why)].cells.append(label)
    helps: dict[tuple[str, ...], DryRun] = {}
    by_binary = {w.binary: w for w in WORKLOADS.values() if w.binary and w.dry_run is not None}
    own = WORKLOADS.get(spec.workload["role"])
    for cmd in built:
        argv = [str(a) for a in cmd["argv"]]
        workload = by_binary.get(Path(argv[0]).name, own) if argv else None
        probe = workload.dry_run(argv, cmd.get("job")) if workload is not None and workload.dry_run else None
        if probe is None:
            continue
        if probe.kind == "parse":
            key: tuple[Any, ...] = ("parse", *probe.argv, probe.stdin or "")
            out.setdefault(key, DryRun("parse", list(probe.argv), [], stdin=probe.stdin)).cells.append(cmd["label"])
            continue
        dry = helps.setdefault(probe.argv, DryRun("options", list(probe.argv), []))
        dry.cells.append(cmd["label"])
        dry.options = sorted(set(dry.options) | set(probe.options))
        if probe.general:  # a command's help lists its own options; the general help the shared ones
            helps.setdefault(probe.general, DryRun("general", list(probe.general), []))
    return (list(out.values()) + list(helps.values()))[:MAX_DRY_RUNS]


def _judge_dry_runs(host: str, tries: list[DryRun], said: list[dict[str, Any]], out: HostCheck) -> None:
    """Turn the host's answers into ``out.dry_runs`` and one blocker per failing command."""
    # sysbench's general options (--threads, --time), known to every test's option check.
    general = "\n".join(str((said[i] if i < len(said) else {}).get("stdout") or "")
                        for i, dry in enumerate(tries) if dry.kind == "general")
    for i, dry in enumerate(tries):
        if dry.kind == "general":
            continue
        cells = dry.cells[0] + (f" (and {len(dry.cells) - 1} more cell(s))" if len(dry.cells) > 1 else "")
        if dry.kind == "problem":
            out.dry_runs.append({"command": "", "cells": dry.cells, "ok": False, "error": dry.problem})
            out.blockers.append(f"{host}: cell {cells}: {dry.problem}")
            continue
        got = said[i] if i < len(said) else {}
        text = "\n".join(str(got.get(k) or "") for k in ("stderr", "stdout", "msg"))
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        shown = " ".join(dry.argv[:2]) + (" ..." if len(dry.argv) > 2 else "")
        if dry.kind == "parse":
            ok = got.get("rc") == 0
            error = "" if ok else (lines[0] if lines else f"exit status {got.get('rc')}")[:300]
            what = " ".join([Path(dry.argv[0]).name, *dry.argv[1:2]])  # fio --parse-only
        else:
            known = set(_HELP_OPTION.findall(text + "\n" + general))
            unknown = [o for o in dry.options if o not in known]
            ok = bool(known) and not unknown
            # The closest option of the help for the first unknown one (a typo, most often).
            error = "" if ok else (f"unknown option(s) {', '.join(unknown)}{did_you_mean(unknown[0], known)}"
                                   if known
                                   else f"no option list from {' '.join(dry.argv)}: {lines[0] if lines else ''}")
            what = f"the option list of {' '.join(dry.argv)}"
        out.dry_runs.append({"command": shown, "cells": dry.cells, "ok": ok, "error": error})
        if not ok:
            out.blockers.append(f"{host}: cell {cells}: the workload's command fails {what}: {error}")


def role_directory(spec: Spec) -> tuple[str, str]:
    """(host variable, default) of the directory the workload role puts its files in: the
    descriptor's ``files_var`` and ``files_default``; for a project's own role (no
    descriptor) its ``<role>_directory`` variable, without a default."""
    from benchmatrix.workloads import WORKLOADS

    role = spec.workload["role"]
    workload = WORKLOADS.get(role)
    if workload is None:
        return f"{role}_directory", ""
    return workload.files_var, workload.files_default


def role_variables(spec: Spec) -> dict[str, str]:
    """The host variables ``bmx check`` reads for the workload role, by what they mean
    (``binary``, ``install``, ``loopfs_mb``): the descriptor's ``binary_var``,
    ``install_var`` and ``loopfs_var`` ("" where the role has none); for a project's own
    role (no descriptor) ``<role>_binary``, ``<role>_install`` and ``<role>_loopfs_mb``."""
    from benchmatrix.workloads import WORKLOADS

    role = spec.workload["role"]
    workload = WORKLOADS.get(role)
    if workload is None:
        return {name: f"{role}_{name}" for name in ("binary", "install", "loopfs_mb")}
    return {"binary": workload.binary_var, "install": workload.install_var, "loopfs_mb": workload.loopfs_var}


def check_host(spec: Spec, project_dir: Path, host: str, levels: dict[str, list[Any]], log: Path) -> HostCheck:
    """One host's check (one Ansible call); never raises for the host's own problems."""
    out = HostCheck(host)
    knobs = [{"factor": f, "role": k.role, "value": levels[f][0] if levels[f] else "", "vars": k.vars,
              "cost": k.cost_class} for f, k in spec.knobs.items()]
    tool = tool_of(spec, project_dir)
    as_text = {f: [str(v) for v in ls] for f, ls in levels.items()}
    tries = dry_runs(spec, project_dir, tool) if tool else []
    try:
        result = run_playbook(
            "check_host.yml", project_dir=Path(project_dir) / "playbooks", inventory=spec.inventory_path(project_dir),
            host=host, data={"bmx_knobs": knobs, "bmx_knob_levels": as_text,
                             "bmx_check_commands": [t.as_dict() for t in tries if t.kind != "problem"],
                             "bmx_check_paths": storage_paths(spec)},
            extravars={"bmx_host": host, "bmx_workload_role": spec.workload["role"], "bmx_check_tool": tool,
                       # The batch runner: its --host-env reads the host's noise settings.
                       "bmx_check_runner_source": str(RUNNER_PATH), "bmx_experiment": spec.name,
                       "bmx_check_directory_var": role_directory(spec)[0],
                       "bmx_check_role_vars": role_variables(spec),
                       "bmx_check_role_directory": role_directory(spec)[1],
                       "bmx_allow_reboot": bool(spec.data.get("allow_reboot", False))},
            log=log, timeout=300)
        said = result.payload("bmx_check")
    except AnsibleError as exc:  # a ResultChannelError too: the check returned no valid result
        out.blockers.append(f"{host}: cannot be checked: {str(exc).splitlines()[0]}")
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
    _judge_storage(host, said, out)
    _judge_env(host, spec, said, out)
    if rc == 0:  # without the tool there is nothing to dry-run; the line above says why
        runnable = [t for t in tries if t.kind != "problem"]
        answers = [{"rc": int(rc), "stdout": o, "stderr": e, "msg": m} for rc, o, e, m in
                   zip(said.get("dry_rc") or [], said.get("dry_out") or [], said.get("dry_err") or [],
                       said.get("dry_msg") or [])]
        _judge_dry_runs(host, [t for t in tries if t.kind == "problem"] + runnable,
                        [{}] * (len(tries) - len(runnable)) + list(answers), out)
    return out


def cpus_used(spec: Spec) -> int | None:
    """The most CPUs a cell's runs are confined to (the workload's ``cpus``), None for all of them."""
    from benchmatrix.workloads.cpulist import parse_cpu_list

    most = None
    for run in _cell_runs(spec):
        cpus = run["vars"].get("cpus") if isinstance(run["vars"], dict) else None
        if cpus in (None, "", "all"):
            return None
        try:
            most = max(most or 0, len(parse_cpu_list(cpus)))
        except Exception:  # a bad list is validation's and the role's to refuse
            return None
    return most


def _judge_env(host: str, spec: Spec, said: dict[str, Any], out: HostCheck) -> None:
    from benchmatrix.results.host_env import busy_warning, untuned_warnings

    env = said.get("host_env") or {}
    out.host_env = dict(env)
    if not env:
        return
    used = cpus_used(spec) or env.get("cpus")
    busy = busy_warning(env.get("load_1m"), used, "now")
    out.warnings += [f"{host}: {w}" for w in ([busy] if busy else []) + untuned_warnings(env)]


def storage_paths(spec: Spec) -> list[str]:
    """Absolute directories the cells' files go to (fio's ``directory``/``filename``, sysbench
    has none of its own), beside the role's directory the host adds."""
    out: list[str] = []
    for run in _cell_runs(spec):
        v = run["vars"] if isinstance(run["vars"], dict) else {}
        for key, path in (("directory", v.get("directory")), ("filename", v.get("filename"))):
            if isinstance(path, str) and path.startswith("/"):
                d = path if key == "directory" else str(Path(path).parent)
                if d not in out:
                    out.append(d)
    return out[:MAX_DRY_RUNS]


def _judge_storage(host: str, said: dict[str, Any], out: HostCheck) -> None:
    """Where the workload's files will be: the file system of each directory, or "not there
    yet" for one the campaign creates (a loop file system, a scratch directory)."""
    role_dir_loopfs = int(said.get("loopfs_mb") or 0)
    paths = said.get("storage_paths") or []
    for i, (path, lines) in enumerate(zip(paths, said.get("storage_out") or [])):
        lines = list(lines or [])
        near = lines[0] if lines else ""
        fields = lines[1].split() if len(lines) > 1 else []
        source, fstype, mount = (fields + ["", "", ""])[:3]
        entry = {"path": path, "there": near == path, "source": source, "fstype": fstype, "mountpoint": mount,
                 "note": ""}
        # The role's directory comes first; with workload_<tool>_loopfs_mb the role mounts a
        # loop file system there when the campaign prepares the host.
        if i == 0 and role_dir_loopfs > 0 and mount != path:
            entry.update(there=False, source="", fstype="", mountpoint="",
                         note=f"not there yet: a {role_dir_loopfs} MiB ext4 loop file system the role creates and "
                              f"mounts when the campaign prepares {host}")
        elif near != path:
            entry.update(source="", fstype="", mountpoint="",
                         note=f"not there yet: created when the campaign prepares {host} or a before_run step runs "
                              f"(nearest existing parent: {near or '/'})")
        else:
            entry["note"] = f"on {source} ({fstype}, mounted at {mount})"
        out.storage.append(entry)


def dry_run_line(check: HostCheck) -> str:
    """One line per host on the dry runs: how many distinct commands, how many passed."""
    if not check.dry_runs:
        return f"{check.host}: dry run: none (the tool does not allow one, or it is not installed yet)"
    ok = sum(1 for d in check.dry_runs if d["ok"])
    cells = sum(len(d["cells"]) for d in check.dry_runs)
    return (f"{check.host}: dry run: {len(check.dry_runs)} distinct command(s) for {cells} cell(s), {ok} ok"
            + (f", {len(check.dry_runs) - ok} failed" if ok < len(check.dry_runs) else ""))


def check_lines(checks: list[HostCheck],
                levels: dict[str, list[Any]]) -> tuple[list[str], list[str], list[str]]:
    """What ``bmx check`` prints of its hosts: (stdout's lines: the knob table, then per
    host its tool, dry runs, storage and settings; the warnings and the blockers, for
    stderr), control and bidirectional characters escaped: hosts come from the
    inventory, notes and blockers quote what the host and the tool said."""
    from benchmatrix.results.host_env import env_line

    out = check_table(checks, levels).splitlines()
    err: list[str] = []
    for c in checks:
        out.append(printable(f"{c.host}: workload tool {c.tool or '-'}"))
        out.append(printable(dry_run_line(c)))
        out += [printable(f"{c.host}: files in {st['path']}: {st['note']}") for st in c.storage]
        if c.host_env:
            out.append(printable(f"{c.host}: host {env_line(c.host_env)}"))
        # Not "bmx check: HOST: ...": that prefix is a blocker's, which scripts count.
        err += [printable(f"bmx check warning: {w}") for w in c.warnings]
    return out, err, [printable(f"bmx check: {b}") for c in checks for b in c.blockers]


def check_spec(spec: Spec, project_dir: Path, log_dir: Path) -> list[HostCheck]:
    """Check every host of the spec, one after the other."""
    levels = planned_levels(spec)
    hosts = resolve_hosts(spec.inventory_path(project_dir), spec.hosts)
    return [check_host(spec, project_dir, h, levels, Path(log_dir) / f"check-{h}.log") for h in hosts]


def check_table(checks: list[HostCheck], levels: dict[str, list[Any]]) -> str:
    """The host × knob table: current value, and each planned level as ok or blocked.

    Control and bidirectional characters of a cell (a host, a level, a value the host
    read) are shown escaped (``\\x1b``, ``\\u202e``), as every table bmx prints.
    """
    rows = [("host", "knob", "role", "current", "planned levels")]
    for c in checks:
        for f, k in c.knobs.items():
            marks = ", ".join(f"{lvl} {'ok' if not why else 'BLOCKED'}" for lvl, why in k["levels"].items())
            rows.append(tuple(printable(str(x)) for x in (c.host, f, k["role"], k["current"], marks)))
        if not c.knobs:
            rows.append((printable(c.host), "-", "-", "-", "no knobs" if not levels else "not checked"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths)) + "  " + r[4] for r in rows)
