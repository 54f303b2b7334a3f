"""The result type every workload parser returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Parsed:
    """Metrics read from one run of a workload.

    Attributes:
        metrics: Aggregate over all jobs of the run: metric name -> ``(value, unit)``.
        jobs: Per job, keyed by job name (a repeated name gets ``#2``, ``#3``, ...
            appended in output order), with the same metric names as ``metrics``.
        extra: Free-form, JSON-serialisable details of the run (tool version, job
            timings, notes the tool printed); may be empty.
    """

    metrics: dict[str, tuple[float, str]]
    jobs: dict[str, dict[str, tuple[float, str]]]
    extra: dict[str, Any] = field(default_factory=dict)
