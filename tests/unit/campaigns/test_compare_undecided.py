"""An ``inconclusive`` comparison of two campaigns says what would decide it (issue 33,
item 5): about how many more runs a cell of B (benchmatrix.analyze.adaptive.runs_to_decide)
or the gate's command. Seeded draws through compare_frames, the function bmx compare uses.
"""

from __future__ import annotations

import numpy as np
from unit.campaigns.test_compare_across_time import LATENCY, UNITS, campaign

from benchmatrix.analyze.adaptive import runs_to_decide
from benchmatrix.campaigns.compare import compare_frames, undecided_note

CV = 0.10


def _table(a, b):
    return compare_frames(a, b, ["lat"], ["lat"], LATENCY, UNITS, campaign_sd=0.01)


def test_the_runs_it_names_decide_an_inconclusive_comparison_most_of_the_time():
    # Latency up 10 % (twice the threshold), A measured with 30 runs, B with 4: mostly
    # inconclusive. B measured again with the runs the note names is decided (worse) in
    # about 80 % of the cases or more (the named runs are for the change observed, and
    # an inconclusive draw underestimates it).
    rng = np.random.default_rng(3)
    decided = asked = 0
    for _ in range(40):
        a = campaign(rng, 1, 30, CV, 0.01)
        row = _table(a, campaign(rng, 1, 4, CV, 0.01, 1.10)).iloc[0]
        more = runs_to_decide(row.to_dict(), 0.05) if row["verdict"] == "inconclusive" else None
        if more is not None:
            asked += 1
            decided += _table(a, campaign(rng, 1, 4 + more, CV, 0.01, 1.10))["verdict"].iloc[0] == "worse"
    assert asked >= 8 and decided / asked >= 0.6, (decided, asked)


def test_the_closer_the_estimate_to_the_threshold_the_more_runs_it_takes():
    row = {"scale": "log", "ci_low_pct": -2.0, "ci_high_pct": 20.0, "df": 30.0, "n_a": 30, "n_b": 5,
           "threshold_pct": 5.0, "campaign_sd_pct": 1.0}
    far, near = (runs_to_decide({**row, "rel_diff_pct": x}, 0.05) for x in (9.0, 7.0))
    # Inside the threshold the distance is to the threshold (for equivalent); here A's
    # 100 runs and campaigns that move by 0.3 % leave room for it.
    quiet = {**row, "ci_low_pct": -6.0, "ci_high_pct": 8.0, "n_a": 100, "campaign_sd_pct": 0.3}
    inside, edge = (runs_to_decide({**quiet, "rel_diff_pct": x}, 0.05) for x in (0.5, 1.0))
    assert 0 < far < near and 0 < inside < edge, (far, near, inside, edge)
    # A row on the difference scale, or without an interval, cannot tell.
    assert runs_to_decide({**row, "rel_diff_pct": 9.0, "scale": "linear"}, 0.05) is None
    assert runs_to_decide({**row, "rel_diff_pct": 9.0, "ci_low_pct": float("nan")}, 0.05) is None


def test_no_number_of_b_runs_decides_what_a_and_the_campaigns_leave_open():
    # A of 3 runs at CV 30 %: its own noise alone is wider than the distance to decide.
    rng = np.random.default_rng(4)
    row = _table(campaign(rng, 1, 3, 0.3), campaign(rng, 1, 3, 0.3, factor=1.03)).iloc[0]
    assert row["verdict"] == "inconclusive"
    assert runs_to_decide(row.to_dict(), 0.05) is None


def test_the_note_names_the_runs_and_the_gate_and_says_nothing_when_all_are_decided():
    rng = np.random.default_rng(5)
    a = campaign(rng, 2, 30, CV)
    table = _table(a, campaign(rng, 2, 4, CV, factor=1.08))
    assert set(table["verdict"]) == {"inconclusive"}
    (note,) = undecided_note(table, ["lat"], 0.05, "main-1")
    assert note.startswith("2 inconclusive: about ") and "more runs a cell of B would decide them" in note
    assert "bmx run SPEC --until-decided --against main-1" in note
    assert undecided_note(_table(a, campaign(rng, 2, 30, CV, factor=2.0)), ["lat"], 0.05, "main-1") == []
