"""Comparisons: the effect of a factor's levels against a baseline (``comparisons.csv``).

``report.compare: {factor, baseline, by}`` asks for every level of ``factor`` against
``baseline`` within each combination of the ``by`` factors' levels. Factors that are
neither compared nor in ``by`` are pooled (put them in ``by`` to hold them fixed).
Each comparison gives the relative difference of the means in percent with a 95 %
confidence interval, a p-value adjusted with Holm's method across every comparison
of the report, and a verdict in the metric's direction.

The analysis follows the design, because the unit of replication does:

* ``welch``: runs were placed independently (``random`` or ``sequential`` order, or
  a cheap factor of a ``restricted`` plan), so each run is a replicate. Welch's
  t-test compares the two means without assuming equal variances; the interval of
  the ratio of means is Fieller's, with Welch's degrees of freedom, so it excludes
  0 % exactly when the unadjusted test rejects.
* ``mixed_model``: in a ``restricted`` (split-plot) plan a costly factor (its knob's
  cost class is ``restart`` or ``reboot``) changes only between whole-plot visits,
  so runs inside one visit share everything the reconfiguration disturbed. Treating
  them as independent would judge the factor against run-to-run noise and
  overstate certainty. A linear mixed model (statsmodels ``MixedLM``) with one mean
  per cell and a random intercept per visit estimates the visit-to-visit variance;
  the effect's standard error includes it, and its t reference distribution has
  the whole-plot error degrees of freedom (visits minus whole-plot settings).
  Replicates of a cell inside one visit are averaged first (they are subsamples).
* ``welch_visit_means``: the fallback when the mixed model cannot be fitted (too
  large, singular, or no visit information): Welch's test on per-visit means,
  which also treats the visit as the unit.

Several hosts (``host`` in runs.csv) make the host a blocking factor; ``comparisons.csv``
then gets a ``host`` column after ``baseline`` (it is absent for a single host, so
single-host output is unchanged):

* ``hosts_mode: replicate`` (the default): every host ran the whole plan, so each
  comparison is made **within each host**, with the analysis above, and the row
  names the host. A host's offset cannot leak into an effect, and an effect seen on
  one machine only is visible as such.
* ``hosts_mode: partition``: the runs of a cell are spread over identical hosts, so
  one comparison pools the hosts (``host`` is ``all``) and removes each host's
  offset: ``blocked_by_host`` is ordinary least squares with one mean per cell and
  one fixed effect per host (effect-coded, so a cell's mean is its average over the
  hosts), fitted on the runs of the two sides; the effect's standard error and
  degrees of freedom come from the residuals. A whole-plot factor gets
  ``mixed_model_blocked_by_host`` (the mixed model with the host effects added,
  degrees of freedom reduced by hosts minus one) or, as its fallback,
  ``blocked_by_host_visit_means`` (the least-squares fit on per-visit means).
  Where the host cannot be separated from the level (every run of one side on
  hosts the other side never ran on) the row is ``insufficient_data``, with a note.

Each comparison is estimated on its metric's scale (:mod:`benchmatrix.analyze.scale`):
a positive metric (throughput, latency, time, size) on its log values, so the estimate
is a ratio of geometric means; any other on its values. The verdict engine
(:func:`benchmatrix.analyze.verdict.judge`) then does the rest, as for ``bmx compare``
and the history: Holm's adjustment across the family (every row of the primary
metrics, ``report.primary``, by default every compared metric, :func:`family_metrics`,
all hosts together), the Holm-consistent interval beside each verdict
(``ci_low_adj_pct``/``ci_high_adj_pct``; ``ci_low_pct``/``ci_high_pct`` stay the
unadjusted 95 % interval), the practical threshold (``report.threshold``), the
smallest detectable change, and the verdicts ``better``/``worse`` (``higher``/``lower``
when the direction is unknown: significant and estimated beyond the threshold, the one
meaning of :mod:`benchmatrix.analyze.verdict`), ``equivalent``, ``inconclusive``,
``insufficient_data`` (no test possible) and ``descriptive`` (outside the family).
A comparison resting on fewer than :data:`MIN_UNITS` runs or visits a side earns a
warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from benchmatrix.analyze import verdict as engine
from benchmatrix.analyze.bounds import pct_interval
from benchmatrix.analyze.scale import LOG, metric_scales
from benchmatrix.analyze.stats import effective_runs, metric_direction, run_hosts, welch_test
from benchmatrix.analyze.verdict import DESCRIPTIVE
from benchmatrix.layout import ALL_HOSTS, HOST_COLUMN, by_column, comparison_columns
from benchmatrix.spec.load import DEFAULT_ALPHA

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Beyond these sizes the mixed model is not attempted (fit time grows fast).
MIXED_MAX_CELLS = 300
MIXED_MAX_ROWS = 200_000

#: A comparison resting on fewer independent units (runs, or visits for a whole-plot
#: factor) on a side earns a warning: a test on two visits per level (2 error degrees
#: of freedom) detects an effect of 2.5 standard deviations of a visit mean only 30 %
#: of the time even before Holm's adjustment (3 per level: 64 %, 4: 84 %).
MIN_UNITS = 3
#: Analyses whose unit of replication is the whole-plot visit.
VISIT_ANALYSES = frozenset({"mixed_model", "welch_visit_means", "mixed_model_blocked_by_host",
                            "blocked_by_host_visit_means"})


def level_key(value: Any) -> str:
    """A factor level as comparable text: YAML booleans, whole floats as integers.

    ``plan.csv`` round-trips levels through text, so ``4096``, ``4096.0`` and
    ``"4096"`` must all name the same level.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    text = str(value).strip()
    # pandas reads a boolean column with gaps as the strings "True"/"False".
    return text.lower() if text in ("True", "False") else text


