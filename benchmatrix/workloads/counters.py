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

The other sources (:data:`SOURCES`) keep flat lists of cumulative counters under
their own key in each sample, named by ``KIND_fields`` (only what the host's kernel
has): ``memory`` (``/proc/meminfo`` in kB and ``/proc/vmstat``), ``pressure`` (the
``total=`` of each line of ``/proc/pressure/{cpu,io,memory}``, µs) and ``process``
(``getrusage(RUSAGE_CHILDREN)`` of the runner: the run's processes once reaped);
``process_peak`` holds the run's peak memory (``{"kib", "from"}``: its cgroup's
``memory.peak``, or the largest ``VmHWM`` of the workload and its children the samples
saw); ``perf`` holds what ``perf stat -x ,`` wrote; ``notes`` says why a source gave
nothing (no perf, no PSI), one line each, which become the run's warnings.

===============================  ============  ==========================================
name                             unit          meaning
===============================  ============  ==========================================
``mem_page_in_kib_s``            KiB/s         read from block devices into memory
                                               (pgpgin: page cache misses, read-ahead)
``mem_page_out_kib_s``           KiB/s         written out (pgpgout)
``mem_major_faults_s``           faults/s      page faults that waited for a read
``mem_faults_s``                 faults/s      all page faults
``mem_swap_in_s`` / ``_out_s``   pages/s       swapping
``mem_refaults_s``               pages/s       evicted page cache read again
``mem_READAHEAD_s``              pages/s       a kernel's read-ahead counters, by name
``mem_cached_mib`` etc.          MiB           page cache, available, free, dirty,
                                               writeback memory: means of the samples
``mem_cached_growth_mib``        MiB           page cache at the end minus the start
``psi_RES_some_pct``             %             share of the time some task stalled on
                                               RES (cpu, io, memory); ``_full_pct``: all
``proc_cpu_user_s`` / ``_system_s``  s         the run's own CPU time
``proc_cpu_pct``                 %             its CPU time over the run's time (100: one
                                               CPU busy)
``proc_voluntary_switches_s``    switches/s    its context switches (blocking); and
                                               ``proc_involuntary_switches_s`` (preempted)
``proc_major_faults``            faults        its page faults that waited for a read;
                                               ``proc_minor_faults``
``proc_max_rss_kib``             KiB           its peak memory
``perf_cycles`` etc.             (counts)      cycles, instructions, cache misses of the
                                               run; ``perf_ipc`` instructions per cycle
===============================  ============  ==========================================
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
#: The names ``collect`` takes, each a source of counters the batch runner samples.
SOURCES = ("cpu", "disk", "memory", "pressure", "process", "perf")
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


#: The ``memory`` source's rates: vmstat counter -> (metric, unit); a per-second mean.
VMSTAT_RATES = {
    "pgpgin": ("mem_page_in_kib_s", "KiB/s"), "pgpgout": ("mem_page_out_kib_s", "KiB/s"),
    "pgfault": ("mem_faults_s", "faults/s"), "pgmajfault": ("mem_major_faults_s", "faults/s"),
    "pswpin": ("mem_swap_in_s", "pages/s"), "pswpout": ("mem_swap_out_s", "pages/s"),
    "workingset_refault_file": ("mem_refaults_s", "pages/s"),
}
#: The ``memory`` source's levels: meminfo line -> metric (MiB, the mean of the samples).
MEMINFO_LEVELS = {"MemFree": "mem_free_mib", "MemAvailable": "mem_available_mib", "Cached": "mem_cached_mib",
                  "Dirty": "mem_dirty_mib", "Writeback": "mem_writeback_mib"}
