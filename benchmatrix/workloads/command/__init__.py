"""Any command: the argv builder of the workload_command role (:mod:`.argv`) and the parser of
the metrics a spec declares next to the command (:mod:`.parse`)."""

from benchmatrix.workloads.command.parse import PICKS, check_declarations, parse_command

__all__ = ["PICKS", "check_declarations", "parse_command"]
