"""Replicate planning: how many runs a cell needs to detect a given relative difference.

A comparison in the report sets one level of a factor against another (Welch's
t-test on the runs of two cells). With a coefficient of variation ``cv`` in both
cells, a relative difference ``detect`` is a standardized effect of
``detect / cv``, and the runs needed per cell follow from the two-sample t-test's
power (statsmodels).

Cheap factors are compared run against run, so their unit is the run and the spec
provides ``replicates`` of them per cell. Whole-plot factors (the costly knobs of
a restricted plan) are compared visit against visit, so their unit is the visit:
a cell provides as many units as there are distinct visits holding its measured
runs (min(replicates, visits) in a restricted plan, one per stretch of equal
settings otherwise). The same CV is used for both: measured across separate visits
it already holds the visit-to-visit variation, and a visit's mean varies no more
than one of its runs, so the whole-plot figure errs on the safe side.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmatrix.errors import BenchmatrixError

#: Significance level and power of the replicate planning unless told otherwise.
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.80
#: The fewest runs a comparison can use: a standard deviation needs two.
MIN_RUNS = 2

_FRACTION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


def parse_fraction(text: str, option: str) -> float:
    """``3%`` or ``0.03`` -> 0.03.

    Raises:
        BenchmatrixError: not a positive percentage or fraction below 1.
    """
    m = _FRACTION.match(str(text))
    if not m:
        raise BenchmatrixError(f"{option} {text!r}: write a percentage such as 3% or a fraction such as 0.03")
    value = float(m.group(1))
    if m.group(2):
        value /= 100.0
    elif value >= 1:
        raise BenchmatrixError(f"{option} {text}: a bare number is a fraction and must be below 1; "
                               f"write {text}% for a percentage")
    if value <= 0:
        raise BenchmatrixError(f"{option} {text}: must be above zero")
    return value


def runs_needed(detect: float, cv: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> int:
    """Runs per cell for a two-sided two-sample t-test to detect a relative difference.

    Args:
        detect: Relative difference between the two cells' means (0.03 for 3%).
        cv: Coefficient of variation of one run (sd / mean) in each cell.
        alpha: Significance level.
        power: Wanted probability of detecting the difference.

    Returns:
        The smallest number of runs per cell (at least :data:`MIN_RUNS`) whose power
        reaches ``power``.
    """
    from statsmodels.stats.power import TTestIndPower

    if cv <= 0:
        return MIN_RUNS
    analysis = TTestIndPower()
    effect = detect / cv

    def enough(n: int) -> bool:
        # scipy's noncentral t returns NaN where the power is within rounding of 1;
        # power grows with the effect, so a slightly smaller effect gives a valid
        # lower bound there.
        for k in range(60):
            value = analysis.power(effect_size=effect * 0.97 ** k, nobs1=n, alpha=alpha, ratio=1.0,
                                   alternative="two-sided")
            if not math.isnan(value):
                return bool(value >= power)
        return False

    if enough(MIN_RUNS):
        return MIN_RUNS
    # solve_power gives a fractional n; the integer search around it makes the
    # answer exact and robust to the solver's tolerance.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a solver that fails to converge leaves n at the minimum
        try:
            guess = analysis.solve_power(effect_size=effect, nobs1=None, alpha=alpha, power=power,
                                         ratio=1.0, alternative="two-sided")
        except (ValueError, RuntimeError):
            guess = float("nan")
    n = MIN_RUNS if math.isnan(guess) else max(MIN_RUNS, math.ceil(guess))
    while n > MIN_RUNS and enough(n - 1):
        n -= 1
    while not enough(n):
        n += 1
    return n


@dataclass
class CvSample:
    """One coefficient of variation: a cell's (or a given) run-to-run CV of a metric."""

    metric: str
    cell_id: str
    cv: float
    n: int


