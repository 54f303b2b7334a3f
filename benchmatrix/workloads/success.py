"""Success criteria of a run beyond its exit status (spec key ``workload.success``)::

    success:
      exit_code: 0                          # checked by the caller, before parsing
      required_line: '^done$'               # a regex (or a list): each must match a line
      forbidden_line: 'ERROR|FATAL'         # a regex (or a list): none may match a line
      metrics:                              # ranges the run's metrics must lie in
        tps: {min: 1}
        latency_avg_ms: {max: 50}

Lines are searched in the run's standard output and standard error. A metric range
fails the run when the metric is missing or outside ``[min, max]`` (bounds
inclusive, each optional).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def _patterns(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def check_success(success: Mapping[str, Any] | None, stdout: str, stderr: str,
                  metrics: Mapping[str, Any]) -> list[str]:
    """Every unmet criterion of ``success`` (except ``exit_code``), one sentence each.

    Args:
        success: The spec's ``workload.success``.
        stdout, stderr: What the run printed.
        metrics: The run's metrics: name -> ``(value, unit)`` or ``{"value": ...}``.

    Returns:
        An empty list when the run meets every criterion.
    """
    success = success or {}
    problems: list[str] = []
    text = stdout + ("\n" if stdout and not stdout.endswith("\n") else "") + (stderr or "")
    for pattern in _patterns(success.get("required_line")):
        if _search("required_line", pattern, text, problems) is None:
            problems.append(f"no output line matches required_line {pattern!r}")
    for pattern in _patterns(success.get("forbidden_line")):
        found = _search("forbidden_line", pattern, text, problems)
        if found:
            line = text[text.rfind("\n", 0, found.start()) + 1:].split("\n", 1)[0].strip()
            problems.append(f"output line matches forbidden_line {pattern!r}: {line[:200]}")
    for name, bounds in (success.get("metrics") or {}).items():
        bounds = bounds or {}
        if name not in metrics:
            problems.append(f"metric '{name}' required by success.metrics was not measured")
            continue
        entry = metrics[name]
        value = entry["value"] if isinstance(entry, Mapping) else entry[0]
        low, high = bounds.get("min"), bounds.get("max")
        if low is not None and value < low:
            problems.append(f"metric '{name}' = {value:g} is below its minimum {low:g}")
        if high is not None and value > high:
            problems.append(f"metric '{name}' = {value:g} is above its maximum {high:g}")
    return problems


def _search(key: str, pattern: str, text: str, problems: list[str]) -> re.Match[str] | None | bool:
    """The first match of ``pattern`` (the spec's ``key``) in ``text``, or None; False, with
    the problem noted, when the pattern is no valid regex."""
    try:
        return re.search(pattern, text, re.MULTILINE)
    except re.error as exc:
        problems.append(f"{key} {pattern!r} is not a valid regex: {exc}")
        return False
