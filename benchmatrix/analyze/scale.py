"""Which scale a metric is compared on: ratios on the log scale, or differences.

Throughput, latency, time, bandwidth and sizes cannot be 0 or negative, and their
run-to-run noise grows with their level: a latency that triples also spreads three
times as wide. On such data a difference of means with a t interval is the wrong
tool (Welch on the linear scale has about 2 degrees of freedom when one side's
variance is 9 times the other's, and its interval of a relative change reaches
below -100 %). Their logarithms are near normal with one spread on both sides, so
benchmatrix compares them as **ratios**: geometric means, Welch's test and the mixed
model on log values, intervals turned back into a relative change, which can never
reach -100 % (docs/report.md, "Scales").

A metric is **positive** (compared on the log scale) when, in this order:

1. the spec says so: ``workload.metrics.NAME.positive: true`` (or ``false`` to keep
   the difference scale);
2. else its unit is a rate, a time or a size (:func:`positive_unit`): every metric
   of the fio, pgbench and sysbench catalogues with such a unit (``IO/s``,
   ``KiB/s``, ``µs``, ``ms``, ``KiB``, ``tx/s``, ``events/s``, ...), and any declared
   metric with one (``unit: ms``);

and, checked against the data, every measured value of it is above 0: one value at
or below 0 puts the metric on the difference scale, with a note
(:func:`metric_scales`). Counts (``tx``, ``errors``) and percentages may be 0 and
stay on the difference scale unless declared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

#: The two scales: ratios of geometric means, or differences of means.
LOG, LINEAR = "log", "linear"

_TIME = {"ns", "us", "µs", "μs", "ms", "s", "sec", "secs", "seconds", "min", "minutes", "h", "hours"}
_SIZE = {"b", "byte", "bytes", "kb", "kib", "mb", "mib", "gb", "gib", "tb", "tib", "pages", "blocks"}
_RATE = re.compile(r"^[^/]+/\s*(s|sec|second|ms|min|h)$|^(iops|tps|qps|ops|rps)$", re.IGNORECASE)


def positive_unit(unit: str | None) -> bool:
    """True for a unit of a quantity that cannot be 0 or negative: a rate
    (``KiB/s``, ``IO/s``, ``tx/s``, ``IOPS``), a time (``µs``, ``ms``, ``s``) or a size
    (``KiB``, ``MiB``, ``bytes``)."""
    text = str(unit or "").strip()
    if not text:
        return False
    low = text.lower()
    return low in _TIME or text in _TIME or low in _SIZE or bool(_RATE.match(text))


def declared_positive(metric: str, declared: Mapping[str, Any] | None = None, unit: str | None = None) -> bool:
    """Whether ``metric`` is positive by its declaration or its unit (not yet
    checked against the data).

    Args:
        metric: The metric's name.
        declared: ``workload.metrics`` of the spec (name -> {unit, better, positive, ...}).
        unit: The metric's unit as measured (the parsers' catalogue), when known.
    """
    info = (declared or {}).get(metric) or {}
    if isinstance(info, Mapping) and isinstance(info.get("positive"), bool):
        return bool(info["positive"])
    return positive_unit(unit if unit else (info.get("unit") if isinstance(info, Mapping) else None))


def all_positive(values: Iterable[Any]) -> bool:
    """True when every finite value is above 0 (and there is at least one)."""
    v = pd.to_numeric(pd.Series(list(values) if not isinstance(values, pd.Series) else values),
                      errors="coerce").to_numpy(dtype="float64")
    v = v[np.isfinite(v)]
    return bool(len(v)) and bool((v > 0).all())


def metric_scales(frame: pd.DataFrame, metrics: Iterable[str], declared: Mapping[str, Any] | None = None,
                  units: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The scale of each metric, checked against its values in ``frame``.

    Args:
        frame: The runs whose values are compared (one column per metric); every
            row of every side counts, so that one metric has one scale everywhere.
        metrics: The metrics to decide.
        declared: ``workload.metrics`` of the spec.
        units: Metric -> unit.

    Returns:
        ``(metric -> "log" | "linear", notes)``; a note names each metric that is
        positive by its unit or declaration but has a value at or below 0.
    """
    scales: dict[str, str] = {}
    notes: list[str] = []
    for metric in dict.fromkeys(metrics):
        positive = declared_positive(metric, declared, (units or {}).get(metric))
        if positive and metric in frame.columns:
            values = pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype="float64")
            values = values[np.isfinite(values)]
            if len(values) and (values <= 0).any():
                notes.append(f"{metric}: compared as differences, not ratios: {int((values <= 0).sum())} value(s) "
                             f"at or below 0 although its unit or declaration makes it a positive quantity")
                positive = False
        scales[metric] = LOG if positive else LINEAR
    return scales, notes
