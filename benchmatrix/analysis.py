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

Verdicts: ``better`` / ``worse`` when the adjusted p-value is below alpha and the
metric's direction is known, ``higher`` / ``lower`` when it is not,
``no_difference`` otherwise, and ``insufficient_data`` where a side has fewer than
two values (or visits), so no test was possible.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
from scipy import stats as sps

from benchmatrix.stats import (CONFIDENCE, effective_runs, fieller_ratio_ci, holm, metric_direction,
                               welch_test)

#: Default significance level of verdicts (``report.alpha``).
DEFAULT_ALPHA = 0.05
#: Cost classes whose knobs make a factor a whole-plot factor in a restricted plan.
WHOLE_PLOT_CLASSES = frozenset({"restart", "reboot"})
#: Beyond these sizes the mixed model is not attempted (fit time grows fast).
MIXED_MAX_CELLS = 300
MIXED_MAX_ROWS = 200_000

#: Columns of runs.csv that are not metrics.
_RUN_COLUMNS = frozenset({"seq", "host", "run_id", "cell_id", "replicate", "warmup", "control", "visit", "batch",
                          "attempt", "status", "reason", "started_at", "ended_at", "duration_s", "exit_code"})
#: Columns of comparisons.csv before the ``by`` factor columns ...
HEAD_COLUMNS = ["metric", "factor", "level", "baseline"]
#: ... and after them.
TAIL_COLUMNS = ["n_level", "n_baseline", "rel_diff_pct", "ci_low_pct", "ci_high_pct", "p_value",
                "analysis", "verdict", "unit", "better", "mean_level", "mean_baseline",
                "p_value_unadjusted", "df"]


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


def whole_plot_factors(spec: Any) -> list[str]:
    """Factors whose knob is costly (restart or reboot), in spec order."""
    return [f for f in spec.factor_names
            if f in spec.knobs and spec.knobs[f].cost_class in WHOLE_PLOT_CLASSES]


@dataclass
class Comparisons:
    """The comparisons of a report.

    Attributes:
        table: Rows of ``comparisons.csv`` (see :func:`comparison_columns`).
        config: ``report.compare`` as used (``None`` when the spec has none).
        explanations: One entry per analysis used: ``{analysis, metrics, why}``.
        notes: Other remarks (skipped levels, fallbacks).
        alpha: Significance level of the verdicts.
    """

    table: pd.DataFrame
    config: dict[str, Any] | None
    explanations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alpha: float = DEFAULT_ALPHA


def comparison_columns(by: list[str]) -> list[str]:
    """Columns of comparisons.csv for these ``by`` factors.

    A ``by`` factor whose name clashes with a fixed column is written as ``by_NAME``.
    """
    fixed = set(HEAD_COLUMNS) | set(TAIL_COLUMNS)
    return [*HEAD_COLUMNS, *[by_column(b, fixed) for b in by], *TAIL_COLUMNS]


def by_column(name: str, fixed: set[str] | None = None) -> str:
    fixed = fixed if fixed is not None else set(HEAD_COLUMNS) | set(TAIL_COLUMNS)
    return f"by_{name}" if name in fixed else name


def _empty(by: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in comparison_columns(by)})


def _ordered_levels(spec_levels: list[Any], present: list[str]) -> list[str]:
    keys = [level_key(v) for v in spec_levels]
    return [k for k in dict.fromkeys(keys) if k in present] + sorted(set(present) - set(keys))


