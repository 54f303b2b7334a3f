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

**Positive metrics are planned on the log scale.** The report compares throughput,
latency, time, bandwidth and sizes as ratios: Welch's test on the log values of the
runs (:mod:`benchmatrix.analyze.scale` decides which metrics). The planner sizes the
cells for that test:

* The spread is the sd of the log values, ``sigma_log``: from a pilot, each cell's sd
  of log(value) over its effective runs (or ``sqrt(log(1 + cv^2))`` from its CV when
  the pilot has no runs.csv); from ``--cv C``, ``sqrt(log(1 + C^2))``, the log sd of a
  lognormal run with that CV.
* The effect is ``log(1 + detect) / sigma_log``. ``--detect D`` is a ratio of geometric
  means; a rise to ``1 + D`` and a drop to ``1 - D`` differ on the log scale, and
  ``|log(1 + D)| < |log(1 - D)|``, so the rise is the harder one to detect and the one
  planned for: every ratio at least ``1 + D`` or at most ``1 / (1 + D)`` (a drop of
  ``D / (1 + D)``, 33 % for 50 %) gets the power, a drop of ``D`` more.
* The power is Welch's, computed above; it is exact here, since the log values of
  lognormal runs are normal.
* One spread for the metric: the log scale exists because a metric's run-to-run
  noise grows with its level, so that its log values have one spread in every cell
  (the model the report's test relies on). The planner therefore **pools** the cells'
  log variances (each weighted by its n - 1), not the noisiest cell's as on the
  linear scale: the largest of many small-sample sds overstates the common one
  (more so the more cells there are), and one outlier run sets it alone. The
  noisiest cell's figure is shown beside it.

Metrics that are not positive (counts, percentages, a metric with a value at or
below 0 in the pilot, one declared ``positive: false``, or one whose unit is
unknown) keep the linear planning: ``detect / cv``, the largest CV over cells.
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

from benchmatrix import layout
from benchmatrix.analyze.scale import LINEAR, LOG
from benchmatrix.errors import BenchmatrixError
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


def log_sd_from_cv(cv: float) -> float:
    """The sd of the log values of a lognormal run whose CV is ``cv``: ``sqrt(log(1 + cv^2))``."""
    return math.sqrt(math.log1p(cv * cv))


@functools.lru_cache(maxsize=4096)
def runs_for_effect(effect: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                    family: int = 1) -> int:
    """Runs per cell for Welch's test, Holm-adjusted over ``family`` comparisons, to
    detect a standardized ``effect`` (difference of the means / sd) with ``power``.

    The power is that of Welch's test at Bonferroni's ``alpha / family``, a lower
    bound for one real difference under Holm (module docstring).

    Returns:
        The smallest number of runs per cell (at least :data:`MIN_RUNS`) whose power
        reaches ``power``; :data:`MIN_RUNS` for an infinite effect (no noise).
    """
    from scipy import stats as sps

    if not effect > 0 or math.isinf(effect):
        return MIN_RUNS
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


def runs_needed(detect: float, cv: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                family: int = 1) -> int:
    """Runs per cell for the report's test to detect a relative difference of means
    on the linear scale (a metric that is not positive).

    Args:
        detect: Relative difference between the two cells' means (0.03 for 3%).
        cv: Coefficient of variation of one run (sd / mean) in each cell.
        alpha: Significance level of the report (family-wise).
        power: Wanted probability of detecting the difference.
        family: Comparisons in the report's Holm family (:func:`family_size`).

    Returns:
        :func:`runs_for_effect` of ``detect / cv``.
    """
    return runs_for_effect(detect / cv, alpha, power, family) if cv > 0 else MIN_RUNS


def runs_needed_log(detect: float, sd_log: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER,
                    family: int = 1) -> int:
    """Runs per cell for the report's test of a ratio (Welch's test on log values)
    to detect a ratio of ``1 + detect`` between the cells' geometric means.

    Args:
        detect: The ratio to detect minus one (0.5 for 50%); a drop to ``1 - detect``
            is a larger log ratio and is detected with more power (module docstring).
        sd_log: Sd of the log values of one run in each cell (:func:`log_sd_from_cv`).

    Returns:
        :func:`runs_for_effect` of ``log(1 + detect) / sd_log``.
    """
    return runs_for_effect(math.log1p(detect) / sd_log, alpha, power, family) if sd_log > 0 else MIN_RUNS


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
    """One cell's (or a given) run-to-run spread of a metric.

    Attributes:
        metric: The metric.
        cell_id: The cell (``(every cell)`` for a CV given by hand).
        cv: Coefficient of variation of one run (sd / mean).
        n: Runs the spread was measured on (0 when given by hand).
        scale: ``log`` for a positive metric, compared as a ratio; else ``linear``.
        sd_log: Sd of the log values of one run (``log`` scale only).
    """

    metric: str
    cell_id: str
    cv: float
    n: int
    scale: str = LINEAR
    sd_log: float | None = None

    @property
    def sigma(self) -> float:
        """The spread the planner uses: ``sd_log`` on the log scale, else ``cv``."""
        return self.sd_log if self.scale == LOG and self.sd_log is not None else self.cv


def workload_units(spec: Spec) -> dict[str, str]:
    """Metric -> unit as far as the spec tells before any run: the workload's metric
    catalogue (its descriptor's ``metrics``: fio, pgbench), with the declared ``workload.metrics`` units."""
    from benchmatrix.results.tables import metric_units
    from benchmatrix.workloads import WORKLOADS

    workload = WORKLOADS.get(str((spec.workload or {}).get("role") or ""))
    return metric_units(spec.declared_metrics, dict(workload.metrics) if workload is not None else {})


def given_cv_samples(cv: float, metrics: list[str] | None = None, declared: dict[str, Any] | None = None,
                     units: dict[str, str] | None = None) -> list[CvSample]:
    """The spread of a CV given by hand (``--cv``), per family metric.

    A positive metric (:func:`benchmatrix.analyze.scale.declared_positive`: declared so,
    or a rate, time or size unit) is planned on the log scale with the log sd of a
    lognormal run of that CV, :func:`log_sd_from_cv`; any other metric, and a spec
    that names none, on the linear scale with the CV itself.
    """
    from benchmatrix.analyze.scale import declared_positive

    if not metrics:
        return [CvSample("(any)", "(every cell)", cv, 0)]
    out = []
    for metric in dict.fromkeys(metrics):
        if declared_positive(metric, declared, (units or {}).get(metric)):
            out.append(CvSample(metric, "(every cell)", cv, 0, LOG, log_sd_from_cv(cv)))
        else:
            out.append(CvSample(metric, "(every cell)", cv, 0))
    return out


# shape: reads summary.csv, then runs.csv for the log scale; split, steps would pass samples/units/minima
def pilot_samples(pilot: Path, metrics: list[str] | None = None, declared: dict[str, Any] | None = None,
                  units: dict[str, str] | None = None) -> tuple[list[CvSample], list[str]]:
    """The spread per cell and metric of an earlier campaign, and notes on its scales.

    Every (cell, metric) of ``summary.csv`` with a CV is a sample. A metric is
    planned on the log scale when it is positive by its declaration (``declared``,
    the spec's ``workload.metrics``) or its unit (the pilot's summary.csv, else the
    declared one) and every value of it in the pilot is above 0
    (:func:`benchmatrix.analyze.scale.metric_scales` on the effective runs of
    ``runs.csv``; the cells' ``min`` in summary.csv when there is no runs.csv). A log
    sample's ``sd_log`` is the sd of log(value) of the cell's effective runs
    (:func:`benchmatrix.analyze.stats.effective_runs`), or ``sqrt(log(1 + cv^2))``
    from its CV without runs.csv.

    Args:
        pilot: ``results/NAME`` of the earlier campaign, or its summary.csv (a
            runs.csv beside it is read too).
        metrics: Keep only these metrics when the pilot has any of them.
        declared: ``workload.metrics`` of the spec being planned.
        units: Metric -> unit where summary.csv gives none (:func:`workload_units`).

    Raises:
        BenchmatrixError: no summary.csv, or no cell with a CV in it, or a runs.csv
            that lacks the columns of one.
    """
    import numpy as np
    import pandas as pd

    from benchmatrix.analyze.scale import declared_positive, metric_scales
    from benchmatrix.analyze.stats import effective_runs
    from benchmatrix.results.tables import metric_units

    path = pilot / layout.SUMMARY if pilot.is_dir() else pilot
    if not path.is_file():
        raise BenchmatrixError(f"{path}: no summary.csv in the pilot campaign; run 'bmx report' on it first")
    out: list[CvSample] = []
    units_seen: dict[str, str] = {}
    minimum: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"metric", "cell_id", "cv"} - set(reader.fieldnames or [])
        if missing:
            raise BenchmatrixError(f"{path}:1: summary.csv lacks column(s) {', '.join(sorted(missing))}")
        for row in reader:
            if row.get("unit") and not units_seen.get(row["metric"]):
                units_seen[row["metric"]] = row["unit"]
            try:
                low = float(row.get("min") or "nan")
            except ValueError:
                low = math.nan
            if not math.isnan(low):
                minimum[row["metric"]] = min(low, minimum.get(row["metric"], math.inf))
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
    names = list(dict.fromkeys(s.metric for s in out))
    # The one unit rule: the pilot's summary.csv names the unit, the workload's fills in.
    units_seen = metric_units(None, units or {}, units_seen)

    runs_path = path.parent / layout.RUNS
    eff = None
    if runs_path.is_file() and runs_path.stat().st_size:
        try:
            eff = effective_runs(pd.read_csv(runs_path, low_memory=False))
        except BenchmatrixError as exc:
            raise BenchmatrixError(f"{runs_path}: {exc}") from exc
    notes: list[str] = []
    if eff is not None:
        scales, notes = metric_scales(eff, names, declared, units_seen)
    else:
        scales = {}
        for metric in names:
            positive = declared_positive(metric, declared, units_seen.get(metric))
            if positive and minimum.get(metric, 1.0) <= 0:
                notes.append(f"{metric}: planned as differences, not ratios: the pilot has a value at or below 0")
                positive = False
            scales[metric] = LOG if positive else LINEAR

    sd_logs: dict[str, Any] = {}
    for metric in names:
        if scales[metric] != LOG or eff is None or metric not in eff.columns:
            continue
        values = pd.to_numeric(eff[metric], errors="coerce").to_numpy(dtype="float64")
        keep = np.isfinite(values) & (values > 0)
        logs = pd.Series(np.log(values[keep]))
        groups = logs.groupby(eff["cell_id"].astype(str).to_numpy()[keep])
        sd_logs[metric] = pd.DataFrame({"sd": groups.std(ddof=1), "n": groups.count()})
    for s in out:
        if scales[s.metric] != LOG:
            continue
        s.scale = LOG
        table = sd_logs.get(s.metric)
        if table is not None and s.cell_id in table.index and table.at[s.cell_id, "n"] >= 2:
            s.sd_log, s.n = float(table.at[s.cell_id, "sd"]), int(table.at[s.cell_id, "n"])
        else:
            s.sd_log = log_sd_from_cv(s.cv)
    return out, notes


