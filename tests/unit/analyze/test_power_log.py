"""Replicate planning on the log scale: positive metrics (throughput, latency, time,
bandwidth) are compared as ratios, by Welch's test on their log values, Holm-adjusted
over the family; the planner sizes the cells for that test.

The Monte Carlo checks draw lognormal runs, take the planner's n and run the
package's own test on them (:func:`detection_rate`, which takes the test as a
``p_value(a, b)`` callable so that it can be pointed at another comparison engine).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from benchmatrix import layout
from benchmatrix.analyze.power import (
    CvSample,
    log_sd_from_cv,
    pilot_cvs,
    replicate_plan,
    runs_needed,
    runs_needed_log,
    welch_power,
)
from benchmatrix.analyze.stats import holm, summarize, welch_test
from benchmatrix.cli import main
from benchmatrix.plan.design import make_plan
from benchmatrix.spec.load import load_spec

ALPHA, POWER = 0.05, 0.80
PValue = Callable[[np.ndarray, np.ndarray], np.ndarray]


def log_welch_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Welch's two-sided p-value on the log values of each row of ``a`` against the
    same row of ``b`` (runs along the last axis): the report's test of a ratio."""
    la, lb = np.log(a), np.log(b)
    p, _ = welch_test(la.mean(axis=-1), la.var(axis=-1, ddof=1), np.full(la.shape[:-1], la.shape[-1]),
                      lb.mean(axis=-1), lb.var(axis=-1, ddof=1), np.full(lb.shape[:-1], lb.shape[-1]))
    return p.reshape(la.shape[:-1])


def detection_rate(p_value: PValue, n: int, family: int, sd_log: float, ratio: float,
                   sims: int, seed: int, alpha: float = ALPHA) -> float:
    """Share of simulated campaigns whose Holm-adjusted family calls the one real
    difference: ``family`` comparisons of two cells of ``n`` lognormal runs each
    (sd of the log values ``sd_log``); comparison 0 has the level/baseline ratio
    ``ratio`` of geometric means, the others none.

    Args:
        p_value: The test: ``p_value(level_runs, baseline_runs)`` with runs along the
            last axis, one p-value per leading index.
    """
    rng = np.random.default_rng(seed)
    shift = np.zeros(family)
    shift[0] = math.log(ratio)
    base = np.exp(rng.normal(0.0, sd_log, (sims, family, n)))
    level = np.exp(rng.normal(shift[None, :, None], sd_log, (sims, family, n)))
    p = np.asarray(p_value(level, base)).reshape(sims, family)
    adjusted = p[:, 0] if family == 1 else np.array([holm(row)[0] for row in p])
    return float((adjusted < alpha).mean())


def planned_n(detect: float, cv: float, family: int) -> int:
    """The planner's answer for a positive metric with a CV given by hand."""
    sample = CvSample("lat", "(every cell)", cv, 0, scale="log", sd_log=log_sd_from_cv(cv))
    fam = {"size": family, "comparisons_per_metric": family, "metrics": ["lat"], "metrics_source": "given"}
    plan = replicate_plan(detect, [sample], replicates=3, visits_per_cell=None, whole_plot_factors=[],
                          source="--cv", alpha=ALPHA, power=POWER, family=fam)
    (metric,) = plan["metrics"]
    assert metric["scale"] == "log" and metric["sigma"] == pytest.approx(log_sd_from_cv(cv))
    return plan["cheap"]["needed"]


# (cv, detect, family, simulations): fewer simulations where n runs into the thousands.
CASES = [(0.2, 0.1, 1, 4000), (0.2, 0.1, 4, 3000), (0.2, 0.5, 1, 6000), (0.2, 0.5, 4, 6000),
         (0.9, 0.5, 1, 4000), (0.9, 0.5, 4, 3000), (0.9, 0.1, 1, 1000), (0.9, 0.1, 4, 600)]


@pytest.mark.parametrize("cv, detect, family, sims", CASES)
def test_planned_n_delivers_the_promised_power_on_lognormal_runs(cv, detect, family, sims):
    n = planned_n(detect, cv, family)
    sd_log = log_sd_from_cv(cv)
    assert n == runs_needed_log(detect, sd_log, ALPHA, POWER, family)
    margin = 3 * math.sqrt(POWER * (1 - POWER) / sims)
    # A level 1 + detect times the baseline: the harder direction, planned for.
    hit = detection_rate(log_welch_p, n, family, sd_log, 1 + detect, sims, seed=int(cv * 100 + detect * 10) + family)
    assert hit >= POWER - margin, (n, hit)
    # The power is exact for one comparison (log values are normal), and in a family
    # Holm gains little over the Bonferroni bound planned with ...
    promised = welch_power(math.log1p(detect) / sd_log, n, ALPHA / family)
    if family == 1:
        assert hit == pytest.approx(promised, abs=margin)
    else:
        assert promised - margin <= hit <= promised + 0.02 + margin
    # ... and the planner does not oversize: one run fewer falls short.
    if n > 2:
        fewer = detection_rate(log_welch_p, n - 1, family, sd_log, 1 + detect, sims, seed=7 + family)
        assert fewer < POWER + margin, (n, fewer)
    # A drop by the same fraction (ratio 1 - detect) is a larger log ratio, so it is
    # detected at least as often: planning for 1 + detect covers both directions.
    if sims >= 3000:
        drop = detection_rate(log_welch_p, n, family, sd_log, 1 - detect, sims, seed=11)
        assert drop >= hit - margin