def level_keys(column: pd.Series) -> pd.Series:
    """:func:`level_key` of every value, computed once per distinct value."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    mapped = np.array([level_key(u) for u in uniques] + [""], dtype=object)
    return pd.Series(mapped[codes], index=column.index, dtype=object)


def family_metrics(spec: Spec, measured: Iterable[str] | None = None) -> list[str]:
    """The metrics whose comparisons form Holm's family and get verdicts.

    ``report.primary`` when the spec gives it; otherwise every metric the report
    compares (the safe default): ``report.metrics``, or, when that is empty, every
    measured metric (``measured``; before any run, the workload's declared metrics).
    The comparisons of the other report metrics are descriptive: shown with their
    unadjusted 95 % intervals, no verdict, outside the family. The replicate planner
    sizes the family with this same function.

    Args:
        spec: The loaded spec (its ``report`` settings and declared metrics are read).
        measured: Names of the measured metrics, when known.

    Returns:
        Metric names, in the order the spec lists them.
    """
    cfg = spec.report
    if cfg.primary:
        return list(dict.fromkeys(str(m) for m in cfg.primary))
    declared = spec.declared_metrics
    return list(dict.fromkeys(cfg.metrics or (measured if measured is not None else declared) or []))


def whole_plot_factors(spec: Spec) -> list[str]:
    """Factors whose knob is costly (restart or reboot), in spec order."""
    costly = set(spec.whole_plot_factors())
    return [f for f in spec.factor_names if f in costly]


@dataclass
class Comparisons:
    """The comparisons of a report.

    Attributes:
        table: Rows of ``comparisons.csv`` (see :func:`comparison_columns`).
        config: ``report.compare`` as used (``None`` when the spec has none).
        explanations: One entry per analysis used: ``{analysis, metrics, why}``.
        notes: Other remarks (skipped levels, fallbacks).
        alpha: Significance level of the verdicts.
        warnings: Findings the report lists among its warnings:
            ``{check, title, message}`` (comparisons with too few visits or runs).
        family: The metrics in Holm's family (:func:`family_metrics`).
        descriptive: The compared metrics outside it.
        scales: Metric -> ``log`` (ratios of geometric means) or ``linear``
            (differences of means): :func:`benchmatrix.analyze.scale.metric_scales`.
        thresholds: Metric -> practical threshold (a fraction).
        adaptive: For adaptive replication, the rounds and why each comparison
            stopped (:func:`benchmatrix.analyze.adaptive.rounds_summary`); None otherwise.
    """

    table: pd.DataFrame
    config: dict[str, Any] | None
    explanations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alpha: float = DEFAULT_ALPHA
    warnings: list[dict[str, str]] = field(default_factory=list)
    family: list[str] = field(default_factory=list)
    descriptive: list[str] = field(default_factory=list)
    scales: dict[str, str] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    adaptive: dict[str, Any] | None = None

    def meta(self) -> dict[str, Any]:
        """Everything but the table, as JSON-ready values (collect keeps it in analysis.json)."""
        return {"config": self.config, "explanations": self.explanations, "notes": self.notes,
                "alpha": self.alpha, "warnings": self.warnings, "family": self.family,
                "descriptive": self.descriptive, "scales": self.scales, "thresholds": self.thresholds,
                "adaptive": self.adaptive}

    @classmethod
    def from_tables(cls, table: pd.DataFrame, meta: dict[str, Any]) -> Comparisons:
        """The comparisons as collect wrote them: comparisons.csv and :meth:`meta`."""
        return cls(table=table, config=meta.get("config"), explanations=list(meta.get("explanations") or []),
                   notes=list(meta.get("notes") or []), alpha=float(meta.get("alpha") or DEFAULT_ALPHA),
                   warnings=list(meta.get("warnings") or []), family=list(meta.get("family") or []),
                   descriptive=list(meta.get("descriptive") or []), scales=dict(meta.get("scales") or {}),
                   thresholds=dict(meta.get("thresholds") or {}), adaptive=meta.get("adaptive"))




def _empty(by: list[str], host: bool = False) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in comparison_columns(by, host)})


def _ordered_levels(spec_levels: list[Any], present: list[str]) -> list[str]:
    keys = [level_key(v) for v in spec_levels]
    return [k for k in dict.fromkeys(keys) if k in present] + sorted(set(present) - set(keys))


# shape: one pass: the keys, combos and host split built first are used by every metric's loop after them
def compare(spec: Spec, runs: pd.DataFrame, metrics: list[str], units: dict[str, str] | None = None,
            alpha: float | None = None) -> Comparisons:
    """Compute every comparison that ``report.compare`` asks for.

    Args:
        spec: The loaded :class:`~benchmatrix.spec.load.Spec`.
        runs: Rows of ``runs.csv`` (every attempt; filtered to the effective runs).
        metrics: Metrics to compare (those without a column are skipped).
        units: Metric -> unit, copied into the table.
        alpha: Significance level; default ``report.alpha`` or 0.05.

    Returns:
        The comparisons, with the explanation of the analysis of each.
    """
    report_cfg = spec.report
    alpha = float(alpha if alpha is not None else report_cfg.alpha)
    if report_cfg.compare is None:
        return Comparisons(_empty([]), None, alpha=alpha)
    cfg = report_cfg.compare.as_dict()
    factor, by = cfg["factor"], cfg["by"]
    hosts = run_hosts(runs)
    multi = len(hosts) > 1
    mode = spec.hosts_mode
    blocked = multi and mode == "partition"
    result = Comparisons(_empty(by, multi), cfg, alpha=alpha)
    units = units or {}
    eff = effective_runs(runs) if len(runs) else runs
    metrics = [m for m in dict.fromkeys(metrics) if m in eff.columns]
    lacking = [f for f in (factor, *by) if f not in eff.columns]
    if eff.empty or not metrics or lacking:
        if lacking and not eff.empty:
            result.notes.append(f"no comparison: the runs lack factor column(s) {', '.join(lacking)}")
        return result

    declared = spec.declared_metrics
    spec_factors = spec.levels
    fkey = level_keys(eff[factor])
    bkeys = [level_keys(eff[b]) for b in by]
    base = level_key(cfg["baseline"])
    levels = [lv for lv in _ordered_levels(spec_factors.get(factor, []), list(fkey.unique())) if lv != base]
    originals = _originals(spec_factors, eff, [factor, *by], [fkey, *bkeys])
    if base not in set(fkey):
        result.notes.append(f"no comparison: no measured run has the baseline {factor}={cfg['baseline']}")
        return result

    strategy = spec.order.get("strategy")
    use_mixed = strategy == "restricted" and factor in whole_plot_factors(spec)
    analysis = _explain(spec, factor, strategy, use_mixed)

    keys = pd.DataFrame({"_f": fkey, **{f"_b{i}": k for i, k in enumerate(bkeys)}}, index=eff.index)
    key_cols = list(keys.columns)
    combos = (keys[key_cols[1:]].drop_duplicates() if by else pd.DataFrame(index=[0]))
    combo_list = _sort_combos(combos, [spec_factors.get(b, []) for b in by], len(by))

    # Which runs each set of comparisons uses: every host alone (replicate), all
    # hosts with the host as a block (partition), or simply all runs (one host).
    host_of = (level_keys(eff["host"]).to_numpy() if multi and "host" in eff.columns
               else np.full(len(eff), "", dtype=object))
    if multi and not blocked:
        groups = [(h, host_of == h) for h in hosts]
    else:
        groups = [(ALL_HOSTS if multi else None, np.ones(len(eff), dtype=bool))]
    if blocked:
        analysis = _blocked_explanation(analysis, factor, use_mixed)
    elif multi:
        analysis = dict(analysis, why=analysis["why"] + _REPLICATE_NOTE)

    rows: list[dict[str, Any]] = []
    used: dict[str, list[str]] = {}
    scales, scale_notes = metric_scales(eff, metrics, declared, units)
    result.scales = scales
    result.notes.extend(scale_notes)
    for metric in metrics:
        values = pd.to_numeric(eff[metric], errors="coerce").astype("float64")
        if scales[metric] == LOG:
            # Ratios of geometric means: every model below works on the log values.
            values = np.log(values)
        have = values.notna().to_numpy()
        if not have.any():
            continue
        direction = metric_direction(metric, declared)
        for host, in_group in groups:
            sel = have & in_group
            if not sel.any():
                continue
            block = pd.Series(host_of[sel], index=eff.index[sel]) if blocked else None
            where = f"{metric} on {host}" if multi and not blocked else metric
            method = analysis["analysis"]
            stats_by_side = None
            if use_mixed:
                stats_by_side, method, why = _mixed_sides(spec, eff[sel], values[sel], keys[sel], key_cols,
                                                          base, levels, combo_list, blocks=block)
                if why:
                    result.notes.append(f"{where}: {why}")
            if stats_by_side is None and blocked:
                frame = pd.DataFrame({"y": values[sel].to_numpy(), "cell": eff["cell_id"].to_numpy()[sel],
                                      "block": block.to_numpy(), **{c: keys[c].to_numpy()[sel] for c in key_cols}})
                stats_by_side, confounded = _blocked_sides(frame, key_cols, base, levels, combo_list)
                method = "blocked_by_host"
                if confounded:
                    result.notes.append(f"{where}: {confounded} comparison(s) without a blocked estimate: the hosts "
                                        "cannot be separated from the levels (one side's runs all on hosts the "
                                        "other side never ran on)")
            elif stats_by_side is None:
                stats_by_side = _welch_sides(values[sel], keys[sel], key_cols, base, levels, combo_list)
            if metric not in used.setdefault(method, []):
                used[method].append(metric)
            for (level, combo), s in stats_by_side.items():
                row = {"metric": metric, "factor": factor, "level": originals[0].get(level, level),
                       "baseline": originals[0].get(base, cfg["baseline"])}
                if multi:
                    row[HOST_COLUMN] = host
                for i, b in enumerate(by):
                    row[by_column(b)] = originals[i + 1].get(combo[i], combo[i])
                row.update(s)
                row.update({"analysis": method, "unit": units.get(metric, ""), "better": direction,
                            "_scale": scales[metric]})
                rows.append(row)

    for method, mets in used.items():
        result.explanations.append({**(analysis if method == analysis["analysis"] else
                                       _fallback_explanation(method, multi and not blocked)), "metrics": mets})
    if not rows:
        return result
    table = pd.DataFrame(rows)
    family = family_metrics(spec, metrics)
    result.family = [m for m in family if m in metrics]
    result.descriptive = [m for m in metrics if m not in set(family)]
    result.thresholds = {m: report_cfg.threshold_for(m) for m in metrics}
    _judge(table, set(family), alpha, result.thresholds)
    _verdict_notes(result, table, factor, family, metrics, bool(report_cfg.primary))
    result.table = table.reindex(columns=comparison_columns(by, multi))
    return result


def _judge(table: pd.DataFrame, family: set[str], alpha: float, thresholds: dict[str, float] | float) -> None:
    """The verdict engine's judgement of every row (:func:`benchmatrix.analyze.verdict.judge`)."""
    engine.judge(table, family, alpha, thresholds)


def _verdict_notes(result: Comparisons, table: pd.DataFrame, factor: str, family: list[str],
                   metrics: list[str], explicit: bool) -> None:
    """Say why rows have no test, which metrics are descriptive, and warn of too few units."""
    if result.descriptive:
        result.notes.append("report.primary: verdicts and Holm's adjustment cover "
                            f"{', '.join(result.family) or 'none'}; "
                            f"descriptive (unadjusted 95 % intervals, no verdict): {', '.join(result.descriptive)}")
    unmeasured = [m for m in family if m not in metrics]
    if unmeasured and explicit:
        result.notes.append(f"report.primary names {', '.join(unmeasured)}, which no measured run has")
    constant = table["_constant"].to_numpy(dtype=bool)
    for metric in dict.fromkeys(table.loc[constant, "metric"]):
        count = int((constant & (table["metric"] == metric).to_numpy()).sum())
        result.notes.append(f"{metric}: {count} comparison(s) without a test: the values on both sides do not "
                            "vary (or only at rounding level), so there is no run-to-run variation to judge a "
                            "difference by; the verdict is insufficient_data (the means are in comparisons.csv)")
    tested = np.isfinite(table["p_value"].to_numpy(dtype="float64"))
    units = table["_units"].to_numpy(dtype="float64")
    few = tested & (units < MIN_UNITS)
    if not few.any():
        return
    by_visit = table["analysis"].isin(VISIT_ANALYSES).to_numpy()
    for visits in (True, False):
        sel = few & (by_visit == visits)
        if not sel.any():
            continue
        kind = "visits" if visits else "runs"
        lowest = int(units[sel].min())
        undecided = int((sel & (table["verdict"] == "inconclusive").to_numpy()).sum())
        mets = ", ".join(dict.fromkeys(table.loc[sel, "metric"]))
        how = ("more visits (order.visits, replicates; `bmx plan SPEC --detect 5% --cv 0.02` says how many)"
               if visits else "more replicates (`bmx plan SPEC --detect 5% --cv 0.02` says how many)")
        result.warnings.append({
            "check": "few_units",
            "title": f"Too few {kind} to decide",
            "message": (f"{int(sel.sum())} comparison(s) of {factor} ({mets}) rest on only {lowest} {kind} on a "
                        f"side{' (whole-plot factor: judged visit against visit)' if visits else ''}. A test on so "
                        f"few has little power: {undecided} of them are inconclusive (their intervals hold both "
                        f"no change and a change beyond the threshold). Plan at least {MIN_UNITS} {kind} per "
                        f"level: {how}."),
        })


def _originals(spec_factors: dict[str, list[Any]], eff: pd.DataFrame, names: list[str],
               keys: list[pd.Series]) -> list[dict[str, Any]]:
    # Show levels as the spec spells them (4096, not "4096"), falling back to the data.
    out = []
    for name, key in zip(names, keys):
        mapping: dict[str, Any] = {}
        for k, v in zip(key.drop_duplicates().tolist(), eff.loc[key.drop_duplicates().index, name].tolist()):
            mapping.setdefault(k, v)
        for v in spec_factors.get(name, []):
            mapping[level_key(v)] = v
        out.append(mapping)
    return out


def _sort_combos(combos: pd.DataFrame, spec_levels: list[list[Any]], n_by: int) -> list[tuple[str, ...]]:
    if n_by == 0:
        return [()]
    tuples = [tuple(r) for r in combos.itertuples(index=False)]
    ranks = [{level_key(v): i for i, v in enumerate(levels)} for levels in spec_levels]

    def order(t: tuple[str, ...]) -> tuple[Any, ...]:
        return tuple((ranks[i].get(v, len(ranks[i])), v) for i, v in enumerate(t))

    return sorted(set(tuples), key=order)


# shape: two sides' mean, variance and n, plus optional cov, df, units: the formula's own inputs
def _side_stats(mean_a, var_a, n_a, mean_b, var_b, n_b, cov=None, df=None, units=None) -> dict[str, Any]:
    """One comparison's estimate from the two sides' means and their (co)variances.

    The values are on the comparison's scale (log values for a positive metric).
    With ``cov``/``df`` absent the sides are independent samples (Welch); otherwise
    ``var_*`` are already variances of the estimated means. ``units`` is the number
    of independent units on the smaller side (default: the smaller n). The p-values,
    intervals and verdicts are filled in later by the verdict engine
    (:func:`benchmatrix.analyze.verdict.judge`), once the family is known; the
    ``_``-prefixed entries carry what it needs and never reach the csv.
    """
    constant = False
    if cov is None:
        _, dfs = welch_test([mean_a], [var_a], [n_a], [mean_b], [var_b], [n_b])
        df = float(dfs[0]) if n_a >= 2 and n_b >= 2 else np.nan
        va, vb, cov = (var_a / n_a if n_a else np.nan), (var_b / n_b if n_b else np.nan), 0.0
        constant = bool(n_a >= 2 and n_b >= 2 and var_a == 0 and var_b == 0)
    else:
        va, vb = var_a, var_b
        df = df if df is not None else np.nan
    se2 = va + vb - 2 * cov
    se2 = max(se2, 0.0) if np.isfinite(se2) else np.nan
    if se2 == 0:
        # No variation at all to judge by: no test, like Welch with two constant sides.
        constant = True
    return {"n_level": int(n_a), "n_baseline": int(n_b), "mean_level": mean_a, "mean_baseline": mean_b,
            "df": df, "_est": mean_a - mean_b, "_se2": se2, "_va": va, "_vb": vb, "_cov": cov,
            "_constant": constant, "_units": units if units is not None else min(int(n_a), int(n_b))}


def _sides_from_groups(grouped: pd.DataFrame, base: str, levels: list[str],
                       combos: list[tuple[str, ...]]) -> dict[tuple[str, tuple], dict[str, Any]]:
    """Sides of every (level, combo) against the baseline from count/mean/var per group.

    ``grouped`` is indexed by (level, *combo) with columns count, mean, var.
    """
    stats = {(k if isinstance(k, tuple) else (k,)): r for k, r in zip(grouped.index, grouped.to_numpy())}
    out = {}
    for combo in combos:
        b = stats.get((base, *combo))
        for level in levels:
            a = stats.get((level, *combo))
            if a is None and b is None:
                continue
            a = a if a is not None else (0, np.nan, np.nan)
            bb = b if b is not None else (0, np.nan, np.nan)
            out[(level, combo)] = _side_stats(a[1], a[2], int(a[0]), bb[1], bb[2], int(bb[0]))
    return out


def _welch_sides(values: pd.Series, keys: pd.DataFrame, key_cols: list[str], base: str,
                 levels: list[str], combos: list[tuple[str, ...]]) -> dict[tuple[str, tuple], dict[str, Any]]:
    grouped = values.groupby([keys[c].to_numpy() for c in key_cols], sort=False).agg(["count", "mean", "var"])
    return _sides_from_groups(grouped, base, levels, combos)


def _visit_groups(eff: pd.DataFrame) -> pd.Series | None:
    if "visit" not in eff.columns:
        return None
    visit = pd.to_numeric(eff["visit"], errors="coerce")
    if visit.isna().all():
        return None
    host = eff["host"].astype(str) if "host" in eff.columns else ""
    return host + "/" + visit.astype("Int64").astype(str)


# shape: the rows, keys and levels compare() built, passed through so the model uses the same rows
def _mixed_sides(spec: Spec, eff: pd.DataFrame, values: pd.Series, keys: pd.DataFrame, key_cols: list[str],
                 base: str, levels: list[str], combos: list[tuple[str, ...]],
                 blocks: pd.Series | None = None):
    """Sides of a whole-plot comparison from a mixed model, or a fallback.

    With ``blocks`` (the host of each run, ``hosts_mode: partition``) the model gets
    one fixed effect per host as well.

    Returns:
        ``(stats or None, analysis name, note)``; ``None`` stats means "use Welch".
    """
    groups = _visit_groups(eff)
    if groups is None:
        used = "least squares with host blocks on runs used" if blocks is not None else "Welch used"
        return None, "welch", f"no visit numbers in runs.csv: mixed model impossible, {used}"
    wp = [f for f in whole_plot_factors(spec) if f in eff.columns]
    setting = pd.Series(list(zip(*[level_keys(eff[f]) for f in wp])), index=eff.index).astype(str)
    frame = pd.DataFrame({"y": values.to_numpy(), "g": groups.to_numpy(), "cell": eff["cell_id"].to_numpy(),
                          "setting": setting.to_numpy(), **{c: keys[c].to_numpy() for c in key_cols},
                          "block": blocks.to_numpy() if blocks is not None else ""})
    collapsed = frame.groupby(["g", "cell"], sort=False).agg(
        y=("y", "mean"), setting=("setting", "first"), block=("block", "first"),
        **{c: (c, "first") for c in key_cols}).reset_index()
    n_groups = collapsed["g"].nunique()
    n_settings = collapsed["setting"].nunique()
    n_blocks = collapsed["block"].nunique()
    # Host effects, when present, are estimated from the visits too.
    df = float(n_groups - n_settings - (n_blocks - 1))
    cells = pd.Index(collapsed["cell"].unique())
    fit = None
    why = ""
    if len(cells) > MIXED_MAX_CELLS or len(collapsed) > MIXED_MAX_ROWS:
        why = f"too large for the mixed model ({len(cells)} cells, {len(collapsed)} visit means)"
    elif df < 1:
        why = (f"only {n_groups} visits for {n_settings} whole-plot settings"
               + (f" and {n_blocks} hosts" if n_blocks > 1 else "") + ": no visit-to-visit variance to judge by")
    else:
        fit, why = _fit_mixed(collapsed, cells, collapsed["block"] if blocks is not None else None)
    if fit is None:
        if blocks is not None:
            sides, _ = _blocked_sides(collapsed, key_cols, base, levels, combos)
            return (sides, "blocked_by_host_visit_means",
                    f"mixed model not used ({why}); least squares with host blocks on per-visit means instead")
        return (_visit_mean_sides(collapsed, key_cols, base, levels, combos), "welch_visit_means",
                f"mixed model not used ({why}); Welch's test on per-visit means instead")
    beta, cov = fit
    cell_pos = {c: i for i, c in enumerate(cells)}
    cell_keys = collapsed.drop_duplicates("cell").set_index("cell")[key_cols]
    raw_n = frame.groupby([frame[c] for c in key_cols], sort=False).size()
    raw_n = {(k if isinstance(k, tuple) else (k,)): int(v) for k, v in raw_n.items()}
    visits = collapsed.groupby([collapsed[c] for c in key_cols], sort=False)["g"].nunique()
    visits = {(k if isinstance(k, tuple) else (k,)): int(v) for k, v in visits.items()}
    out = {}
    for combo in combos:
        wb = _weights(cell_keys, cell_pos, (base, *combo), key_cols)
        for level in levels:
            wa = _weights(cell_keys, cell_pos, (level, *combo), key_cols)
            if wa is None and wb is None:
                continue
            n_a, n_b = raw_n.get((level, *combo), 0), raw_n.get((base, *combo), 0)
            if wa is None or wb is None or visits.get((level, *combo), 0) < 2 or visits.get((base, *combo), 0) < 2:
                out[(level, combo)] = _side_stats(np.nan, np.nan, n_a, np.nan, np.nan, n_b, cov=0.0, df=np.nan)
                out[(level, combo)]["mean_level"] = float(wa @ beta) if wa is not None else np.nan
                out[(level, combo)]["mean_baseline"] = float(wb @ beta) if wb is not None else np.nan
                continue
            s = _side_stats(float(wa @ beta), float(wa @ cov @ wa), n_a, float(wb @ beta), float(wb @ cov @ wb), n_b,
                            cov=float(wa @ cov @ wb), df=df,
                            units=min(visits[(level, *combo)], visits[(base, *combo)]))
            out[(level, combo)] = s
    return out, ("mixed_model_blocked_by_host" if blocks is not None else "mixed_model"), ""


def _weights(cell_keys: pd.DataFrame, cell_pos: dict[str, int], side: tuple[str, ...],
             key_cols: list[str]) -> np.ndarray | None:
    # Equal weight for every cell of the side: the side's mean is the mean of its cell means.
    mask = np.ones(len(cell_keys), dtype=bool)
    for col, want in zip(key_cols, side):
        mask &= cell_keys[col].to_numpy() == want
    chosen = cell_keys.index[mask]
    if len(chosen) == 0:
        return None
    w = np.zeros(len(cell_pos))
    for c in chosen:
        w[cell_pos[c]] = 1.0 / len(chosen)
    return w


def _fit_mixed(collapsed: pd.DataFrame, cells: pd.Index,
               blocks: pd.Series | None = None) -> tuple[tuple[np.ndarray, np.ndarray] | None, str]:
    """Fit y ~ 0 + cell (+ host) + (1 | visit) by REML; return (cell means, their covariance).

    Host effects (``blocks``) are effect-coded, so a cell's mean is its average over
    the hosts.
    """
    from statsmodels.regression.mixed_linear_model import MixedLM

    codes = cells.get_indexer(collapsed["cell"])
    exog = np.zeros((len(collapsed), len(cells)))
    exog[np.arange(len(collapsed)), codes] = 1.0
    if blocks is not None and pd.Series(blocks).nunique() > 1:
        exog = np.hstack([exog, _effect_coding(pd.Series(blocks).to_numpy())])
        if np.linalg.matrix_rank(exog) < exog.shape[1]:
            return None, "the hosts cannot be separated from the cells"
    y = collapsed["y"].to_numpy(dtype="float64")
    # Centre each cell on its own mean and scale by the pooled within-cell spread: the
    # fixed cell effects absorb the shift exactly, and the optimizer then works on
    # numbers near 1 whether the metric is IOPS in the millions or latencies in µs.
    offset = pd.Series(y).groupby(codes).transform("mean").to_numpy()
    scale = float(np.sqrt(np.mean((y - offset) ** 2))) or float(np.mean(np.abs(y))) or 1.0
    shift = pd.Series(y).groupby(codes).mean().reindex(range(len(cells))).to_numpy()
    res, why = None, ""
    for method in ("bfgs", "lbfgs", "powell"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = MixedLM((y - offset) / scale, exog, groups=collapsed["g"].to_numpy())
                res = model.fit(reml=True, method=[method])
            break
        except (np.linalg.LinAlgError, ValueError, OverflowError) as exc:
            res, why = None, f"fit failed: {exc}"
    if res is None:
        return None, why
    beta = shift + np.asarray(res.fe_params, dtype="float64")[: len(cells)] * scale
    cov = np.asarray(res.cov_params(), dtype="float64")[: len(cells), : len(cells)] * scale * scale
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(cov))):
        return None, "the fit gave no finite estimates"
    return (beta, cov), ""


