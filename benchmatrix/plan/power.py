"""Replicate planning: how many runs a cell needs to detect a given relative difference.

A comparison in the report sets one level of a factor against another with Welch's
t-test on the runs of two cells, and the report adjusts the p-values with Holm's
method across its whole family of comparisons (every level against the baseline,
in every combination of the ``by`` factors, on every host of a ``replicate``
campaign, for every family metric). The planner asks what the report will do:

* **Welch's test.** With ``n`` runs on each side and the same CV in both cells, a
  relative difference ``detect`` is a standardized effect ``d = detect / cv``.
  For equal n Welch's statistic equals Student's pooled t, a noncentral t with
  2n-2 degrees of freedom and noncentrality ``d * sqrt(n / 2)``; only Welch's
  degrees of freedom differ: ``(n-1) / (U^2 + (1-U)^2)`` with ``U = s1^2 / (s1^2 +
  s2^2)``, which follows Beta((n-1)/2, (n-1)/2) independently of the statistic.
  The power is therefore the average over U of a noncentral-t tail (computed on
  quantiles of U), exact for normal runs. Student's power (statsmodels' figure,
  used before) is higher: at 5 % / CV 2 % it promised 80 % with 4 runs, where
  Welch gives 79.6 %.
* **Holm's family.** For one real difference among ``m`` comparisons, Holm's
  procedure rejects at least whatever Bonferroni's ``alpha / m`` rejects, so the
  power at ``alpha / m`` is a guaranteed lower bound (and a close one: with the
  other comparisons null, Holm rarely gets past its first step). The family size
  comes from the spec (:func:`family_size`).

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
import functools
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmatrix.errors import BenchmatrixError
from benchmatrix.results import layout
from benchmatrix.spec.load import DEFAULT_ALPHA

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Power of the replicate planning unless told otherwise (its alpha: ``report.alpha``'s default).
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


#: Quantiles of Welch's variance share U at which the power is averaged (the
#: midpoint rule on 256 quantiles, accurate to about 3e-5; U and 1 - U give the same
#: degrees of freedom, so only the lower half is evaluated).
_U_POINTS = 256


@functools.lru_cache(maxsize=1024)
def _welch_critical(n: int, alpha: float) -> Any:
    """Welch's two-sided critical t values at the lower half of the U quantiles."""
    import numpy as np
    from scipy import stats as sps

    k = (n - 1) / 2.0
    share = sps.beta.ppf((np.arange(_U_POINTS // 2) + 0.5) / _U_POINTS, k, k)
    df_welch = (n - 1) / (share ** 2 + (1.0 - share) ** 2)
    return sps.t.ppf(1.0 - alpha / 2.0, df_welch)


def welch_power(effect: float, n: int, alpha: float) -> float:
    """Power of Welch's two-sided test with ``n`` normal runs per side.

    Args:
        effect: Standardized difference of the means (difference / sd), the same sd
            on both sides.
        n: Runs per side (at least 2).
        alpha: Significance level of the test (per comparison: ``alpha / m`` for a
            Bonferroni bound on a family of m).

    Returns:
        The probability that the test rejects equal means (module docstring).
    """
    import numpy as np
    from scipy import stats as sps

    crit = _welch_critical(int(n), float(alpha))
    ncp = abs(effect) * math.sqrt(n / 2.0)
    df = 2 * n - 2
    with np.errstate(all="ignore"):
        upper = sps.nct.sf(crit, df, ncp)
        lower = sps.nct.cdf(-crit, df, ncp)
    # scipy's noncentral t gives NaN deep in a tail: there the tail is 0 or 1.
    upper = np.where(np.isnan(upper), np.where(ncp > crit, 1.0, 0.0), upper)
    lower = np.nan_to_num(lower, nan=0.0)
    return float(np.mean(np.clip(upper + lower, 0.0, 1.0)))


@functools.lru_cache(maxsize=4096)
def runs_needed(detect: float, cv: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                family: int = 1) -> int:
    """Runs per cell for the report's test to detect a relative difference.

    The report's test is Welch's two-sided t-test, Holm-adjusted over a family of
    ``family`` comparisons; the power is that of Welch's test at Bonferroni's
    ``alpha / family``, a lower bound for one real difference under Holm.

    Args:
        detect: Relative difference between the two cells' means (0.03 for 3%).
        cv: Coefficient of variation of one run (sd / mean) in each cell.
        alpha: Significance level of the report (family-wise).
        power: Wanted probability of detecting the difference.
        family: Comparisons in the report's Holm family (:func:`family_size`).

    Returns:
        The smallest number of runs per cell (at least :data:`MIN_RUNS`) whose power
        reaches ``power``.
    """
    from scipy import stats as sps

    if cv <= 0:
        return MIN_RUNS
    effect = detect / cv
    level = alpha / max(1, family)

    def enough(n: int) -> bool:
        return welch_power(effect, n, level) >= power

    # Start from the normal approximation and walk to the exact boundary; power
    # grows with n, so the first n that is enough after one that is not is the answer.
    z = sps.norm.ppf(1.0 - level / 2.0) + sps.norm.ppf(power)
    n = max(MIN_RUNS, math.ceil(2.0 * (z / effect) ** 2))
    while n > MIN_RUNS and enough(n - 1):
        n -= 1
    while not enough(n):
        n += 1
    return n


def family_metrics(spec: Spec) -> tuple[list[str], str]:
    """The metrics of the report's Holm family and where that list comes from.

    ``report.primary`` names the family when the spec has it (the other metrics are
    descriptive), else ``report.metrics``; a spec that names neither compares every
    metric the runs produce, which the workload's declared ``metrics`` tell in
    advance. The list is the report's own (:func:`benchmatrix.analyze.comparisons.family_metrics`).

    Returns:
        ``(metrics, source)``; ``metrics`` is empty when the spec cannot tell.
    """
    from benchmatrix.analyze.comparisons import family_metrics as report_family

    metrics = report_family(spec)
    report = spec.report
    for key, given in (("primary", report.primary), ("metrics", report.metrics)):
        if given:
            return metrics, f"report.{key}"
    if metrics:
        return metrics, "workload.metrics (report.metrics not set: every metric is compared)"
    return [], "unknown (report.metrics not set)"


def comparisons_per_metric(spec: Spec, hosts: list[str] | None = None) -> int:
    """Comparisons the report makes for one metric: every level of
    ``report.compare.factor`` against the baseline where both are among the cells
    of one combination of the ``by`` factors, on each host of a ``replicate``
    campaign with several hosts. 1 when the spec asks for no comparison (the
    figure is then for one pair of levels)."""
    from benchmatrix.analyze.comparisons import level_key

    cfg = spec.report.compare
    if cfg is None:
        return 1
    factor, by = cfg.factor, list(cfg.by)
    base = level_key(cfg.baseline)
    levels: dict[tuple[str, ...], set[str]] = {}
    for cell in spec.cells:
        if factor not in cell.factors or any(b not in cell.factors for b in by):
            continue
        combo = tuple(level_key(cell.factors[b]) for b in by)
        levels.setdefault(combo, set()).add(level_key(cell.factors[factor]))
    count = sum(len(found - {base}) for found in levels.values() if base in found)
    per_host = len(hosts) if hosts and len(hosts) > 1 and spec.hosts_mode == "replicate" else 1
    return max(1, count) * per_host


def family_size(spec: Spec, hosts: list[str] | None = None, known_metrics: list[str] | None = None
                ) -> dict[str, Any]:
    """The size of the Holm family the spec's report will produce.

    Args:
        spec: The loaded spec.
        hosts: The campaign's hosts (a ``replicate`` campaign compares on each).
        known_metrics: Metrics seen elsewhere (a pilot's), used when the spec
            names none.

    Returns:
        ``{size, comparisons_per_metric, metrics, metrics_source}``; ``size`` is
        comparisons per metric x family metrics (one metric assumed when unknown).
    """
    metrics, source = family_metrics(spec)
    if not metrics and known_metrics:
        metrics, source = list(dict.fromkeys(known_metrics)), "the pilot's metrics (report.metrics not set)"
    per_metric = comparisons_per_metric(spec, hosts)
    return {"size": per_metric * max(1, len(metrics)), "comparisons_per_metric": per_metric,
            "metrics": metrics, "metrics_source": source}


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
    path = pilot / layout.SUMMARY if pilot.is_dir() else pilot
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


def _needed_by_cv(detect: float, cvs: list[float], alpha: float, power: float, family: int) -> dict[float, int]:
    """:func:`runs_needed` for many CVs (a pilot's cells) without solving each one.

    The runs needed never fall as the CV grows, so over the sorted distinct CVs
    every stretch between two CVs with the same answer shares it: divide and
    conquer solves about (distinct answers x log2(CVs)) of them, not every cell.
    """
    uniq = sorted(set(cvs))
    if not uniq:
        return {}
    out: dict[float, int] = {}

    def solve(i: int) -> int:
        return runs_needed(detect, uniq[i], alpha, power, family)

    stack = [(0, len(uniq) - 1, solve(0), solve(len(uniq) - 1))]
    while stack:
        lo, hi, n_lo, n_hi = stack.pop()
        if n_lo == n_hi or hi - lo <= 1:
            out.update({uniq[i]: n_lo for i in range(lo, hi)})
            out[uniq[hi]] = n_hi
            continue
        mid = (lo + hi) // 2
        n_mid = solve(mid)
        stack += [(lo, mid, n_lo, n_mid), (mid, hi, n_mid, n_hi)]
    return out


def replicate_plan(detect: float, samples: list[CvSample], replicates: int, visits_per_cell: int | None,
                   whole_plot_factors: list[str], source: str, alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER, family: dict[str, Any] | None = None) -> dict[str, Any]:
    """Runs and visits needed per cell, per metric and overall, beside what the spec provides.

    The requirement uses the largest CV (the noisiest cell and metric): every
    comparison the report makes should have the wanted power, not only the typical
    one. The median CV's figure is given beside it. Every figure is for Welch's
    test inside the report's Holm family (module docstring).

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
        family: :func:`family_size` of the spec; None plans for a single comparison.

    Returns:
        A JSON-ready mapping; ``family`` says the Holm family assumed, ``warnings``
        lists each shortfall as one line.
    """
    family = dict(family or {"size": 1, "comparisons_per_metric": 1, "metrics": [], "metrics_source": "given"})
    size = int(family["size"])
    family["alpha_per_comparison"] = alpha / size
    cvs = [s.cv for s in samples]
    cvs += [statistics.median([s.cv for s in samples if s.metric == m]) for m in {s.metric for s in samples}]
    needed_by_cv = _needed_by_cv(detect, cvs, alpha, power, size)

    def needed_for(cv: float) -> int:
        return needed_by_cv[cv]

    per_metric = []
    for metric in sorted({s.metric for s in samples}):
        cvs = [s.cv for s in samples if s.metric == metric]
        worst = max((s for s in samples if s.metric == metric), key=lambda s: s.cv)
        med, top = statistics.median(cvs), max(cvs)
        per_metric.append({"metric": metric, "cells": len(cvs), "median_cv": med, "max_cv": top,
                           "max_cv_cell": worst.cell_id,
                           "needed_at_median_cv": needed_for(med),
                           "needed_at_max_cv": needed_for(top)})
    needed = max(m["needed_at_max_cv"] for m in per_metric)
    cells = {}
    for s in samples:
        cells[s.cell_id] = max(cells.get(s.cell_id, MIN_RUNS), needed_for(s.cv))
    out: dict[str, Any] = {
        "detect": detect, "alpha": alpha, "power": power, "source": source,
        "test": "welch", "family": family,
        "rule": "requirement from the largest CV over cells and metrics; median CV shown beside it",
        "metrics": per_metric,
        "needed_per_cell": cells,
        "cheap": {"unit": "run", "needed": needed, "planned": replicates},
        "whole_plot": None,
        "warnings": [],
    }
    pct = f"{detect * 100:g}%"
    if not family["metrics"] and family["metrics_source"] != "given":
        out["warnings"].append("warning: the spec names no metric (report.metrics), so the report will compare "
                               "every metric the runs produce; planned for one, which overstates the power: "
                               "set report.metrics")
    if replicates < needed:
        out["warnings"].append(f"warning: detecting {pct} at alpha {alpha:g} with {power:.0%} power among "
                               f"{size} Holm-adjusted comparison(s) needs {needed} replicates per cell; "
                               f"the spec has {replicates}")
    if whole_plot_factors and visits_per_cell is not None:
        out["whole_plot"] = {"unit": "visit", "factors": whole_plot_factors, "needed": needed,
                             "planned": visits_per_cell}
        if visits_per_cell < needed:
            out["warnings"].append(
                f"warning: whole-plot factor(s) {', '.join(whole_plot_factors)} are judged visit against visit: "
                f"detecting {pct} needs each cell's runs in {needed} separate visits; the plan gives "
                f"{visits_per_cell} (raise order.visits and replicates)")
    return out
