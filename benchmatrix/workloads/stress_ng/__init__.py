"""stress-ng: the argv builder of the workload_stress_ng role (:mod:`.argv`) and the parser
of its YAML report with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from __future__ import annotations

from typing import Any

from benchmatrix.workloads.base import DryRunCommand, Workload, read_only, whole_seconds
from benchmatrix.workloads.stress_ng.argv import KNOWN
from benchmatrix.workloads.stress_ng.parse import STRESS_NG_METRICS, parse_stress_ng


def _seconds(v: Any) -> float | None:
    """``timeout`` (``--timeout``, whole seconds, default 10 as the argv builder's)."""
    return whole_seconds(v.get("timeout", 10))


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    from benchmatrix.workloads.stress_ng.argv import workload_stress_ng_argv

    return workload_stress_ng_argv([run], binary)[0]


def _dry_run(argv: list[str], job: str | None) -> DryRunCommand:
    """``stress-ng --dry-run``: parses every option and stressor, runs none."""
    return DryRunCommand("parse", (argv[0], "--dry-run", *argv[1:]))


def _build(runs: list[dict[str, Any]], role_vars: Any) -> dict[str, Any]:
    """The batch's commands (:attr:`Workload.build`)."""
    from benchmatrix.workloads.stress_ng.argv import workload_stress_ng_argv

    return {"commands": workload_stress_ng_argv(runs, str(role_vars["workload_stress_ng_binary"])),
            "files": [], "dirs": []}


WORKLOAD = Workload(
    role="workload_stress_ng", summary="stress-ng stressors (cpu, vm, io, ...); its YAML metrics report",
    parse=parse_stress_ng, argv="benchmatrix.workloads.stress_ng.argv", binary="stress-ng",
    metrics=STRESS_NG_METRICS, directions=((r"^bogo_ops_per_s", "higher"),), install_once=True,
    seconds=_seconds, command=_command, dry_run=_dry_run,
    binary_var="workload_stress_ng_binary", install_var="workload_stress_ng_install",
    version_var="workload_stress_ng_version", build=_build, build_vars=("workload_stress_ng_binary",),
    variables=read_only(KNOWN))

__all__ = ["STRESS_NG_METRICS", "WORKLOAD", "parse_stress_ng"]
