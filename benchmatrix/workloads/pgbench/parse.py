"""Parser for pgbench's report (written against pgbench 15; 12-14 spellings handled).

pgbench prints its report on standard output and its progress lines (``-P``) and
errors on standard error; this parser reads standard output.

Metrics of the run (``Parsed.metrics``); each appears only when pgbench printed it:

=============================  =====  =================================================
name                           unit   source line
=============================  =====  =================================================
``tps``                        tx/s   ``tps = X (without initial connection time)``
                                      (pgbench 14+), ``(excluding connections
                                      establishing)`` (13 and older) or ``(including
                                      reconnection times)`` (``-C``)
``tps_incl_conn``              tx/s   ``tps = X (including connections establishing)``
                                      (13 and older only)
``transactions``               tx     ``number of transactions actually processed``
``failed_transactions``        tx     ``number of failed transactions: N (P%)``
``failed_pct``                 %      the same line's percentage
``serialization_failures``     tx     ``number of serialization failures`` (with
                                      ``--failures-detailed``)
``deadlock_failures``          tx     ``number of deadlock failures``
``retried_transactions``       tx     ``number of transactions retried`` (``--max-tries``)
``retries``                    count  ``total number of retries``
``skipped_transactions``       tx     ``number of transactions skipped`` (``--rate`` with
                                      ``--latency-limit``)
``late_transactions``          tx     ``number of transactions above the L ms latency
                                      limit``
``latency_avg_ms``             ms     ``latency average = X ms``
``latency_stddev_ms``          ms     ``latency stddev = X ms`` (printed only with ``-P``
                                      or ``--rate``; the role always passes ``-P``)
``lag_avg_ms``, ``lag_max_ms`` ms     ``rate limit schedule lag: avg X (max Y) ms``
``initial_connection_ms``      ms     ``initial connection time = X ms``
``average_connection_ms``      ms     ``average connection time = X ms`` (``-C``)
``stmt{i}_latency_ms``         ms     ``-r``: the i-th line (1-based, ``\\set`` and
                                      ``\\sleep`` lines count) of the only script
``script{k}_tps`` etc.         ...    with several scripts: ``tps``,
                                      ``transactions``, ``failed_transactions``,
                                      ``latency_avg_ms`` and ``latency_stddev_ms`` of
                                      script k (1-based, in pgbench's order), and
                                      ``script{k}_stmt{i}_latency_ms``
=============================  =====  =================================================

``Parsed.jobs`` has one entry per script (pgbench's name for it, e.g. ``builtin:
select only`` or the script file's name) with that script's figures under the
unprefixed names (``tps``, ``latency_avg_ms``, ``stmt{i}_latency_ms``, ...).

``Parsed.extra`` holds the run's settings as pgbench printed them (``version``,
``transaction_type``, ``scaling_factor``, ``query_mode``, ``clients``,
``threads``, ``max_tries``, ``duration_s`` or ``transactions_per_client``,
``tps_basis``) and ``statements``: per statement its script, index, text, latency
and failure and retry counts.

Latency here is pgbench's transaction latency: a ``\\sleep`` in a script (think
time) is part of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.workloads.base import Parsed, as_text, headline, last_line, unique_name

_NUM = r"(-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|NaN|-?inf)"

# (regex, metric, unit) for lines of the summary and of each script section.
_COUNTS = [
    (re.compile(rf"^number of transactions actually processed: {_NUM}(?:/\d+)?$"), "transactions", "tx"),
    (re.compile(rf"^number of serialization failures: {_NUM}"), "serialization_failures", "tx"),
    (re.compile(rf"^number of deadlock failures: {_NUM}"), "deadlock_failures", "tx"),
    (re.compile(rf"^number of transactions retried: {_NUM}"), "retried_transactions", "tx"),
    (re.compile(rf"^total number of retries: {_NUM}$"), "retries", "count"),
    (re.compile(rf"^number of transactions skipped: {_NUM}"), "skipped_transactions", "tx"),
    (re.compile(rf"^number of transactions above the {_NUM} ms latency limit: {_NUM}"), None, "tx"),
    (re.compile(rf"^latency average = {_NUM} ms"), "latency_avg_ms", "ms"),
    (re.compile(rf"^latency stddev = {_NUM} ms"), "latency_stddev_ms", "ms"),
    (re.compile(rf"^initial connection time = {_NUM} ms$"), "initial_connection_ms", "ms"),
    (re.compile(rf"^average connection time = {_NUM} ms$"), "average_connection_ms", "ms"),
]
_FAILED = re.compile(rf"^number of failed transactions: {_NUM} \({_NUM}%\)$")
_LAG = re.compile(rf"^rate limit schedule lag: avg {_NUM} \(max {_NUM}\) ms$")
_TPS = re.compile(rf"^tps = {_NUM} \((.+)\)$")
_SCRIPT = re.compile(r"^SQL script (\d+): (.*)$")
_SCRIPT_TX = re.compile(rf"^- {_NUM} transactions \({_NUM}% of total, tps = {_NUM}\)$")
_WEIGHT = re.compile(rf"^- weight: {_NUM}")
_STMT_HEADER = re.compile(r"^(?:- )?statement latencies in milliseconds(.*):$")
_SETTINGS = {
    "transaction type": ("transaction_type", str),
    "scaling factor": ("scaling_factor", int),
    "query mode": ("query_mode", str),
    "number of clients": ("clients", int),
    "number of threads": ("threads", int),
    "maximum number of tries": ("max_tries", int),
    "number of transactions per client": ("transactions_per_client", int),
}
_VERSION = re.compile(r"^pgbench \((.*)\)$")
_DURATION = re.compile(r"^duration: (\d+) s$")

#: Units of the fixed metric names (statement and script metrics follow their base name).
PGBENCH_METRICS: dict[str, str] = {
    "tps": "tx/s", "tps_incl_conn": "tx/s", "transactions": "tx", "failed_transactions": "tx",
    "failed_pct": "%", "serialization_failures": "tx", "deadlock_failures": "tx",
    "retried_transactions": "tx", "retries": "count", "skipped_transactions": "tx",
    "late_transactions": "tx", "latency_avg_ms": "ms", "latency_stddev_ms": "ms",
    "lag_avg_ms": "ms", "lag_max_ms": "ms", "initial_connection_ms": "ms",
    "average_connection_ms": "ms",
}
#: A script's figures that the run's metrics repeat as ``script{k}_NAME`` (several scripts).
_SCRIPT_KEYS = ("tps", "transactions", "failed_transactions", "latency_avg_ms", "latency_stddev_ms")
#: The names the parser makes from the run: a statement's latency (``-r``) and, with
#: several scripts, each script's figures; ``(regex, shown)`` for the workload descriptor.
PGBENCH_METRIC_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"stmt[0-9]+_latency_ms", "stmtN_latency_ms"),
    (rf"script[0-9]+_(?:{'|'.join(_SCRIPT_KEYS)}|stmt[0-9]+_latency_ms)", "scriptK_METRIC"),
)


def _num(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"pgbench: {what} is not a number ({text!r:.40})") from None
    return value


class _Script:
    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self.metrics: dict[str, tuple[float, str]] = {}
        self.weight: float | None = None


class _Reader:
    """What :func:`parse_pgbench` has read of the report so far, one line at a time: the
    figures, and the section it is in (a script's, the statement table's)."""

    def __init__(self) -> None:
        self.metrics: dict[str, tuple[float, str]] = {}
        self.extra: dict[str, Any] = {}
        self.scripts: list[_Script] = []
        self.statements: list[dict[str, Any]] = []
        self.current: _Script | None = None      # the script whose section we are in
        self.stmt_columns: int | None = None     # count columns after the latency while reading statements
        self.stmt_index = 0
        self.aborted = False

    def read(self, raw: str) -> None:
        line = raw.strip()
        if not line:
            return
        if self.stmt_columns is not None:
            if self._statement_row(raw):
                return
            self.stmt_columns = None
        if not self._section(line) and not self._figure(line):
            self._header(line)

    def _statement_row(self, raw: str) -> bool:
        """A row of the statement latency table; False when ``raw`` is none."""
        cols = self.stmt_columns or 0  # read() calls this while the table's columns are known
        parsed = _statement(raw, cols)
        if parsed is None:
            return False
        self.stmt_index += 1
        latency, counts, sql = parsed
        current = self.current
        owner = current.index if current else 1
        entry = {"script": owner, "index": self.stmt_index, "text": sql, "latency_ms": latency}
        if cols >= 1:
            entry["failures"] = counts[0]
        if cols >= 2:
            entry["retries"] = counts[1]
        self.statements.append(entry)
        target = current.metrics if current else self.metrics
        target[f"stmt{self.stmt_index}_latency_ms"] = (latency, "ms")
        return True

    def _section(self, line: str) -> bool:
        """The abort notice, the version, a script's heading or the statement table's."""
        if "Run was aborted" in line:
            self.aborted = True
            return True
        m = _VERSION.match(line)
        if m and not self.extra.get("version"):
            self.extra["version"] = m.group(1)
            return True
        m = _SCRIPT.match(line)
        if m:
            self.current = _Script(int(m.group(1)), m.group(2).strip())
            self.scripts.append(self.current)
            self.stmt_index = 0
            return True
        m = _STMT_HEADER.match(line)
        if m:
            tail = m.group(1)
            self.stmt_columns = 2 if "retries" in tail else 1 if "failures" in tail else 0
            if self.current is None:
                self.stmt_index = 0
            return True
        return False

    def _figure(self, line: str) -> bool:
        """A figure of the whole run or of the current script's section."""
        current = self.current
        target = current.metrics if current else self.metrics
        body = line[2:] if current and line.startswith("- ") else line
        if current:
            m = _SCRIPT_TX.match(line)
            if m:
                target["transactions"] = (_num(m.group(1), "transactions"), "tx")
                target["tps"] = (_num(m.group(3), "tps"), "tx/s")
                return True
            m = _WEIGHT.match(line)
            if m:
                current.weight = _num(m.group(1), "weight")
                return True
        m = _FAILED.match(body)
        if m:
            target["failed_transactions"] = (_num(m.group(1), "failed transactions"), "tx")
            pct = m.group(2)
            if pct.lower() != "nan":
                target["failed_pct"] = (_num(pct, "failed percentage"), "%")
            return True
        if _count_line(body, target):
            return True
        m = _LAG.match(body)
        if m:
            target["lag_avg_ms"] = (_num(m.group(1), "schedule lag"), "ms")
            target["lag_max_ms"] = (_num(m.group(2), "schedule lag"), "ms")
            return True
        return False

    def _header(self, line: str) -> None:
        """The run's tps, its duration, or one of the settings pgbench prints."""
        m = _TPS.match(line)
        if m and self.current is None:
            value = _num(m.group(1), "tps")
            basis = m.group(2)
            if basis == "including connections establishing":
                self.metrics["tps_incl_conn"] = (value, "tx/s")
            else:
                self.metrics["tps"] = (value, "tx/s")
                self.extra["tps_basis"] = basis
            return
        m = _DURATION.match(line)
        if m:
            self.extra["duration_s"] = int(m.group(1))
            return
        key, sep, value = line.partition(":")
        if sep and key in _SETTINGS:
            name, kind = _SETTINGS[key]
            value = value.strip()
            if kind is int:
                try:
                    self.extra[name] = int(value)
                except ValueError:
                    self.extra[name] = value
            else:
                self.extra[name] = value.strip("<>")


