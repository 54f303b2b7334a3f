"""sysbench: the argv builder of the workload_sysbench role (:mod:`.argv`) and the parser of
sysbench's report with its metric catalogue (:mod:`.parse`)."""

from benchmatrix.workloads.sysbench.parse import parse_sysbench

__all__ = ["parse_sysbench"]
