"""Filter of workload_command: the logic is benchmatrix.workloads.command.argv (docs/workloads.md)."""
from benchmatrix.workloads.command.argv import FilterModule  # noqa: F401
