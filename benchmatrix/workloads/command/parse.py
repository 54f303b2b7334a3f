"""Parser of ``workload_command``: metrics declared in the spec next to the command.

Each entry of the spec's ``workload.metrics`` names one metric::

    metrics:
      tps:    {regex: 'tps = (?P<value>[0-9.]+)', unit: tx/s, better: higher}
      p99_ms: {json: '$.latency.p99', unit: ms, better: lower}

* ``regex``: a Python regular expression with a named group ``value``, searched in
  the output line by line semantics (``^`` and ``$`` match at every line). When it
  matches several times, ``pick`` chooses: ``last`` (the default: tools tend to
  print progress first and the result last), ``first``, ``min``, ``max``,
  ``mean``, ``sum`` or ``count`` (the number of matches; the group is then not
  needed).
* ``json``: a path into the JSON document the command printed: ``$`` is the
  document, ``.name`` or ``['name']`` a member, ``[3]`` an element (negative counts
  from the end), ``[*]`` every element (combined with ``pick``). Text before the
  JSON (a banner) is skipped: the document starts at the first line that begins with
  ``{`` or ``[``.
* ``unit`` (required) and ``better`` (``higher`` or ``lower``) describe the metric.
* ``source``: ``stdout`` (the default) or ``stderr``.

A declared metric that cannot be found makes the run fail with a clear reason: a
number that silently went missing is worse than a failed run.

Without declared metrics the batch runner times the command itself (the manifest's
``measure``) and writes ``usage.json`` into the run's directory: its metrics are
:data:`TIMED_METRICS`, each lower is better.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.spec.declared import check_declarations
from benchmatrix.spec.declared import compile_path as _compile_path
from benchmatrix.workloads.base import Parsed, as_text, headline

#: The metrics of a command the batch runner timed (its usage.json) -> unit: wall time from
#: the fork to the exit, user and system CPU of the command and the children it waited for,
#: peak resident memory of its largest process.
TIMED_METRICS = {"wall_s": "s", "user_s": "s", "system_s": "s", "max_rss_kib": "KiB"}
USAGE_FILE = "usage.json"


def parse_command(stdout: str, workload: Mapping[str, Any] | None = None,
                  run_dir: Path | None = None) -> Parsed:
    """Extract the metrics the spec declares (``workload.metrics``) from the output, or
    without declarations the command's time as the batch runner measured it.

    Raises:
        ParseError: A declaration is invalid, the JSON cannot be decoded, or a
            declared metric is not found or is not a number; the runner's
            measurement cannot be read.
    """
    decls = dict((workload or {}).get("metrics") or {})
    if not decls:
        return Parsed(metrics=_timed(run_dir), jobs={}, extra={})
    texts = {"stdout": as_text(stdout, "command")}
    metrics: dict[str, tuple[float, str]] = {}
    documents: dict[str, Any] = {}
    for name, decl in decls.items():
        problems = check_declarations({name: decl})
        if problems:
            raise ParseError(problems[0][1])
        source = decl.get("source", "stdout")
        if source not in texts:
            if source != "stderr":
                raise ParseError(f"metric '{name}': source must be stdout or stderr, not {source!r}")
            texts[source] = _read_stderr(run_dir)
        text = texts[source]
        pick = decl.get("pick", "last")
        if "regex" in decl:
            values = _regex_values(name, str(decl["regex"]), text, pick)
            where = f"regex {decl['regex']!r}"
        else:
            if source not in documents:
                documents[source] = _document(text, source)
            values = _json_values(name, str(decl["json"]), documents[source])
            where = f"JSON path {decl['json']!r}"
        if not values and pick != "count":
            hint = f"; {source} begins: {headline(text)}" if text.strip() else f"; {source} is empty"
            raise ParseError(f"metric '{name}': {where} found nothing in {source}{hint}")
        metrics[name] = (_pick(values, pick), str(decl.get("unit", "")))
    return Parsed(metrics=metrics, jobs={}, extra={})


def _timed(run_dir: Path | None) -> dict[str, tuple[float, str]]:
    """The metrics of the run's usage.json (none without one: a run the runner did not time)."""
    path = Path(run_dir) / USAGE_FILE if run_dir is not None else None
    if path is None or not path.is_file():
        return {}
    try:
        usage = json.loads(path.read_text())
        return {name: (_number(name, usage[name]), unit) for name, unit in TIMED_METRICS.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"the runner's {USAGE_FILE} cannot be read: {type(exc).__name__}: {exc}") from None


def _read_stderr(run_dir: Path | None) -> str:
    if run_dir is None:
        raise ParseError("a metric reads stderr, but the run's stderr is not available")
    try:
        return (Path(run_dir) / "stderr").read_text(errors="replace")
    except OSError as exc:
        raise ParseError(f"cannot read the run's stderr: {exc}") from None


def _number(name: str, raw: Any) -> float:
    if isinstance(raw, bool):
        raise ParseError(f"metric '{name}': {raw!r} is a boolean, not a number")
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise ParseError(f"metric '{name}': {raw.strip()!r:.60} is not a number") from None
    else:
        raise ParseError(f"metric '{name}': found a {type(raw).__name__}, not a number")
    if not math.isfinite(value):
        raise ParseError(f"metric '{name}': {raw!r} is not a finite number")
    return value


def _regex_values(name: str, regex: str, text: str, pick: str) -> list[float]:
    pattern = re.compile(regex, re.MULTILINE)
    if pick == "count":
        return [1.0 for _ in pattern.finditer(text)]
    values = []
    for m in pattern.finditer(text):
        raw = m.group("value")
        if raw is None:
            continue
        values.append(_number(name, raw))
    return values


def _pick(values: list[float], pick: str) -> float:
    if pick == "count":
        return float(len(values))
    if pick == "first":
        return values[0]
    if pick == "last":
        return values[-1]
    if pick == "min":
        return min(values)
    if pick == "max":
        return max(values)
    if pick == "sum":
        return math.fsum(values)
    return math.fsum(values) / len(values)


def _document(text: str, source: str) -> Any:
    if not text.strip():
        raise ParseError(f"the command printed nothing on {source} (a JSON document was expected)")
    start = None
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("{", "[")):
            start = offset
            break
        offset += len(line)
    if start is None:
        raise ParseError(f"no JSON document in {source}: {headline(text)}")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:].lstrip())
    except json.JSONDecodeError as exc:
        line = exc.lineno + text.count("\n", 0, start)
        raise ParseError(f"{source} is not valid JSON: {exc.msg} (line {line}, column {exc.colno})") from None
    return doc


def _json_values(name: str, path: str, doc: Any) -> list[float]:
    nodes = [doc]
    for token in _compile_path(path):
        nxt = []
        for node in nodes:
            if token == "*":
                if isinstance(node, list):
                    nxt.extend(node)
                elif isinstance(node, dict):
                    nxt.extend(node.values())
            elif isinstance(token, int):
                if isinstance(node, list) and -len(node) <= token < len(node):
                    nxt.append(node[token])
            elif isinstance(node, dict) and token in node:
                nxt.append(node[token])
        nodes = nxt
    return [_number(name, node) for node in nodes if node is not None]
