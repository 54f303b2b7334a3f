"""The workload registry and what the controller does with a run's output.

:data:`WORKLOADS` maps a workload role to its descriptor (:class:`Workload`: parser,
metric catalogue with units and directions, binary, argv builder, install and clean-up
flags), one per subpackage (``benchmatrix/workloads/NAME/__init__.py`` defines
``WORKLOAD``); adding a workload is that folder plus its role and one line here.

Each parser is called as ``parse(stdout, workload, run_dir)`` (see
:class:`benchmatrix.workloads.base.Parser`): the text the workload printed, the spec's
``workload`` section (a generic workload declares its metrics there) and the run's
directory of raw files (stderr, ``counters.json``, the job file or script the run
used). It returns a :class:`Parsed`, or raises :class:`benchmatrix.errors.ParseError`.
:data:`PARSERS` maps a workload role name to its parser (read from :data:`WORKLOADS`).

Beside the workload parsers: :func:`load_counters` turns the system counters the
batch runner sampled (spec key ``collect``) into metrics, and :func:`check_success`
applies a spec's ``workload.success`` criteria.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmatrix.spec.declared import MetricNames
from benchmatrix.workloads import command, fio, pgbench, stress_ng, sysbench
from benchmatrix.workloads.base import Parsed, Parser, Workload, registry
from benchmatrix.workloads.command import check_declarations, parse_command
from benchmatrix.workloads.counters import counter_direction, counter_metric_names, load_counters, parse_counters
from benchmatrix.workloads.fio import FIO_METRICS, parse_fio
from benchmatrix.workloads.pgbench import PGBENCH_METRICS, parse_pgbench
from benchmatrix.workloads.stress_ng import STRESS_NG_METRICS, parse_stress_ng
from benchmatrix.workloads.success import check_success
from benchmatrix.workloads.sysbench import parse_sysbench

#: workload role -> its descriptor.
WORKLOADS: dict[str, Workload] = registry((
    fio.WORKLOAD, pgbench.WORKLOAD, sysbench.WORKLOAD, command.WORKLOAD, stress_ng.WORKLOAD,
))

#: workload role -> its parser.
PARSERS: dict[str, Parser] = {role: w.parse for role, w in WORKLOADS.items()}


def metric_names(role: str, collect: list[str]) -> MetricNames:
    """The metric names runs of ``role`` can hold with the counters of ``collect``: the
    descriptor's (:meth:`Workload.names`) and the counters'. Not complete for a role
    whose names come from its output (a project's own role): only the spec's names can be
    checked then (``bmx validate`` passes this to :func:`benchmatrix.spec.load.load_spec`).
    """
    workload = WORKLOADS.get(role)
    return (workload.names() if workload is not None else MetricNames()) | counter_metric_names(collect)


def workload_variables(role: str, given: Mapping[str, Any]) -> tuple[frozenset[str], bool] | None:
    """The names a ``workload.vars`` of ``role`` may hold and whether another name is an
    error (:attr:`Workload.variables`), or None when any name goes (a project's own role):
    ``bmx validate`` passes this to :func:`benchmatrix.spec.load.load_spec`."""
    workload = WORKLOADS.get(role)
    return workload.variables(given) if workload is not None and workload.variables is not None else None


def metric_direction(metric: str) -> str:
    """Which way a built-in workload's metric is better (``higher``, ``lower``, or "" when
    no workload's ``directions`` name it): the first descriptor that knows it says, else
    the counters' own direction (:func:`benchmatrix.workloads.counters.counter_direction`)."""
    return next((d for d in (w.direction(metric) for w in WORKLOADS.values()) if d), "") or counter_direction(metric)


__all__ = [
    "FIO_METRICS", "PARSERS", "PGBENCH_METRICS", "STRESS_NG_METRICS", "WORKLOADS", "Parsed", "Parser", "Workload",
    "check_declarations", "check_success", "load_counters", "metric_direction", "metric_names", "parse_command",
    "parse_counters", "parse_fio", "parse_pgbench", "parse_stress_ng", "parse_sysbench", "workload_variables",
]
