"""Filters of workload_fio: the logic is benchmatrix.workloads.fio.argv (docs/workloads.md)."""
from benchmatrix.workloads.fio.argv import FilterModule  # noqa: F401
