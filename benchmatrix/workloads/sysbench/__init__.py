"""sysbench: the argv builder of the workload_sysbench role (:mod:`.argv`) and the parser of
sysbench's report (:mod:`.parse`: it sets each metric's unit as it parses); :data:`WORKLOAD`
describes the role."""

from benchmatrix.workloads.base import Workload
from benchmatrix.workloads.sysbench.parse import parse_sysbench

WORKLOAD = Workload(
    role="workload_sysbench", summary="sysbench 1.0: cpu, memory, fileio, threads, mutex and the OLTP tests",
    parse=parse_sysbench, argv="benchmatrix.workloads.sysbench.argv", binary="sysbench", cleanup=True)

__all__ = ["WORKLOAD", "parse_sysbench"]