def pilot_cvs(pilot: Path, metrics: list[str] | None = None) -> list[CvSample]:
    """The CVs per cell and metric of an earlier campaign's ``summary.csv``.

    Args:
        pilot: ``results/NAME`` of the earlier campaign, or its summary.csv.
        metrics: Keep only these metrics when the pilot has any of them.

    Raises:
        BenchmatrixError: no summary.csv, or no cell with a CV in it.
    """
    path = pilot / "summary.csv" if pilot.is_dir() else pilot
    if not path.is_file():
        raise BenchmatrixError(f"{path}: no summary.csv in the pilot campaign; run 'bmx report' on it first")
    out: list[CvSample] = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"metric", "cell_id", "cv"} - set(reader.fieldnames or [])
        if missing:
            raise BenchmatrixError(f"{path}:1: summary.csv lacks column(s) {', '.join(sorted(missing))}")
        for row in reader:
            try:
                cv = float(row["cv"])
            except (TypeError, ValueError):
                continue
            if math.isnan(cv) or cv < 0:
                continue  # fewer than two runs, or a mean of zero
            n = int(float(row.get("n") or 0))
            out.append(CvSample(row["metric"], row["cell_id"], cv, n))
    if metrics:
        chosen = [s for s in out if s.metric in set(metrics)]
        out = chosen or out
    if not out:
        raise BenchmatrixError(f"{path}: no cell with a coefficient of variation (every cell has fewer than two runs)")
    return out


def replicate_plan(detect: float, samples: list[CvSample], replicates: int, visits_per_cell: int | None,
                   whole_plot_factors: list[str], source: str, alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER) -> dict[str, Any]:
    """Runs and visits needed per cell, per metric and overall, beside what the spec provides.

    The requirement uses the largest CV (the noisiest cell and metric): every
    comparison the report makes should have the wanted power, not only the typical
    one. The median CV's figure is given beside it.

    Args:
        detect: Relative difference to detect.
        samples: CVs per cell and metric (one sample for a CV given by hand).
        replicates: Measured runs per cell in the spec.
        visits_per_cell: Distinct visits holding each cell's measured runs (the
            fewest over cells and hosts); None when the spec has no costly knob.
        whole_plot_factors: The costly knobs' factors.
        source: Where the CVs come from, for the output.
        alpha: Significance level.
        power: Wanted power.

    Returns:
        A JSON-ready mapping; ``warnings`` lists each shortfall as one line.
    """
    per_metric = []
    for metric in sorted({s.metric for s in samples}):
        cvs = [s.cv for s in samples if s.metric == metric]
        worst = max((s for s in samples if s.metric == metric), key=lambda s: s.cv)
        med, top = statistics.median(cvs), max(cvs)
        per_metric.append({"metric": metric, "cells": len(cvs), "median_cv": med, "max_cv": top,
                           "max_cv_cell": worst.cell_id,
                           "needed_at_median_cv": runs_needed(detect, med, alpha, power),
                           "needed_at_max_cv": runs_needed(detect, top, alpha, power)})
    needed = max(m["needed_at_max_cv"] for m in per_metric)
    cells = {}
    for s in samples:
        n = runs_needed(detect, s.cv, alpha, power)
        cells[s.cell_id] = max(cells.get(s.cell_id, MIN_RUNS), n)
    out: dict[str, Any] = {
        "detect": detect, "alpha": alpha, "power": power, "source": source,
        "rule": "requirement from the largest CV over cells and metrics; median CV shown beside it",
        "metrics": per_metric,
        "needed_per_cell": cells,
        "cheap": {"unit": "run", "needed": needed, "planned": replicates},
        "whole_plot": None,
        "warnings": [],
    }
    pct = f"{detect * 100:g}%"
    if replicates < needed:
        out["warnings"].append(f"warning: detecting {pct} at alpha {alpha:g} with {power:.0%} power needs "
                               f"{needed} replicates per cell; the spec has {replicates}")
    if whole_plot_factors and visits_per_cell is not None:
        out["whole_plot"] = {"unit": "visit", "factors": whole_plot_factors, "needed": needed,
                             "planned": visits_per_cell}
        if visits_per_cell < needed:
            out["warnings"].append(
                f"warning: whole-plot factor(s) {', '.join(whole_plot_factors)} are judged visit against visit: "
                f"detecting {pct} needs each cell's runs in {needed} separate visits; the plan gives "
                f"{visits_per_cell} (raise order.visits and replicates)")
    return out
