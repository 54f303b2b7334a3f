"""pgbench: the argv builder of the workload_pgbench role (:mod:`.argv`) and the parser of
pgbench's report with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from benchmatrix.workloads.base import Workload
from benchmatrix.workloads.pgbench.parse import PGBENCH_METRICS, parse_pgbench

WORKLOAD = Workload(
    role="workload_pgbench", summary="pgbench (builtin or custom scripts) against a private PostgreSQL",
    parse=parse_pgbench, argv="benchmatrix.workloads.pgbench.argv", binary="pgbench", metrics=PGBENCH_METRICS,
    cleanup=True)

__all__ = ["PGBENCH_METRICS", "WORKLOAD", "parse_pgbench"]
