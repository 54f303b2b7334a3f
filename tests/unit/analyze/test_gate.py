"""The CI gate (``bmx run --until-decided --against A``, issue 33 item 5): its stopping
rule and seeded Monte Carlo checks of its power and false alarms under optional stopping.

The simulations drive the package's own functions as ``bmx run`` does between its
passes: :func:`benchmatrix.campaigns.compare.compare_frames` judges B's cell against
campaign A at the sequential level (the campaign-to-campaign variance in the noise),
:func:`benchmatrix.analyze.adaptive.judge_gate` decides whether B's cell gets another
round. One cell, run CV 10 %, campaigns that move with SD 1 % (``report.campaign_sd: 1%``
says so), threshold 5 %; B's runs are drawn ahead and revealed as the rounds ask. The
gate's design is :func:`benchmatrix.analyze.adaptive.gate_settings` (looks at 5, 10, 20
and 30 runs, each at the exact constant level of those looks, futility at 98 %).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled, upper
from scipy import stats as sps
from unit.campaigns.test_compare_across_time import LATENCY, UNITS, campaign

from benchmatrix.analyze.adaptive import (
    GATE_MAX,
    Settings,
    exact_level,
    flag_settings,
    gate_settings,
    judge_gate,
    settings_of,
)
from benchmatrix.campaigns.compare import compare_frames
from benchmatrix.spec.load import Spec, load_spec

CV, CAMPAIGN_SD, THRESHOLD, ALPHA = 0.10, 0.01, 0.05, 0.05
#: The gate's design: B starts with 5 runs a cell and gets rounds up to 30 (5, 10, 20, 30).
GATE = gate_settings(Settings(5, GATE_MAX, 2 * THRESHOLD))
#: The design before (issue 33's 70 %): 6 looks (5, 8, 12, 18, 27, 30) at alpha / 6, futility at 90 %.
BONFERRONI = Settings(5, GATE_MAX, 2 * THRESHOLD)
#: Runs a cell of the baseline campaign A (measured once, as the recipe of docs/campaigns.md says).
BASELINE_RUNS = 120


def _compare(a: pd.DataFrame, b: pd.DataFrame, alpha: float) -> pd.DataFrame:
    return compare_frames(a, b, ["lat"], ["lat"], LATENCY, UNITS, alpha, THRESHOLD, campaign_sd=CAMPAIGN_SD)


def gate(a: pd.DataFrame, pool: pd.DataFrame, settings: Settings = GATE) -> tuple[str, int]:
    """The gate's rounds on one cell: B's first ``settings.min`` runs of ``pool``, more as
    :func:`judge_gate` asks. Returns the verdict at the stop and B's runs."""
    n = settings.min
    while True:
        table = _compare(a, pool.iloc[:n], settings.level(ALPHA))
        judged = judge_gate(table, settings, ["lat"])
        if not judged.extend:
            return str(judged.comparisons["verdict"].iloc[0]), n
        n = judged.extend[("h1", "c000")]


def rates(seed: int, sims: int, factor: float, baseline_runs: int = BASELINE_RUNS,
          settings: Settings = GATE) -> dict[str, float]:
    """Share of ``worse`` with the gate and with a fixed design of 5 runs on each side,
    and the gate's mean runs of B, over ``sims`` pairs of campaigns (B's level ``factor``
    times A's)."""
    rng = np.random.default_rng(seed)
    worse = fixed = spent = 0
    for _ in range(sims):
        a = campaign(rng, 1, baseline_runs, CV, CAMPAIGN_SD)
        pool = campaign(rng, 1, settings.max, CV, CAMPAIGN_SD, factor)
        verdict, n = gate(a, pool, settings)
        worse += verdict == "worse"
        spent += n
        fixed += _compare(a.iloc[:5], pool.iloc[:5], ALPHA)["verdict"].iloc[0] == "worse"
    return {"gate": worse / sims, "fixed5": fixed / sims, "runs": spent / sims}


def _two_cells(rng, n: int, factor: float) -> pd.DataFrame:
    """A campaign of cell c000 (its level times ``factor``) and cell c001 (unchanged, CV
    30 %: at 5 runs its comparison can neither be decided nor rule out 10 %), ``n`` runs each."""
    second = campaign(rng, 1, n, 3 * CV)
    second = second.assign(cell_id="c001", run_id="x" + second["run_id"])
    return pd.concat([campaign(rng, 1, n, CV, factor=factor), second], ignore_index=True)