def pilot_cvs(pilot: Path, metrics: list[str] | None = None, declared: dict[str, Any] | None = None,
              units: dict[str, str] | None = None) -> list[CvSample]:
    """The samples of :func:`pilot_samples`, without its notes."""
    return pilot_samples(pilot, metrics, declared, units)[0]


def _needed_by_effect(effects: list[float], alpha: float, power: float, family: int) -> dict[float, int]:
    """:func:`runs_for_effect` for many effects (a pilot's cells) without solving each one.

    The runs needed never grow as the effect grows, so over the sorted distinct
    effects every stretch between two effects with the same answer shares it: divide
    and conquer solves about (distinct answers x log2(effects)) of them, not every cell.
    """
    uniq = sorted(set(effects))
    if not uniq:
        return {}
    out: dict[float, int] = {}

    def solve(i: int) -> int:
        return runs_for_effect(uniq[i], alpha, power, family)

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


def _effect(detect: float, scale: str, sigma: float) -> float:
    """The standardized effect: ``log(1 + detect) / sd_log`` or ``detect / cv``."""
    if not sigma > 0:
        return math.inf
    return (math.log1p(detect) if scale == LOG else detect) / sigma


def pooled_sd(samples: list[CvSample]) -> float:
    """The common sd of the samples' cells: the root of their variances' mean, each
    weighted by its degrees of freedom (n - 1; 1 for a spread given by hand)."""
    weights = [max(s.n - 1, 1) for s in samples]
    return math.sqrt(sum(w * s.sigma ** 2 for w, s in zip(weights, samples)) / sum(weights))


