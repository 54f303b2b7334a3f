"""Adaptive replication (benchmatrix.analyze.adaptive): the stopping rule, the rounds it
plans, and seeded Monte Carlo checks that its error rates hold under optional stopping.

The simulations drive the package's own functions: ``judge_round`` decides after each
look which cells get more runs, exactly as ``bmx run`` does between its passes, and
``compare`` judges the campaign at the sequential level, as collect does.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled, upper

from benchmatrix.analyze.adaptive import Settings, judge_round, parse_budget, settings_of
from benchmatrix.analyze.comparisons import compare
from benchmatrix.analyze.verdict import CHANGED
from benchmatrix.errors import BenchmatrixError
from benchmatrix.plan.design import PlannedRun
from benchmatrix.plan.reruns import plan_reruns, replicate_counts, round_requests
from benchmatrix.spec.load import Spec, load_spec
from benchmatrix.spec.matrix import Cell

LATENCY = {"lat": {"unit": "ms", "better": "lower"}}
UNITS = {"lat": "ms"}


def _spec(comparisons: int, replicates=None) -> Spec:
    factors = {"v": ["old", "new"], "size": list(range(comparisons))}
    cells = [Cell(f"c{i}", dict(zip(factors, combo)))
             for i, combo in enumerate(pd.MultiIndex.from_product(list(factors.values())).tolist())]
    data = {"factors": factors, "order": {"strategy": "random", "seed": 1},
            "report": {"compare": {"factor": "v", "baseline": "old", "by": ["size"]}},
            "workload": {"metrics": LATENCY}, "warmup": 0, "replicates": 3}
    if replicates:
        data["replicates_until"] = replicates
    return Spec("adaptive.yaml", data, "0", cells, {})


class Campaign:
    """A simulated campaign: each cell's runs drawn ahead, revealed as rounds ask."""

    def __init__(self, spec: Spec, rng, factor: dict[int, float], cv: float, start: int, most: int):
        sigma = math.sqrt(math.log1p(cv * cv))
        self.spec = spec
        self.pool = {c.cell_id: 100 * np.exp(rng.normal(-sigma * sigma / 2, sigma, most))
                     * (factor.get(c.factors["size"], 1.0) if c.factors["v"] == "new" else 1.0) for c in spec.cells}
        self.n = {c.cell_id: start for c in spec.cells}
        self.cells = {c.cell_id: c for c in spec.cells}

    def runs(self, n: dict[str, int] | None = None) -> pd.DataFrame:
        n = n or self.n
        rows = [{"run_id": f"{cid}-r{r}", "cell_id": cid, "host": "h1", "status": "ok", "warmup": False,
                 "control": False, "attempt": 1, **self.cells[cid].factors, "lat": self.pool[cid][r]}
                for cid in self.pool for r in range(n[cid])]
        frame = pd.DataFrame(rows)
        frame["seq"] = range(len(frame))
        return frame

    def run_until_decided(self, settings: Settings):
        """The loop of ``bmx run``: judge, extend, until no round is asked for."""
        while True:
            judged = judge_round(self.spec, self.runs(), settings, UNITS)
            if not judged.extend:
                return judged
            for (_, cell), total in judged.extend.items():
                self.n[cell] = max(self.n[cell], total)


# ------------------------------------------------------------------ settings and rounds

def test_schedule_looks_and_level():
    s = Settings(3, 20, 0.10)
    assert s.schedule == [3, 5, 8, 12, 18, 20] and s.looks == 6 and s.level(0.05) == pytest.approx(0.05 / 6)
    assert s.next_total(3) == 5 and s.next_total(18) == 20 and s.next_total(20) == 20
    assert Settings(2, 2, 0.1).schedule == [2]
    assert parse_budget("1h30m") == 5400 and parse_budget("45s") == 45
    with pytest.raises(BenchmatrixError, match="--budget"):
        parse_budget("2 days")


