"""fio: the argv builder of the workload_fio role (:mod:`.argv`) and the parser of fio's JSON
output with its metric catalogue (:mod:`.parse`)."""

from benchmatrix.workloads.fio.parse import (
    FIO_METRICS,
    JOB_FILE_INPUT,
    JobIntent,
    concurrency_warnings,
    job_file_intent,
    parse_fio,
)

__all__ = ["FIO_METRICS", "JOB_FILE_INPUT", "JobIntent", "concurrency_warnings", "job_file_intent", "parse_fio"]
