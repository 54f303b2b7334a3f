"""Filters of workload_sysbench: the logic is benchmatrix.workloads.sysbench.argv (docs/workloads.md)."""
from benchmatrix.workloads.sysbench.argv import FilterModule  # noqa: F401
