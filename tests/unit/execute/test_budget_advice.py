"""What bmx run says when an until-decided campaign's time budget leaves comparisons
undecided (issue 38's trial: "look 1: 2 budget; replicates until decided: stopped" and
nothing else)."""

from __future__ import annotations

import math

import pandas as pd
from unit.analyze.test_max_advice import adaptive_spec

from benchmatrix.execute.supervise import max_advice_line


def test_a_budget_stop_says_how_many_runs_would_decide_and_what_to_raise():
    spec = adaptive_spec(2)
    ci = {"ci_low_adj_pct": 100 * math.expm1(math.log(1.2) - 0.3),
          "ci_high_adj_pct": 100 * math.expm1(math.log(1.2) + 0.3)}
    rows = pd.DataFrame([
        {"metric": "lat", "level": "new", "baseline": "old", "size": 0, "reason": "budget", "n": 6,
         "rel_diff_pct": 20.0, **ci},
        {"metric": "lat", "level": "new", "baseline": "old", "size": 1, "reason": "decided", "n": 3,
         "rel_diff_pct": 50.0, **ci}])
    assert max_advice_line(spec, rows, "budget") == (
        "bmx: stopped by the time budget undecided: lat new vs old at size=0 would need about 17 runs a cell "
        "(at this estimate; raise replicates budget in the spec, or --budget, to go on)")
    assert max_advice_line(spec, rows) == ""             # nothing stopped at max
    assert max_advice_line(spec, rows[rows["reason"] != "budget"], "budget") == ""
