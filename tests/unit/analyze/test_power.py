"""Tests of benchmatrix.analyze.power: replicate planning delivers the power it promises.

The planner's answer is checked against a simulation of the report's own analysis:
normal runs with the planned CV, Welch's test (stats.welch_test) on every comparison
and Holm's adjustment (stats.holm) across the spec's whole family, one real
difference among the comparisons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from benchmatrix.analyze.power import (
    CvSample,
    comparisons_per_metric,
    family_metrics,
    family_size,
    replicate_plan,
    runs_needed,
    welch_power,
)
from benchmatrix.analyze.stats import holm, welch_test
from benchmatrix.spec.load import load_spec

DETECT, CV, ALPHA = 0.05, 0.02, 0.05
METRICS = {"tps": {"regex": "tps (?P<value>[0-9.]+)", "unit": "tx/s", "better": "higher"},
           "lat": {"regex": "lat (?P<value>[0-9.]+)", "unit": "ms", "better": "lower"},
           "extra": {"regex": "x (?P<value>[0-9.]+)", "unit": "x"}}


def spec_with(tmp_path: Path, factors: dict[str, list[Any]], report: dict[str, Any],
              exclude: list[dict[str, Any]] | None = None, **extra: Any):
    """Write and load a real spec with a command workload declaring METRICS."""
    doc: dict[str, Any] = {"name": "power_test", "hosts": "localhost", "factors": factors,
                           "workload": {"role": "workload_command",
                                        "vars": {"argv": ["echo"] + ["{{ %s }}" % f for f in factors]},
                                        "metrics": METRICS},
                           "replicates": 3, "report": report, **extra}
    if exclude:
        doc["exclude"] = exclude
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_spec(path)


def simulated_power(n: int, m: int, sims: int = 8000, seed: int = 12) -> float:
    """Share of simulated campaigns in which the report calls the one real difference
    (comparison 0 of m; the other m-1 have none) after Holm's adjustment."""
    rng = np.random.default_rng(seed)
    shift = np.zeros(m)
    shift[0] = DETECT
    base = rng.normal(1.0, CV, (sims, m, n))
    level = rng.normal(1.0 + shift[None, :, None], CV, (sims, m, n))
    count = np.full(sims * m, float(n))
    p, _ = welch_test(level.mean(axis=2).ravel(), level.var(axis=2, ddof=1).ravel(), count,
                      base.mean(axis=2).ravel(), base.var(axis=2, ddof=1).ravel(), count)
    p = p.reshape(sims, m)
    adjusted = np.array([holm(row)[0] for row in p])
    return float((adjusted < ALPHA).mean())


FAMILIES = {
    # one comparison of one metric
    1: ({"a": ["x", "y"]}, {"metrics": ["tps"], "compare": {"factor": "a", "baseline": "x"}}, None),
    # the same comparison on two metrics
    2: ({"a": ["x", "y"]}, {"metrics": ["tps", "lat"], "compare": {"factor": "a", "baseline": "x"}}, None),
    # 8 comparisons (by b) x 2 primary metrics; the third metric is descriptive
    16: ({"a": ["x", "y"], "b": list(range(1, 9))},
         {"metrics": ["tps", "lat", "extra"], "compare": {"factor": "a", "baseline": "x", "by": ["b"]}},
         ["tps", "lat"]),
}


@pytest.mark.parametrize("m", sorted(FAMILIES))
def test_planned_replicates_reach_the_power_in_the_reports_own_analysis(tmp_path, m):
    factors, report, primary = FAMILIES[m]
    spec = spec_with(tmp_path, factors, {**report, "primary": primary} if primary else report)
    family = family_size(spec, ["localhost"])
    assert family["size"] == m
    plan = replicate_plan(DETECT, [CvSample("(any)", "(every cell)", CV, 0)], replicates=3, visits_per_cell=None,
                          whole_plot_factors=[], source="--cv", alpha=ALPHA, power=0.8, family=family)
    n = plan["cheap"]["needed"]
    assert simulated_power(n, m) >= 0.80, (m, n)
    if m > 1:
        # ... and the planner does not overshoot: one run fewer falls short.
        assert simulated_power(n - 1, m) < 0.80, (m, n)


