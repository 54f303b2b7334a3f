"""Parser for the output of ``fio --output-format=json`` (written against fio 3.33).

Metrics, for each direction ``d`` in ``read`` and ``write`` (``trim`` and ``sync``
are ignored):

==========================  =======  ==============================================
name                        unit     source in each job's ``d`` section
==========================  =======  ==============================================
``d_iops``                  IO/s     ``iops``
``d_bw_kib``                KiB/s    ``bw_bytes / 1024`` (``bw`` when absent)
``d_io_kib``                KiB      ``io_bytes / 1024`` (``io_kbytes`` when absent)
``d_clat_mean_us``          µs       ``clat_ns.mean / 1000``
``d_clat_p50_us`` etc.      µs       ``clat_ns.percentile["50.000000"] / 1000``;
                                     also p95, p99 and ``p99_9`` (99.9th)
``d_clat_max_us``           µs       ``clat_ns.max / 1000``
``d_runtime_ms``            ms       ``runtime``
==========================  =======  ==============================================

A direction's metrics appear only where that direction did I/O (``total_ios > 0``
or ``io_bytes > 0``): in a job's metrics when that job did, in the aggregate when at
least one job did. A percentile fio did not print is left out rather than guessed.

The aggregate over jobs sums IOPS, bandwidth and I/O volume; the mean completion
latency is the mean of the jobs' means weighted by their ``total_ios``; runtime is
the longest job's. Percentiles and the maximum are the **largest value over the
jobs**. For the maximum that is exact, but for a percentile it is only a
conservative (upper) bound of the percentile of all I/Os pooled together: fio's
JSON carries no histogram to pool exactly. An aggregate latency figure is given only
when every job that did I/O in that direction reported it, so that a bound never
silently covers only some of the jobs.

Known quirks of fio's output that the parser handles:

* fio prints notes and warnings as plain text before the JSON on stdout (for
  example ``note: both iodepth >= 1 and synchronous I/O engine are selected``) and,
  when stderr is captured as well, error lines before or after it. The JSON starts
  at the first line that begins with ``{``; the text around it is kept in
  ``extra["notes"]``.
* With ``--status-interval`` fio prints one complete JSON report per interval,
  back to back; the last one is the final result and is the one parsed.
* fio formats floating point numbers with ``printf("%f")``, so a NaN or infinity
  appears as a bare ``nan``/``-nan``/``inf`` that strict JSON rejects; such a value
  is read as missing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import ParseError
from benchmatrix.workloads.base import Parsed, as_text, read_input, unique_name

#: Name of the job file in a run's ``inputs/`` directory (written by workload_fio).
JOB_FILE_INPUT = "job.fio"

DIRECTIONS: tuple[str, ...] = ("read", "write")

_US = "\u00b5s"  # "µs" with MICRO SIGN, spelled out so an editor cannot swap it for Greek mu

# Metric suffix -> the percentile it reports. fio keys percentiles as "%f" strings
# ("99.900000"), but they are matched as numbers so another spelling still matches.
_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
)

_HEADLINE_MAX = 200

# Only bare tokens right after a key's colon; a quoted "nan" is a string and valid.
_NON_FINITE = re.compile(r"(?<=:)(\s*)-?(?:nan|inf)\b", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s*")


def _metric_units() -> dict[str, str]:
    units: dict[str, str] = {}
    for d in DIRECTIONS:
        units[f"{d}_iops"] = "IO/s"
        units[f"{d}_bw_kib"] = "KiB/s"
        units[f"{d}_io_kib"] = "KiB"
        units[f"{d}_clat_mean_us"] = _US
        for suffix, _ in _PERCENTILES:
            units[f"{d}_clat_{suffix}_us"] = _US
        units[f"{d}_clat_max_us"] = _US
        units[f"{d}_runtime_ms"] = "ms"
    return units


#: Every metric name :func:`parse_fio` can emit -> its unit.
FIO_METRICS: dict[str, str] = _metric_units()


@dataclass
class _Direction:
    """One job's (or the aggregate's) figures for one direction, in output units."""

    iops: float
    bw_kib: float
    io_kib: float
    runtime_ms: float
    total_ios: float
    clat_mean_us: float | None = None
    clat_max_us: float | None = None
    clat_percentiles_us: dict[str, float] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.total_ios > 0 or self.io_kib > 0

    def metrics(self, d: str) -> dict[str, tuple[float, str]]:
        out = {
            f"{d}_iops": (self.iops, FIO_METRICS[f"{d}_iops"]),
            f"{d}_bw_kib": (self.bw_kib, FIO_METRICS[f"{d}_bw_kib"]),
            f"{d}_io_kib": (self.io_kib, FIO_METRICS[f"{d}_io_kib"]),
        }
        if self.clat_mean_us is not None:
            out[f"{d}_clat_mean_us"] = (self.clat_mean_us, _US)
        for suffix, _ in _PERCENTILES:
            if suffix in self.clat_percentiles_us:
                out[f"{d}_clat_{suffix}_us"] = (self.clat_percentiles_us[suffix], _US)
        if self.clat_max_us is not None:
            out[f"{d}_clat_max_us"] = (self.clat_max_us, _US)
        out[f"{d}_runtime_ms"] = (self.runtime_ms, FIO_METRICS[f"{d}_runtime_ms"])
        return out


# shape: one pass over fio's JSON: jobs, aggregate, groups, extras; split, blocks pass the same job lists
def parse_fio(stdout: str, workload: Mapping[str, Any] | None = None,
              run_dir: Path | None = None) -> Parsed:
    """Turn what ``fio --output-format=json`` printed into metrics.

    See the module docstring for the metric names, units and how jobs are
    aggregated.

    Args:
        stdout: fio's standard output (standard error mixed in is tolerated).
        workload: The spec's workload section (unused: fio's output is typed).
        run_dir: The run's raw files; when it holds ``inputs/job.fio`` (the job
            file the run used), the job file's intent is checked against what fio
            did (see :func:`concurrency_warnings`).

    Returns:
        The aggregate metrics, the metrics of each job (keyed by job name, a
        repeated name made unique with ``#2``, ``#3``, ...) and ``extra`` with
        ``fio_version``, ``timestamp_ms`` (when fio wrote the report), ``jobs`` (per
        job: ``name``, ``groupid``, ``runtime_ms``, and ``start_ms``/``end_ms`` only
        when fio reports ``job_start``, which fio 3.33 does not; ``end_ms`` is then
        ``start_ms + runtime_ms``, an approximation; otherwise ``start_est_ms`` and
        ``end_est_ms``, estimated from the report's timestamp, the group order and
        the runtimes), ``notes`` (non-JSON lines fio printed) and
        ``interim_reports`` (reports before the final one, with
        ``--status-interval``), each present only when known. ``groups`` holds
        the aggregate of each reporting group (same rules as over all jobs) and
        ``warnings`` the findings of :func:`concurrency_warnings`.

    Raises:
        ParseError: The output is empty, holds no JSON or invalid JSON, has no
            ``jobs`` list, is malformed, or a job reports a non-zero ``error``.
    """
    text = as_text(stdout, "fio")
    if not text.strip():
        raise ParseError("fio printed no output")
    start = _json_start(text)
    if start is None:
        raise ParseError(f"fio printed no JSON: {_headline(text)}")

    reports, trailing = _decode_reports(text, start)
    # With --status-interval only the last report is the final result.
    report = reports[-1]
    notes = [line.strip() for line in (text[:start] + "\n" + trailing).splitlines() if line.strip()]

    jobs = report.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError("fio JSON has no 'jobs' list")
    if not jobs:
        raise ParseError("fio JSON has an empty 'jobs' list")
    names = _check_jobs(jobs, notes)

    per_job: dict[str, dict[str, tuple[float, str]]] = {}
    directions: dict[str, list[_Direction]] = {d: [] for d in DIRECTIONS}
    job_extra: list[dict[str, Any]] = []
    for job, name in zip(jobs, names):
        unique = unique_name(name, per_job)
        metrics: dict[str, tuple[float, str]] = {}
        for d in DIRECTIONS:
            stats = _read_direction(name, d, job.get(d))
            if stats is not None and stats.active:
                directions[d].append(stats)
                metrics.update(stats.metrics(d))
        per_job[unique] = metrics
        job_extra.append(_job_extra(unique, name, job))

    aggregate: dict[str, tuple[float, str]] = {}
    for d in DIRECTIONS:
        if directions[d]:
            aggregate.update(_combine(directions[d]).metrics(d))

    extra: dict[str, Any] = {}
    if isinstance(report.get("fio version"), str):
        extra["fio_version"] = report["fio version"]
    if _is_number(report.get("timestamp_ms")):
        extra["timestamp_ms"] = report["timestamp_ms"]
    extra["jobs"] = job_extra
    if notes:
        extra["notes"] = notes
    if len(reports) > 1:
        extra["interim_reports"] = len(reports) - 1

    groups: dict[str, dict[str, tuple[float, str]]] = {}
    by_group: dict[int, dict[str, list[_Direction]]] = {}
    for job, info in zip(jobs, job_extra):
        gid = int(info.get("groupid", 0))
        slot = by_group.setdefault(gid, {d: [] for d in DIRECTIONS})
        for d in DIRECTIONS:
            stats = _read_direction(info["name"], d, job.get(d))
            if stats is not None and stats.active:
                slot[d].append(stats)
    for gid in sorted(by_group):
        metrics_g: dict[str, tuple[float, str]] = {}
        for d in DIRECTIONS:
            if by_group[gid][d]:
                metrics_g.update(_combine(by_group[gid][d]).metrics(d))
        groups[str(gid)] = metrics_g
    _estimate_timing(job_extra, extra.get("timestamp_ms"))

    job_file = read_input(run_dir, JOB_FILE_INPUT)
    intent = job_file_intent(job_file) if job_file is not None else _intent_from_json(report, jobs)
    warnings = concurrency_warnings(intent, job_extra)
    return Parsed(metrics=aggregate, jobs=per_job, extra=extra, groups=groups, warnings=warnings)


def _json_start(text: str) -> int | None:
    """Offset of the first line that begins with ``{``, or None."""
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("{"):
            return offset
        offset += len(line)
    return None


def _headline(text: str) -> str:
    """The line that best says what went wrong, for an output without JSON."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # fio prefixes its own error messages with "fio:"; on stdout alone the first
    # line may instead be e.g. the list of valid values that follows such an error.
    line = next((line for line in lines if line.startswith("fio:")), lines[0])
    if len(line) > _HEADLINE_MAX:
        return line[:_HEADLINE_MAX] + "..."
    return line


def _decode_reports(text: str, start: int) -> tuple[list[dict[str, Any]], str]:
    """Decode the JSON report(s) that begin at ``start``.

    Returns:
        The reports in output order and the text that follows the last one.
    """
    body = text[start:]
    try:
        return _decode_all(body)
    except json.JSONDecodeError as error:
        cleaned = _NON_FINITE.sub(r"\1null", body)
        if cleaned != body:
            try:
                return _decode_all(cleaned)
            except json.JSONDecodeError:
                pass  # report the error in what fio printed, not in our rewrite
        line = error.lineno + text.count("\n", 0, start)
        raise ParseError(
            f"fio output is not valid JSON: {error.msg} (line {line}, column {error.colno})"
        ) from None


def _decode_all(body: str) -> tuple[list[dict[str, Any]], str]:
    decoder = json.JSONDecoder()
    reports: list[dict[str, Any]] = []
    pos = 0
    while True:
        report, pos = decoder.raw_decode(body, pos)
        reports.append(report)
        pos = _WHITESPACE.match(body, pos).end()
        if not body.startswith("{", pos):
            return reports, body[pos:]


def _check_jobs(jobs: list[Any], notes: list[str]) -> list[str]:
    """Validate each job's identity and error code; return the job names.

    Raises:
        ParseError: A job is malformed or reports a non-zero ``error``.
    """
    names: list[str] = []
    failed: list[tuple[str, int]] = []
    for index, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ParseError(f"fio JSON: jobs[{index}] is not an object")
        name = job.get("jobname")
        if not isinstance(name, str) or not name:
            raise ParseError(f"fio JSON: jobs[{index}] has no 'jobname'")
        code = job.get("error", 0)
        if isinstance(code, bool) or not isinstance(code, int):
            raise ParseError(f"fio JSON: job '{name}' has a non-integer 'error' ({code!r:.40})")
        if code != 0:
            failed.append((name, code))
        names.append(name)
    if failed:
        name, code = failed[0]
        message = f"fio job '{name}' failed with error {code}"
        detail = _error_detail(notes, code)
        if detail:
            message += f" ({detail})"
        if len(failed) > 1:
            message += f"; {len(failed) - 1} more job(s) failed"
        raise ParseError(message)
    return names


def _error_detail(notes: list[str], code: int) -> str:
    """fio's own description of error ``code``, when its stderr line was captured."""
    # fio reports a job error on stderr as "fio: pid=N, err=CODE/DESCRIPTION".
    marker = f"err={code}/"
    for line in notes:
        at = line.find(marker)
        if at >= 0:
            detail = line[at + len(marker):].strip()
            return detail[:_HEADLINE_MAX]
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(section: dict[str, Any], key: str, where: str) -> float:
    value = section.get(key)
    if not _is_number(value):
        raise ParseError(f"fio JSON: {where}.{key} is missing or not a number ({value!r:.40})")
    return float(value)


def _optional_number(section: dict[str, Any], key: str, where: str) -> float | None:
    """A number, or None when absent, null or non-finite (fio's bare nan/inf)."""
    value = section.get(key)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if not _is_number(value):
        raise ParseError(f"fio JSON: {where}.{key} is not a number ({value!r:.40})")
    return float(value)


def _read_direction(job: str, d: str, section: Any) -> _Direction | None:
    """One job's figures for direction ``d``; None when fio printed no such section."""
    if section is None:
        return None
    where = f"job '{job}' {d}"
    if not isinstance(section, dict):
        raise ParseError(f"fio JSON: {where} is not an object")

    # The byte counts are exact; fio's "bw" and "io_kbytes" are the same values
    # divided by 1024 and truncated to integers.
    if "io_bytes" in section:
        io_kib = _number(section, "io_bytes", where) / 1024
    else:
        io_kib = _number(section, "io_kbytes", where)
    if "bw_bytes" in section:
        bw_kib = _number(section, "bw_bytes", where) / 1024
    else:
        bw_kib = _number(section, "bw", where)
    stats = _Direction(
        iops=_number(section, "iops", where),
        bw_kib=bw_kib,
        io_kib=io_kib,
        runtime_ms=_number(section, "runtime", where),
        total_ios=_number(section, "total_ios", where),
    )

    clat = section.get("clat_ns")
    if clat is None:
        return stats
    where = f"{where}.clat_ns"
    if not isinstance(clat, dict):
        raise ParseError(f"fio JSON: {where} is not an object")
    samples = _optional_number(clat, "N", where)
    if samples == 0:
        # No completion latency was recorded (e.g. disable_clat): fio's zeros there
        # are placeholders, not measurements.
        return stats
    mean = _optional_number(clat, "mean", where)
    maximum = _optional_number(clat, "max", where)
    stats.clat_mean_us = None if mean is None else mean / 1000
    stats.clat_max_us = None if maximum is None else maximum / 1000

    percentiles = clat.get("percentile")
    if percentiles is None:
        return stats
    if not isinstance(percentiles, dict):
        raise ParseError(f"fio JSON: {where}.percentile is not an object")
    by_rank: dict[float, float] = {}
    for key in percentiles:
        try:
            rank = float(key)
        except ValueError:
            continue
        value = _optional_number(percentiles, key, f"{where}.percentile")
        if value is not None:
            by_rank[rank] = value
    for suffix, rank in _PERCENTILES:
        if rank in by_rank:
            stats.clat_percentiles_us[suffix] = by_rank[rank] / 1000
    return stats


def _combine(parts: list[_Direction]) -> _Direction:
    """Aggregate the figures of the jobs that did I/O in one direction."""
    total_ios = sum(p.total_ios for p in parts)
    combined = _Direction(
        iops=sum(p.iops for p in parts),
        bw_kib=sum(p.bw_kib for p in parts),
        io_kib=sum(p.io_kib for p in parts),
        runtime_ms=max(p.runtime_ms for p in parts),
        total_ios=total_ios,
    )
    if total_ios > 0 and all(p.clat_mean_us is not None for p in parts):
        combined.clat_mean_us = (
            sum(p.clat_mean_us * p.total_ios for p in parts) / total_ios  # type: ignore[operator]
        )
    if all(p.clat_max_us is not None for p in parts):
        combined.clat_max_us = max(p.clat_max_us for p in parts)  # type: ignore[type-var]
    for suffix, _ in _PERCENTILES:
        if all(suffix in p.clat_percentiles_us for p in parts):
            combined.clat_percentiles_us[suffix] = max(p.clat_percentiles_us[suffix] for p in parts)
    return combined


def _job_extra(unique: str, name: str, job: dict[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {"name": unique}
    if unique != name:
        info["jobname"] = name
    if _is_number(job.get("groupid")):
        info["groupid"] = job["groupid"]
    runtime = job.get("job_runtime")
    if _is_number(runtime):
        info["runtime_ms"] = runtime
    # Newer fio versions report when each job started (ms since the epoch); 3.33 does not.
    start = job.get("job_start")
    if _is_number(start) and start > 0:
        info["start_ms"] = start
        if _is_number(runtime):
            info["end_ms"] = start + runtime
    return info


# ---------------------------------------------------------------- job file sanity

_OFF = {"0", "false", "no", "off"}


@dataclass
class JobIntent:
    """What a job file section asks for, as far as ordering goes."""

    name: str
    stonewall: bool = False      # wait for every job before this one (new group)
    new_group: bool = False      # start a new reporting group (does not wait)
    numjobs: int = 1
    stonewall_in_section: bool = False   # set in the job's own section, not in [global]


def _flag(options: dict[str, str | None], *keys: str) -> bool:
    for key in keys:
        if key in options:
            value = options[key]
            return value is None or value.strip().lower() not in _OFF
    return False


def job_file_intent(text: str) -> list[JobIntent]:
    """The jobs of a fio job file in order, with their ordering options.

    A ``[global]`` section applies to the jobs after it; ``stonewall`` and
    ``wait_for_previous`` are the same option.
    """
    jobs: list[JobIntent] = []
    global_opts: dict[str, str | None] = {}
    section: str | None = None
    own: dict[str, str | None] = {}

    def close() -> None:
        if section is None or section == "global":
            return
        merged = {**global_opts, **own}
        try:
            numjobs = int(str(merged.get("numjobs") or 1).strip())
        except ValueError:
            numjobs = 1
        jobs.append(JobIntent(name=section, stonewall=_flag(merged, "stonewall", "wait_for_previous"),
                              new_group=_flag(merged, "new_group"), numjobs=max(numjobs, 1),
                              stonewall_in_section=_flag(own, "stonewall", "wait_for_previous")))

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            close()
            section = line[1:-1].strip()
            own = {}
            continue
        key, sep, value = line.partition("=")
        target = global_opts if section in (None, "global") else own
        target[key.strip().lower()] = value.strip() if sep else None
    close()
    return jobs


def _intent_from_json(report: dict[str, Any], jobs: list[Any]) -> list[JobIntent]:
    """Ordering options as fio echoes them in its JSON (only options given a value)."""
    global_opts = {k: (None if v == "" else str(v)) for k, v in (report.get("global options") or {}).items()}
    out: list[JobIntent] = []
    previous = None
    for job in jobs:
        name = job.get("jobname")
        opts = {k: (None if v == "" else str(v)) for k, v in (job.get("job options") or {}).items()}
        if previous is not None and name == previous.name:  # a numjobs clone
            previous.numjobs += 1
            continue
        merged = {**global_opts, **opts}
        previous = JobIntent(name=name, stonewall=_flag(merged, "stonewall", "wait_for_previous"),
                             new_group=_flag(merged, "new_group"),
                             stonewall_in_section=_flag(opts, "stonewall", "wait_for_previous"))
        out.append(previous)
    return out


def concurrency_warnings(intent: list[JobIntent], jobs: list[dict[str, Any]]) -> list[str]:
    """Warnings where jobs ran at the same time although the job file suggests otherwise.

    The fio seed: a job file that puts ``stonewall`` on the first job (where it
    does nothing) and not on the second ran both jobs at the same time, on the same
    file, and the "sequential read" figure was a mix of both. Warned about:

    * ``stonewall`` on the first job (it only makes a job wait for the jobs before it);
    * jobs without ``stonewall`` in a file whose other jobs mostly have it: they ran
      at the same time as the job before them;
    * ``new_group`` without ``stonewall``: a separate reporting group that still ran
      in parallel with the previous group;
    * jobs of different groups whose reported start and end overlap (fio 3.34 and
      newer report each job's start).

    Args:
        intent: From :func:`job_file_intent` (or fio's JSON echo of the options).
        jobs: ``extra["jobs"]`` of the parsed report (name, groupid, start/end).
    """
    warnings: list[str] = []
    if len(intent) >= 2:
        first, second = intent[0], intent[1]
        if first.stonewall_in_section and not second.stonewall:
            warnings.append(
                f"fio job '{first.name}' sets stonewall, which has no effect on the first job (it makes a "
                f"job wait for the jobs before it); '{second.name}' does not set it, so '{first.name}' and "
                f"'{second.name}' ran at the same time. Put stonewall on every job that must wait for the "
                "ones before it.")
        later = intent[1:]
        walled = [j for j in later if j.stonewall]
        unwalled = [j for j in later if not j.stonewall]
        if walled and unwalled and len(walled) >= len(unwalled):
            for job in unwalled:
                if job is second and first.stonewall_in_section:
                    continue  # already explained above
                before = intent[intent.index(job) - 1]
                warnings.append(
                    f"fio job '{job.name}' has no stonewall while most jobs of the job file do, so it ran at "
                    f"the same time as '{before.name}'; add stonewall to '{job.name}' if they were meant "
                    "to run one after another.")
        for i, job in enumerate(later, start=1):
            if job.new_group and not job.stonewall:
                warnings.append(
                    f"fio job '{job.name}' starts a new reporting group (new_group) without stonewall, so its "
                    f"group ran in parallel with the group of '{intent[i - 1].name}'; the groups' figures "
                    "are not separate measurements.")
    timed = [j for j in jobs if "start_ms" in j and "end_ms" in j and "groupid" in j]
    seen: set[tuple[int, int]] = set()
    for a in timed:
        for b in timed:
            ga, gb = int(a["groupid"]), int(b["groupid"])
            if ga < gb and (ga, gb) not in seen and a["start_ms"] < b["end_ms"] and b["start_ms"] < a["end_ms"]:
                seen.add((ga, gb))
                warnings.append(f"fio groups {ga} and {gb} overlapped in time (jobs '{a['name']}' and "
                                f"'{b['name']}'), although groups are meant to run one after another.")
    return warnings


def _estimate_timing(job_extra: list[dict[str, Any]], end_ms: Any) -> None:
    """Set ``start_est_ms``/``end_est_ms`` of each job when fio reported no job start.

    fio 3.33 reports no job start. Groups run one after another, so, going back from
    the report's timestamp (the end of the last group), each group is placed to end
    where the next one starts and to last as long as its longest job. Setup time
    (laying out files) is not counted, so the estimate is late by that much.
    """
    if not _is_number(end_ms) or any("start_ms" in j for j in job_extra):
        return
    by_group: dict[int, list[dict[str, Any]]] = {}
    for info in job_extra:
        by_group.setdefault(int(info.get("groupid", 0)), []).append(info)
    cursor = float(end_ms)
    for gid in sorted(by_group, reverse=True):
        members = by_group[gid]
        length = max((float(j.get("runtime_ms", 0) or 0) for j in members), default=0.0)
        for j in members:
            j["start_est_ms"] = round(cursor - length, 3)
            j["end_est_ms"] = round(cursor - length + float(j.get("runtime_ms", 0) or 0), 3)
        cursor -= length