def parse_pgbench(stdout: str, workload: Mapping[str, Any] | None = None,
                  run_dir: Path | None = None) -> Parsed:
    """Turn pgbench's report into metrics (see the module docstring).

    Raises:
        ParseError: The output is empty, has no ``tps`` line (the run was aborted,
            pgbench failed before running, or the output is truncated), or a figure
            is not a number.
    """
    text = as_text(stdout, "pgbench")
    if not text.strip():
        raise ParseError("pgbench printed no output" + _stderr_hint(run_dir))
    reader = _Reader()
    for raw in text.splitlines():
        reader.read(raw)
    metrics, extra, scripts, aborted = reader.metrics, reader.extra, reader.scripts, reader.aborted

    if "tps" not in metrics:
        if aborted:
            why = "pgbench reports that the run was aborted"
        elif extra.get("transaction_type"):
            why = "the report stops early: the run was aborted or the output is truncated"
        else:
            why = "this is not a pgbench report"
        raise ParseError(f"pgbench printed no 'tps = ...' line ({why}); last line: "
                         f"{last_line(text)}{_stderr_hint(run_dir)}")

    # pgbench prints NaN for a script that ran no transaction (weight 0): not a measurement.
    metrics = {k: v for k, v in metrics.items() if math.isfinite(v[0])}
    for s in scripts:
        s.metrics = {k: v for k, v in s.metrics.items() if math.isfinite(v[0])}
    jobs: dict[str, dict[str, tuple[float, str]]] = {}
    if scripts:
        for s in scripts:
            jobs[unique_name(s.name, jobs)] = dict(s.metrics)
            for key in _SCRIPT_KEYS:
                if key in s.metrics:
                    metrics[f"script{s.index}_{key}"] = s.metrics[key]
            for key, value in s.metrics.items():
                if key.startswith("stmt"):
                    metrics[f"script{s.index}_{key}"] = value
        extra["scripts"] = [{"index": s.index, "name": s.name, "weight": s.weight} for s in scripts]
    else:
        name = str(extra.get("transaction_type") or "script")
        jobs[name] = {k: v for k, v in metrics.items()}
    if reader.statements:
        extra["statements"] = reader.statements
    warnings = []
    if aborted:
        warnings.append("pgbench reports that the run was aborted; the results are incomplete")
    return Parsed(metrics=metrics, jobs=jobs, extra=extra, warnings=warnings)


def _count_line(body: str, target: dict[str, tuple[float, str]]) -> bool:
    for pattern, name, unit in _COUNTS:
        m = pattern.match(body)
        if m:
            if name is None:  # the latency-limit line: the limit, then the count
                target["late_transactions"] = (_num(m.group(2), "late transactions"), unit)
            else:
                target[name] = (_num(m.group(1), name), unit)
            return True
    return False


def _statement(raw: str, columns: int) -> tuple[float, list[float], str] | None:
    """One ``-r`` line: latency, then ``columns`` counts, then the statement text."""
    parts = raw.strip().split(None, columns + 1)
    if len(parts) < columns + 2:
        return None
    try:
        latency = float(parts[0])
        counts = [float(p) for p in parts[1:columns + 1]]
    except ValueError:
        return None
    return latency, counts, parts[columns + 1]




def _stderr_hint(run_dir: Path | None) -> str:
    """`` (stderr: LINE)`` with pgbench's first error line, when the run's stderr is at hand."""
    if run_dir is None:
        return ""
    try:
        err = (Path(run_dir) / "stderr").read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in err.splitlines() if "error" in ln.lower()]
    return f" (stderr: {headline(lines[0])})" if lines else ""