def _effect_coding(blocks: np.ndarray) -> np.ndarray:
    """Sum-to-zero (effect) coding of a block factor: one column per block but the last,
    whose rows get -1 everywhere; no columns for a single block."""
    names = pd.Index(pd.unique(blocks))
    codes = names.get_indexer(blocks)
    out = np.zeros((len(blocks), max(len(names) - 1, 0)))
    if len(names) > 1:
        first = codes < len(names) - 1
        out[np.flatnonzero(first), codes[first]] = 1.0
        out[~first, :] = -1.0
    return out


def _ols_blocked(sub: pd.DataFrame) -> tuple[pd.Index, np.ndarray, np.ndarray, float] | None:
    """Least squares y = cell mean + host effect from per-(cell, host) statistics.

    ``sub`` has one row per (cell, block) with ``count``, ``mean`` and ``var`` of the
    values. Host effects are effect-coded, so each cell's coefficient is its mean
    averaged over the hosts. Fitting on these sufficient statistics gives exactly the
    fit on the runs (residual sum of squares = within-group sum of squares + the
    weighted residuals of the group means), at the cost of the groups only.

    Returns:
        ``(cells, cell means, their covariance, residual df)``, or ``None`` when the
        host effects cannot be separated from the cell means (rank deficient).
    """
    cells = pd.Index(pd.unique(sub["cell"]))
    k = len(cells)
    x = np.zeros((len(sub), k))
    x[np.arange(len(sub)), cells.get_indexer(sub["cell"])] = 1.0
    x = np.hstack([x, _effect_coding(sub["block"].to_numpy())])
    n = sub["count"].to_numpy(dtype="float64")
    ybar = sub["mean"].to_numpy(dtype="float64")
    within = np.nan_to_num(sub["var"].to_numpy(dtype="float64")) * (n - 1)
    xtx = x.T @ (x * n[:, None])
    if np.linalg.matrix_rank(xtx) < x.shape[1]:
        return None
    # Centred on the overall mean so that the normal equations stay well scaled; a
    # constant added to every value adds it to every cell mean (effect coding).
    centre = float(np.average(ybar, weights=n))
    inv = np.linalg.inv(xtx)
    beta = inv @ (x.T @ (n * (ybar - centre)))
    resid = ybar - centre - x @ beta
    rss = float(within.sum() + (n * resid * resid).sum())
    df = float(n.sum() - x.shape[1])
    s2 = rss / df if df >= 1 else np.nan
    return cells, beta[:k] + centre, s2 * inv[:k, :k], df


