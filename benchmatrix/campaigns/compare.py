"""Compare two campaigns of an experiment: ``bmx compare A B``.

Cells are matched by cell id and host (each host against itself), and every metric of
every matched cell becomes one row: the relative change of B against A in percent (a
ratio of geometric means for a positive metric, :mod:`benchmatrix.analyze.scale`), judged
by the verdict engine (:func:`benchmatrix.analyze.verdict.judge`) as the report's
comparisons are: Welch's test on the two campaigns' effective runs (on log values for a
positive metric), Holm's adjustment over the family of
:func:`benchmatrix.analyze.comparisons.family_metrics` (every row of those metrics, all
cells and hosts together) with Holm-consistent intervals, the practical threshold, the
metric's direction from :func:`benchmatrix.analyze.stats.metric_direction`,
``descriptive`` outside the family.

The comparability guard looks at the provenance of both sides first:

* the **measurement** - the spec keys that define what a run measures
  (:data:`benchmatrix.campaigns.store.MEASUREMENT_KEYS`, from each campaign's ``spec.json``) and, per cell and
  host, the workload as the records hold it (role, rendered argv, before_run actions),
  without what the records observe of a run (:data:`WORKLOAD_OBSERVATIONS`: the seconds
  and output of before_run, timings). Any difference refuses the comparison: exit 3
  and one line per differing field (``workload.vars.filename: /a → /b``,
  :mod:`benchmatrix.report.diff`);
* the **environment** - host facts (:data:`ENV_FACTS`: kernel, CPU model, memory,
  tool version, ...) and the knobs' actual states, per host and cell. Differences are
  what a user usually wants to compare; they are shown and named beside each verdict
  (``kernel 6.1 -> 6.6``).

Campaigns vary more than their runs (a reboot, the day's load, a shifting SAN). Every
comparison adds each metric's campaign-to-campaign variance to its runs' noise: the
prior ``report.campaign_sd`` pooled with the estimate from the experiment's comparable
campaigns besides B, A among them, an outlying one left out
(:mod:`benchmatrix.analyze.campaign_model`). Which campaigns count is chosen
(``--history``, :func:`choose_history`): by default those with A's spec digest and host
state, on A's side of the last step; the campaigns used are named. Host state that
differs between A and B (runs.csv's ``env_*``, the load before the runs) is listed with
the environment, and a busy host is named in one line. compare.csv's ``basis`` (``prior`` or
``pooled``) and ``campaign_sd_pct`` and a note say what was used (docs/report.md,
"Across campaigns").

Exit codes: 0 nothing worse, 1 some verdict ``worse`` (or ``inconclusive`` with
``--fail-on-inconclusive``), 2 a usage error, 3 not comparable.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmatrix import layout
from benchmatrix.analyze import campaign_model
from benchmatrix.analyze import verdict as engine
from benchmatrix.analyze.bounds import pct_interval
from benchmatrix.analyze.campaign_model import CampaignVariance
from benchmatrix.analyze.comparisons import family_metrics, level_key
from benchmatrix.analyze.explain import moved_between
from benchmatrix.analyze.scale import LINEAR, LOG, metric_scales
from benchmatrix.analyze.stats import effective_runs, metric_direction, welch_df
from benchmatrix.campaigns.store import (
    CAMPAIGNS_DIR,
    MEASUREMENT_KEYS,
    SPEC_FILE,
    Campaign,
    dig,
    find_campaign,
    list_campaigns,
    measured,
    read_campaign,
)
from benchmatrix.errors import BenchmatrixError
from benchmatrix.report.diff import differences, grouped, without
from benchmatrix.results.tables import metric_units
from benchmatrix.spec.load import DEFAULT_ALPHA, DEFAULT_CAMPAIGN_SD, DEFAULT_THRESHOLD, Spec

#: Host facts that describe the environment a campaign ran in.
ENV_FACTS = ("kernel", "cpu_model", "cpu_count", "sockets", "cores", "threads_per_core", "memory_mb",
             "distribution", "architecture", "python", "tool_version", "smt", "online_cpus", "filesystem",
             "block_device", "io_scheduler", "read_ahead_kb")
#: Keys of a record's ``workload`` that observe how a run's preparation went, not what
#: it measured; the guard ignores them wherever they occur in it. Read off the records
#: the batch job writes (benchmatrix/execute/rules.py, from the batch runner's
#: result.json): each ``before_run`` item is ``{action, seconds, error, output}``, and
#: only the action is the measurement: ``seconds`` is how long sync/drop_caches/fstrim
#: took (it differs in every run), ``output`` what fstrim reported it trimmed where,
#: ``error``/``exit_code`` how it went (null in every ok run, the only ones compared).
#: ``affinity.pinned`` counts the server threads pinned at that moment, and
#: ``affinity_applied`` is the CPU set read back from the process: the host's doing.
WORKLOAD_OBSERVATIONS = frozenset({"seconds", "output", "error", "exit_code", "pinned", "affinity_applied"})
#: Key name endings and beginnings that mark a timing or the host's load (``wait_s``,
#: ``elapsed_seconds``, ``loadavg``), so that a field of that kind added to the records
#: later is an observation too instead of refusing every comparison.
_OBSERVATION_SUFFIXES, _OBSERVATION_PREFIXES = ("_s", "_seconds", "_ms", "_ns"), ("load",)
#: Columns of runs.csv that are not metrics.
_RUN_COLUMNS = layout.NON_METRIC_COLUMNS
#: Columns of compare.csv after the factor columns.
TAIL_COLUMNS = ["host", "metric", "unit", "better", "n_a", "n_b", "mean_a", "mean_b", "rel_diff_pct",
                "ci_low_pct", "ci_high_pct", "ci_low_adj_pct", "ci_high_adj_pct", "p_value",
                "p_value_unadjusted", "df", "verdict", "environment", "moved_with", "scale", "threshold_pct",
                "detectable_pct", "basis", "campaign_sd_pct"]
#: Exit status of ``bmx compare`` when the campaigns are not comparable (2 stays a
#: usage error or an invalid spec, as for every command).
NOT_COMPARABLE = 3
#: Columns of provenance.csv.
PROVENANCE_COLUMNS = ["kind", "scope", "host", "cell_id", "what", "a", "b"]
#: Lines of differences a refusal prints; provenance.csv holds them all.
_SHOWN = 20
#: Rows of the table ``bmx compare`` prints; compare.csv and ``--json`` have them all.
_TABLE_ROWS = 40


class NotComparable(BenchmatrixError):
    """Two campaigns cannot be compared (exit status :data:`NOT_COMPARABLE`)."""

    exit_code = NOT_COMPARABLE


@dataclass
class Side:
    """What one campaign brings to a comparison."""

    campaign: Campaign
    runs: pd.DataFrame
    factor_names: list[str]
    spec: dict[str, Any] | None
    facts: dict[str, dict[str, Any]]
    records: list[dict[str, Any]]


@dataclass
class CampaignComparison:
    """The comparison of campaign B against campaign A.

    Attributes:
        a: The baseline campaign.
        b: The campaign compared with it.
        table: Rows of compare.csv (:func:`compare_columns`), empty when refused.
        measurement: Differences of the measurement (rows of provenance.csv, kind
            ``measurement``); any refuses the comparison.
        environment: Differences of the environment (kind ``environment``).
        only_a: ``(cell_id, host)`` pairs measured only in A; ``only_b`` likewise.
        factor_names: Factor columns of the table.
        alpha: Significance level of the verdicts.
        family: Metrics in Holm's family; ``descriptive`` the other compared ones.
        notes: Remarks for the reader.
    """

    a: Campaign
    b: Campaign
    table: pd.DataFrame
    measurement: list[dict[str, Any]] = field(default_factory=list)
    environment: list[dict[str, Any]] = field(default_factory=list)
    only_a: list[tuple[str, str]] = field(default_factory=list)
    only_b: list[tuple[str, str]] = field(default_factory=list)
    factor_names: list[str] = field(default_factory=list)
    alpha: float = DEFAULT_ALPHA
    family: list[str] = field(default_factory=list)
    descriptive: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    basis: str = ""
    fail_on_inconclusive: bool = False
    history: campaign_model.History | None = None
    history_names: dict[str, str] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """True when the two campaigns are not comparable (the measurement differs or
        no cell was measured in both)."""
        return bool(self.measurement) or self.table.empty

    @property
    def exit_code(self) -> int:
        """0 nothing worse, 1 some verdict worse (or inconclusive, with
        ``fail_on_inconclusive``), :data:`NOT_COMPARABLE` when refused."""
        if self.refused:
            return NOT_COMPARABLE
        failing = {"worse", "inconclusive"} if self.fail_on_inconclusive else {"worse"}
        return 1 if self.table["verdict"].isin(failing).any() else 0

    def counts(self) -> dict[str, int]:
        """Rows per verdict."""
        return {str(k): int(v) for k, v in self.table["verdict"].value_counts().items()} if len(self.table) else {}


def compare_columns(factor_names: list[str]) -> list[str]:
    """Columns of compare.csv: cell_id, the factors, then :data:`TAIL_COLUMNS`."""
    return ["cell_id", *[f"factor_{f}" if f in TAIL_COLUMNS or f == "cell_id" else f for f in factor_names],
            *TAIL_COLUMNS]


# ---------------------------------------------------------------- loading

def load_side(campaign: Campaign) -> Side:
    """Read what a comparison needs from a campaign directory.

    Raises:
        BenchmatrixError: the campaign has no runs.csv yet.
    """
    from benchmatrix.plan.design import read_plan
    from benchmatrix.results.records import load_records

    path = campaign.path
    runs_csv, plan_csv = path / layout.RUNS, path / layout.PLAN
    if not runs_csv.is_file() or not plan_csv.is_file() or not runs_csv.stat().st_size:
        raise NotComparable(f"{path}: campaign {campaign.name} has no runs.csv yet; run or report it first")
    plan, factor_names = read_plan(plan_csv)
    runs = pd.read_csv(runs_csv)
    try:
        spec = json.loads((path / SPEC_FILE).read_text())
    except (OSError, ValueError):
        spec = None
    facts = {}
    for fp in sorted((path / "hosts").glob("*/facts.json")):
        try:
            facts[fp.parent.name] = json.loads(fp.read_text())
        except (OSError, ValueError):
            continue
    return Side(campaign, runs, factor_names, spec, facts, load_records(path, plan))


# ---------------------------------------------------------------- provenance

def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _measured_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == "ok" and not r.get("warmup") and not r.get("control")]


def _per_cell_host(records: list[dict[str, Any]], get) -> dict[tuple[str, str], list[Any]]:
    """(cell_id, host) -> the distinct values ``get`` finds in its measured records."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in _measured_records(records):
        value = get(rec)
        out.setdefault((str(rec.get("cell_id")), str(rec.get("host"))), {})[_text(value)] = value
    return {k: list(v.values()) for k, v in out.items()}