#: A kernel's read-ahead counters in /proc/vmstat (their names differ between kernels):
#: ``mem_NAME_s`` in pages/s.
READAHEAD_NAME = r"mem_[a-z0-9_]*readahead[a-z0-9_]*_s"
#: The ``pressure`` source: ``psi_RESOURCE_some_pct`` / ``_full_pct``.
PSI_METRICS = tuple(f"psi_{r}_{k}_pct" for r in ("cpu", "io", "memory") for k in ("some", "full"))
#: The ``process`` source's metrics and units.
PROCESS_UNITS = {
    "proc_cpu_user_s": "s", "proc_cpu_system_s": "s", "proc_cpu_pct": "%",
    "proc_voluntary_switches_s": "switches/s", "proc_involuntary_switches_s": "switches/s",
    "proc_major_faults": "faults", "proc_minor_faults": "faults", "proc_max_rss_kib": "KiB",
}
#: The ``perf`` source's metrics and units (perf stat's events, per run).
PERF_UNITS = {"perf_cycles": "cycles", "perf_instructions": "instructions", "perf_cache_misses": "misses",
              "perf_ipc": "instructions/cycle"}
#: Which way a counter is better, where one way is (``(regex, direction)``, first match):
#: stalls, faults, swapping, misses and the CPU a run needed for its work.
COUNTER_DIRECTIONS = (
    (r"psi_.+_pct", "lower"), (r"mem_(major_faults|swap_in|swap_out|refaults)_s", "lower"),
    (r"proc_(major_faults|cpu_user_s|cpu_system_s)", "lower"), (r"perf_cache_misses", "lower"),
    (r"perf_ipc", "higher"),
)


def counter_direction(metric: str) -> str:
    """``lower``, ``higher`` or "" (no way is better) for a counter metric."""
    return next((d for pattern, d in COUNTER_DIRECTIONS if re.fullmatch(pattern, metric)), "")


def counter_metric_names(collect: list[str]) -> MetricNames:
    """The metric names the counters of ``collect`` (:data:`SOURCES`) give a run: the
    cpu shares, the disk figures summed over devices, and per device as a pattern
    (``disk_DEV_util_pct``: the devices are the host's), the memory, pressure, process
    and perf figures."""
    names: set[str] = set()
    patterns: list[tuple[str, str]] = []
    if "cpu" in collect:
        names.update(CPU_METRICS)
    if "disk" in collect:
        names.update(f"disk_{suffix}" for suffix in DISK_UNITS)
        patterns += [(rf"disk_[A-Za-z0-9_]+_{suffix}", f"disk_DEV_{suffix}") for suffix in DISK_UNITS]
    if "memory" in collect:
        names.update(m for m, _ in VMSTAT_RATES.values())
        names.update(MEMINFO_LEVELS.values())
        names.add("mem_cached_growth_mib")
        patterns.append((READAHEAD_NAME, "mem_READAHEAD_s"))
    if "pressure" in collect:
        names.update(PSI_METRICS)
    if "process" in collect:
        names.update(PROCESS_UNITS)
    if "perf" in collect:
        names.update(PERF_UNITS)
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
    metrics.update(_memory_metrics(data, samples, seconds))
    metrics.update(_pressure_metrics(data, first, last, seconds))
    metrics.update(_process_metrics(data, first, last, seconds))
    warnings = [f"{note}" for note in data.get("notes") or [] if isinstance(note, str)]
    perf, note = _perf_metrics(data.get("perf"))
    metrics.update(perf)
    warnings += [note] if note else []
    return Parsed(metrics=metrics, jobs={}, extra=extra, warnings=warnings)


def _series(data: dict[str, Any], first: dict[str, Any], last: dict[str, Any], kind: str) -> dict[str, float]:
    """Field -> last - first of one source's flat list of counters (``KIND_fields``); a
    field that went backwards (reset) is left out."""
    fields = data.get(f"{kind}_fields")
    a, b = first.get(kind), last.get(kind)
    if not isinstance(fields, list) or not isinstance(a, list) or not isinstance(b, list):
        return {}
    return {str(f): float(y) - float(x) for f, x, y in zip(fields, a, b)
            if _is_number(x) and _is_number(y) and y >= x}