def _blocked_sides(frame: pd.DataFrame, key_cols: list[str], base: str, levels: list[str],
                   combos: list[tuple[str, ...]]) -> tuple[dict[tuple[str, tuple], dict[str, Any]], int]:
    """Sides of each comparison from a least-squares fit with host blocks.

    ``frame`` has ``y``, ``cell``, ``block`` (the host) and the key columns, one row
    per run (or per visit mean). Each comparison is fitted on its two sides' values
    only, like Welch's test, so a noisy cell elsewhere does not widen its interval.

    Returns:
        ``(stats per (level, combo), comparisons whose host and level are confounded)``.
    """
    groups = frame.groupby(["cell", "block"], sort=False)["y"].agg(["count", "mean", "var"]).reset_index()
    cell_keys = frame.drop_duplicates("cell").set_index("cell")[key_cols]
    gkeys = cell_keys.reindex(groups["cell"]).to_numpy(dtype=object)
    counts = groups["count"].to_numpy()
    sums = counts * groups["mean"].to_numpy(dtype="float64")

    def side(key: tuple[str, ...]) -> np.ndarray:
        return np.all(gkeys == np.array(key, dtype=object)[None, :], axis=1)

    out: dict[tuple[str, tuple], dict[str, Any]] = {}
    confounded = 0
    for combo in combos:
        mb = side((base, *combo))
        for level in levels:
            ma = side((level, *combo))
            if not ma.any() and not mb.any():
                continue
            n_a, n_b = int(counts[ma].sum()), int(counts[mb].sum())
            raw_a = sums[ma].sum() / n_a if n_a else np.nan
            raw_b = sums[mb].sum() / n_b if n_b else np.nan
            fit = _ols_blocked(groups[ma | mb]) if ma.any() and mb.any() else None
            if fit is None:
                confounded += bool(ma.any() and mb.any())
                s = _side_stats(np.nan, np.nan, n_a, np.nan, np.nan, n_b, cov=0.0, df=np.nan)
                s.update(mean_level=raw_a, mean_baseline=raw_b)
                out[(level, combo)] = s
                continue
            cells, beta, cov, df = fit
            sub_cells = groups["cell"].to_numpy()
            wa = cells.isin(pd.unique(sub_cells[ma])).astype("float64")
            wb = cells.isin(pd.unique(sub_cells[mb])).astype("float64")
            wa, wb = wa / wa.sum(), wb / wb.sum()
            out[(level, combo)] = _side_stats(float(wa @ beta), float(wa @ cov @ wa), n_a, float(wb @ beta),
                                              float(wb @ cov @ wb), n_b, cov=float(wa @ cov @ wb), df=df)
    return out, confounded


