"""Filters of workload_pgbench: the logic is benchmatrix.workloads.pgbench.argv (docs/workloads.md)."""
from benchmatrix.workloads.pgbench.argv import FilterModule  # noqa: F401
