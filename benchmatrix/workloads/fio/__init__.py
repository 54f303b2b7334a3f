"""fio: the argv builder of the workload_fio role (:mod:`.argv`) and the parser of fio's JSON
output with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from __future__ import annotations

import re
from typing import Any

from benchmatrix.workloads.base import DryRunCommand, Workload
from benchmatrix.workloads.fio.parse import (
    FIO_METRICS,
    JOB_FILE_INPUT,
    JobIntent,
    concurrency_warnings,
    job_file_intent,
    parse_fio,
)

# fio's time suffixes; a bare number is seconds (fio's default unit for runtime).
_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
          "ms": 1e-3, "us": 1e-6, "usec": 1e-6, "msec": 1e-3}
_TIME = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.I)


def fio_seconds(value: Any) -> float | None:
    """fio's time value (``30``, ``30s``, ``2m``, ``500ms``) in seconds, or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _TIME.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _seconds(v: Any) -> float | None:
    """``runtime`` plus ``ramp_time``; a job file keeps its time to itself."""
    if "job_file" in v:
        return None
    runtime = fio_seconds(v.get("runtime"))
    return None if runtime is None else runtime + (fio_seconds(v.get("ramp_time")) or 0.0)


def _command(run: dict[str, Any], binary: str, project_dir: str) -> dict[str, Any]:
    from benchmatrix.workloads.fio.argv import workload_fio_plan

    plan = workload_fio_plan([run], binary, "benchmatrix-fio.dat", "/nonexistent", project_dir)
    return {**plan["commands"][0], "job": plan["files"][0]["content"] if plan["files"] else None}


def _dry_run(argv: list[str], job: str | None) -> DryRunCommand:
    """``fio --parse-only``: the options, or the job file fed on stdin (nothing written on the host)."""
    if job is not None:
        return DryRunCommand("parse", (argv[0], "--parse-only", "-"), stdin=job)
    return DryRunCommand("parse", (argv[0], "--parse-only", *argv[1:]))


def _variables(v: Any) -> tuple[frozenset[str], bool] | None:
    """fio's options and ``job_file``, unknown ones a warning (the host's fio decides); with a
    job file the other variables are its template's values: any name."""
    from benchmatrix.workloads.fio.options import FIO_OPTIONS

    return None if "job_file" in v else (FIO_OPTIONS | {"job_file"}, False)


def _build(runs: list[dict[str, Any]], role_vars: Any) -> dict[str, Any]:
    """The batch's commands, job files and their directories (:attr:`Workload.build`)."""
    from benchmatrix.workloads.fio.argv import workload_fio_plan

    directory = str(role_vars["workload_fio_directory"])
    out = workload_fio_plan(runs, str(role_vars["workload_fio_binary"]),
                            f"{directory}/{role_vars['workload_fio_filename']}", directory,
                            str(role_vars["workload_fio_base_dir"]))
    return {"commands": out["commands"], "files": out["files"],
            "dirs": [directory] + ([f"{directory}/jobs"] if out["files"] else [])}


WORKLOAD = Workload(
    role="workload_fio", summary="fio from a spec's options or a job file template; JSON output",
    parse=parse_fio, argv="benchmatrix.workloads.fio.argv", binary="fio", metrics=FIO_METRICS,
    directions=((r"_(iops|bw_kib|io_kib)$", "higher"), (r"_clat_", "lower")),
    install_once=True, cleanup=True, cleanup_var="workload_fio_loopfs_mb", directory_var="workload_fio_directory",
    files_var="workload_fio_directory", files_default="/var/tmp/benchmatrix/scratch",
    binary_var="workload_fio_binary", install_var="workload_fio_install", loopfs_var="workload_fio_loopfs_mb",
    version_var="workload_fio_version",
    seconds=_seconds, command=_command, dry_run=_dry_run, build=_build, variables=_variables,
    build_vars=("workload_fio_binary", "workload_fio_directory", "workload_fio_filename", "workload_fio_base_dir"),
    # What the read-ahead case study turned to: the device's request size, then its await.
    explained_by=(r"disk_([A-Za-z0-9_]+_)?(read|write)_kib_per_io", r"disk_([A-Za-z0-9_]+_)?(read|write)_await_ms"))

__all__ = ["FIO_METRICS", "JOB_FILE_INPUT", "WORKLOAD", "JobIntent", "concurrency_warnings", "fio_seconds",
           "job_file_intent", "parse_fio"]