def test_log_sd_from_cv_and_the_log_planners_figures():
    assert log_sd_from_cv(0.2) == pytest.approx(math.sqrt(math.log(1.04)))
    assert log_sd_from_cv(0.9) == pytest.approx(0.7703, abs=1e-4)
    # Small CVs: both scales agree (the log sd is the CV, log(1.05) is about 5 %).
    assert abs(runs_needed_log(0.05, log_sd_from_cv(0.02)) - runs_needed(0.05, 0.02)) <= 1
    assert runs_needed_log(0.5, log_sd_from_cv(0.2)) == 6
    assert runs_needed_log(0.5, 0.0) == 2
    # A constant metric (no spread): the fewest runs, and JSON without Infinity.
    plan = replicate_plan(0.5, [CvSample("lat", "c1", 0.0, 5, scale="log", sd_log=0.0)], 3, None, [], "x")
    assert plan["cheap"]["needed"] == 2 and plan["metrics"][0]["effect"] is None
    json.dumps(plan, allow_nan=False)


# ---------------------------------------------------------------- pilots

SPEC = {"name": "skewed", "hosts": "localhost",
        "factors": {"mode": ["thread", "fiber"], "users": [10, 20, 40]},
        "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ mode }}", "{{ users }}"]},
                     "metrics": {"lat_ms": {"regex": "lat (?P<value>[0-9.]+)", "unit": "ms", "better": "lower"},
                                 "errors": {"regex": "err (?P<value>[0-9]+)", "unit": "count"}}},
        "replicates": 6, "warmup": 1, "order": {"strategy": "random", "seed": 3},
        "report": {"metrics": ["lat_ms"], "compare": {"factor": "mode", "baseline": "thread", "by": ["users"]}}}


def write_pilot(exp: Path, spec_path: Path, seed: int = 25, sd_log: float = 0.15, outlier: float = 4.0,
                summary_only: bool = False) -> pd.DataFrame:
    """A pilot campaign's runs.csv and summary.csv, as collect writes them: the spec's
    plan with every run ok, lognormal latencies (sd of the logs ``sd_log``, a level
    per cell) and one run ``outlier`` times slower than its cell."""
    spec = load_spec(spec_path)
    runs = make_plan(spec, ["localhost"])
    rng = np.random.default_rng(seed)
    level = {c.cell_id: 10.0 * (1 + i % 3) for i, c in enumerate(spec.cells)}
    rows = []
    for r in runs:
        rows.append({**dict(zip(layout.PLAN_COLUMNS, r.row([])[:len(layout.PLAN_COLUMNS)])),
                     "status": "ok", "reason": "", "started_at": f"2026-01-01T00:00:{r.seq % 60:02d}+00:00",
                     "ended_at": "", "duration_s": 1.0, **r.factors,
                     "errors": float(rng.integers(0, 2)),
                     "lat_ms": float(level[r.cell_id] * math.exp(rng.normal(0.0, sd_log)))})
    frame = pd.DataFrame(rows)
    measured = frame.index[(frame["warmup"] == "false") & (frame["control"] == "false")]
    frame.loc[measured[0], "lat_ms"] *= outlier
    exp.mkdir(parents=True, exist_ok=True)
    if not summary_only:
        frame.to_csv(exp / layout.RUNS, index=False)
    summarize(frame, spec.factor_names, {"lat_ms": "ms", "errors": "count"}).to_csv(exp / layout.SUMMARY,
                                                                                      index=False)
    return frame


