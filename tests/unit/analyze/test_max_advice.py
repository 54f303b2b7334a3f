"""A comparison that replicates-until-decided stopped at max says how many runs a cell
would decide it (issue 38, item 2): "two comparisons stopped at max, inconclusive, with
no advice". The figure is the runs at which the comparison's Holm-adjusted interval,
shrinking as 1 / sqrt(n) around the same estimate, would just exclude no change (an
estimate beyond the threshold) or fit inside the threshold (one within it).

Seeded Monte Carlo through judge_round and compare: comparisons stopped at max, then a
fresh campaign of the advised runs a cell, judged the same way (docs/report.md,
"Calibration").
"""

from __future__ import annotations

import math

import numpy as np
from montecarlo import scaled
from unit.analyze.test_adaptive import UNITS, Campaign
from unit.analyze.test_adaptive import _spec as adaptive_spec

from benchmatrix.analyze.adaptive import Settings, judge_round, runs_at_max

DECIDED = ("better", "worse", "higher", "lower", "equivalent")


def test_the_runs_at_which_the_interval_would_just_decide():
    # +20 % with a 5 % threshold, interval +/-30 % on the log scale at 6 runs: it must
    # shrink to log(1.2) around the estimate: 6 * (0.30 / log 1.2)^2 = 16.2 -> 17.
    half = 0.30
    row = {"n": 6, "rel_diff_pct": 20.0, "ci_low_adj_pct": 100 * math.expm1(math.log(1.2) - half),
           "ci_high_adj_pct": 100 * math.expm1(math.log(1.2) + half)}
    assert runs_at_max(row, 0.05) == 17
    # Within the threshold (+1 %): the interval must fit inside +/-5 %: distance log(1.05) - log(1.01).
    row = {"n": 6, "rel_diff_pct": 1.0, "ci_low_adj_pct": 100 * math.expm1(math.log(1.01) - 0.1),
           "ci_high_adj_pct": 100 * math.expm1(math.log(1.01) + 0.1)}
    assert runs_at_max(row, 0.05) == math.ceil(6 * (0.1 / (math.log(1.05) - math.log(1.01))) ** 2)
    # Unbounded or missing interval ends: no figure.
    assert runs_at_max({**row, "ci_low_adj_pct": -100.0}, 0.05) is None
    assert runs_at_max({"n": 6}, 0.05) is None


def test_a_fresh_campaign_of_the_advised_runs_decides_a_third_to_half_of_them():
    spec = adaptive_spec(1)
    threshold = spec.report.threshold_for("lat")
    settings = Settings(3, 5, 0.05)
    rng = np.random.default_rng(38)
    advised, decided, sims = [], 0, scaled(30)
    for _ in range(sims):
        sim = Campaign(spec, rng, {0: 1.12}, 0.25, 3, 5)
        judged = sim.run_until_decided(settings)
        row = judged.comparisons.iloc[0].to_dict()
        if row["reason"] != "max":
            continue
        n = runs_at_max(row, threshold)
        if n is None or n > 200:
            continue
        advised.append(n)
        fresh = Campaign(spec, rng, {0: 1.12}, 0.25, n, n)
        again = judge_round(spec, fresh.runs(), settings, UNITS)  # at the same level
        decided += again.comparisons["verdict"].iloc[0] in DECIDED
    share = decided / len(advised)
    print(f"stopped at max: {len(advised)} of {sims}; advised median {np.median(advised):.0f} runs a cell; "
          f"decided at the advised runs: {share:.2f} (MC SE {math.sqrt(share * (1 - share) / len(advised)):.2f})")
    assert len(advised) >= sims // 3
    assert 0.25 <= share <= 0.80, share


def test_bmx_run_says_it_when_the_campaign_stops():
    import pandas as pd

    from benchmatrix.execute.supervise import max_advice_line

    spec = adaptive_spec(2)
    ci = {"ci_low_adj_pct": 100 * math.expm1(math.log(1.2) - 0.3),
          "ci_high_adj_pct": 100 * math.expm1(math.log(1.2) + 0.3)}
    rows = pd.DataFrame([
        {"metric": "lat", "level": "new", "baseline": "old", "size": 0, "reason": "max", "n": 6, "rel_diff_pct": 20.0,
         **ci},
        {"metric": "lat", "level": "new", "baseline": "old", "size": 1, "reason": "decided", "n": 3,
         "rel_diff_pct": 50.0, **ci}])
    assert max_advice_line(spec, rows) == (
        "bmx: stopped at max undecided: lat new vs old at size=0 would need about 17 runs a cell "
        "(at this estimate; raise replicates max in the spec to go on)")
    assert max_advice_line(spec, rows[rows["reason"] != "max"]) == ""
