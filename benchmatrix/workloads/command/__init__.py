"""Any command: the argv builder of the workload_command role (:mod:`.argv`) and the parser of
the metrics a spec declares next to the command (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from __future__ import annotations

from typing import Any

from benchmatrix.spec.declared import PICKS, check_declarations
from benchmatrix.workloads.base import Workload, whole_seconds
from benchmatrix.workloads.command.parse import parse_command
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
    return argv_seconds(argv) if isinstance(argv, list) else None


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    """The spec's argv as it is; its tool's own descriptor (by binary) says how to dry-run it."""
    return {"argv": [str(a) for a in run["vars"].get("argv") or []]}


def _build(runs: list[dict[str, Any]], role_vars: Any) -> dict[str, Any]:
    """The batch's commands (:attr:`Workload.build`); the host's workload_command_env is
    merged on the host (``env_var``)."""
    from benchmatrix.workloads.command.argv import workload_command_argv

    return {"commands": workload_command_argv(runs), "files": [], "dirs": []}


WORKLOAD = Workload(
    role="workload_command", summary="any command; metrics declared in the spec (regex or JSON path)",
    parse=parse_command, argv="benchmatrix.workloads.command.argv", install_once=True,
    seconds=_seconds, command=_command, install_var="workload_command_install",
    version_var="workload_command_version", build=_build, env_var="workload_command_env")

__all__ = ["PICKS", "WORKLOAD", "argv_seconds", "check_declarations", "parse_command"]