def compare(spec: Any, runs: pd.DataFrame, metrics: list[str], units: dict[str, str] | None = None,
            alpha: float | None = None) -> Comparisons:
    """Compute every comparison that ``report.compare`` asks for.

    Args:
        spec: The loaded :class:`~benchmatrix.spec.Spec`.
        runs: Rows of ``runs.csv`` (every attempt; filtered to the effective runs).
        metrics: Metrics to compare (those without a column are skipped).
        units: Metric -> unit, copied into the table.
        alpha: Significance level; default ``report.alpha`` or 0.05.

    Returns:
        The comparisons, with the explanation of the analysis of each.
    """
    report_cfg = spec.data.get("report") or {}
    alpha = float(alpha if alpha is not None else report_cfg.get("alpha") or DEFAULT_ALPHA)
    cfg = report_cfg.get("compare")
    if not cfg:
        return Comparisons(_empty([]), None, alpha=alpha)
    factor, by = cfg["factor"], list(cfg.get("by") or [])
    result = Comparisons(_empty(by), dict(cfg, by=by), alpha=alpha)
    units = units or {}
    eff = effective_runs(runs) if len(runs) else runs
    metrics = [m for m in dict.fromkeys(metrics) if m in eff.columns]
    lacking = [f for f in (factor, *by) if f not in eff.columns]
    if eff.empty or not metrics or lacking:
        if lacking and not eff.empty:
            result.notes.append(f"no comparison: the runs lack factor column(s) {', '.join(lacking)}")
        return result

    declared = (spec.data.get("workload") or {}).get("metrics") or {}
    spec_factors = spec.data.get("factors") or {}
    fkey = level_keys(eff[factor])
    bkeys = [level_keys(eff[b]) for b in by]
    base = level_key(cfg["baseline"])
    levels = [lv for lv in _ordered_levels(spec_factors.get(factor, []), list(fkey.unique())) if lv != base]
    originals = _originals(spec_factors, eff, [factor, *by], [fkey, *bkeys])
    if base not in set(fkey):
        result.notes.append(f"no comparison: no measured run has the baseline {factor}={cfg['baseline']}")
        return result

    strategy = (spec.data.get("order") or {}).get("strategy")
    use_mixed = strategy == "restricted" and factor in whole_plot_factors(spec)
    analysis = _explain(spec, factor, strategy, use_mixed)

    keys = pd.DataFrame({"_f": fkey, **{f"_b{i}": k for i, k in enumerate(bkeys)}}, index=eff.index)
    key_cols = list(keys.columns)
    combos = (keys[key_cols[1:]].drop_duplicates() if by else pd.DataFrame(index=[0]))
    combo_list = _sort_combos(combos, [spec_factors.get(b, []) for b in by], len(by))

    rows: list[dict[str, Any]] = []
    used: dict[str, list[str]] = {}
    for metric in metrics:
        values = pd.to_numeric(eff[metric], errors="coerce").astype("float64")
        have = values.notna().to_numpy()
        if not have.any():
            continue
        method = analysis["analysis"]
        stats_by_side = None
        if use_mixed:
            stats_by_side, method, why = _mixed_sides(spec, eff[have], values[have], keys[have], key_cols,
                                                      factor, base, levels, combo_list)
            if why:
                result.notes.append(f"{metric}: {why}")
        if stats_by_side is None:
            stats_by_side = _welch_sides(values[have], keys[have], key_cols, base, levels, combo_list)
        used.setdefault(method, []).append(metric)
        direction = metric_direction(metric, declared)
        for (level, combo), s in stats_by_side.items():
            row = {"metric": metric, "factor": factor, "level": originals[0].get(level, level),
                   "baseline": originals[0].get(base, cfg["baseline"])}
            for i, b in enumerate(by):
                row[by_column(b)] = originals[i + 1].get(combo[i], combo[i])
            row.update(s)
            row.update({"analysis": method, "unit": units.get(metric, ""), "better": direction})
            rows.append(row)

    for method, mets in used.items():
        result.explanations.append({**(analysis if method == analysis["analysis"] else _fallback_explanation(method)),
                                    "metrics": mets})
    if not rows:
        return result
    table = pd.DataFrame(rows)
    table["p_value"] = holm(table["p_value_unadjusted"].to_numpy(dtype="float64"))
    table["verdict"] = _verdicts(table, alpha)
    result.table = table.reindex(columns=comparison_columns(by))
    return result


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


def _side_stats(mean_a, var_a, n_a, mean_b, var_b, n_b, cov=None, df=None) -> dict[str, Any]:
    """One comparison's numbers from the two sides' means and their (co)variances.

    With ``cov``/``df`` absent the sides are independent samples (Welch); otherwise
    ``var_*`` are already variances of the estimated means.
    """
    if cov is None:
        p, dfs = welch_test([mean_a], [var_a], [n_a], [mean_b], [var_b], [n_b])
        p, df = float(p[0]), float(dfs[0])
        va, vb, cov = (var_a / n_a if n_a else np.nan), (var_b / n_b if n_b else np.nan), 0.0
    else:
        va, vb = var_a, var_b
        se = math.sqrt(max(va + vb - 2 * cov, 0.0)) if np.isfinite(va + vb - 2 * cov) else np.nan
        if not np.isfinite(se) or df is None or not np.isfinite(df) or df < 1:
            p = np.nan
        elif se == 0:
            p = 1.0 if mean_a == mean_b else 0.0
        else:
            p = float(2 * sps.t.sf(abs(mean_a - mean_b) / se, df))
    rel = lo = hi = np.nan
    if np.isfinite(p) and mean_b != 0:
        rel = (mean_a / mean_b - 1) * 100
        if va == 0 and vb == 0:
            lo = hi = rel
        else:
            low, high = fieller_ratio_ci(mean_a, mean_b, va, vb, cov, df, CONFIDENCE)
            lo, hi = (low[0] - 1) * 100, (high[0] - 1) * 100
            if mean_b < 0:
                # A negative baseline flips the ratio's meaning; report the point only.
                lo = hi = np.nan
    return {"n_level": int(n_a), "n_baseline": int(n_b), "mean_level": mean_a, "mean_baseline": mean_b,
            "rel_diff_pct": rel, "ci_low_pct": lo, "ci_high_pct": hi, "p_value_unadjusted": p, "df": df}


