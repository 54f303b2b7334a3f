"""Filters of workload_stress_ng: the logic is benchmatrix.workloads.stress_ng.argv (docs/workloads.md)."""
from benchmatrix.workloads.stress_ng.argv import FilterModule  # noqa: F401
