"""sysbench: the argv builder of the workload_sysbench role (:mod:`.argv`) and the parser of
sysbench's report (:mod:`.parse`: it sets each metric's unit as it parses); :data:`WORKLOAD`
describes the role."""

from __future__ import annotations

from typing import Any

from benchmatrix.workloads.base import DryRunCommand, Workload, long_options, read_only, whole_seconds
from benchmatrix.workloads.sysbench.argv import KNOWN
from benchmatrix.workloads.sysbench.parse import SYSBENCH_METRIC_NAMES, SYSBENCH_METRIC_PATTERNS, parse_sysbench


def _seconds(v: Any) -> float | None:
    """``time`` (``--time``, default 10 s)."""
    return whole_seconds(v.get("time", 10))


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    from benchmatrix.workloads.sysbench.argv import workload_sysbench_plan

    conn = {"host": "localhost", "port": 5432, "user": "postgres", "database": "sbtest"}
    return workload_sysbench_plan([run], binary, "/nonexistent", conn)[0]


def _dry_run(argv: list[str], job: str | None) -> DryRunCommand:
    """The test's help (``sysbench cpu help``) lists its own options, ``sysbench --help`` the general ones."""
    test = next((a for a in argv[1:] if not a.startswith("-")), "")
    if not test:
        return DryRunCommand("options", (argv[0], "--help"), long_options(argv))
    return DryRunCommand("options", (argv[0], test, "help"), long_options(argv), general=(argv[0], "--help"))


WORKLOAD = Workload(
    role="workload_sysbench", summary="sysbench 1.0: cpu, memory, fileio, threads, mutex and the OLTP tests",
    parse=parse_sysbench, argv="benchmatrix.workloads.sysbench.argv", binary="sysbench", cleanup=True,
    metric_names=SYSBENCH_METRIC_NAMES, metric_patterns=SYSBENCH_METRIC_PATTERNS,
    seconds=_seconds, command=_command, dry_run=_dry_run, files_var="workload_sysbench_directory",
    binary_var="workload_sysbench_binary", install_var="workload_sysbench_install",
    version_var="workload_sysbench_version",
    files_default="/var/tmp/benchmatrix/{{ bmx_experiment | default('default') }}-sysbench",
    variables=read_only(KNOWN))

__all__ = ["WORKLOAD", "parse_sysbench"]