@pytest.fixture
def in_project(project, monkeypatch):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(project.root))
    monkeypatch.chdir(project.root)
    (project.root / "skewed.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False), encoding="utf-8")
    return project


def plan_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["plan", "skewed.yaml", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["replicate_planning"]


def test_a_skewed_pilot_with_one_outlier_needs_a_few_runs_not_52(in_project, capsys):
    """The case of issue 22: --detect 50% on a pilot whose latencies are lognormal
    (CV 15 %) with one run 4 times slower. Its cell's linear CV is 77 %, and the
    linear planner asked 52 replicates from it (the largest CV over the cells rules
    there); Welch's test on log values, planned with the cells' pooled log spread,
    needs 11 (the outlier still costs: at the log spread without it, 0.15, 5 would do)."""
    pilot = in_project.root / "results" / "pilot"
    frame = write_pilot(pilot, in_project.root / "skewed.yaml")
    summary = pd.read_csv(pilot / layout.SUMMARY)
    lat = summary[summary["metric"] == "lat_ms"]
    old = runs_needed(0.5, lat["cv"].max(), family=3)
    assert old == 52  # what the linear planner asked (largest linear CV, 3 comparisons)

    rp = plan_json(capsys, "--detect", "50%", "--pilot", "results/pilot")
    (metric,) = rp["metrics"]
    assert metric["metric"] == "lat_ms" and metric["scale"] == "log"
    # sigma: the cells' sd of log values, pooled over the cells (each with its n - 1).
    eff = frame[(frame["warmup"] == "false") & (frame["control"] == "false")]
    logs = np.log(eff["lat_ms"]).groupby(eff["cell_id"])
    pooled = math.sqrt(((logs.count() - 1) * logs.var()).sum() / (logs.count() - 1).sum())
    assert metric["sigma"] == pytest.approx(pooled)
    assert metric["max_sigma"] == pytest.approx(logs.std().max())
    needed = rp["cheap"]["needed"]
    assert needed == runs_needed_log(0.5, pooled, family=3)
    assert needed <= 12 and needed * 4 <= old


def test_pilot_scales_sigmas_and_fallbacks(tmp_path):
    spec_path = tmp_path / "skewed.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC, sort_keys=False), encoding="utf-8")
    spec = load_spec(spec_path)
    frame = write_pilot(tmp_path / "pilot", spec_path, outlier=1.0)
    samples = pilot_cvs(tmp_path / "pilot", declared=spec.declared_metrics)
    by = {(s.metric, s.cell_id): s for s in samples}
    eff = frame[(frame["warmup"] == "false") & (frame["control"] == "false")]
    for cell, values in eff.groupby("cell_id"):
        lat = by[("lat_ms", cell)]
        assert lat.scale == "log" and lat.sd_log == pytest.approx(np.log(values["lat_ms"]).std())
        assert lat.sigma == lat.sd_log
        # errors: a count (it may be 0), kept on the difference scale.
        assert by[("errors", cell)].scale == "linear" and by[("errors", cell)].sigma == by[("errors", cell)].cv
    # Without runs.csv: the log sd comes from each cell's CV, sqrt(log(1 + cv^2)).
    write_pilot(tmp_path / "bare", spec_path, outlier=1.0, summary_only=True)
    for s in pilot_cvs(tmp_path / "bare", ["lat_ms"], declared=spec.declared_metrics):
        assert s.scale == "log" and s.sd_log == pytest.approx(math.sqrt(math.log1p(s.cv ** 2)))
    # A value at or below 0 puts the metric back on the difference scale.
    frame.loc[frame.index[-1], "lat_ms"] = 0.0
    frame.to_csv(tmp_path / "pilot" / layout.RUNS, index=False)
    assert {s.scale for s in pilot_cvs(tmp_path / "pilot", ["lat_ms"], declared=spec.declared_metrics)} == {"linear"}
    # Declared positive: false wins over the unit.
    declared = {**spec.declared_metrics, "lat_ms": {**spec.declared_metrics["lat_ms"], "positive": False}}
    write_pilot(tmp_path / "pilot2", spec_path, outlier=1.0)
    assert {s.scale for s in pilot_cvs(tmp_path / "pilot2", ["lat_ms"], declared=declared)} == {"linear"}


def test_bmx_plan_with_cv_plans_positive_metrics_on_the_log_scale(in_project, capsys):
    rp = plan_json(capsys, "--detect", "50%", "--cv", "0.9")
    (metric,) = rp["metrics"]
    assert metric["metric"] == "lat_ms" and metric["scale"] == "log"
    assert metric["sigma"] == pytest.approx(math.sqrt(math.log(1 + 0.81)))
    assert rp["cheap"]["needed"] == runs_needed_log(0.5, log_sd_from_cv(0.9), family=3)
    assert rp["detect_ratio"] == pytest.approx(1.5)
    # A metric that is not positive keeps the linear planning.
    spec = dict(SPEC, report={**SPEC["report"], "metrics": ["errors"]})
    (in_project.root / "skewed.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    rp = plan_json(capsys, "--detect", "50%", "--cv", "0.9")
    (metric,) = rp["metrics"]
    assert metric["scale"] == "linear" and metric["sigma"] == pytest.approx(0.9)
    assert rp["cheap"]["needed"] == runs_needed(0.5, 0.9, family=3)
    # The text output names the scale.
    capsys.readouterr()
    assert main(["plan", "skewed.yaml", "--detect", "50%", "--cv", "0.9"]) == 0
    assert "linear" in capsys.readouterr().out
