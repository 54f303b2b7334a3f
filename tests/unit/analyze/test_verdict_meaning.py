"""One meaning of the verdict words everywhere (issue 33, item 4).

``better``/``worse`` claim a change that matters: significant after Holm's adjustment
AND estimated beyond the practical threshold. A significant change whose estimate lies
inside the threshold is ``equivalent`` when its adjusted interval lies inside
+-threshold, else ``inconclusive``; it never fails a gate by default. The engine is
the same for the report's comparisons, ``bmx compare`` and the history's steps, so
these tests drive :func:`benchmatrix.analyze.verdict.judge` directly and through
``compare_frames``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze import verdict as engine
from benchmatrix.campaigns.compare import compare_frames


def _rows(changes_pct, se, df=30.0, better="lower", metric="lat"):
    """One comparison per change (in percent) on the log scale, with standard error ``se``
    (log units) and ``df`` degrees of freedom."""
    est = np.log1p(np.asarray(changes_pct, dtype="float64") / 100.0)
    n = len(est)
    return pd.DataFrame({"metric": metric, "better": better, "mean_level": np.log(100.0) + est,
                         "mean_baseline": np.full(n, np.log(100.0)), "df": df, "_est": est,
                         "_se2": se * se, "_scale": "log", "_va": se * se / 2, "_vb": se * se / 2, "_cov": 0.0,
                         "_constant": False})


def _judged(changes_pct, se, threshold=0.05, **kw):
    table = _rows(changes_pct, se, **kw)
    engine.judge(table, {table["metric"].iloc[0]}, 0.05, threshold)
    return table


def test_a_significant_change_inside_the_threshold_is_not_worse():
    # Latency 1 % up, known to +-0.3 %: significant (p ~ 0.001), but inside the 5 %
    # threshold: the change does not matter, and the interval shows it.
    t = _judged([1.0], 0.003)
    assert t["p_value"].iloc[0] < 0.01
    assert t["verdict"].tolist() == ["equivalent"]
    # Latency 3 % up, known to +-1.4 %: significant, inside the threshold, but the
    # interval reaches beyond it: the data cannot say whether it matters.
    t = _judged([3.0], 0.014)
    assert t["p_value"].iloc[0] < 0.05 and t["ci_high_adj_pct"].iloc[0] > 5.0
    assert t["verdict"].tolist() == ["inconclusive"]


def test_a_significant_change_beyond_the_threshold_is_worse_or_better_in_the_metrics_direction():
    t = _judged([8.0, -8.0], 0.01)
    assert t["verdict"].tolist() == ["worse", "better"]
    t = _judged([8.0, -8.0], 0.01, better="higher", metric="tps")
    assert t["verdict"].tolist() == ["better", "worse"]
    t = _judged([8.0, -8.0], 0.01, better="", metric="x")
    assert t["verdict"].tolist() == ["higher", "lower"]
    # The estimate beyond the threshold is not enough: it must be significant too.
    t = _judged([8.0], 0.06)
    assert t["p_value"].iloc[0] > 0.05 and t["verdict"].tolist() == ["inconclusive"]


def test_the_threshold_per_metric_decides_and_the_basis_column_is_gone():
    t = _rows([3.0], 0.003)
    engine.judge(t, {"lat"}, 0.05, {"lat": 0.02, "default": 0.05})
    assert t["verdict"].tolist() == ["worse"]
    t = _rows([3.0], 0.003)
    engine.judge(t, {"lat"}, 0.05, {"default": 0.05})
    assert t["verdict"].tolist() == ["equivalent"]
    # No second basis of judgement remains (it changed the words' meaning).
    assert "basis" not in t.columns and not hasattr(engine, "THRESHOLD")


def test_the_smallest_detectable_change_is_beyond_the_threshold():
    # A very precise comparison can only find a change that matters: its smallest
    # detectable change is the threshold plus t(0.8) standard errors, not a hair above 0.
    t = _judged([0.0], 0.001)
    expected = math.expm1(math.log1p(0.05) + 0.8416 * 0.001) * 100.0
    assert t["detectable_pct"].iloc[0] == pytest.approx(expected, rel=1e-3)
    # A noisy one is limited by its significance: (t(1 - a/2) + t(0.8)) se, as before.
    t = _judged([0.0], 0.05, df=1e6)
    assert t["detectable_pct"].iloc[0] == pytest.approx(math.expm1((1.96 + 0.8416) * 0.05) * 100.0, rel=1e-3)


def test_compare_does_not_fail_a_gate_on_a_significant_change_below_the_threshold():
    # The case: B 1 % slower in 8 cells, very quiet runs, a long history of
    # still campaigns (campaign SD 0): significant in every cell, but 1 % at a 5 %
    # threshold is no regression: exit 0, every cell equivalent.
    rng = np.random.default_rng(4)

    def runs(factor):
        values = 100.0 * factor * np.exp(rng.normal(0.0, 0.002, (8, 10)))
        return pd.DataFrame({"run_id": np.arange(80).astype(str), "cell_id": np.repeat([f"c{i}" for i in range(8)], 10),
                             "host": "h1", "status": "ok", "warmup": False, "control": False, "attempt": 1,
                             "lat": values.ravel()})

    a, b = runs(1.0), runs(1.01)
    t = compare_frames(a, b, ["lat"], ["lat"], {"lat": {"unit": "ms", "better": "lower"}}, {"lat": "ms"},
                       campaign_sd=0.0)
    assert (t["p_value"] < 0.05).all()
    assert set(t["verdict"]) == {"equivalent"}, t[["rel_diff_pct", "ci_low_adj_pct", "ci_high_adj_pct"]]