def test_a_cell_stops_decided_futile_or_at_max_and_only_undecided_cells_get_runs():
    rng = np.random.default_rng(2)
    a = _two_cells(rng, 30, 1.0)
    # c000 doubles its latency (decided at once); c001 is unchanged and noisy at 5 runs.
    b = _two_cells(rng, 5, 2.0)
    judged = judge_gate(_compare(a, b, GATE.level(ALPHA)), GATE, ["lat"])
    rows = judged.comparisons.set_index("cell_id")
    assert rows.loc["c000", "verdict"] == "worse" and rows.loc["c000", "reason"] == "decided"
    assert rows.loc["c001", "reason"] == "running" and judged.extend == {("h1", "c001"): 10}
    assert judged.look == 1
    # A metric outside the family is not decided: nothing to extend for it.
    assert judge_gate(_compare(a, b, GATE.level(ALPHA)), GATE, ["other"]).extend == {}
    # At max, or with the budget spent, the undecided cell stops too.
    full = _two_cells(rng, 30, 2.0)
    at_max = judge_gate(_compare(a, full, GATE.level(ALPHA)), GATE, ["lat"])
    assert at_max.extend == {} and at_max.look == GATE.looks
    assert set(at_max.comparisons["reason"]) <= {"decided", "futile", "max"}
    spent = judge_gate(_compare(a, b, GATE.level(ALPHA)), Settings(5, 30, 0.10, budget_s=60), ["lat"],
                       elapsed_s=61, per_run_s=1.0)
    assert spent.extend == {} and "budget" in set(spent.comparisons["reason"])


def test_the_gate_has_its_own_design_kept_with_the_campaign():
    # B's runs double a round; every look at the exact constant level of the 4 looks.
    assert GATE.schedule == [5, 10, 20, 30] and (GATE.futility_confidence, GATE.futility_look) == (0.98, 2)
    # Pocock's constants (Jennison and Turnbull 2000, table 2.1): 0.0158 for 5 equal
    # looks, 0.0294 for 2, both at alpha 0.05; one look is the fixed design.
    assert exact_level((1, 2, 3, 4, 5), 0.05) == pytest.approx(0.0158, abs=2e-4)
    assert exact_level((1, 2), 0.05) == pytest.approx(0.0294, abs=2e-4)
    assert exact_level((30,), 0.05) == 0.05
    assert GATE.level(ALPHA) == pytest.approx(0.01677, abs=1e-4) and ALPHA / GATE.looks < GATE.level(ALPHA) < ALPHA
    assert GATE.level_words(ALPHA) == "0.01677 (alpha 0.05 held exactly over 4 looks)"
    # A campaign's own until-decided rounds keep alpha / L (issue 27's figures).
    assert BONFERRONI.level(ALPHA) == ALPHA / 6 and BONFERRONI.level_words(ALPHA) == "alpha / 6 = 0.008333"
    # bmx run --until-decided --against A gets it; campaign.json keeps it for a resumed
    # gate, also where the spec has its own replicates mapping (its min and max kept).
    spec = load_spec("config/experiments/quickstart.yaml")
    chosen = flag_settings(spec, gate=True)
    assert (chosen.levels, chosen.growth, chosen.max) == ("exact", 2.0, GATE_MAX)
    assert flag_settings(spec).levels == "bonferroni"
    assert settings_of(spec, {"until_decided": chosen.as_dict()}) == chosen
    ranged = Spec(spec.path, {**spec.data, "replicates_until": {"min": 3, "max": 12}}, spec.digest, spec.cells, {})
    kept = flag_settings(ranged, gate=True)
    assert (kept.min, kept.max, kept.levels) == (3, 12, "exact")
    assert settings_of(ranged, {"until_decided": kept.as_dict()}) == kept
    # A campaign.json of a gate before this design goes on with its alpha / L.
    assert settings_of(spec, {"until_decided": {"min": 5, "max": 30, "detect": 0.1}}) == BONFERRONI


def test_a_change_of_twice_the_threshold_is_found_within_30_runs_nine_times_in_ten():
    # Latency up 10 % (twice the 5 % threshold), A of 120 runs a cell (the recipe's):
    # issue 33's target. The figures with their Monte Carlo SE, and the designs measured
    # beside this one, are in docs/report.md ("Calibration", "The CI gate").
    sims = scaled(40)
    got = rates(11, sims, 1.0 + 2 * THRESHOLD)
    # The gate finds it 93 % of the time (600 pairs): as good a gate passes this bound in
    # 999 suites of 1000, one at the 90 % target in 995; the design before (alpha / 6 over
    # 6 looks, futility at 90 % from the first look, A of 30 runs: 70 %) in 1 of 5 (and
    # with this seed it finds 29 of 40: it fails).
    assert got["gate"] >= sps.binom.ppf(0.001, sims, 0.93) / sims, got
    # 5 fixed runs on each side find it about a fifth of the time (reported beside it).
    assert got["fixed5"] < 0.5 < got["gate"] and got["runs"] <= GATE.max, got


def test_an_unchanged_b_is_seldom_called_worse_whenever_the_gate_stops():
    sims = scaled(30)
    got = rates(12, sims, 1.0)
    assert got["gate"] <= upper(sims, ALPHA), got
    assert math.isfinite(got["runs"])
