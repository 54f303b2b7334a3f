"""System counters sampled on the host during a run (spec key ``collect``).

The batch runner reads ``/proc/stat`` (``cpu``) and ``/proc/diskstats`` (``disk``)
right before the workload starts, once per second while it runs and right after it
exits, and keeps the raw cumulative counters in the run directory as
``counters.json``::

    {"version": 1, "collect": ["cpu", "disk"], "interval_s": 1.0,
     "cpu_fields": ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"],
     "disk_fields": ["reads", "reads_merged", "sectors_read", "read_ms", "writes",
                     "writes_merged", "sectors_written", "write_ms", "in_flight",
                     "io_ms", "weighted_io_ms"],
     "devices": {"vda": {"virtual": false}, "loop0": {"virtual": true}},
     "samples": [{"t": 0.0, "cpu": [...], "disk": {"vda": [...], ...}}, ...]}

``t`` is seconds since the first sample; ``devices`` lists the whole block devices
of ``/sys/block`` with a non-zero size (partitions are left out, so nothing is
counted twice) and whether the kernel calls them virtual (loop, device mapper, md,
...). The metrics of the run are the means over the run: the difference between the
last and the first sample divided by the time between them.

=============================  =====  ==============================================
name                           unit   meaning
=============================  =====  ==============================================
``cpu_user_pct``               %      user + nice time, share of all CPUs' time
``cpu_system_pct``             %      system + irq + softirq
``cpu_iowait_pct``             %      idle while waiting for I/O
``cpu_idle_pct``               %      idle
``cpu_steal_pct``              %      taken by the hypervisor
``cpu_busy_pct``               %      100 - idle - iowait
``disk_DEV_reads_s``           IO/s   reads completed per second on device DEV
``disk_DEV_writes_s``          IO/s   writes completed per second
``disk_DEV_read_mib_s``        MiB/s  read throughput
``disk_DEV_write_mib_s``       MiB/s  write throughput
``disk_DEV_read_kib_per_io``   KiB    average read request size (the seed's "bytes
                                      per read"); only when DEV read
``disk_DEV_write_kib_per_io``  KiB    average write request size; only when DEV wrote
``disk_DEV_read_await_ms``     ms     average time a read took (queue + service)
``disk_DEV_write_await_ms``    ms     average time a write took
``disk_DEV_util_pct``          %      share of the time DEV had I/O in flight
``disk_reads_s`` etc.          ...    the same summed over the non-virtual devices
                                      (request size and await from the sums;
                                      ``disk_util_pct`` is the busiest device's)
=============================  =====  ==============================================

``DEV`` is the kernel's device name with every character other than a letter or a
digit replaced by ``_`` (``dm-0`` -> ``dm_0``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.spec.declared import MetricNames
from benchmatrix.workloads.base import Parsed

COUNTERS_FILE = "counters.json"
SECTOR_BYTES = 512
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
DISK_FIELDS = ("reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged",
               "sectors_written", "write_ms", "in_flight", "io_ms", "weighted_io_ms")
#: Unit of each per-device metric suffix.
DISK_UNITS = {
    "reads_s": "IO/s", "writes_s": "IO/s", "read_mib_s": "MiB/s", "write_mib_s": "MiB/s",
    "read_kib_per_io": "KiB", "write_kib_per_io": "KiB", "read_await_ms": "ms",
    "write_await_ms": "ms", "util_pct": "%",
}
CPU_METRICS = ("cpu_user_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_idle_pct", "cpu_steal_pct",
               "cpu_busy_pct")


def counter_metric_names(collect: list[str]) -> MetricNames:
    """The metric names the counters of ``collect`` (``cpu``, ``disk``) give a run: the
    cpu shares, the disk figures summed over devices, and per device as a pattern
    (``disk_DEV_util_pct``: the devices are the host's)."""
    names: set[str] = set()
    patterns: list[tuple[str, str]] = []
    if "cpu" in collect:
        names.update(CPU_METRICS)
    if "disk" in collect:
        names.update(f"disk_{suffix}" for suffix in DISK_UNITS)
        patterns += [(rf"disk_[A-Za-z0-9_]+_{suffix}", f"disk_DEV_{suffix}") for suffix in DISK_UNITS]
    return MetricNames(frozenset(names), tuple(patterns), complete=True)


def device_key(name: str) -> str:
    """A device name as it appears in metric names (``dm-0`` -> ``dm_0``)."""
    return re.sub(r"[^A-Za-z0-9]", "_", name)


def load_counters(run_dir: Path | None) -> Parsed | None:
    """The counter metrics of the run in ``run_dir``, or None when it has no counters.json."""
    if run_dir is None:
        return None
    path = Path(run_dir) / COUNTERS_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return parse_counters(text)


def parse_counters(text: str) -> Parsed:
    """The mean CPU and disk figures of one run from its ``counters.json``.

    Returns:
        ``metrics`` as in the module docstring; ``extra`` with ``samples`` (how many),
        ``seconds`` (covered), ``devices`` (per device, its metrics, whether virtual)
        and ``peak`` (the highest one-interval ``cpu_busy_pct`` and per-device
        ``util_pct``).

    Raises:
        ParseError: The file is not valid JSON, is malformed, or holds fewer than two
            samples.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{COUNTERS_FILE} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("samples"), list):
        raise ParseError(f"{COUNTERS_FILE} has no 'samples' list")
    samples = [s for s in data["samples"] if isinstance(s, dict) and _is_number(s.get("t"))]
    if len(samples) < 2:
        raise ParseError(f"{COUNTERS_FILE} holds {len(samples)} sample(s); two are needed for a rate")
    first, last = samples[0], samples[-1]
    seconds = float(last["t"]) - float(first["t"])
    if seconds <= 0:
        raise ParseError(f"{COUNTERS_FILE}: the samples span no time")
    cpu_fields = list(data.get("cpu_fields") or CPU_FIELDS)
    disk_fields = list(data.get("disk_fields") or DISK_FIELDS)
    metrics: dict[str, tuple[float, str]] = {}
    extra: dict[str, Any] = {"samples": len(samples), "seconds": round(seconds, 6)}
    peak: dict[str, float] = {}

    if "cpu" in first and "cpu" in last:
        cpu = _cpu_shares(first["cpu"], last["cpu"], cpu_fields)
        if cpu is not None:
            for name, value in cpu.items():
                metrics[name] = (value, "%")
            busiest = max(((_cpu_shares(a["cpu"], b["cpu"], cpu_fields) or {}).get("cpu_busy_pct", 0.0)
                           for a, b in zip(samples, samples[1:]) if "cpu" in a and "cpu" in b), default=0.0)
            busiest = max(busiest, cpu["cpu_busy_pct"])
            peak["cpu_busy_pct"] = busiest

    devices = data.get("devices") or {}
    if isinstance(first.get("disk"), dict) and isinstance(last.get("disk"), dict):
        per_device: dict[str, Any] = {}
        totals = dict.fromkeys(("reads", "writes", "sectors_read", "sectors_written", "read_ms", "write_ms"), 0.0)
        util_max = None
        counted = 0
        for dev in sorted(set(first["disk"]) & set(last["disk"])):
            delta = _delta(first["disk"][dev], last["disk"][dev], disk_fields)
            if delta is None:
                continue
            figures = _disk_figures(delta, seconds)
            key = device_key(dev)
            for suffix, value in figures.items():
                metrics[f"disk_{key}_{suffix}"] = (value, DISK_UNITS[suffix])
            virtual = bool((devices.get(dev) or {}).get("virtual", False))
            per_device[dev] = {"virtual": virtual, **figures}
            peak[f"disk_{key}_util_pct"] = _peak_util(samples, dev, disk_fields, figures["util_pct"])
            if not virtual:
                counted += 1
                for name in totals:
                    totals[name] += delta[name]
                util_max = figures["util_pct"] if util_max is None else max(util_max, figures["util_pct"])
        if counted:
            summed = dict(totals, io_ms=(util_max or 0.0) * seconds * 10.0)
            for suffix, value in _disk_figures(summed, seconds).items():
                metrics[f"disk_{suffix}"] = (value, DISK_UNITS[suffix])
        extra["devices"] = per_device
    extra["peak"] = {k: round(v, 6) for k, v in peak.items()}
    return Parsed(metrics=metrics, jobs={}, extra=extra)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _delta(a: Any, b: Any, fields: list[str]) -> dict[str, float] | None:
    """Field -> b - a, or None when malformed or a counter went backwards (wrapped or reset)."""
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b) or len(a) < len(fields):
        return None
    out = {}
    for name, x, y in zip(fields, a, b):
        if not (_is_number(x) and _is_number(y)):
            return None
        if name != "in_flight" and y < x:
            return None
        out[name] = float(y) - float(x)
    return out


def _peak_util(samples: list[dict[str, Any]], dev: str, fields: list[str], default: float) -> float:
    """The highest one-interval utilisation of ``dev``."""
    best = default
    for a, b in zip(samples, samples[1:]):
        seconds = float(b["t"]) - float(a["t"])
        da, db = a.get("disk"), b.get("disk")
        if seconds <= 0 or not isinstance(da, dict) or not isinstance(db, dict) or dev not in da or dev not in db:
            continue
        d = _delta(da[dev], db[dev], fields)
        if d is not None:
            best = max(best, _disk_figures(d, seconds)["util_pct"])
    return best


def _cpu_shares(a: Any, b: Any, fields: list[str]) -> dict[str, float] | None:
    d = _delta(a, b, fields)
    if d is None:
        return None
    total = sum(d.get(f, 0.0) for f in CPU_FIELDS)
    if total <= 0:
        return None
    pct = {name: 100.0 * d.get(name, 0.0) / total for name in CPU_FIELDS}
    return {
        "cpu_user_pct": pct["user"] + pct["nice"],
        "cpu_system_pct": pct["system"] + pct["irq"] + pct["softirq"],
        "cpu_iowait_pct": pct["iowait"],
        "cpu_idle_pct": pct["idle"],
        "cpu_steal_pct": pct["steal"],
        "cpu_busy_pct": max(0.0, 100.0 - pct["idle"] - pct["iowait"]),
    }


def _disk_figures(d: dict[str, float], seconds: float) -> dict[str, float]:
    mib = SECTOR_BYTES / (1024.0 * 1024.0)
    out = {
        "reads_s": d["reads"] / seconds,
        "writes_s": d["writes"] / seconds,
        "read_mib_s": d["sectors_read"] * mib / seconds,
        "write_mib_s": d["sectors_written"] * mib / seconds,
        "util_pct": min(100.0, d.get("io_ms", 0.0) / (seconds * 10.0)),
    }
    if d["reads"] > 0:
        out["read_kib_per_io"] = d["sectors_read"] * SECTOR_BYTES / 1024.0 / d["reads"]
        out["read_await_ms"] = d["read_ms"] / d["reads"]
    if d["writes"] > 0:
        out["write_kib_per_io"] = d["sectors_written"] * SECTOR_BYTES / 1024.0 / d["writes"]
        out["write_await_ms"] = d["write_ms"] / d["writes"]
    return out
