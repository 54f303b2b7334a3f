"""Parser for sysbench 1.0's report (written against sysbench 1.0.20).

Every test prints the same general statistics; the cpu, memory, fileio and
database (OLTP) tests add their own section. Each metric appears only when sysbench
printed its line:

===========================  =======  =================================================
name                         unit     source
===========================  =======  =================================================
``total_time_s``             s        ``total time:``
``events``                   events   ``total number of events:``
``events_per_s``             events/s events / total time (cpu: ``events per second:``)
``latency_min_ms`` etc.      ms       ``Latency (ms):`` min, avg, max, sum;
                                      ``latency_p95_ms`` from ``95th percentile:`` (the
                                      number follows ``--percentile``; 0 disables it)
``transactions_per_s``       tx/s     OLTP ``transactions: N (X per sec.)``
``transactions``             tx       the same line's count
``queries_per_s``            q/s      OLTP ``queries: N (X per sec.)``
``queries``                  q        the same line's count
``reads``, ``writes``,       q        OLTP ``queries performed`` read, write, other
``other_queries``
``errors``, ``errors_per_s`` q, q/s   OLTP ``ignored errors:``
``reconnects``,              count    OLTP ``reconnects:``
``reconnects_per_s``
``ops_per_s``, ``ops``       op/s     memory ``Total operations: N (X per second)``
``mib_per_s``,               MiB/s    memory ``N MiB transferred (X MiB/sec)``
``transferred_mib``
``reads_per_s``,             op/s     fileio ``File operations``
``writes_per_s``,
``fsyncs_per_s``
``read_mib_per_s``,          MiB/s    fileio ``Throughput``
``written_mib_per_s``
===========================  =======  =================================================

``Parsed.extra`` holds ``version``, ``threads`` and ``test`` (``cpu``, ``memory``,
``fileio`` or ``oltp`` as recognised from the sections), plus ``fairness`` (events and
execution time per thread, average and standard deviation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.workloads.base import Parsed, as_text, headline, last_line

_NUM = r"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"

_LINES: list[tuple[re.Pattern[str], list[tuple[str, str]]]] = [
    (re.compile(rf"^total time:\s+{_NUM}s$"), [("total_time_s", "s")]),
    (re.compile(rf"^total number of events:\s+{_NUM}$"), [("events", "events")]),
    (re.compile(rf"^events per second:\s+{_NUM}$"), [("events_per_s", "events/s")]),
    (re.compile(rf"^transactions:\s+{_NUM}\s+\({_NUM} per sec\.\)$"),
     [("transactions", "tx"), ("transactions_per_s", "tx/s")]),
    (re.compile(rf"^queries:\s+{_NUM}\s+\({_NUM} per sec\.\)$"), [("queries", "q"), ("queries_per_s", "q/s")]),
    (re.compile(rf"^ignored errors:\s+{_NUM}\s+\({_NUM} per sec\.\)$"), [("errors", "q"), ("errors_per_s", "q/s")]),
    (re.compile(rf"^reconnects:\s+{_NUM}\s+\({_NUM} per sec\.\)$"),
     [("reconnects", "count"), ("reconnects_per_s", "count/s")]),
    (re.compile(rf"^Total operations:\s+{_NUM}\s+\({_NUM} per second\)$"), [("ops", "op"), ("ops_per_s", "op/s")]),
    (re.compile(rf"^{_NUM} MiB transferred \({_NUM} MiB/sec\)$"),
     [("transferred_mib", "MiB"), ("mib_per_s", "MiB/s")]),
    (re.compile(rf"^reads/s:\s+{_NUM}$"), [("reads_per_s", "op/s")]),
    (re.compile(rf"^writes/s:\s+{_NUM}$"), [("writes_per_s", "op/s")]),
    (re.compile(rf"^fsyncs/s:\s+{_NUM}$"), [("fsyncs_per_s", "op/s")]),
    (re.compile(rf"^read, MiB/s:\s+{_NUM}$"), [("read_mib_per_s", "MiB/s")]),
    (re.compile(rf"^written, MiB/s:\s+{_NUM}$"), [("written_mib_per_s", "MiB/s")]),
]
#: ``queries performed``' lines -> metric (``total`` is their sum: left out).
_QUERY_NAMES = {"read": "reads", "write": "writes", "other": "other_queries"}
_QUERIES = re.compile(rf"^(read|write|other|total):\s+{_NUM}$")
_LATENCY_STATS = ("min", "avg", "max", "sum")
_LATENCY = re.compile(rf"^({'|'.join(_LATENCY_STATS)}|([0-9.]+)th percentile):\s+{_NUM}$")
_FAIRNESS = re.compile(rf"^(events|execution time) \(avg/stddev\):\s+{_NUM}/{_NUM}$")
_VERSION = re.compile(r"^sysbench (\S+)")
_THREADS = re.compile(r"^Number of threads: (\d+)$")
_FATAL = re.compile(r"^FATAL: (.*)$")


def _percentile_name(rank: str) -> str:
    value = float(rank)
    text = f"{value:g}".replace(".", "_")
    return f"latency_p{text}_ms"


#: Every fixed name :func:`parse_sysbench` can give (``latency_p95_ms`` at sysbench's
#: default ``--percentile``); the workload descriptor offers them to spec checks.
SYSBENCH_METRIC_NAMES: tuple[str, ...] = tuple(dict.fromkeys(
    [name for _, names in _LINES for name, _ in names] + [f"latency_{s}_ms" for s in _LATENCY_STATS]
    + list(_QUERY_NAMES.values()) + [_percentile_name("95")]))
#: The name of another ``--percentile``'s latency (``latency_p99_ms``, ``latency_p99_9_ms``), as
#: :func:`_percentile_name` makes it, and how a message shows it.
SYSBENCH_METRIC_PATTERNS: tuple[tuple[str, str], ...] = ((r"latency_p[0-9]+(?:_[0-9]+)?(?:e[-+][0-9]+)?_ms",
                                                          "latency_pN_ms"),)


def parse_sysbench(stdout: str, workload: Mapping[str, Any] | None = None,
                   run_dir: Path | None = None) -> Parsed:
    """Turn sysbench's report into metrics (see the module docstring).

    Raises:
        ParseError: The output is empty, reports a ``FATAL`` error, or has no
            general statistics (the run failed or the output is truncated).
    """
    text = as_text(stdout, "sysbench")
    if not text.strip():
        raise ParseError("sysbench printed no output")
    metrics: dict[str, tuple[float, str]] = {}
    extra: dict[str, Any] = {}
    fatal: list[str] = []
    section = ""
    fairness: dict[str, dict[str, float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.endswith(":") and not raw.startswith(" " * 8):
            section = line[:-1]
            if section in ("CPU speed", "SQL statistics", "File operations"):
                extra.setdefault("test", {"CPU speed": "cpu", "SQL statistics": "oltp",
                                          "File operations": "fileio"}[section])
            continue
        m = _FATAL.match(line)
        if m:
            fatal.append(m.group(1))
            continue
        m = _VERSION.match(line)
        if m and "version" not in extra:
            extra["version"] = m.group(1)
            continue
        m = _THREADS.match(line)
        if m:
            extra["threads"] = int(m.group(1))
            continue
        if section == "Latency (ms)":
            m = _LATENCY.match(line)
            if m:
                name = _percentile_name(m.group(2)) if m.group(2) else f"latency_{m.group(1)}_ms"
                metrics[name] = (float(m.group(3)), "ms")
                continue
        if section == "queries performed":
            m = _QUERIES.match(line)
            if m:
                if m.group(1) != "total":
                    name = _QUERY_NAMES[m.group(1)]
                    metrics[name] = (float(m.group(2)), "q")
                continue
        m = _FAIRNESS.match(line)
        if m:
            key = "events" if m.group(1) == "events" else "execution_time_s"
            fairness[key] = {"avg": float(m.group(2)), "stddev": float(m.group(3))}
            continue
        for pattern, names in _LINES:
            m = pattern.match(line)
            if m:
                for (name, unit), value in zip(names, m.groups()):
                    metrics[name] = (float(value), unit)
                if names[0][0] == "ops":
                    extra.setdefault("test", "memory")
                break
    if fatal:
        raise ParseError(f"sysbench failed: {headline(fatal[0])}")
    if "total_time_s" not in metrics or "events" not in metrics:
        raise ParseError("sysbench printed no general statistics (run failed or output truncated): "
                         f"{last_line(text)}")
    if "events_per_s" not in metrics and metrics["total_time_s"][0] > 0:
        metrics["events_per_s"] = (metrics["events"][0] / metrics["total_time_s"][0], "events/s")
    if fairness:
        extra["fairness"] = fairness
    return Parsed(metrics=metrics, jobs={}, extra=extra)


