"""stress-ng's metrics: the YAML report ``--yaml /dev/stdout`` prints (the argv builder
adds it, with ``--metrics-brief``) -> metrics, per stressor and summed over them.

==========================  =======  ==========================================================
metric                      unit     from each stressor's entry under ``metrics:``
==========================  =======  ==========================================================
``bogo_ops``                ops      ``bogo-ops`` (summed over the stressors)
``bogo_ops_per_s``          ops/s    ``bogo-ops-per-second-real-time`` (summed)
``bogo_ops_per_s_cpu``      ops/s    ``bogo-ops-per-second-usr-sys-time`` (summed)
``wall_s``                  s        ``wall-clock-time`` (the longest)
``usr_s``, ``sys_s``        s        ``user-time``, ``system-time`` (summed)
``max_rss_kib``             KiB      ``max-rss`` (the largest)
==========================  =======  ==========================================================

Each stressor is a job with the same metric names; ``extra`` has the stress-ng version
and the stressors. A report without a ``metrics:`` list (empty output, a usage error,
a run killed before its report) raises :class:`benchmatrix.errors.ParseError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from benchmatrix.errors import ParseError
from benchmatrix.workloads.base import Parsed, as_text, headline, unique_name

#: metric -> (unit, the key of a stressor's entry, how the stressors combine).
_FIELDS: dict[str, tuple[str, str, Any]] = {
    "bogo_ops": ("ops", "bogo-ops", sum),
    "bogo_ops_per_s": ("ops/s", "bogo-ops-per-second-real-time", sum),
    "bogo_ops_per_s_cpu": ("ops/s", "bogo-ops-per-second-usr-sys-time", sum),
    "wall_s": ("s", "wall-clock-time", max),
    "usr_s": ("s", "user-time", sum),
    "sys_s": ("s", "system-time", sum),
    "max_rss_kib": ("KiB", "max-rss", max),
}
#: The metric catalogue: name -> unit.
STRESS_NG_METRICS: dict[str, str] = {name: unit for name, (unit, _, _) in _FIELDS.items()}


def parse_stress_ng(stdout: Any, workload: Mapping[str, Any] | None = None,
                    run_dir: Path | None = None) -> Parsed:
    """Metrics of one stress-ng run from its YAML report on standard output."""
    text = as_text(stdout, "stress-ng")
    if not text.strip():
        raise ParseError("stress-ng: empty output (no YAML report: did stress-ng start?)")
    try:
        report = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParseError(f"stress-ng: the report is not YAML ({headline(str(exc), 120)})") from None
    entries = report.get("metrics") if isinstance(report, dict) else None
    if not isinstance(entries, list) or not entries:
        if isinstance(report, dict) and "system-info" in report:
            raise ParseError("stress-ng: the report ends before its metrics (truncated: was the run killed?)")
        raise ParseError(f"stress-ng: no metrics in the output (an error instead of a report: {headline(text, 120)})")
    jobs: dict[str, dict[str, tuple[float, str]]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or "stressor" not in entry:
            raise ParseError(f"stress-ng: a metrics entry without a stressor ({headline(str(entry), 80)})")
        job = {}
        for name, (unit, key, _) in _FIELDS.items():
            value = entry.get(key)
            if value is not None:
                try:
                    job[name] = (float(value), unit)
                except (TypeError, ValueError):
                    raise ParseError(f"stress-ng: {entry['stressor']}: {key} is not a number ({value!r:.40})") from None
        jobs[unique_name(str(entry["stressor"]), jobs)] = job
    metrics = {}
    for name, (unit, _, combine) in _FIELDS.items():
        values = [job[name][0] for job in jobs.values() if name in job]
        if values:
            metrics[name] = (float(combine(values)), unit)
    info = report.get("system-info") if isinstance(report.get("system-info"), dict) else {}
    return Parsed(metrics, jobs, extra={"version": str(info.get("stress-ng-version", "")), "stressors": list(jobs)})