def test_the_spec_mapping_plans_min_replicates_and_keeps_the_rest(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("name: a\nhosts: localhost\nfactors: {v: [old, new]}\n"
                    "workload: {role: workload_command, vars: {argv: [echo, '{{ v }}']}, "
                    "metrics: {lat: {regex: 'x=(?P<value>[0-9.]+)', unit: ms, better: lower}}}\n"
                    "replicates: {min: 4, max: 12, until: decided, detect: 20%, budget: 2h}\n"
                    "report: {compare: {factor: v, baseline: old}}\n")
    spec = load_spec(str(path))
    assert spec.replicates == 4
    assert settings_of(spec) == Settings(4, 12, 0.2, 7200.0)
    # Kept by `bmx run --until-decided` in campaign.json for a spec without the mapping.
    plain = _spec(1)
    assert settings_of(plain) is None
    assert settings_of(plain, {"until_decided": Settings(3, 9, 0.1).as_dict()}) == Settings(3, 9, 0.1)


def test_a_round_asks_for_new_replicates_planned_like_a_rerun_round():
    spec = _spec(1)
    planned = [PlannedRun(i + 1, "h1", f"h1-{c}-r{r}", c, r, False, False, i + 1, "b1", 1, dict(f))
               for i, (c, r, f) in enumerate((c.cell_id, r, c.factors) for c in spec.cells for r in (1, 2, 3))]
    plan = pd.DataFrame([{"host": p.host, "cell_id": p.cell_id, "replicate": str(p.replicate), "warmup": "false",
                          "control": "false"} for p in planned])
    counts = replicate_counts(plan)
    assert counts == {("h1", "c0"): 3, ("h1", "c1"): 3}
    requests = round_requests({("h1", "c0"): 5, ("h1", "c1"): 5}, counts)
    assert requests == [("h1-c0-r4", 1), ("h1-c0-r5", 1), ("h1-c1-r4", 1), ("h1-c1-r5", 1)]
    extra = plan_reruns(spec, planned, [{"round": 1, "run_id": rid, "attempt": 1} for rid, _ in requests])
    assert sorted(r.run_id for r in extra) == sorted(rid for rid, _ in requests)
    assert {r.replicate for r in extra} == {4, 5} and all(r.round == 1 and not r.warmup for r in extra)
    assert min(r.visit for r in extra) > max(p.visit for p in planned)       # visits of their own


def test_judge_round_says_why_each_comparison_stopped_and_extends_the_others():
    # size 0: latency doubled (decided); size 1: the same, quiet (futile: a 10 % change
    # is ruled out); size 2: very noisy, no change (undecided: both its cells get more).
    spec = _spec(3)
    rng = np.random.default_rng(2)
    sim = Campaign(spec, rng, {0: 2.0}, 0.02, 3, 20)
    for cid, cell in sim.cells.items():
        if cell.factors["size"] == 2:
            sim.pool[cid] = 100 * np.exp(rng.normal(0, 0.6, 20))
    judged = judge_round(spec, sim.runs(), Settings(3, 8, 0.10), UNITS)
    reasons = dict(zip(judged.comparisons["size"], judged.comparisons["reason"]))
    assert reasons == {0: "decided", 1: "futile", 2: "running"}
    noisy = {cid for cid, c in sim.cells.items() if c.factors["size"] == 2}
    assert judged.extend == {("h1", cid): 5 for cid in noisy} and judged.look == 1
    # At max the noisy one stops too; a budget already spent stops it at once.
    sim.n = {cid: 8 for cid in sim.n}
    assert set(judge_round(spec, sim.runs(), Settings(3, 8, 0.10), UNITS).comparisons["reason"]) <= {
        "decided", "futile", "max"}
    sim.n = {cid: 3 for cid in sim.n}
    spent = judge_round(spec, sim.runs(), Settings(3, 8, 0.10, budget_s=60), UNITS, elapsed_s=61, per_run_s=1.0)
    assert not spent.extend and "budget" in set(spent.comparisons["reason"])


# ------------------------------------------------------------------ error rates under optional stopping

def test_aa_false_verdicts_per_comparison_with_the_stopping_rule_in_force():
    # One comparison that does not differ, lognormal CV 10 %, min 3, max 12: stopping as
    # soon as it looks decided must not raise the false better/worse rate above 5 %.
    spec = _spec(1)
    settings = Settings(3, 12, 0.10)
    rng = np.random.default_rng(61)
    sims, hits, covered = scaled(60), 0, 0
    for _ in range(sims):
        sim = Campaign(spec, rng, {}, 0.1, 3, 12)
        sim.run_until_decided(settings)
        row = compare(spec, sim.runs(), ["lat"], UNITS, settings.level(0.05)).table.iloc[0]
        hits += row["verdict"] in CHANGED
        covered += row["ci_low_adj_pct"] <= 0.0 <= row["ci_high_adj_pct"]
    assert hits / sims <= upper(sims), hits
    assert covered / sims >= 0.93, covered          # coverage at stop


def test_sixteen_comparisons_four_real_stop_early_with_the_same_decisions_and_few_runs():
    # The target: 16 comparisons, 4 with a 10 % effect and 12 none, CV 5 %
    # lognormal. The fixed design sized by `bmx plan --detect 10%` (11 runs a cell for
    # this family) against adaptive replication with min 3 and max 16: the same
    # decisions (the effects found as often, no false alarm) with at most 60 % of the runs.
    from benchmatrix.analyze.power import log_sd_from_cv, runs_needed_log

    spec = _spec(16)
    fixed_n = runs_needed_log(0.10, log_sd_from_cv(0.05), 0.05, 0.8, 16)
    assert fixed_n == 11
    settings = Settings(3, 16, 0.10)
    rng = np.random.default_rng(62)
    sims = scaled(30)
    found = {"adaptive": 0.0, "fixed": 0.0}
    false_families, runs = 0, 0
    for _ in range(sims):
        sim = Campaign(spec, rng, {0: 1.1, 1: 1.1, 2: 1.1, 3: 1.1}, 0.05, 3, 16 + fixed_n)
        sim.run_until_decided(settings)
        adaptive = compare(spec, sim.runs(), ["lat"], UNITS, settings.level(0.05)).table
        fixed = compare(spec, sim.runs({c: fixed_n for c in sim.n}), ["lat"], UNITS, 0.05).table
        for name, table in (("adaptive", adaptive), ("fixed", fixed)):
            found[name] += (table["verdict"].iloc[:4] == "worse").mean()
        false_families += adaptive["verdict"].iloc[4:].isin(CHANGED).any()
        runs += sum(sim.n.values())
    share = runs / sims / (len(spec.cells) * fixed_n)
    assert share <= 0.60, share
    assert found["adaptive"] / sims >= found["fixed"] / sims - 0.05, found
    assert false_families / sims <= upper(sims), false_families


def test_bmx_plans_figures_of_an_adaptive_design():
    from benchmatrix.analyze.adaptive import design_figures
    from benchmatrix.analyze.power import log_sd_from_cv

    f = design_figures(Settings(3, 12, 0.10), cells=4, hosts=2, per_run_s=2.0, alpha=0.05,
                       sd_log=log_sd_from_cv(0.05), detect=0.10)
    assert (f["runs_min"], f["runs_max"], f["seconds_max"]) == (24, 96, 192.0)
    assert f["looks"] == 4 and f["level"] == pytest.approx(0.0125) and f["schedule"] == [3, 5, 8, 12]
    # CV 5 %: a 10 % change is ruled out at 3 runs where nothing changed, and found by 5.
    assert f["typical_runs_per_cell"] == {"no_change": 3, "change": 5}
    noisy = design_figures(Settings(3, 12, 0.10), 4, 1, None, 0.05, sd_log=log_sd_from_cv(0.3), detect=0.10)
    assert noisy["typical_runs_per_cell"]["no_change"] == 12 and noisy["seconds_min"] is None
