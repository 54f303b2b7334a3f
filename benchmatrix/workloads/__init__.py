"""Parsers that turn a workload's raw output into metrics.

Each parser is called as ``parse(stdout, workload, run_dir)`` (see
:class:`benchmatrix.workloads.base.Parser`): the text the workload printed, the spec's
``workload`` section (a generic workload declares its metrics there) and the run's
directory of raw files (stderr, ``counters.json``, the job file or script the run
used). It returns a :class:`Parsed`, or raises :class:`benchmatrix.errors.ParseError`.
:data:`PARSERS` maps a workload role name to its parser.

Beside the workload parsers: :func:`load_counters` turns the system counters the
batch runner sampled (spec key ``collect``) into metrics, and :func:`check_success`
applies a spec's ``workload.success`` criteria.
"""

from __future__ import annotations

from benchmatrix.workloads.base import Parsed, Parser
from benchmatrix.workloads.command import check_declarations, parse_command
from benchmatrix.workloads.counters import load_counters, parse_counters
from benchmatrix.workloads.fio import FIO_METRICS, parse_fio
from benchmatrix.workloads.pgbench import PGBENCH_METRICS, parse_pgbench
from benchmatrix.workloads.success import check_success
from benchmatrix.workloads.sysbench import parse_sysbench

PARSERS: dict[str, Parser] = {
    "workload_fio": parse_fio,
    "workload_pgbench": parse_pgbench,
    "workload_sysbench": parse_sysbench,
    "workload_command": parse_command,
}

__all__ = [
    "FIO_METRICS", "PARSERS", "PGBENCH_METRICS", "Parsed", "Parser",
    "check_declarations", "check_success", "load_counters", "parse_command", "parse_counters",
    "parse_fio", "parse_pgbench", "parse_sysbench",
]