def _memory_metrics(data: dict[str, Any], samples: list[dict[str, Any]],
                    seconds: float) -> dict[str, tuple[float, str]]:
    """Paging rates over the run, and the page cache and free memory (means of the samples)."""
    delta = _series(data, samples[0], samples[-1], "memory")
    out: dict[str, tuple[float, str]] = {}
    for field, value in delta.items():
        if field in VMSTAT_RATES:
            name, unit = VMSTAT_RATES[field]
            out[name] = (value / seconds, unit)
        elif "readahead" in field:
            out[f"mem_{device_key(field).lower()}_s"] = (value / seconds, "pages/s")
    fields = data.get("memory_fields") or []
    for field, name in MEMINFO_LEVELS.items():
        if field not in fields:
            continue
        i = fields.index(field)
        kib = [s["memory"][i] for s in samples if isinstance(s.get("memory"), list) and len(s["memory"]) > i
               and _is_number(s["memory"][i])]
        if kib:
            out[name] = (sum(kib) / len(kib) / 1024.0, "MiB")
            if field == "Cached":
                out["mem_cached_growth_mib"] = ((kib[-1] - kib[0]) / 1024.0, "MiB")
    return out


def _pressure_metrics(data: dict[str, Any], first: dict[str, Any], last: dict[str, Any],
                      seconds: float) -> dict[str, tuple[float, str]]:
    """The share of the run's time some (or all) tasks stalled on each resource."""
    return {f"psi_{field}_pct": (min(100.0, 100.0 * us / 1e6 / seconds), "%")
            for field, us in _series(data, first, last, "pressure").items()
            if f"psi_{field}_pct" in PSI_METRICS}


def _process_metrics(data: dict[str, Any], first: dict[str, Any], last: dict[str, Any],
                     seconds: float) -> dict[str, tuple[float, str]]:
    """The run's own CPU time, context switches, faults and peak memory."""
    d = _series(data, first, last, "process")
    out: dict[str, tuple[float, str]] = {}
    if {"user_s", "system_s"} <= set(d):
        out["proc_cpu_user_s"] = (d["user_s"], "s")
        out["proc_cpu_system_s"] = (d["system_s"], "s")
        out["proc_cpu_pct"] = (100.0 * (d["user_s"] + d["system_s"]) / seconds, "%")
    for field, name in (("voluntary_switches", "proc_voluntary_switches_s"),
                        ("involuntary_switches", "proc_involuntary_switches_s")):
        if field in d:
            out[name] = (d[field] / seconds, PROCESS_UNITS[name])
    for field, name in (("major_faults", "proc_major_faults"), ("minor_faults", "proc_minor_faults")):
        if field in d:
            out[name] = (d[field], "faults")
    peak = (data.get("process_peak") or {}).get("kib") if isinstance(data.get("process_peak"), dict) else None
    if _is_number(peak) and peak > 0:
        out["proc_max_rss_kib"] = (float(peak), "KiB")
    return out


def _perf_metrics(perf: Any) -> tuple[dict[str, tuple[float, str]], str]:
    """perf stat's counts (its ``-x ,`` output) and a note when it counted none of them."""
    if not isinstance(perf, dict) or not isinstance(perf.get("output"), str):
        return {}, ""
    counts: dict[str, float] = {}
    missing: list[str] = []
    for line in perf["output"].splitlines():
        parts = line.split(",")
        if line.startswith("#") or len(parts) < 3 or not parts[2]:
            continue
        event = parts[2].split(":")[0]
        try:
            counts[event] = float(parts[0])
        except ValueError:
            missing.append(f"{event} {parts[0].strip('<>')}")
    out: dict[str, tuple[float, str]] = {}
    for event, name in (("cycles", "perf_cycles"), ("instructions", "perf_instructions"),
                        ("cache-misses", "perf_cache_misses")):
        if event in counts:
            out[name] = (counts[event], PERF_UNITS[name])
    if counts.get("cycles"):
        if "instructions" in counts:
            out["perf_ipc"] = (counts["instructions"] / counts["cycles"], PERF_UNITS["perf_ipc"])
    if out:
        return out, ""
    why = ", ".join(missing) if missing else "perf stat wrote no counts"
    return {}, f"perf: hardware counters skipped ({why})"


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
