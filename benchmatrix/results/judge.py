"""Judging one finished run: the runner's result, the workload's output and the spec's
success criteria -> status, reason, metrics and details of its record.json."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.spec.load import Spec
from benchmatrix.workloads import check_success, load_counters, parse_counters
from benchmatrix.workloads.counters import COUNTERS_FILE

#: A run's files already in memory, by name (``stdout``, ``stderr``, ``counters.json``):
#: their bytes, or None for one too large to keep (read from its file). A name missing
#: is a file the run does not have.
Kept = Mapping[str, "bytes | None"]

_ABSENT = object()


def run_file_text(kept: Kept | None, name: str, path: Path | str) -> str | None:
    """A run file's text (UTF-8, undecodable bytes replaced, newlines as text mode reads
    them) from ``kept`` when it is there, else from ``path``; None when it does not exist.

    The batch job judges each run from the bytes it just unpacked (issue 34): reading
    the three files back cost the controller about 0.1 ms a run.
    """
    if kept is not None:
        data = kept.get(name, _ABSENT)
        if data is _ABSENT:
            return None
        if data is not None:
            text = data.decode("utf-8", errors="replace")
            return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def error_lines(path: Path) -> str:
    """A failed tool's first stderr line (where tools name the error: ``fio: unrecognized
    option ...``) and, when it differs, its last (often the hint or the summary)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return ""
    if not lines:
        return ""
    first, last = lines[0][:300], lines[-1][:300]
    return first if len(lines) == 1 or first == last else f"{first} ... {last}"


def judge(spec: Spec, res: dict[str, Any], stdout: str, stderr_path: Path,
           parse: Callable[[str], Any], kept: Kept | None = None) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """Status, reason, metrics and per-job metrics of one finished run.

    Args:
        kept: The run's files in memory (:data:`Kept`); None: read from ``stderr_path``'s
            directory.
    """
    outcome = res.get("outcome")
    if outcome == "interrupted":
        return "interrupted", res.get("error") or "interrupted", {}, {}
    if outcome == "invalid":  # the runner could not set the run's knobs: nothing of it ran
        return "invalid", res.get("error") or "a knob missed its value", {}, {}
    if outcome == "timeout":
        return "timeout", res.get("error") or "timeout", {}, {}
    if outcome != "exited":
        return "failed", res.get("error") or f"runner outcome {outcome}", {}, {}
    want = spec.workload["success"].get("exit_code", 0)
    if res.get("exit_code") != want:
        tail = error_lines(stderr_path)
        return "failed", f"exit status {res.get('exit_code')} (expected {want})" + (f": {tail}" if tail else ""), {}, {}
    run_files = stderr_path.parent  # stdout, stderr, counters.json, inputs/ of the run
    try:
        parsed = parse(stdout, spec.workload, run_files)
    except ParseError as exc:
        return "failed", f"parse error: {exc}", {}, {}
    metrics = {k: {"value": v, "unit": u} for k, (v, u) in parsed.metrics.items()}
    jobs = {j: {k: {"value": v, "unit": u} for k, (v, u) in m.items()} for j, m in parsed.jobs.items()}
    extra = dict(parsed.extra or {})
    details: dict[str, Any] = {"jobs": jobs, **{k: v for k, v in extra.items() if k != "jobs"}}
    if "jobs" in extra:  # fio: each job's group, runtime, start and end
        details["job_timing"] = extra["jobs"]
    if parsed.groups:
        details["groups"] = {g: {k: {"value": v, "unit": u} for k, (v, u) in m.items()}
                             for g, m in parsed.groups.items()}
    warnings = list(parsed.warnings)
    try:
        if kept is None:
            counters = load_counters(run_files)
        else:
            text = run_file_text(kept, COUNTERS_FILE, run_files / COUNTERS_FILE)
            counters = None if text is None else parse_counters(text)
    except ParseError as exc:
        counters = None
        warnings.append(f"system counters not usable: {exc}")
    if counters is not None:
        for k, (v, u) in counters.metrics.items():
            metrics.setdefault(k, {"value": v, "unit": u})
        details["counters"] = counters.extra
    if res.get("affinity"):
        details["affinity"] = res["affinity"]
    if warnings:
        details["warnings"] = warnings
    stderr_text = run_file_text(kept, "stderr", stderr_path) or ""
    problems = check_success(spec.workload.get("success"), stdout, stderr_text, metrics)
    if problems:
        return ("failed", "success criteria not met: " + "; ".join(problems), {},
                {**details, "rejected_metrics": metrics})
    return "ok", "", metrics, details
