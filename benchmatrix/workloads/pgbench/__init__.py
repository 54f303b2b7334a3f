"""pgbench: the argv builder of the workload_pgbench role (:mod:`.argv`) and the parser of
pgbench's report with its metric catalogue (:mod:`.parse`)."""

from benchmatrix.workloads.pgbench.parse import PGBENCH_METRICS, parse_pgbench

__all__ = ["PGBENCH_METRICS", "parse_pgbench"]
