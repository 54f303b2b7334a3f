"""pgbench: the argv builder of the workload_pgbench role (:mod:`.argv`) and the parser of
pgbench's report with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from __future__ import annotations

from typing import Any

from benchmatrix.workloads.base import DryRunCommand, Workload, long_options, read_only, whole_seconds
from benchmatrix.workloads.pgbench.argv import KNOWN
from benchmatrix.workloads.pgbench.parse import PGBENCH_METRIC_PATTERNS, PGBENCH_METRICS, parse_pgbench


def _seconds(v: Any) -> float | None:
    """``duration`` (``-T``, default 10 s); a run of ``transactions`` is not time-based."""
    return None if v.get("transactions") is not None else whole_seconds(v.get("duration", 10))


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    from benchmatrix.workloads.pgbench.argv import workload_pgbench_plan

    conn = {"host": "localhost", "port": 5432, "user": "postgres", "database": "bench"}
    return workload_pgbench_plan([run], conn, binary, "/nonexistent", project_dir)["commands"][0]


def _dry_run(argv: list[str], job: str | None) -> DryRunCommand:
    """pgbench's ``--help`` must list every option of the command."""
    return DryRunCommand("options", (argv[0], "--help"), long_options(argv))


WORKLOAD = Workload(
    role="workload_pgbench", summary="pgbench (builtin or custom scripts) against a private PostgreSQL",
    parse=parse_pgbench, argv="benchmatrix.workloads.pgbench.argv", binary="pgbench", metrics=PGBENCH_METRICS,
    metric_patterns=PGBENCH_METRIC_PATTERNS, cleanup=True, seconds=_seconds, command=_command, dry_run=_dry_run,
    files_var="workload_pgbench_directory", binary_var="workload_pgbench_binary",
    install_var="workload_pgbench_install", version_var="workload_pgbench_version",
    files_default="/var/tmp/benchmatrix/{{ bmx_experiment | default('default') }}-pgbench",
    variables=read_only(KNOWN))

__all__ = ["PGBENCH_METRICS", "WORKLOAD", "parse_pgbench"]
