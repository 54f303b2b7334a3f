"""fio: the argv builder of the workload_fio role (:mod:`.argv`) and the parser of fio's JSON
output with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from benchmatrix.workloads.base import Workload
from benchmatrix.workloads.fio.parse import (
    FIO_METRICS,
    JOB_FILE_INPUT,
    JobIntent,
    concurrency_warnings,
    job_file_intent,
    parse_fio,
)

WORKLOAD = Workload(
    role="workload_fio", summary="fio from a spec's options or a job file template; JSON output",
    parse=parse_fio, argv="benchmatrix.workloads.fio.argv", binary="fio", metrics=FIO_METRICS,
    directions=((r"_(iops|bw_kib|io_kib)$", "higher"), (r"_clat_", "lower")),
    install_once=True, cleanup=True)

__all__ = ["FIO_METRICS", "JOB_FILE_INPUT", "WORKLOAD", "JobIntent", "concurrency_warnings", "job_file_intent",
           "parse_fio"]
