"""Any command: the argv builder of the workload_command role (:mod:`.argv`) and the parser of
the metrics a spec declares next to the command (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from benchmatrix.spec.declared import PICKS, check_declarations
from benchmatrix.workloads.base import Workload
from benchmatrix.workloads.command.parse import parse_command

WORKLOAD = Workload(
    role="workload_command", summary="any command; metrics declared in the spec (regex or JSON path)",
    parse=parse_command, argv="benchmatrix.workloads.command.argv", install_once=True)

__all__ = ["PICKS", "WORKLOAD", "check_declarations", "parse_command"]