def _visit_mean_sides(collapsed: pd.DataFrame, key_cols: list[str], base: str, levels: list[str],
                      combos: list[tuple[str, ...]]):
    per_visit = collapsed.groupby([*key_cols, "g"], sort=False)["y"].mean()
    grouped = per_visit.groupby(level=list(range(len(key_cols))), sort=False).agg(["count", "mean", "var"])
    return _sides_from_groups(grouped, base, levels, combos)


def _explain(spec: Spec, factor: str, strategy: str | None, use_mixed: bool) -> dict[str, str]:
    knob = spec.knobs.get(factor)
    cost = knob.cost_class if knob else "none"
    if use_mixed:
        return {"analysis": "mixed_model",
                "why": (f"the plan is restricted (split-plot) and {factor}'s knob costs a {cost}, so {factor} "
                        "changes only between whole-plot visits: runs inside a visit are not independent "
                        "replicates. A linear mixed model with a random intercept per visit judges the effect "
                        "against visit-to-visit variation, with the whole-plot error degrees of freedom "
                        "(visits minus whole-plot settings).")}
    if strategy == "restricted":
        why = (f"{factor} is a cheap (sub-plot) factor of a restricted plan: its levels alternate inside "
               "each visit, so runs are the replicates; Welch's t-test on runs, Fieller's interval of the "
               "ratio of means.")
    elif strategy == "sequential":
        why = ("the plan ran in matrix order (sequential), so drift over time is confounded with the factors; "
               "Welch's t-test on runs is shown but treat it with suspicion.")
    else:
        why = ("every run was placed independently at random, so each run is a replicate: Welch's t-test "
               "(no equal-variance assumption) and Fieller's interval of the ratio of means.")
    return {"analysis": "welch", "why": why}


