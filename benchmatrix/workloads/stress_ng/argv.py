"""The argv builder of stress-ng: the filter ``workload_stress_ng_argv`` of the
workload_stress_ng role (a batch's runs -> the same runs with stress-ng's argv).

A run's variables: ``stressors`` (required: a mapping of stressor name to its number
of instances, e.g. ``{cpu: 2, vm: 1}``), ``timeout`` (seconds each stressor runs,
default 10), ``options`` (any other long option, ``{vm-bytes: 64m, cpu-method:
matrixprod}``: ``--NAME VALUE``; ``true`` gives ``--NAME`` alone) and ``cpus`` (the CPU
list the batch runner confines stress-ng to). benchmatrix adds ``--metrics-brief`` and
``--yaml /dev/stdout``: the metrics arrive as YAML on standard output (stress-ng logs
to standard error), which :mod:`benchmatrix.workloads.stress_ng.parse` reads.
"""

from __future__ import annotations

import re

from benchmatrix.errors import WorkloadVarsError
from benchmatrix.names import shown
from benchmatrix.workloads.base import filter_module, run_cpus, runs_filter, unknown_variables

KNOWN = ("stressors", "timeout", "options", "cpus")
#: Options benchmatrix sets itself: the output it parses and the run's length.
RESERVED = frozenset({"yaml", "metrics", "metrics-brief", "timeout", "t", "log-file", "quiet", "q"})
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,63}$")


def _refuse(run, message):
    raise WorkloadVarsError(f"workload_stress_ng: run {run.get('run_id', '?')}: {message}")


def _word(run, what, value):
    """A value as one argv item: a string or number without NUL or line break."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or re.search(r"[\x00\n\r]", str(value)):
        _refuse(run, f"{what} must be a string or number on one line, not {value!r:.60}")
    return str(value)


def workload_stress_ng_argv(runs, binary="stress-ng"):
    """Add ``argv`` (and ``cpus``) to every run and drop its ``vars``."""
    out = []
    for run in runs or []:
        v = run.get("vars") or {}
        unknown = unknown_variables(v, KNOWN)
        if unknown:
            _refuse(run, unknown)
        stressors = v.get("stressors")
        if not isinstance(stressors, dict) or not stressors:
            _refuse(run, "vars.stressors must be a mapping of stressor to instances, e.g. {cpu: 1}")
        argv = [str(binary)]
        for name, count in stressors.items():
            if not _NAME.match(str(name)) or str(name) in RESERVED:
                _refuse(run, f"{shown(str(name))} is not a stressor name")
            if isinstance(count, bool) or not str(count).isdigit():
                _refuse(run, f"stressor {name}: instances must be a whole number (0: one per CPU), not {count!r:.40}")
            argv += [f"--{name}", str(count)]
        timeout = v.get("timeout", 10)
        if isinstance(timeout, bool) or not str(timeout).isdigit() or int(timeout) < 1:
            _refuse(run, f"timeout must be whole seconds > 0, not {timeout!r:.40}")
        argv += ["--timeout", f"{int(timeout)}s", "--metrics-brief", "--yaml", "/dev/stdout"]
        options = v.get("options") or {}
        if not isinstance(options, dict):
            _refuse(run, "vars.options must be a mapping of option name to value")
        for name, value in options.items():
            if not _NAME.match(str(name)) or str(name) in RESERVED:
                _refuse(run, f"option {shown(str(name))} is not an option name, or is set by benchmatrix")
            if value is True:
                argv.append(f"--{name}")
            elif value not in (None, False, ""):
                argv += [f"--{name}", _word(run, f"option {name}", value)]
        item = {k: val for k, val in run.items() if k not in ("vars", "factors")}
        item["argv"] = argv
        if v.get("cpus") not in (None, ""):
            item["cpus"] = run_cpus("workload_stress_ng", run, v["cpus"])
        out.append(item)
    return out


FilterModule = filter_module(workload_stress_ng_argv=runs_filter(workload_stress_ng_argv, commands=""))
