"""fio's argv builder: the filters ``workload_fio_argv`` and ``workload_fio_plan`` of the
workload_fio role (a batch's runs -> the same runs with fio's argv).

Every workload variable becomes one ``--key=value`` argument, so a value can never
become a second option or shell text. Options benchmatrix owns (output format and
destination) cannot be overridden.

With the variable ``job_file`` (a path on the controller, relative to the project
directory), the run executes that job file instead: it is rendered as a Jinja2
template (in the bounded sandbox of workload variables) with the cell's factor values
and the run's other variables (which are then template values, not fio options),
written to the host once per distinct content, and copied into the run's results
(``inputs/job.fio``). A template value may not contain a line break, so a factor level
can never add an option line (such as ``exec_prerun``) to the job file.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from benchmatrix.errors import WorkloadVarsError
from benchmatrix.names import shown
from benchmatrix.workloads.base import filter_module, refuse_characters, render_template, runs_filter

_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_OWNED = {"output", "output_format", "output-format", "eta", "eta_newline", "status_interval"}
_ONE_LINE = refuse_characters("\n\r\x00", "a line break or NUL")


def _value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        text = str(value)
        if "\n" in text or "\x00" in text:
            raise WorkloadVarsError(f"workload_fio: value of '{key}' contains a newline or NUL")
        return text
    raise WorkloadVarsError(f"workload_fio: value of '{key}' must be a string, number or boolean, "
                            f"not {type(value).__name__}")


def fio_argv(run_vars: dict[str, Any], binary: str = "fio", default_filename: str = "benchmatrix-fio.dat") -> list[str]:
    """fio's argv for one run's variables (a dict)."""
    argv = [binary, "--output-format=json", "--eta=never"]
    if "name" not in run_vars:
        argv.append("--name=benchmatrix")
    if "filename" not in run_vars and "directory" not in run_vars:
        argv.append(f"--filename={default_filename}")
    for key in run_vars:
        value = run_vars[key]
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise WorkloadVarsError(f"workload_fio: {shown(key)} is not a fio option name")
        if key in _OWNED:
            raise WorkloadVarsError(f"workload_fio: option '{key}' is set by benchmatrix and cannot be changed")
        argv.append(f"--{key}" if value is None else f"--{key}={_value(key, value)}")
    return argv


def workload_fio_argv(runs: list[dict[str, Any]], binary: str = "fio",
                      default_filename: str = "benchmatrix-fio.dat") -> list[dict[str, Any]]:
    """Add ``argv`` to every run and drop its ``vars``."""
    out = []
    for run in runs:
        item = {k: v for k, v in run.items() if k not in ("vars", "factors")}
        item["argv"] = fio_argv(run.get("vars") or {}, binary, default_filename)
        out.append(item)
    return out


def render_job_file(run: dict[str, Any], base_dir: str) -> str:
    """The text of a run's job file: ``vars.job_file`` rendered with factors and vars."""
    run_vars = dict(run.get("vars") or {})
    path = str(run_vars.pop("job_file"))
    full = path if os.path.isabs(path) else os.path.join(base_dir, path)
    where = f"workload_fio: run {run.get('run_id', '?')}"
    try:
        with open(full, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        raise WorkloadVarsError(f"{where}: cannot read job file {full}: {exc.strerror or exc}") from None
    context = dict(run.get("factors") or {})
    context.update(run_vars)
    context.update({"run_id": run.get("run_id"), "attempt": run.get("attempt")})
    try:
        return render_template(source, context, _ONE_LINE)
    except ValueError as exc:
        raise WorkloadVarsError(f"{where}: job file {path}: {exc}") from None
    except Exception as exc:  # Jinja2 syntax and undefined-variable errors, bounds exceeded
        raise WorkloadVarsError(f"{where}: job file {path}: template error: {exc}") from None


def workload_fio_plan(runs: list[dict[str, Any]], binary: str = "fio", default_filename: str = "benchmatrix-fio.dat",
                      directory: str = ".", base_dir: str = ".") -> dict[str, Any]:
    """Commands for every run, plus the rendered job files to write on the host.

    Returns:
        ``{"commands": [...], "files": [{"path", "content"}]}``: runs with a job file
        run ``fio --output-format=json --eta=never JOBFILE`` in ``directory`` (where
        relative file names in the job file land) and carry ``inputs`` so the batch
        runner keeps the job file with the run's results.
    """
    commands, files = [], {}
    for run in runs or []:
        run_vars = run.get("vars") or {}
        item = {k: v for k, v in run.items() if k not in ("vars", "factors")}
        if "job_file" in run_vars:
            text = render_job_file(run, base_dir)
            path = f"{directory}/jobs/job-{hashlib.sha256(text.encode()).hexdigest()[:16]}.fio"
            files[path] = text
            item["argv"] = [binary, "--output-format=json", "--eta=never", path]
            item["cwd"] = directory
            item["inputs"] = {"job.fio": path}
        else:
            item["argv"] = fio_argv(run_vars, binary, default_filename)
        commands.append(item)
    return {"commands": commands, "files": [{"path": p, "content": files[p]} for p in sorted(files)]}


FilterModule = filter_module(workload_fio_argv=runs_filter(workload_fio_argv, commands=""),
                             workload_fio_plan=runs_filter(workload_fio_plan, commands="commands"))
