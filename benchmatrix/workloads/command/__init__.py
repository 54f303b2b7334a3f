"""Any command: the argv builder of the workload_command role (:mod:`.argv`) and the parser of
the metrics a spec declares next to the command (:mod:`.parse`)."""

from benchmatrix.spec.declared import PICKS, check_declarations
from benchmatrix.workloads.command.parse import parse_command

__all__ = ["PICKS", "check_declarations", "parse_command"]
