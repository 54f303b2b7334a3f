"""Any command: the argv builder of the workload_command role (:mod:`.argv`) and the parser of
the metrics a spec declares next to the command (:mod:`.parse`), or of the command's time as the
batch runner measured it when the spec declares none; :data:`WORKLOAD` describes the role."""

from __future__ import annotations

import shlex
from typing import Any

from benchmatrix.spec.declared import PICKS, check_declarations
from benchmatrix.workloads.base import Workload, read_only, whole_seconds
from benchmatrix.workloads.command.argv import KNOWN, command_argv
from benchmatrix.workloads.command.parse import TIMED_METRICS, parse_command
from benchmatrix.workloads.fio import fio_seconds


def argv_seconds(argv: list[Any]) -> float | None:
    """The time limit in a command's argv: ``-T N`` / ``--time=N`` (pgbench, sysbench) or fio's ``--runtime=``."""
    args = [str(a) for a in argv]
    total = None
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in ("-T", "--time") and nxt is not None:
            total = whole_seconds(nxt)
        elif a.startswith("--time="):
            total = whole_seconds(a.split("=", 1)[1])
        elif a.startswith("-T") and len(a) > 2:
            total = whole_seconds(a[2:])
        elif a.startswith("--runtime="):
            total = fio_seconds(a.split("=", 1)[1])
        elif a.startswith("--ramp_time=") and total is not None:
            total += fio_seconds(a.split("=", 1)[1]) or 0.0
    return total


def _seconds(v: Any) -> float | None:
    argv = v.get("argv")
    if isinstance(v.get("command"), str):
        try:
            argv = shlex.split(v["command"])
        except ValueError:
            return None
    return argv_seconds(argv) if isinstance(argv, list) else None


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    """The spec's argv (or command line split) as the role builds it; its tool's own
    descriptor (by binary) says how to dry-run it."""
    return {"argv": [str(a) for a in command_argv(run, run.get("vars") or {})]}


def _measure(workload: Any) -> bool:
    """Without declared metrics, the runner times the command (its wall time, CPU and memory are the metrics)."""
    return not workload.get("metrics")


def _build(runs: list[dict[str, Any]], role_vars: Any) -> dict[str, Any]:
    """The batch's commands (:attr:`Workload.build`); the host's workload_command_env is
    merged on the host (``env_var``)."""
    from benchmatrix.workloads.command.argv import workload_command_argv

    return {"commands": workload_command_argv(runs), "files": [], "dirs": []}


WORKLOAD = Workload(
    role="workload_command",
    summary="any command; metrics declared in the spec (regex or JSON path), else timed by bmx",
    parse=parse_command, argv="benchmatrix.workloads.command.argv", install_once=True,
    seconds=_seconds, command=_command, install_var="workload_command_install",
    version_var="workload_command_version", measure=_measure, metric_names=tuple(TIMED_METRICS),
    build=_build, env_var="workload_command_env", variables=read_only(KNOWN),
    # Time and memory: positive, and less is better (a spec's own metric says its own direction).
    directions=(("^(" + "|".join(TIMED_METRICS) + ")$", "lower"),))

__all__ = ["PICKS", "TIMED_METRICS", "WORKLOAD", "argv_seconds", "check_declarations", "parse_command"]