#: Appended to the explanation of every analysis of a replicate campaign on several hosts.
_REPLICATE_NOTE = (" Every host ran the whole plan (hosts_mode: replicate), so each comparison is made within one "
                   "host (the host column names it): a host's offset cannot leak into an effect, and an effect "
                   "found on one machine only shows as such. Holm's adjustment covers every host's rows.")


def _blocked_explanation(analysis: dict[str, str], factor: str, use_mixed: bool) -> dict[str, str]:
    """The explanation of a partition campaign's blocked analysis."""
    head = ("the runs of each cell were spread over identical hosts (hosts_mode: partition), so the hosts are "
            "blocks: any offset of a host would otherwise mix into the effect, and an uneven share of a "
            "fast host would fake one. ")
    if use_mixed:
        return {"analysis": "mixed_model_blocked_by_host",
                "why": head + analysis["why"].replace("A linear mixed model with", "A linear mixed model with one "
                                                      "fixed effect per host and")
                + " The hosts' effects take hosts minus one of those degrees of freedom."}
    return {"analysis": "blocked_by_host",
            "why": head + (f"Ordinary least squares on the runs of the two sides of each comparison with one mean "
                           f"per cell and one fixed effect per host (effect-coded, so a side's mean is its average "
                           f"over the hosts) removes the hosts' offsets; {factor}'s effect is judged against the "
                           f"residual run-to-run variation, with its degrees of freedom, and Fieller's interval "
                           f"of the ratio of means.")}