def is_observation(key: str) -> bool:
    """True for a key of a record's workload that observes the run rather than defines
    it (:data:`WORKLOAD_OBSERVATIONS`, or a timing or load by its name)."""
    return key in WORKLOAD_OBSERVATIONS or key.endswith(_OBSERVATION_SUFFIXES) or key.startswith(
        _OBSERVATION_PREFIXES)


def _workload_of(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's workload as the measurement: role, argv, before_run actions, affinity."""
    return without(rec.get("workload") or {}, is_observation)


def _knobs_of(rec: dict[str, Any]) -> dict[str, Any]:
    knobs = rec.get("knobs") or {}
    return {k: {"actual": v.get("actual") if isinstance(v, dict) else v} for k, v in sorted(knobs.items())}


def _rows(kind: str, scope: str, host: str, cell: str, diffs: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [{"kind": kind, "scope": scope, "host": host, "cell_id": cell, "what": what, "a": a, "b": b}
            for what, a, b in diffs]


def provenance(a: Side, b: Side, pairs: list[tuple[str, str]]) -> tuple[list[dict], list[dict], list[str]]:
    """The measurement and environment differences of two campaigns.

    Args:
        a: The baseline side; b: the other.
        pairs: The ``(cell_id, host)`` pairs measured in both.

    Returns:
        ``(measurement, environment, notes)``; each difference is a dict with the
        keys of :data:`PROVENANCE_COLUMNS`, one per differing field: ``what`` is its
        dotted path (``workload.vars.filename``, ``workload.argv.4``,
        ``knobs.read_ahead_kb.actual``), ``a`` and ``b`` its values, cut to 80
        characters.
    """
    measurement: list[dict[str, Any]] = []
    environment: list[dict[str, Any]] = []
    notes: list[str] = []
    if a.spec is not None and b.spec is not None:
        for key in MEASUREMENT_KEYS:
            measurement += _rows("measurement", "spec", "", "",
                                 differences(measured(a.spec, key), measured(b.spec, key), key))
    else:
        missing = " and ".join(s.campaign.name for s in (a, b) if s.spec is None)
        notes.append(f"{missing}: no {SPEC_FILE} (a campaign planned before it was kept): the spec's measurement "
                     f"keys were not compared, only the workload each run's record holds")
    wa, wb = _per_cell_host(a.records, _workload_of), _per_cell_host(b.records, _workload_of)
    ka, kb = _per_cell_host(a.records, _knobs_of), _per_cell_host(b.records, _knobs_of)
    for cell, host in pairs:
        x, y = wa.get((cell, host), []), wb.get((cell, host), [])
        if x and y:
            measurement += _rows("measurement", "cell", host, cell, differences(x, y, "workload", variants=True))
        x, y = ka.get((cell, host), []), kb.get((cell, host), [])
        # A side that recorded no knob states (an older record) has nothing to compare.
        if any(x) and any(y):
            environment += _rows("environment", "cell", host, cell, differences(x, y, "knobs", variants=True))
    for host in sorted({h for _, h in pairs}):
        fa = a.facts.get(host) or _record_facts(a.records, host)
        fb = b.facts.get(host) or _record_facts(b.records, host)
        for key in ENV_FACTS:
            va, vb = fa.get(key), fb.get(key)
            if _text(va) != _text(vb):
                environment.append({"kind": "environment", "scope": "host", "host": host, "cell_id": "",
                                    "what": key, "a": _text(va), "b": _text(vb)})
        va, vb = _versions(a.records, host), _versions(b.records, host)
        if va != vb and va and vb:
            environment.append({"kind": "environment", "scope": "host", "host": host, "cell_id": "",
                                "what": "benchmatrix_version", "a": ", ".join(sorted(va)), "b": ", ".join(sorted(vb))})
    return measurement, environment, notes


def _record_facts(records: list[dict[str, Any]], host: str) -> dict[str, Any]:
    for rec in records:
        if rec.get("host") == host and rec.get("host_facts"):
            return rec["host_facts"]
    return {}


def _versions(records: list[dict[str, Any]], host: str) -> set[str]:
    return {str(r.get("benchmatrix_version")) for r in records
            if r.get("host") == host and r.get("benchmatrix_version")}


def _changes_by_row(environment: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(cell_id, host) -> "kernel 6.1 -> 6.6; ..." (host-wide changes under cell "")."""
    out: dict[tuple[str, str], list[str]] = {}
    for d in environment:
        out.setdefault((d["cell_id"], d["host"]), []).append(f"{d['what']} {d['a']} -> {d['b']}")
    return {k: "; ".join(v) for k, v in out.items()}


# ---------------------------------------------------------------- statistics

def _metrics(side: Side) -> list[str]:
    return [c for c in side.runs.columns if c not in _RUN_COLUMNS and c not in set(side.factor_names)]


def _groups(eff: pd.DataFrame, metric: str, scale: str = LINEAR) -> pd.DataFrame:
    """count, mean and var of ``metric`` per (cell_id, host), on the comparison's scale.

    Sums per group with numpy (two passes for the variance), not a pandas group-by:
    a comparison across campaigns computes this for every metric of every campaign
    of the history, and the Monte Carlo tests for thousands of campaigns.
    """
    values = pd.to_numeric(eff[metric], errors="coerce").to_numpy(dtype="float64")
    if scale == LOG:
        with np.errstate(invalid="ignore", divide="ignore"):
            values = np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)
    cells = eff["cell_id"].astype(str).to_numpy()
    hosts = eff["host"].astype(str).to_numpy() if "host" in eff.columns else np.full(len(eff), "", dtype=object)
    have = np.isfinite(values)
    if not have.any():
        return pd.DataFrame({"count": [], "mean": [], "var": []},
                            index=pd.MultiIndex.from_arrays([[], []], names=["cell_id", "host"]))
    pairs = pd.MultiIndex.from_arrays([cells[have], hosts[have]], names=["cell_id", "host"])
    codes, uniques = pd.factorize(pairs, sort=True)
    y = values[have]
    count = np.bincount(codes, minlength=len(uniques)).astype("float64")
    mean = np.bincount(codes, weights=y, minlength=len(uniques)) / count
    dev = y - mean[codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(count > 1, np.bincount(codes, weights=dev * dev, minlength=len(uniques)) / (count - 1), np.nan)
    return pd.DataFrame({"count": count.astype("int64"), "mean": mean, "var": var},
                        index=pd.MultiIndex.from_tuples(list(uniques), names=["cell_id", "host"]))


def _side_frame(both: pd.DataFrame) -> pd.DataFrame:
    """:func:`benchmatrix.analyze.comparisons._side_stats` for every row at once: B
    (``_b``) is the level, A (``_a``) the baseline; independent samples (Welch)."""
    na, ma, va = (both[f"{c}_a"].to_numpy(dtype="float64") for c in ("count", "mean", "var"))
    nb, mb, vb = (both[f"{c}_b"].to_numpy(dtype="float64") for c in ("count", "mean", "var"))
    with np.errstate(invalid="ignore", divide="ignore"):
        qa, qb = va / na, vb / nb
        df = np.where((na >= 2) & (nb >= 2), welch_df(vb, nb, va, na), np.nan)
    se2 = qa + qb
    return pd.DataFrame({"n_level": nb.astype("int64"), "n_baseline": na.astype("int64"), "mean_level": mb,
                         "mean_baseline": ma, "df": df, "_est": mb - ma, "_se2": se2, "_va": qb, "_vb": qa,
                         "_cov": 0.0, "_constant": (na >= 2) & (nb >= 2) & (va == 0) & (vb == 0),
                         "_units": np.minimum(na, nb)}, index=both.index)


def campaign_basis(history: list[pd.DataFrame], metric: str, scale: str,
                   prior_sd: float = DEFAULT_CAMPAIGN_SD) -> CampaignVariance:
    """The campaign-to-campaign variance of one metric: the prior ``prior_sd`` pooled
    with the history's campaigns (:func:`benchmatrix.analyze.campaign_model.model`)."""
    stats = [_groups(eff, metric, scale) for eff in history if metric in eff.columns]
    return campaign_model.model(stats, prior_sd, relative=scale != LOG)


# shape: two runs tables and the comparison's options, each with a default; a parameter object would only rename them
def compare_frames(runs_a: pd.DataFrame, runs_b: pd.DataFrame, metrics: list[str], family: list[str],
                   declared: dict[str, Any] | None = None, units: dict[str, str] | None = None,
                   alpha: float = DEFAULT_ALPHA, thresholds: dict[str, float] | float = DEFAULT_THRESHOLD,
                   history: list[pd.DataFrame] | None = None,
                   campaign_sd: Mapping[str, float] | float = DEFAULT_CAMPAIGN_SD) -> pd.DataFrame:
    """Compare two runs tables cell by cell and host by host (the statistics only).

    Positive metrics are compared as ratios of geometric means (Welch on the log
    values), the others as differences (:mod:`benchmatrix.analyze.scale`). Campaigns
    vary more than their runs: every comparison adds each metric's campaign-to-campaign
    variance (twice: each side's mean moves by it), the prior ``campaign_sd`` pooled
    with what ``history`` (the effective runs of the experiment's comparable campaigns
    other than B, A among them) says (:mod:`benchmatrix.analyze.campaign_model`; basis
    ``prior`` without a usable history, else ``pooled``), with the t quantile on
    Welch-Satterthwaite's degrees of freedom of the sum. The verdict engine
    (:func:`benchmatrix.analyze.verdict.judge`) does the rest.

    Args:
        runs_a: Rows of A's runs.csv (every attempt; the effective runs are used).
        runs_b: Rows of B's runs.csv.
        metrics: Metrics to compare (those missing on a side are skipped).
        family: Metrics of Holm's family; the others get verdict ``descriptive``.
        declared: ``workload.metrics`` (for each metric's direction and scale).
        units: Metric -> unit.
        alpha: Significance level.
        thresholds: The practical threshold per metric (a fraction), or one for all.
        history: Effective runs of the experiment's campaigns other than B.
        campaign_sd: The prior campaign SD (a fraction) per metric (key ``default``
            for the others), or one for all: ``report.campaign_sd``.

    Returns:
        One row per (cell_id, host, metric) measured in both: ``cell_id, host, metric,
        unit, better, n_a, n_b, mean_a, mean_b`` (geometric means for the log scale),
        ``rel_diff_pct`` (B vs A), both intervals, ``p_value`` (Holm-adjusted),
        ``p_value_unadjusted, df, verdict, scale, threshold_pct, detectable_pct, basis,
        campaign_sd_pct``.
    """
    eff_a, eff_b = effective_runs(runs_a), effective_runs(runs_b)
    common = [m for m in dict.fromkeys(metrics) if m in eff_a.columns and m in eff_b.columns]
    scales, _ = metric_scales(pd.concat([eff_a[common], eff_b[common]], ignore_index=True), common, declared, units)
    rows = []
    models: dict[str, CampaignVariance] = {}
    for metric in common:
        scale = scales[metric]
        ga, gb = _groups(eff_a, metric, scale), _groups(eff_b, metric, scale)
        direction = metric_direction(metric, declared)
        both = ga.add_suffix("_a").join(gb.add_suffix("_b"), how="inner")
        if both.empty:
            continue
        basis = campaign_basis(history or [], metric, scale, _prior_sd(campaign_sd, metric))
        # B is the "level", A the "baseline": rel_diff = B vs A.
        part = _side_frame(both)
        # Runs without variation (to rounding level) leave nothing to judge by, whatever
        # the campaigns add: tell them by the runs' own spread.
        part["_constant"] = part["_constant"] | engine.near_constant(
            part["_se2"], part["mean_level"], part["mean_baseline"], np.full(len(part), scale, dtype=object))
        # On the difference scale the variance is relative: scaled by A's level squared.
        scale_sq = 1.0 if scale == LOG else part["mean_baseline"].to_numpy() ** 2
        part["_se2"], part["df"] = engine.add_campaign_variance(part["_se2"], part["df"], basis.variance,
                                                                basis.dof, scale_sq)
        extra = basis.variance * scale_sq  # each side's mean moves by it
        part["_va"], part["_vb"] = part["_va"] + extra, part["_vb"] + extra
        part.insert(0, "metric", metric)
        part = part.assign(unit=(units or {}).get(metric, ""), better=direction, _scale=scale,
                           _basis_text=basis.kind, campaign_sd_pct=basis.sd_pct)
        rows.append(part.reset_index())
        models[metric] = basis
    if not rows:
        return pd.DataFrame(columns=["cell_id", "host", "metric", "unit", "better", "n_a", "n_b", "mean_a", "mean_b",
                                     "rel_diff_pct", "ci_low_pct", "ci_high_pct", "ci_low_adj_pct",
                                     "ci_high_adj_pct", "p_value", "p_value_unadjusted", "df", "verdict", "scale",
                                     "threshold_pct", "detectable_pct", "basis", "campaign_sd_pct"])
    table = pd.concat(rows, ignore_index=True)
    engine.judge(table, set(family), alpha, thresholds)
    table["basis"] = table["_basis_text"]
    table = table.rename(columns={"n_level": "n_b", "n_baseline": "n_a", "mean_level": "mean_b",
                                  "mean_baseline": "mean_a"})
    table = table[[c for c in table.columns if not c.startswith("_")]]
    table.attrs["campaign_models"] = models
    return table


def _prior_sd(campaign_sd: Mapping[str, float] | float, metric: str) -> float:
    if isinstance(campaign_sd, Mapping):
        return float(campaign_sd.get(metric, campaign_sd.get("default", DEFAULT_CAMPAIGN_SD)))
    return float(campaign_sd)


def _units(side: Side) -> dict[str, str]:
    """Metric -> unit of one side, by collect's rule (:func:`benchmatrix.results.tables.metric_units`)."""
    seen = {m: v.get("unit") for rec in side.records for m, v in (rec.get("metrics") or {}).items()
            if isinstance(v, dict)}
    return metric_units(dig(side.spec, "workload.metrics"), seen)


def history_runs(a: Campaign, b: Campaign, spec_a: dict[str, Any] | None) -> list[tuple[Campaign, pd.DataFrame]]:
    """Every campaign of B's experiment but B that measured what A measured (the same
    measurement keys in spec.json, or no spec.json to tell), A included, oldest first,
    with its effective runs: the candidates for the history
    (:func:`benchmatrix.analyze.campaign_model.select_history` chooses among them)."""
    out = []
    for c in list_campaigns(experiment_dir_of(b)):
        if c.path.resolve() == b.path.resolve():
            continue
        if c.path.resolve() == a.path.resolve():
            c, runs_csv = a, a.path / layout.RUNS
        else:
            try:
                other = json.loads((c.path / SPEC_FILE).read_text())
            except (OSError, ValueError):
                other = None
            if spec_a is not None and other is not None and any(
                    _text(measured(spec_a, k)) != _text(measured(other, k)) for k in MEASUREMENT_KEYS):
                continue
            runs_csv = c.path / layout.RUNS
        try:
            runs = pd.read_csv(runs_csv)
        except (OSError, ValueError):
            continue
        eff = effective_runs(runs)
        if len(eff):
            out.append((c, eff))
    return out


def _host_facts(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for fp in sorted((path / "hosts").glob("*/facts.json")):
        try:
            out[fp.parent.name] = json.loads(fp.read_text())
        except (OSError, ValueError):
            continue
    return out


def _state_text(values: pd.Series) -> str:
    """A host-state column of one host's runs as one text: its distinct values joined."""
    # A column with a gap is read as floats: 1.0 is the 1 another campaign shows.
    seen = sorted({str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip()
                   for v in values.dropna() if str(v).strip()})
    return ", ".join(seen)


def campaign_summary(c: Campaign, eff: pd.DataFrame, groups_a: dict[str, pd.DataFrame] | None = None,
                     scales: dict[str, str] | None = None) -> campaign_model.CampaignSummary:
    """What choosing a history needs of one campaign: its spec digest, each host's state
    (runs.csv's ``env_*`` columns, the kernel and CPUs from its facts), its median load
    before the runs, and its level against A (``groups_a``: A's :func:`_groups` per metric)."""
    facts = _host_facts(c.path)
    hosts_col = eff["host"].astype(str) if "host" in eff.columns else pd.Series("", index=eff.index)
    states: dict[str, dict[str, str]] = {}
    load: dict[str, float] = {}
    cpus: dict[str, float] = {}
    for host in sorted(set(hosts_col)):
        mine = eff[(hosts_col == host).to_numpy()]
        state = {f: _state_text(mine[f"env_{f}"]) if f"env_{f}" in mine.columns else ""
                 for f in campaign_model.HOST_STATE_FIELDS if f != "kernel"}
        state["kernel"] = str((facts.get(host) or {}).get("kernel") or "")
        states[host] = state
        if "env_load_before" in mine.columns:
            load[host] = float(pd.to_numeric(mine["env_load_before"], errors="coerce").median())
        try:
            cpus[host] = float((facts.get(host) or {}).get("cpu_count"))
        except (TypeError, ValueError):
            cpus[host] = float("nan")
    level = campaign_level(eff, groups_a or {}, scales or {})
    return campaign_model.CampaignSummary(c.id, c.name, str(c.meta.get("spec_digest") or ""), states, load, cpus,
                                          level)


def campaign_level(eff: pd.DataFrame, groups_a: dict[str, pd.DataFrame], scales: dict[str, str]) -> float:
    """A campaign's level against A: the median over every metric and series both hold
    of its mean's log ratio to A's (the relative difference on the difference scale).

    Args:
        eff: The campaign's effective runs.
        groups_a: A's :func:`_groups` per metric.
        scales: Metric -> scale (``log`` when missing).
    """
    offsets: list[float] = []
    for metric, ga in groups_a.items():
        if metric not in eff.columns:
            continue
        scale = scales.get(metric, LOG)
        both = ga[["mean"]].join(_groups(eff, metric, scale)[["mean"]].add_suffix("_c"), how="inner")
        dev = both["mean_c"] - both["mean"]
        if scale != LOG:
            dev = dev / both["mean"].abs()
        offsets += [x for x in dev.to_numpy(dtype="float64") if math.isfinite(x)]
    return float(np.median(offsets)) if offsets else float("nan")


def choose_history(a: Campaign, b: Campaign, spec_a: dict[str, Any] | None, metrics: list[str],
                   rule: str | int | list[str] = "auto", prior_sd: float | None = None
                   ) -> tuple[campaign_model.History, list[pd.DataFrame], dict[str, Campaign],
                              campaign_model.CampaignSummary, campaign_model.CampaignSummary]:
    """The history of a comparison by ``rule`` (``--history``): the choice, the chosen
    campaigns' effective runs, the candidates by id, and A's and B's summaries.
    ``prior_sd``: the spec's ``report.campaign_sd`` for the step test (its default when None)."""
    candidates = history_runs(a, b, spec_a)
    eff_a = next((eff for c, eff in candidates if c is a), None)
    if eff_a is None:
        eff_a = effective_runs(pd.read_csv(a.path / layout.RUNS))
    scales = {}
    groups_a = {}
    for m in metrics:
        if m in eff_a.columns:
            values = pd.to_numeric(eff_a[m], errors="coerce")
            scales[m] = LOG if (values.dropna() > 0).all() else LINEAR
            groups_a[m] = _groups(eff_a, m, scales[m])
    summaries = {c.id: campaign_summary(c, eff, groups_a, scales) for c, eff in candidates}
    sum_a = summaries.get(a.id) or campaign_summary(a, eff_a, groups_a, scales)
    try:
        eff_b = effective_runs(pd.read_csv(b.path / layout.RUNS))
    except (OSError, ValueError):
        eff_b = eff_a.iloc[:0]
    sum_b = campaign_summary(b, eff_b)
    chosen = campaign_model.select_history(sum_a, [summaries[c.id] for c, _ in candidates], rule, prior_sd)
    used = set(chosen.used)
    return (chosen, [eff for c, eff in candidates if c.id in used], {c.id: c for c, _ in candidates}, sum_a,
            sum_b)


def host_state_steps(campaigns: list[Campaign]) -> list[dict[str, str]]:
    """Where the host state changed along an experiment's campaigns (the site's history
    page): for each campaign whose host state differs from the campaign before it
    (:func:`benchmatrix.analyze.campaign_model.host_state_changes`) or whose host, or the
    previous one's, was busy, ``{campaign, previous, changes, busy}`` as text. A campaign
    without a readable runs.csv is passed over.

    Args:
        campaigns: The experiment's campaigns, oldest first.
    """
    out = []
    prev = None
    for c in campaigns:
        try:
            eff = effective_runs(pd.read_csv(c.path / layout.RUNS))
        except (OSError, ValueError, BenchmatrixError):  # unreadable or without run states: nothing to tell
            continue
        if eff.empty:
            continue
        now = campaign_summary(c, eff)
        if prev is not None:
            changes = campaign_model.host_state_changes(prev, now)
            busy = campaign_model.busy_hosts(prev, now)
            if changes or busy:
                out.append({"campaign": now.name, "previous": prev.name,
                            "changes": "; ".join(f"{f} {va} -> {vb} on {h}" for h, f, va, vb in changes),
                            "busy": " ".join(busy)})
        prev = now
    return out


def _history_note(chosen: campaign_model.History, names: dict[str, str]) -> str:
    """One sentence naming the campaigns the history used and why the others were left out."""
    used = ", ".join(names.get(k, k) for k in chosen.used) or "none (the prior alone)"
    out = f"history ({chosen.rule}, --history): {used}"
    if chosen.left_out and chosen.rule != "none":
        out += "; left out: " + "; ".join(f"{names.get(k, k)} ({why})" for k, why in chosen.left_out)
    return out


def compare_campaigns(a: Campaign, b: Campaign, alpha: float | None = None,
                      threshold: float | None = None,
                      history: str | int | list[str] = "auto") -> CampaignComparison:
    """Compare campaign ``b`` against campaign ``a`` (see the module docstring).

    Args:
        a: The baseline campaign.
        b: The campaign compared with it.
        alpha: Significance level; default B's ``report.alpha`` or 0.05.
        threshold: The practical threshold (a fraction) for every metric; default
            B's ``report.threshold`` (per metric where it says so), else 5 %.
        history: Which campaigns estimate the campaign variance (``--history``):
            ``auto``, ``none``, a count or labels
            (:func:`benchmatrix.analyze.campaign_model.select_history`).

    Returns:
        The comparison; ``exit_code`` says what ``bmx compare`` exits with.
    """
    sa, sb = load_side(a), load_side(b)
    spec = sb.spec or sa.spec or {}
    stored = Spec(SPEC_FILE, spec, "", [], {})  # the typed view of the kept spec.json
    alpha = float(alpha if alpha is not None else stored.report.alpha)
    common = [m for m in _metrics(sb) if m in set(_metrics(sa))]
    wanted = [m for m in stored.report.metrics if m in common]
    metrics = wanted or sorted(common)
    family = [m for m in family_metrics(stored, metrics) if m in metrics]
    units = {**_units(sa), **_units(sb)}
    thresholds = {m: threshold if threshold is not None else stored.report.threshold_for(m) for m in metrics}
    # The step test reads one level a campaign (over every metric): the metrics' median prior SD.
    prior_sd = float(np.median([stored.report.campaign_sd_for(m) for m in metrics])) if metrics else None
    chosen, history, candidates, sum_a, sum_b = choose_history(a, b, sa.spec, metrics, history, prior_sd)
    table = compare_frames(sa.runs, sb.runs, metrics, family, dig(spec, "workload.metrics"), units, alpha,
                           thresholds, history, {m: stored.report.campaign_sd_for(m) for m in metrics})
    pairs_a = _pairs(sa.runs)
    pairs_b = _pairs(sb.runs)
    common_pairs = sorted(pairs_a & pairs_b)
    measurement, environment, notes = provenance(sa, sb, common_pairs)
    # Host state (runs.csv's env_*; the kernel is among the facts provenance compares).
    environment += [{"kind": "environment", "scope": "host", "host": h, "cell_id": "", "what": f, "a": va, "b": vb}
                    for h, f, va, vb in campaign_model.host_state_changes(sum_a, sum_b) if f != "kernel"]
    factor_names = list(dict.fromkeys([*sb.factor_names, *sa.factor_names]))
    result = CampaignComparison(a, b, table, measurement, environment, sorted(pairs_a - pairs_b),
                                sorted(pairs_b - pairs_a), factor_names, alpha, family,
                                [m for m in metrics if m not in set(family)], notes)
    result.thresholds = thresholds
    result.history = chosen
    result.history_names = {k: c.name for k, c in candidates.items()}
    result.busy = campaign_model.busy_hosts(sum_a, sum_b)
    if not len(table):
        result.notes.append("no cell was measured (ok runs with a metric) on the same host in both campaigns")
        return result
    result.basis = _basis_note(table.attrs.get("campaign_models", {}), len(history))
    result.notes.append(result.basis)
    result.notes.append(_history_note(chosen, result.history_names))
    result.notes += result.busy
    if not measurement:
        # Not comparable: no run of B would decide a row, and the gate refuses such an A.
        result.notes += undecided_note(table, family, alpha, a.label or a.id)
    changes = _changes_by_row(environment)
    table["environment"] = ["; ".join(x for x in (changes.get(("", h), ""), changes.get((c, h), "")) if x)
                            for c, h in zip(table["cell_id"], table["host"])]
    # The counters of the same cells that moved between A and B beside each worse/better row (issue 37).
    table["moved_with"] = moved_between(sa.runs, sb.runs, table, units=units, alpha=alpha,
                                        threshold=threshold if threshold is not None else stored.report.threshold)
    levels = _levels(sb, sa, factor_names)
    for f in factor_names:
        col = f"factor_{f}" if f in TAIL_COLUMNS or f == "cell_id" else f
        table[col] = [levels.get(c, {}).get(f, "") for c in table["cell_id"]]
    table = table.reindex(columns=compare_columns(factor_names))
    # Metrics in the spec's order, then hosts, then cells by their levels (numbers as numbers).
    order = {m: i for i, m in enumerate(metrics)}
    keys = [(order.get(r[0], len(order)), r[1], *(_sort_key(v) for v in r[2:]), r[-1])
            for r in table[["metric", "host", *compare_columns(factor_names)[1:1 + len(factor_names)], "cell_id"]]
            .itertuples(index=False)]
    result.table = table.iloc[sorted(range(len(table)), key=keys.__getitem__)].reset_index(drop=True)
    if result.descriptive:
        result.notes.append(f"verdicts and Holm's adjustment cover {', '.join(family) or 'none'}; descriptive "
                            f"(unadjusted 95 % intervals, no verdict): {', '.join(result.descriptive)}")
    return result


def undecided_note(table: pd.DataFrame, family: list[str], alpha: float, a_name: str) -> list[str]:
    """What would decide the ``inconclusive`` rows (issue 33): about how many more runs
    a cell of B (:func:`benchmatrix.analyze.adaptive.runs_to_decide`, at Bonferroni's
    share of the family's alpha), or the gate that adds them until decided; [] when none.

    Args:
        table: Rows of compare.csv.
        family: Metrics of Holm's family.
        alpha: The family's significance level.
        a_name: A's label or id, for the gate's command.
    """
    from benchmatrix.analyze.adaptive import runs_to_decide

    undecided = table[table["verdict"] == "inconclusive"]
    if not len(undecided):
        return []
    tested = table[table["metric"].isin(family) & np.isfinite(pd.to_numeric(table["p_value"], errors="coerce"))]
    more = [runs_to_decide(r, alpha / max(1, len(tested))) for r in undecided.to_dict("records")]
    known = sorted(x for x in more if x is not None)
    parts = []
    if known:
        spread = f" ({known[0]} to {known[-1]})" if known[0] != known[-1] else ""
        parts.append(f"about {known[len(known) // 2]} more runs a cell of B would decide "
                     f"{'them' if len(known) > 1 else 'it'} (80 % of the time){spread}")
    if len(known) < len(more):
        parts.append(f"{len(more) - len(known)} cannot be decided by B's runs alone (A's runs and the campaign "
                     f"variance are wider: measure A with more runs, or set a report.campaign_sd that fits the "
                     f"machine)")
    parts.append(f"or let the gate add runs until decided: bmx run SPEC --until-decided --against {a_name} "
                 f"(B the current campaign; docs/campaigns.md, CI gate)")
    return [f"{len(undecided)} inconclusive: " + "; ".join(parts)]


def _basis_note(models: dict[str, CampaignVariance], history: int) -> str:
    """One sentence saying how much campaigns were taken to vary, per metric."""
    parts = []
    for metric, m in models.items():
        used = (f"pooled with {m.campaigns} comparable campaigns of the experiment (A among them; their own "
                f"estimate {_short(math.sqrt(m.estimate) * 100)} % on {_short(m.estimate_dof)} df)"
                if m.kind == "pooled" else
                f"alone ({history} comparable campaign{'s' if history != 1 else ''} besides B: too few to "
                f"estimate it)")
        dropped = f"; {len(m.dropped)} outlying campaign(s) left out" if m.dropped else ""
        parts.append(f"{metric} {_short(m.sd_pct)} % on {_short(m.dof)} df (prior {_short(m.prior_sd * 100)} %, "
                     f"report.campaign_sd, {used}{dropped})")
    if not parts:
        return ""
    return ("campaign-to-campaign SD added to the runs' noise: " + "; ".join(parts)
            + ": a verdict means B moved more than campaigns do")


def _history_json(result: CampaignComparison) -> dict[str, Any]:
    """``--json``'s ``history``: the rule, the campaigns used and those left out (with why)."""
    h, names = result.history, result.history_names
    if h is None:
        return {}
    return {"rule": h.rule, "used": [{"id": k, "name": names.get(k, k)} for k in h.used],
            "left_out": [{"id": k, "name": names.get(k, k), "why": why} for k, why in h.left_out]}


def _short(x: float) -> str:
    """A number for a sentence: 2 significant digits below 10, whole numbers above, no exponent."""
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.2f}".rstrip("0").rstrip(".")


def _sort_key(value: Any) -> tuple[int, float, str]:
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _pairs(runs: pd.DataFrame) -> set[tuple[str, str]]:
    eff = effective_runs(runs)
    if eff.empty:
        return set()
    hosts = eff["host"].astype(str) if "host" in eff.columns else pd.Series("", index=eff.index)
    return set(zip(eff["cell_id"].astype(str), hosts))


def _levels(*sides_and_names) -> dict[str, dict[str, str]]:
    *sides, names = sides_and_names
    out: dict[str, dict[str, str]] = {}
    for side in sides:
        cols = [f for f in names if f in side.runs.columns]
        for row in side.runs[["cell_id", *cols]].drop_duplicates("cell_id").itertuples(index=False):
            out.setdefault(str(row[0]), {f: level_key(v) for f, v in zip(cols, row[1:])})
    return out


# ---------------------------------------------------------------- resolving and writing

def experiment_dir_of(campaign: Campaign) -> Path:
    """``results/NAME`` of a campaign (its own directory for the current one)."""
    p = campaign.path
    return p.parent.parent if p.parent.name == CAMPAIGNS_DIR else p


def resolve(ref: str, project_dir: Path, exp_dir: Path | None = None) -> Campaign:
    """The campaign a user names: a directory, or an id, id prefix or label among
    ``exp_dir``'s campaigns (``--spec``), else among every experiment's in results/.

    Raises:
        BenchmatrixError: nothing or several campaigns match.
    """
    as_path = Path(ref)
    if as_path.is_dir():
        c = read_campaign(as_path, current=as_path.parent.name != CAMPAIGNS_DIR)
        if c is None:
            raise BenchmatrixError(f"{ref}: not a campaign directory (no campaign.json)")
        return c
    if exp_dir is not None:
        return find_campaign(exp_dir, ref)
    hits = []
    for exp in sorted((Path(project_dir) / "results").glob("*/")):
        try:
            hits.append(find_campaign(exp, ref))
        except BenchmatrixError:
            continue
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise BenchmatrixError(f"no campaign {ref!r} in {Path(project_dir) / 'results'}; give --spec SPEC, "
                               f"an id from 'bmx campaigns SPEC', or a directory")
    raise BenchmatrixError(f"{ref!r} names campaigns of {len(hits)} experiments "
                           f"({', '.join(str(c.path) for c in hits)}); give --spec SPEC or a directory")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] or "campaign"


def default_out(result: CampaignComparison) -> Path:
    """``results/NAME/compare/A_vs_B/`` of B's experiment."""
    return experiment_dir_of(result.b) / "compare" / f"{_safe(result.a.name)}_vs_{_safe(result.b.name)}"


def context(result: CampaignComparison) -> dict[str, Any]:
    """What the compare templates see."""
    def side(c: Campaign) -> dict[str, Any]:
        return {"id": c.id, "label": c.label, "name": c.name, "started_at": c.started_at or "-",
                "ended_at": c.ended_at or "-", "path": str(c.path)}

    rows = result.table.to_dict("records") if len(result.table) else []
    for r in rows:
        r["cell"] = ", ".join(f"{f}={r.get(f'factor_{f}', r.get(f, ''))}" for f in result.factor_names) or r["cell_id"]
        adjusted = r["verdict"] != "descriptive"
        lo, hi = (r["ci_low_adj_pct"], r["ci_high_adj_pct"]) if adjusted else (r["ci_low_pct"], r["ci_high_pct"])
        # The one rule of benchmatrix.analyze.bounds: an end past its limits prints as "unbounded".
        r["ci"] = pct_interval(lo, hi, suffix="") if _finite(r["rel_diff_pct"]) else "-"
        r["rel"] = f"{r['rel_diff_pct']:+.1f}" if _finite(r["rel_diff_pct"]) else "-"
        r["threshold"] = f"{r['threshold_pct']:g}" if _finite(r.get("threshold_pct")) else "-"
        r["detectable"] = f"{r['detectable_pct']:.1f}" if _finite(r.get("detectable_pct")) else "-"
        r["scale_text"] = "ratio" if r.get("scale") == "log" else "difference"
        r["moved_with"] = r.get("moved_with") if isinstance(r.get("moved_with"), str) else ""
        r["verdict_text"] = r["verdict"].replace("_", " ") + (f" ({r['environment']})" if r["environment"]
                                                              and r["verdict"] in ("better", "worse", "higher",
                                                                                    "lower") else "")
    return {"a": side(result.a), "b": side(result.b), "rows": rows, "refused": result.refused,
            "exit_code": result.exit_code, "measurement": result.measurement, "environment": result.environment,
            "only_a": result.only_a, "only_b": result.only_b, "alpha": result.alpha, "family": result.family,
            "descriptive": result.descriptive, "notes": [n for n in result.notes if n != result.basis],
            "counts": result.counts(), "basis": result.basis or "",
            "multi_host": len({r["host"] for r in rows}) > 1}


def _print_moved(result: CampaignComparison) -> None:
    """The counters that moved between A and B under compare's table, one line per worse
    or better row that has any (issue 37): ``  METRIC CELL on HOST: TEXT, TEXT``."""
    rows = [r for r in result.table.to_dict("records") if isinstance(r.get("moved_with"), str) and r["moved_with"]]
    if not rows:
        return
    print("moved with it (the counters of the same runs, B vs A):")
    for r in rows[:_TABLE_ROWS]:
        cell = layout.cell_label((f, r.get(f"factor_{f}" if f in TAIL_COLUMNS or f == "cell_id" else f))
                                 for f in result.factor_names) or r["cell_id"]
        print(f"  {r['metric']} {cell} on {r['host']}: {r['moved_with']}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating)) and math.isfinite(float(x))


def write_comparison(result: CampaignComparison, out: Path | None = None) -> dict[str, Path]:
    """Write compare.csv, provenance.csv, compare.md and compare.html into ``out``
    (default :func:`default_out`), each atomically. Returns name -> path."""
    from benchmatrix.files import atomic_write
    from benchmatrix.report.render import _environment

    out = Path(out) if out is not None else default_out(result)
    out.mkdir(parents=True, exist_ok=True)
    paths = {n: out / n for n in ("compare.csv", "provenance.csv", "compare.md", "compare.html")}
    atomic_write(paths["compare.csv"], result.table.to_csv(index=False))
    prov = pd.DataFrame(result.measurement + result.environment, columns=PROVENANCE_COLUMNS)
    atomic_write(paths["provenance.csv"], prov.to_csv(index=False))
    env = _environment()
    ctx = context(result)
    atomic_write(paths["compare.md"], env.get_template("compare.md.j2").render(ctx))
    atomic_write(paths["compare.html"], env.get_template("compare.html.j2").render(ctx))
    return paths


# shape: one parameter per bmx compare option (cli.py passes each), each with a default
def compare_main(ref_a: str, ref_b: str, project_dir: Path, spec_path: str | None = None,
                 out: Path | None = None, as_json: bool = False, threshold: float | None = None,
                 fail_on_inconclusive: bool = False, color: str = "auto",
                 history: str | int | list[str] = "auto") -> int:
    """``bmx compare``: resolve, compare, write, print; returns the exit code.

    Args:
        ref_a, ref_b: The campaigns as the user names them (A the baseline).
        project_dir: The project (its results/ holds the campaigns).
        spec_path: Resolve A and B among this spec's experiment's campaigns.
        out: Where to write the files (default :func:`default_out`).
        as_json: Print JSON instead of lines.
        threshold: The practical threshold (a fraction) for every metric.
        fail_on_inconclusive: Exit 1 on ``inconclusive`` too (a CI gate that wants an answer).
        color: Colour the verdicts: ``auto`` (a terminal without ``NO_COLOR``), ``always``, ``never``.
        history: ``--history``: ``auto``, ``none``, a count or a list of labels.
    """
    exp = None
    if spec_path:
        from benchmatrix.spec.load import load_spec

        exp = layout.exp_dir_of(project_dir, load_spec(spec_path))
    a, b = resolve(ref_a, project_dir, exp), resolve(ref_b, project_dir, exp)
    if a.path.resolve() == b.path.resolve():
        raise BenchmatrixError(f"{ref_a} and {ref_b} name the same campaign {a.id}")
    result = compare_campaigns(a, b, threshold=threshold, history=history)
    result.fail_on_inconclusive = fail_on_inconclusive
    return show_comparison(result, out, as_json, color)


def show_comparison(result: CampaignComparison, out: Path | None = None, as_json: bool = False,
                    color: str = "auto") -> int:
    """Write a comparison's files and print it as ``bmx compare`` does (the gate of
    ``bmx run --against`` prints its verdicts so too); returns the exit code.

    Args:
        result: The comparison of B against A.
        out: Where to write the files (default :func:`default_out`).
        as_json: Print JSON instead of lines.
        color: Colour the verdicts: ``auto``, ``always``, ``never``.
    """
    from benchmatrix.report.terminal import compare_records, compare_table, use_color

    a, b = result.a, result.b
    paths = write_comparison(result, out)
    if as_json:
        print(json.dumps({"a": a.id, "b": b.id, "exit_code": result.exit_code, "refused": result.refused,
                          "counts": result.counts(), "measurement": result.measurement,
                          "environment": result.environment, "notes": result.notes,
                          "history": _history_json(result), "busy": result.busy,
                          "rows": compare_records(result.table, result.factor_names),
                          "files": {k: str(v) for k, v in paths.items()}}, indent=2, default=str))
        return result.exit_code
    print(f"bmx: {b.name} vs {a.name}")
    if result.measurement:
        lines = grouped(result.measurement)
        print(f"bmx: not comparable: the measurement differs ({len(lines)} difference(s)):")
        for d in lines[:_SHOWN]:
            print(f"  {d['where']}: {d['what']}: {d['a']} → {d['b']}")
        if len(lines) > _SHOWN:
            print(f"  ... {len(lines) - _SHOWN} more in {paths['provenance.csv']}")
    elif result.table.empty:
        print("bmx: not comparable: no cell was measured on the same host in both campaigns")
    else:
        for d in result.environment:
            if d["scope"] == "host":
                print(f"bmx: environment on {d['host']}: {d['what']} {d['a']} -> {d['b']}")
        counts = result.counts()
        print("bmx: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(counts.items())))
        # Largest effect first (pyperf compare_to --table); compare.csv has every row.
        print(compare_table(compare_records(result.table, result.factor_names), result.factor_names,
                            use_color(sys.stdout, color), limit=_TABLE_ROWS))
        _print_moved(result)
    for n in result.notes:
        print(f"bmx: note: {n}")
    print(f"compare: {paths['compare.md']}")
    print(f"compare: {paths['compare.html']}")
    print(f"compare: {paths['compare.csv']}")
    return result.exit_code
