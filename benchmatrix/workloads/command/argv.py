"""The argv builder of any command: the filter ``workload_command_argv`` of the
workload_command role (a batch's runs -> the same runs with the argv the spec declared,
``workload.vars.argv``, checked).

A run's variables: ``argv`` (a list, one item per argument, already rendered with the
cell's factors) or ``command`` (one command line, split into arguments as a shell
splits words, by :func:`shlex.split`: quotes group, nothing is expanded, no pipes),
``env`` (extra environment variables), ``cwd`` (working directory on the host),
``cpus`` (CPU list the command is confined to). Items are passed to the program as
they are: no shell ever sees them.
"""

from __future__ import annotations

import re
import shlex

from benchmatrix.errors import WorkloadVarsError
from benchmatrix.names import shown
from benchmatrix.workloads.base import filter_module, run_cpus, runs_filter, unknown_variables

KNOWN = {"argv", "command", "env", "cwd", "cpus"}
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _fail(run, message):
    raise WorkloadVarsError(f"workload_command: run {run.get('run_id', '?')}: {message}")


def _text(run, what, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    if not isinstance(value, (int, float, str)):
        _fail(run, f"{what} must be a string or number, not {type(value).__name__} ({value!r:.60})")
    text = str(value)
    if "\x00" in text:
        _fail(run, f"{what} contains a NUL character")
    return text


def command_argv(run, v):
    """The run's argv: ``vars.argv`` as it is, or ``vars.command`` split into arguments."""
    if "command" in v:
        if "argv" in v:
            _fail(run, "give vars.argv or vars.command, not both")
        try:
            argv = shlex.split(_text(run, "vars.command", v["command"]))
        except ValueError as exc:
            _fail(run, f"vars.command cannot be split into arguments: {exc}")
        if not argv:
            _fail(run, "vars.command is empty")
        return argv
    argv = v.get("argv")
    if not isinstance(argv, list) or not argv:
        _fail(run, "vars.argv must be a non-empty list (one item per argument), or vars.command a command line")
    return argv


def workload_command_argv(runs, host_env=None):
    """Add ``argv`` (and ``env``, ``cwd``, ``cpus``) to every run and drop its ``vars``.

    ``host_env`` (the inventory's ``workload_command_env``) is the base of every run's
    environment: the place for secrets, which must never travel in argv.
    """
    if host_env and not isinstance(host_env, dict):
        raise WorkloadVarsError("workload_command: workload_command_env must be a mapping")
    out = []
    for run in runs or []:
        v = run.get("vars") or {}
        unknown = unknown_variables(v, KNOWN)
        if unknown:
            _fail(run, unknown)
        argv = command_argv(run, v)
        item = {k: val for k, val in run.items() if k not in ("vars", "factors")}
        item["argv"] = [_text(run, f"argv[{i}]", a) for i, a in enumerate(argv)]
        if v.get("env") or host_env:
            if v.get("env") and not isinstance(v["env"], dict):
                _fail(run, "vars.env must be a mapping of variable name to value")
            env = {}
            for name, value in {**(host_env or {}), **(v.get("env") or {})}.items():
                if not _ENV.fullmatch(str(name)):
                    _fail(run, f"env: {shown(name)} is not an environment variable name")
                env[str(name)] = _text(run, f"env.{name}", value)
            item["env"] = env
        if v.get("cwd"):
            item["cwd"] = _text(run, "cwd", v["cwd"])
        if v.get("cpus") not in (None, ""):
            item["cpus"] = run_cpus("workload_command", run, v["cpus"])
        out.append(item)
    return out


FilterModule = filter_module(workload_command_argv=runs_filter(workload_command_argv, commands=""))