def _welch_sides(values: pd.Series, keys: pd.DataFrame, key_cols: list[str], base: str,
                 levels: list[str], combos: list[tuple[str, ...]]) -> dict[tuple[str, tuple], dict[str, Any]]:
    grouped = values.groupby([keys[c].to_numpy() for c in key_cols], sort=False).agg(["count", "mean", "var"])
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


def _visit_groups(eff: pd.DataFrame) -> pd.Series | None:
    if "visit" not in eff.columns:
        return None
    visit = pd.to_numeric(eff["visit"], errors="coerce")
    if visit.isna().all():
        return None
    host = eff["host"].astype(str) if "host" in eff.columns else ""
    return host + "/" + visit.astype("Int64").astype(str)


def _mixed_sides(spec: Any, eff: pd.DataFrame, values: pd.Series, keys: pd.DataFrame, key_cols: list[str],
                 factor: str, base: str, levels: list[str], combos: list[tuple[str, ...]]):
    """Sides of a whole-plot comparison from a mixed model, or a fallback.

    Returns:
        ``(stats or None, analysis name, note)``; ``None`` stats means "use Welch".
    """
    groups = _visit_groups(eff)
    if groups is None:
        return None, "welch", "no visit numbers in runs.csv: mixed model impossible, Welch used"
    wp = [f for f in whole_plot_factors(spec) if f in eff.columns]
    setting = pd.Series(list(zip(*[level_keys(eff[f]) for f in wp])), index=eff.index).astype(str)
    frame = pd.DataFrame({"y": values.to_numpy(), "g": groups.to_numpy(), "cell": eff["cell_id"].to_numpy(),
                          "setting": setting.to_numpy(), **{c: keys[c].to_numpy() for c in key_cols}})
    collapsed = frame.groupby(["g", "cell"], sort=False).agg(
        y=("y", "mean"), setting=("setting", "first"), **{c: (c, "first") for c in key_cols}).reset_index()
    n_groups = collapsed["g"].nunique()
    n_settings = collapsed["setting"].nunique()
    df = float(n_groups - n_settings)
    cells = pd.Index(collapsed["cell"].unique())
    fit = None
    why = ""
    if len(cells) > MIXED_MAX_CELLS or len(collapsed) > MIXED_MAX_ROWS:
        why = f"too large for the mixed model ({len(cells)} cells, {len(collapsed)} visit means)"
    elif df < 1:
        why = f"only {n_groups} visits for {n_settings} whole-plot settings: no visit-to-visit variance to judge by"
    else:
        fit, why = _fit_mixed(collapsed, cells)
    if fit is None:
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
                            cov=float(wa @ cov @ wb), df=df)
            out[(level, combo)] = s
    return out, "mixed_model", ""


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


def _fit_mixed(collapsed: pd.DataFrame, cells: pd.Index) -> tuple[tuple[np.ndarray, np.ndarray] | None, str]:
    """Fit y ~ 0 + cell + (1 | visit) by REML; return (cell means, their covariance)."""
    from statsmodels.regression.mixed_linear_model import MixedLM

    codes = cells.get_indexer(collapsed["cell"])
    exog = np.zeros((len(collapsed), len(cells)))
    exog[np.arange(len(collapsed)), codes] = 1.0
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
    beta = shift + np.asarray(res.fe_params, dtype="float64") * scale
    cov = np.asarray(res.cov_params(), dtype="float64")[: len(cells), : len(cells)] * scale * scale
    if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(cov))):
        return None, "the fit gave no finite estimates"
    return (beta, cov), ""


