"""Metrics a spec declares (``workload.metrics`` of workload_command): are they well formed?

The grammar of a declaration (a regex with a ``value`` group, or a JSON path; ``pick``)
is checked here for ``bmx validate`` (:func:`benchmatrix.spec.load.load_spec`), and the
parser (:mod:`benchmatrix.workloads.command.parse`) reads the same JSON paths with
:func:`compile_path`. :class:`MetricNames` holds the names a campaign's runs can hold
(the spec's, the workload descriptors' and the counters'), which ``report.threshold``'s
keys must match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmatrix.errors import ParseError

PICKS = ("last", "first", "min", "max", "mean", "sum", "count")
_PATH_TOKEN = re.compile(r"""\.([A-Za-z_][A-Za-z0-9_-]*)|\[\s*(-?\d+|\*|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]""")


def check_declarations(metrics: Mapping[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """Problems in a spec's ``workload.metrics``: ``(path under metrics, message)`` each.

    For ``bmx validate``: the schema checks the keys, this checks that each regex
    compiles and has a ``value`` group and that each JSON path is well formed.
    """
    problems: list[tuple[tuple[Any, ...], str]] = []
    for name, decl in (metrics or {}).items():
        if not isinstance(decl, Mapping):
            problems.append(((name,), f"metric '{name}' must be a mapping with regex or json"))
            continue
        has_regex, has_json = "regex" in decl, "json" in decl
        if has_regex == has_json:
            problems.append(((name,), f"metric '{name}' needs exactly one of regex and json"))
            continue
        pick = decl.get("pick", "last")
        if pick not in PICKS:
            problems.append(((name, "pick"), f"metric '{name}': pick must be one of {', '.join(PICKS)}"))
        if has_regex:
            try:
                pattern = re.compile(str(decl["regex"]), re.MULTILINE)
            except re.error as exc:
                problems.append(((name, "regex"), f"metric '{name}': invalid regex: {exc}"))
                continue
            if "value" not in pattern.groupindex and pick != "count":
                problems.append(((name, "regex"), f"metric '{name}': the regex needs a named group "
                                                  "(?P<value>...) that captures the number"))
        else:
            try:
                compile_path(str(decl["json"]))
            except ParseError as exc:
                problems.append(((name, "json"), f"metric '{name}': {exc}"))
    return problems


def compile_path(path: str) -> list[Any]:
    """``$.a['b'][0][*]`` -> ``['a', 'b', 0, '*']``."""
    path = path.strip()
    if not path.startswith("$"):
        raise ParseError(f"JSON path {path!r} must start with '$'")
    tokens: list[Any] = []
    pos = 1
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if not m:
            raise ParseError(f"JSON path {path!r}: cannot read {path[pos:]!r} "
                             "(use .name, ['name'], [index] or [*])")
        if m.group(1) is not None:
            tokens.append(m.group(1))
        else:
            inner = m.group(2)
            if inner == "*":
                tokens.append("*")
            elif inner[0] == '"':
                tokens.append(json.loads(inner))
            elif inner[0] == "'":
                tokens.append(re.sub(r"\\(.)", r"\1", inner[1:-1]))
            else:
                tokens.append(int(inner))
        pos = m.end()
    return tokens


@dataclass(frozen=True)
class MetricNames:
    """The metric names a campaign's runs can hold, to check the names a spec gives
    (``report.threshold``'s keys) before anything runs.

    :func:`benchmatrix.workloads.metric_names` makes them from the workload descriptors
    (each parser's catalogue and patterns) and the collected counters.

    Attributes:
        names: The fixed names (also what "did you mean" offers).
        patterns: ``(regex, shown)`` pairs for the names that follow a pattern (a
            sysbench percentile, a disk's counters): the regex matches a whole name,
            ``shown`` stands for them in a message (``disk_DEV_util_pct``).
        complete: The names are all there can be; False when the workload also has
            names that only its output or the spec says (workload_command).
    """

    names: frozenset[str] = frozenset()
    patterns: tuple[tuple[str, str], ...] = ()
    complete: bool = False

    def matches(self, name: str) -> bool:
        """Whether a run can hold a metric called ``name``."""
        return name in self.names or any(re.fullmatch(regex, name) for regex, _ in self.patterns)

    def __or__(self, other: MetricNames) -> MetricNames:
        """Both sets of names; complete only when both are."""
        return MetricNames(self.names | other.names, self.patterns + other.patterns,
                           self.complete and other.complete)


#: What gives the metric names of a workload role with the counters of ``collect``
#: (:func:`benchmatrix.workloads.metric_names`).
MetricNamesOf = Callable[[str, list[str]], MetricNames]