def test_welch_power_is_exact_and_below_students():
    # 2,000,000 simulated Welch tests give 0.7964 (n=4), 0.9189 (n=5), 0.5262 (n=3) for
    # a 5 % difference at CV 2 %; Student's t (statsmodels) promised 0.836 at n=4.
    for n, expected in ((3, 0.5262), (4, 0.7964), (5, 0.9189)):
        assert welch_power(DETECT / CV, n, ALPHA) == pytest.approx(expected, abs=0.002)
    assert runs_needed(DETECT, CV) == 5   # it said 4 with Student's t
    assert runs_needed(DETECT, CV, family=16) == 8
    assert runs_needed(0.5, 0.01) == 2 and runs_needed(0.03, 0.0) == 2
    assert runs_needed(0.005, 0.05) > 1000   # tiny effects stay finite and exact


def test_family_counts_comparisons_present_in_the_cells(tmp_path):
    # a=z exists only for b=1, and b=3 has no baseline: (y,1) (z,1) (y,2) are compared.
    spec = spec_with(tmp_path, {"a": ["x", "y", "z"], "b": [1, 2, 3]},
                     {"metrics": ["tps", "lat"], "compare": {"factor": "a", "baseline": "x", "by": ["b"]}},
                     exclude=[{"a": "z", "b": [2, 3]}, {"a": "x", "b": 3}])
    assert comparisons_per_metric(spec) == 3
    assert family_size(spec, ["h1"])["size"] == 6
    # Several hosts: each host is compared on its own (hosts_mode replicate) ...
    assert family_size(spec, ["h1", "h2"])["size"] == 12
    # ... or pooled (partition).
    spec.data["hosts_mode"] = "partition"
    assert family_size(spec, ["h1", "h2"])["size"] == 6


def test_family_metrics_read_primary_defensively(tmp_path):
    spec = spec_with(tmp_path, {"a": ["x", "y"]}, {"metrics": ["tps", "lat", "extra"],
                                                   "compare": {"factor": "a", "baseline": "x"}})
    assert family_metrics(spec) == (["tps", "lat", "extra"], "report.metrics")
    spec.data["report"]["primary"] = ["tps"]
    assert family_metrics(spec) == (["tps"], "report.primary")
    spec.data["report"]["primary"] = []
    assert family_metrics(spec)[1] == "report.metrics"
    del spec.data["report"]["metrics"]
    metrics, source = family_metrics(spec)
    assert metrics == ["tps", "lat", "extra"] and source.startswith("workload.metrics")
    spec.data["report"] = {}
    spec.data["workload"]["metrics"] = {}
    assert family_metrics(spec) == ([], "unknown (report.metrics not set)")
    # A pilot's metrics stand in; without any, one metric is assumed and a warning says so.
    assert family_size(spec, ["h1"], ["iops", "p99"])["size"] == 2
    family = family_size(spec, ["h1"])
    assert family["size"] == 1
    plan = replicate_plan(DETECT, [CvSample("(any)", "(every cell)", CV, 0)], 10, None, [], "--cv", family=family)
    assert any("set report.metrics" in w for w in plan["warnings"])


def test_a_pilot_of_many_cells_gets_each_cells_exact_answer_quickly():
    # replicate_plan solves only where the answer changes along the sorted CVs.
    rng = np.random.default_rng(5)
    samples = [CvSample("tps", f"c{i}", float(cv), 5) for i, cv in enumerate(rng.uniform(0.01, 0.04, 400))]
    plan = replicate_plan(DETECT, samples, 5, None, [], "pilot", family={"size": 4, "comparisons_per_metric": 4,
                                                                         "metrics": ["tps"], "metrics_source": "x"})
    for s in samples[::40]:
        assert plan["needed_per_cell"][s.cell_id] == runs_needed(DETECT, s.cv, family=4)
    assert plan["cheap"]["needed"] == runs_needed(DETECT, max(s.cv for s in samples), family=4)