def _visit_mean_sides(collapsed: pd.DataFrame, key_cols: list[str], base: str, levels: list[str],
                      combos: list[tuple[str, ...]]):
    per_visit = collapsed.groupby([*key_cols, "g"], sort=False)["y"].mean()
    grouped = per_visit.groupby(level=list(range(len(key_cols))), sort=False).agg(["count", "mean", "var"])
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


def _verdicts(table: pd.DataFrame, alpha: float) -> np.ndarray:
    p = table["p_value"].to_numpy(dtype="float64")
    rel = table["rel_diff_pct"].to_numpy(dtype="float64")
    diff = table["mean_level"].to_numpy(dtype="float64") - table["mean_baseline"].to_numpy(dtype="float64")
    sign = np.sign(np.where(np.isfinite(rel), rel, diff))
    better = table["better"].to_numpy(dtype=object)
    out = np.full(len(table), "no_difference", dtype=object)
    out[~np.isfinite(p)] = "insufficient_data"
    hit = np.isfinite(p) & (p < alpha)
    for i in np.flatnonzero(hit):
        up = sign[i] > 0
        if better[i] == "higher":
            out[i] = "better" if up else "worse"
        elif better[i] == "lower":
            out[i] = "worse" if up else "better"
        else:
            out[i] = "higher" if up else "lower"
    return out


def _explain(spec: Any, factor: str, strategy: str | None, use_mixed: bool) -> dict[str, str]:
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


def _fallback_explanation(method: str) -> dict[str, str]:
    if method == "welch_visit_means":
        return {"analysis": method,
                "why": ("the mixed model could not be used for these metrics (see the notes), so each visit's "
                        "mean is one replicate and Welch's test compares visit means: still judged against "
                        "visit-to-visit variation.")}
    return {"analysis": method, "why": "fallback: Welch's t-test on runs (see the notes)."}


def sentence(row: dict[str, Any], by: list[str]) -> str:
    """One comparison in plain words, e.g.
    ``ht=on vs off: +5.1% tps at cores=40 [95% CI +3.2, +7.0] – better (p=0.003, welch)``."""
    at = ", ".join(f"{b}={_text(row.get(by_column(b)))}" for b in by)
    head = f"{row['factor']}={_text(row['level'])} vs {_text(row['baseline'])}"
    rel = row.get("rel_diff_pct")
    if row.get("verdict") == "insufficient_data" or rel is None or not np.isfinite(rel):
        return f"{head}: {row['metric']}{' at ' + at if at else ''}: not enough data to compare"
    lo, hi = row.get("ci_low_pct"), row.get("ci_high_pct")
    ci = (f" [95% CI {lo:+.1f}, {hi:+.1f}]" if lo is not None and np.isfinite(lo) and hi is not None
          and np.isfinite(hi) else " [95% CI unbounded]")
    verdict = str(row.get("verdict")).replace("_", " ")
    p = row.get("p_value")
    ptext = "p<0.001" if p is not None and p < 0.001 else f"p={p:.3f}"
    return f"{head}: {rel:+.1f}% {row['metric']}{' at ' + at if at else ''}{ci} – {verdict} ({ptext}, {row['analysis']})"


def _text(value: Any) -> str:
    return level_key(value) if not isinstance(value, str) else value


def write_analysis(exp_dir: str | Path, spec: Any, runs: pd.DataFrame,
                   records: Iterable[dict[str, Any]] | None = None) -> None:
    """Write ``comparisons.csv`` and, given the records, ``record_notes.csv``.

    Meant for ``tasks.collect()``, which already holds every record: the report
    then reads the notes instead of re-reading a record.json per run (too slow for
    a million runs). The report rewrites ``comparisons.csv`` itself, so calling
    this is optional for the comparisons.

    Args:
        exp_dir: ``results/NAME``.
        spec: The loaded spec.
        runs: Rows of ``runs.csv`` as written.
        records: The run records (all attempts), if at hand.
    """
    from benchmatrix import sanity
    from benchmatrix.results import atomic_write

    exp_dir = Path(exp_dir)
    metric_cols = [c for c in runs.columns if c not in set(spec.factor_names) | _RUN_COLUMNS]
    wanted = [m for m in (spec.data.get("report") or {}).get("metrics") or [] if m in runs.columns]
    result = compare(spec, runs, wanted or sorted(metric_cols))
    atomic_write(exp_dir / "comparisons.csv", result.table.to_csv(index=False))
    if records is not None:
        notes = sanity.record_notes(records)
        atomic_write(exp_dir / sanity.RECORD_NOTES, notes.to_csv(index=False))