RULES = {LOG: "sd of the log values, pooled over the cells (each with its n - 1)",
         LINEAR: "CV of the noisiest cell"}


# shape: the planner's inputs, the last four with defaults; a parameter object would only rename them
def replicate_plan(detect: float, samples: list[CvSample], replicates: int, visits_per_cell: int | None,
                   whole_plot_factors: list[str], source: str, alpha: float = DEFAULT_ALPHA,
                   power: float = DEFAULT_POWER, family: dict[str, Any] | None = None,
                   notes: list[str] | None = None) -> dict[str, Any]:
    """Runs and visits needed per cell, per metric and overall, beside what the spec provides.

    Each metric is planned on its scale (module docstring): a positive metric with
    the sd of its log values pooled over the cells and the effect ``log(1 + detect)``;
    any other with the largest CV over the cells (the noisiest cell: every
    comparison the report makes should have the wanted power) and the effect
    ``detect``. The requirement is the largest over the metrics. The figures at the
    median and the largest spread of a cell are given beside. Every figure is for
    Welch's test inside the report's Holm family (module docstring).

    Args:
        detect: Relative difference to detect (a ratio of 1 + detect on the log scale).
        samples: Spreads per cell and metric (one per metric for a CV given by hand).
        replicates: Measured runs per cell in the spec.
        visits_per_cell: Distinct visits holding each cell's measured runs (the
            fewest over cells and hosts); None when the spec has no costly knob.
        whole_plot_factors: The costly knobs' factors.
        source: Where the spreads come from, for the output.
        alpha: Significance level.
        power: Wanted power.
        family: :func:`family_size` of the spec; None plans for a single comparison.
        notes: Remarks on the scales (:func:`pilot_samples`), passed through.

    Returns:
        A JSON-ready mapping; ``family`` says the Holm family assumed, ``metrics`` the
        scale, spread (``sigma``) and runs of each metric, ``warnings`` lists each
        shortfall as one line.
    """
    family = dict(family or {"size": 1, "comparisons_per_metric": 1, "metrics": [], "metrics_source": "given"})
    size = int(family["size"])
    family["alpha_per_comparison"] = alpha / size
    by_metric: dict[str, list[CvSample]] = {}
    for s in samples:
        by_metric.setdefault(s.metric, []).append(s)
    scale_of = {m: LOG if all(s.scale == LOG and s.sd_log is not None for s in ms) else LINEAR
                for m, ms in by_metric.items()}

    def spread(s: CvSample) -> float:
        return s.sigma if scale_of[s.metric] == LOG else s.cv

    planned_sigma: dict[str, float] = {}
    for metric, ms in by_metric.items():
        planned_sigma[metric] = pooled_sd(ms) if scale_of[metric] == LOG else max(s.cv for s in ms)
    effects = [_effect(detect, scale_of[s.metric], spread(s)) for s in samples]
    effects += [_effect(detect, scale_of[m], statistics.median([spread(s) for s in ms]))
                for m, ms in by_metric.items()]
    effects += [_effect(detect, scale_of[m], planned_sigma[m]) for m in by_metric]
    needed_by_effect = _needed_by_effect(effects, alpha, power, size)

    def needed_for(metric: str, sigma: float) -> int:
        return needed_by_effect[_effect(detect, scale_of[metric], sigma)]

    per_metric = []
    for metric in sorted(by_metric):
        ms = by_metric[metric]
        scale = scale_of[metric]
        sigmas = [spread(s) for s in ms]
        worst = max(ms, key=spread)
        noisiest = max(ms, key=lambda s: s.cv)
        sigma = planned_sigma[metric]
        effect = _effect(detect, scale, sigma)
        per_metric.append({
            "metric": metric, "scale": scale, "cells": len(ms),
            "sigma": sigma, "sigma_rule": RULES[scale],
            "effect": effect if math.isfinite(effect) else None,
            "needed": needed_for(metric, sigma),
            "median_sigma": statistics.median(sigmas), "max_sigma": spread(worst), "max_sigma_cell": worst.cell_id,
            "needed_at_median_sigma": needed_for(metric, statistics.median(sigmas)),
            "needed_at_max_sigma": needed_for(metric, spread(worst)),
            "median_cv": statistics.median([s.cv for s in ms]), "max_cv": noisiest.cv,
            "max_cv_cell": noisiest.cell_id})
    needed = max(m["needed"] for m in per_metric)
    cells: dict[str, int] = {}
    for s in samples:
        cells[s.cell_id] = max(cells.get(s.cell_id, MIN_RUNS), needed_for(s.metric, spread(s)))
    out: dict[str, Any] = {
        "detect": detect, "detect_ratio": 1.0 + detect, "alpha": alpha, "power": power, "source": source,
        "test": "welch", "family": family,
        "rule": ("positive metrics (scale log): Welch's test on log values, a ratio of 1 + detect, the sd of "
                 "the log values pooled over the cells; others (scale linear): the largest CV over the cells; "
                 "the requirement is the largest over the metrics"),
        "metrics": per_metric,
        "needed_per_cell": cells,
        "cheap": {"unit": "run", "needed": needed, "planned": replicates},
        "whole_plot": None,
        "notes": list(notes or []),
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