def _fallback_explanation(method: str, per_host: bool = False) -> dict[str, str]:
    if method == "welch_visit_means":
        out = {"analysis": method,
               "why": ("the mixed model could not be used for these metrics (see the notes), so each visit's "
                       "mean is one replicate and Welch's test compares visit means: still judged against "
                       "visit-to-visit variation.")}
    elif method == "blocked_by_host_visit_means":
        out = {"analysis": method,
               "why": ("the mixed model could not be used for these metrics (see the notes), so each visit's "
                       "mean is one replicate, and least squares with one mean per cell and one fixed effect per "
                       "host compares them: judged against visit-to-visit variation, host offsets removed.")}
    elif method == "mixed_model":
        out = {"analysis": method, "why": "the mixed model with a random intercept per visit (see above)."}
    elif method == "blocked_by_host":
        out = {"analysis": method,
               "why": ("fallback (see the notes): ordinary least squares on runs with one mean per cell and one "
                       "fixed effect per host, judged against run-to-run variation.")}
    else:
        out = {"analysis": method, "why": "fallback: Welch's t-test on runs (see the notes)."}
    if per_host:
        out["why"] += _REPLICATE_NOTE
    return out


def sentence(row: dict[str, Any], by: list[str]) -> str:
    """One comparison in plain words, e.g.
    ``ht=on vs off: +5.1% tps at cores=40 [95% CI +3.2, +7.0] – better (p=0.003, welch)``;
    with several hosts the host follows: ``... at cores=40 on h2 [95% CI ...``."""
    at = ", ".join(f"{b}={_text(row.get(by_column(b)))}" for b in by)
    where = f" at {at}" if at else ""
    host = row.get(HOST_COLUMN)
    if host is not None and not (isinstance(host, float) and math.isnan(host)) and str(host) != "":
        where += " on all hosts" if str(host) == ALL_HOSTS else f" on {_text(host)}"
    head = f"{row['factor']}={_text(row['level'])} vs {_text(row['baseline'])}"
    rel = row.get("rel_diff_pct")
    verdict = str(row.get("verdict"))
    if verdict == "insufficient_data" or rel is None or not np.isfinite(rel):
        return f"{head}: {row['metric']}{where}: not enough data to compare"
    # The interval beside a verdict is the Holm-adjusted one, so the two agree; a
    # descriptive metric's is its unadjusted 95 % interval (older tables: the same).
    adjusted = verdict != DESCRIPTIVE and "ci_low_adj_pct" in row
    lo, hi = (row.get("ci_low_adj_pct"), row.get("ci_high_adj_pct")) if adjusted else (row.get("ci_low_pct"),
                                                                                       row.get("ci_high_pct"))
    label = "Holm-adjusted CI" if adjusted else "95% CI"
    shown = pct_interval(lo, hi, suffix="", sep=", ")
    ci = f" [{label} {shown}]"
    p = row.get("p_value_unadjusted") if verdict == DESCRIPTIVE else row.get("p_value")
    ptext = "p<0.001" if p is not None and p < 0.001 else f"p={p:.3f}"
    if verdict == DESCRIPTIVE:
        ptext = "unadjusted " + ptext
    return f"{head}: {rel:+.1f}% {row['metric']}{where}{ci} – {verdict.replace('_', ' ')} ({ptext}, {row['analysis']})"


def _text(value: Any) -> str:
    return level_key(value) if not isinstance(value, str) else value
