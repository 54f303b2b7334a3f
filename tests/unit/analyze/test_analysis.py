"""Tests of the statistics against a known truth: comparisons, intervals, drift, the
split-plot analysis, and the sanity checks.

Simulations are seeded, so every run of the suite sees the same data; the tolerances
are binomial intervals wide enough that a correct method passes with almost any seed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchmatrix.analyze import sanity
from benchmatrix.analyze.comparisons import compare, comparison_columns, level_key, sentence
from benchmatrix.analyze.stats import fieller_ratio_ci, holm, metric_direction, summarize, welch_test
from benchmatrix.analyze.verdict import CHANGED
from benchmatrix.spec.load import Knob, Spec
from benchmatrix.spec.matrix import Cell

ALPHA = 0.05


def make_spec(factors, compare_cfg=None, strategy="random", knobs=None, control=None, metrics=None, **report):
    """A Spec with just what analysis and sanity read (no file, no validation)."""
    cells = [Cell(f"c{i}", dict(zip(factors, combo)))
             for i, combo in enumerate(pd.MultiIndex.from_product(list(factors.values())).tolist())]
    data = {"factors": factors, "order": {"strategy": strategy, "control": control},
            "report": {"compare": compare_cfg, **report}, "workload": {"metrics": metrics or {}}, "warmup": 0}
    return Spec("test.yaml", data, "0", cells, knobs or {})


def runs_frame(rows):
    table = pd.DataFrame(rows)
    defaults = {"status": "ok", "warmup": False, "control": False, "attempt": 1, "host": "h1"}
    for col, value in defaults.items():
        table[col] = table[col].fillna(value) if col in table.columns else value
    table["run_id"] = [f"r{i}" for i in range(len(table))]
    table["seq"] = range(1, len(table) + 1)
    return table


def two_level_campaign(rng, n, ratio=1.0, sd=0.05):
    rows = []
    for level, scale in (("off", 1.0), ("on", ratio)):
        for v in rng.normal(100.0 * scale, 100.0 * sd, n):
            rows.append({"cell_id": f"c_{level}", "ht": level, "tps": v})
    return runs_frame(rows)


HT_SPEC = make_spec({"ht": ["off", "on"]}, {"factor": "ht", "baseline": "off", "by": []},
                    metrics={"tps": {"better": "higher", "unit": "tx/s"}})
#: The same at a practical threshold of 2 %: a +5 % effect is one that matters.
HT_SPEC_2PCT = make_spec({"ht": ["off", "on"]}, {"factor": "ht", "baseline": "off", "by": []},
                         metrics={"tps": {"better": "higher", "unit": "tx/s"}}, threshold="2%")


def significant(table) -> pd.Series:
    """Rows whose Holm-adjusted test rejects "no change": the false detections of the
    test itself. A verdict better/worse also needs the estimate beyond the practical
    threshold (docs/report.md, "Verdicts"), so it is rarer still."""
    return table["p_value"] < ALPHA


# ----------------------------------------------------------------- known truth

def test_false_detection_rate_stays_near_alpha():
    # 200 campaigns without a real difference: the share of significant comparisons
    # must be compatible with alpha (99.9 % binomial interval); a changed verdict is
    # never given without one.
    rng = np.random.default_rng(20240601)
    hits = 0
    for _ in range(200):
        table = compare(HT_SPEC, two_level_campaign(rng, 5), ["tps"]).table
        hits += significant(table).iloc[0]
        assert table["verdict"].iloc[0] not in CHANGED or significant(table).iloc[0]
    low, high = sps.binom.interval(0.999, 200, ALPHA)
    assert low <= hits <= high, hits


def test_ratio_interval_covers_the_true_effect():
    # With a real +5 % effect the 95 % interval of the relative difference covers 5 %
    # in about 95 % of campaigns, and at a 2 % practical threshold the effect is
    # usually detected (at the default 5 % it is the threshold itself: found about half
    # the time, docs/report.md "Calibration").
    rng = np.random.default_rng(7)
    covered = detected = 0
    sims = 300
    for _ in range(sims):
        row = compare(HT_SPEC_2PCT, two_level_campaign(rng, 8, ratio=1.05, sd=0.03), ["tps"]).table.iloc[0]
        covered += row["ci_low_pct"] <= 5.0 <= row["ci_high_pct"]
        detected += row["verdict"] == "better"
    low, high = sps.binom.interval(0.999, sims, 0.95)
    assert low <= covered <= high, covered
    assert detected / sims > 0.8


def test_mean_intervals_cover_the_true_mean_93_to_97_percent():
    rng = np.random.default_rng(11)
    cells, n = 2000, 6
    values = rng.normal(250.0, 20.0, (cells, n))
    runs = runs_frame([{"cell_id": f"c{i}", "f": 0, "m": v} for i in range(cells) for v in values[i]])
    summary = summarize(runs, ["f"], {"m": ""})
    coverage = ((summary["ci_low"] <= 250.0) & (250.0 <= summary["ci_high"])).mean()
    assert 0.93 <= coverage <= 0.97, coverage
    assert set(summary["ci_method"]) == {"t"}


def test_skewed_positive_cells_get_the_cox_interval_and_say_so():
    # A positive metric (ms) gets the modified Cox interval on every row, whatever a
    # sample's skewness (the skew-triggered BCa bootstrap under-covered the cells it
    # chose); exponential runs are more skewed than the lognormal it is made for.
    rng = np.random.default_rng(3)
    cells, n = 300, 20
    values = rng.exponential(10.0, (cells, n))
    runs = runs_frame([{"cell_id": f"c{i}", "f": 0, "m": v} for i in range(cells) for v in values[i]])
    summary = summarize(runs, ["f"], {"m": "ms"})
    assert set(summary["ci_method"]) == {"cox"} and (summary["ci_low"] > 0).all()
    coverage = ((summary["ci_low"] <= 10.0) & (10.0 <= summary["ci_high"])).mean()
    assert coverage >= 0.90, coverage   # small, very skewed samples under-cover somewhat with any method


def test_interval_does_not_depend_on_run_order():
    rng = np.random.default_rng(4)
    runs = runs_frame([{"cell_id": "c", "f": 0, "m": v} for v in rng.lognormal(0, 1.2, 30)])
    a = summarize(runs, ["f"], {"m": ""})
    b = summarize(runs.sample(frac=1.0, random_state=1), ["f"], {"m": ""})
    assert a["ci_method"].iloc[0] == "t"
    assert (a["ci_low"].iloc[0], a["ci_high"].iloc[0]) == pytest.approx((b["ci_low"].iloc[0], b["ci_high"].iloc[0]))


def control_campaign(rng, n_control=40, drift=0.0, kind="step", noise=0.01, seconds=60):
    rows = []
    start = pd.Timestamp("2025-01-01T00:00:00Z")
    for i in range(n_control):
        level = 1.0
        if kind == "step" and i >= n_control // 2:
            level += drift
        elif kind == "trend":
            level += drift * i / (n_control - 1)
        rows.append({"cell_id": "ctl", "ht": "on", "control": True,
                     "started_at": (start + pd.Timedelta(seconds=seconds * i)).isoformat(),
                     "tps": 1000.0 * level * rng.normal(1.0, noise)})
    return runs_frame(rows)


def test_injected_5_percent_step_in_the_control_cell_is_flagged():
    rng = np.random.default_rng(5)
    table = sanity.drift(control_campaign(rng, drift=-0.05), ["tps"])
    row = table.iloc[0]
    assert bool(row["shift_flagged"]), row
    assert row["shift_after"] == 20
    assert row["shift_change"] == pytest.approx(-0.05, abs=0.01)


def test_injected_5_percent_trend_in_the_control_cell_is_flagged():
    rng = np.random.default_rng(6)
    row = sanity.drift(control_campaign(rng, drift=0.05, kind="trend"), ["tps"]).iloc[0]
    assert bool(row["flagged"])
    assert bool(row["trend_flagged"])
    assert row["trend_change"] == pytest.approx(0.05, abs=0.015)


def test_stable_control_cell_rarely_raises_drift():
    rng = np.random.default_rng(8)
    alarms = sum(bool(sanity.drift(control_campaign(rng, n_control=30), ["tps"])["flagged"].iloc[0])
                 for _ in range(60))
    assert alarms <= 6


def test_drift_on_a_big_campaign_uses_the_approximation_and_ignores_tiny_shifts():
    rng = np.random.default_rng(9)
    big = control_campaign(rng, n_control=3000, drift=0.002, noise=0.005, seconds=1)
    row = sanity.drift(big, ["tps"]).iloc[0]
    # Statistically significant but below the 1 % practical threshold: no warning.
    assert row["p_shift_adj"] < 0.05
    assert not bool(row["flagged"])


# ----------------------------------------------------------------- split-plot analysis

def split_plot_campaign(rng, visits_per_level=6, runs_per_visit=4, visit_sd=0.05, run_sd=0.01, effect=0.0):
    """Whole-plot factor 'ht' (reboot), sub-plot factor 'users'; no effect of ht unless given."""
    rows = []
    visit = 0
    for _rep in range(visits_per_level):
        for ht in rng.permutation(["off", "on"]):
            visit += 1
            shift = rng.normal(0.0, visit_sd)
            for users in rng.permutation([10, 20]):
                for _ in range(runs_per_visit // 2):
                    base = 100.0 * (1 + (effect if ht == "on" else 0.0)) * (1.5 if users == 20 else 1.0)
                    rows.append({"cell_id": f"{ht}-{users}", "ht": ht, "users": users, "visit": visit,
                                 "tps": base * (1 + shift) * rng.normal(1.0, run_sd)})
    return runs_frame(rows)


SPLIT_SPEC = make_spec({"ht": ["off", "on"], "users": [10, 20]}, {"factor": "ht", "baseline": "off", "by": ["users"]},
                       strategy="restricted", knobs={"ht": Knob("ht", "knob_ht", "reboot", 300.0)},
                       metrics={"tps": {"better": "higher"}})
NAIVE_SPEC = make_spec({"ht": ["off", "on"], "users": [10, 20]}, {"factor": "ht", "baseline": "off", "by": ["users"]},
                       strategy="random", metrics={"tps": {"better": "higher"}})


def test_whole_plot_factor_uses_the_mixed_model_and_says_why():
    rng = np.random.default_rng(1)
    result = compare(SPLIT_SPEC, split_plot_campaign(rng, effect=0.3), ["tps"])
    assert len(result.table) == 2
    row = result.table.iloc[0]
    assert row["analysis"] == "mixed_model"
    assert row["verdict"] == "better"
    assert row["df"] == 12 - 2            # visits minus whole-plot settings
    assert result.explanations[0]["analysis"] == "mixed_model"
    assert "visit" in result.explanations[0]["why"]
    assert row["rel_diff_pct"] == pytest.approx(30.0, abs=8.0)


def test_mixed_model_keeps_false_detections_near_alpha_where_welch_does_not():
    # Visit-to-visit variation (5 %) dwarfs run-to-run noise (1 %): Welch on runs
    # mistakes the visits' luck for an effect of ht; the mixed model does not.
    rng = np.random.default_rng(2)
    sims = 60
    mixed = naive = 0
    for _ in range(sims):
        runs = split_plot_campaign(rng, runs_per_visit=8)
        # Significance, not the verdict: a false effect of the visits' size is mostly
        # inside the 5 % threshold, yet Welch's test on runs calls it real.
        mixed += significant(compare(SPLIT_SPEC, runs, ["tps"]).table).iloc[0]
        naive += significant(compare(NAIVE_SPEC, runs, ["tps"]).table).iloc[0]
    # Two comparisons per campaign (users 10 and 20), Holm-corrected: family-wise rate <= alpha.
    assert mixed <= sps.binom.ppf(0.999, sims, ALPHA), mixed
    assert naive >= sims * 0.15, naive     # about 30 % in the long run


def test_sub_plot_factor_of_a_restricted_plan_uses_welch():
    spec = make_spec({"ht": ["off", "on"], "users": [10, 20]}, {"factor": "users", "baseline": 10, "by": ["ht"]},
                     strategy="restricted", knobs={"ht": Knob("ht", "knob_ht", "reboot", 300.0)})
    result = compare(spec, split_plot_campaign(np.random.default_rng(3)), ["tps"])
    assert set(result.table["analysis"]) == {"welch"}
    assert "sub-plot" in result.explanations[0]["why"]


def test_mixed_model_falls_back_to_visit_means_without_enough_visits():
    rng = np.random.default_rng(4)
    runs = split_plot_campaign(rng, visits_per_level=1)
    result = compare(SPLIT_SPEC, runs, ["tps"])
    assert set(result.table["analysis"]) == {"welch_visit_means"}
    assert set(result.table["verdict"]) == {"insufficient_data"}
    assert result.notes


# ----------------------------------------------------------------- comparison details

def test_fieller_interval_matches_welch_decision():
    rng = np.random.default_rng(12)
    for _ in range(50):
        a, b = rng.normal(103, 4, 6), rng.normal(100, 4, 7)
        p, df = welch_test([a.mean()], [a.var(ddof=1)], [6], [b.mean()], [b.var(ddof=1)], [7])
        lo, hi = fieller_ratio_ci(a.mean(), b.mean(), a.var(ddof=1) / 6, b.var(ddof=1) / 7, 0.0, df)
        assert (p[0] < 0.05) == (not (lo[0] <= 1.0 <= hi[0]))
        assert sps.ttest_ind(a, b, equal_var=False).pvalue == pytest.approx(p[0])


def test_fieller_interval_is_unbounded_when_the_baseline_could_be_zero():
    lo, hi = fieller_ratio_ci(5.0, 0.1, 1.0, 1.0, 0.0, 10)
    assert math.isnan(lo[0]) and math.isnan(hi[0])


def test_holm_adjustment():
    adjusted = holm([0.01, 0.04, 0.03, np.nan])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[3])


@pytest.mark.parametrize("metric, declared, direction", [
    ("read_iops", None, "higher"), ("write_bw_kib", None, "higher"), ("read_io_kib", None, "higher"),
    ("read_clat_p99_us", None, "lower"), ("write_clat_mean_us", None, "lower"),
    ("tps", {"tps": {"better": "higher"}}, "higher"), ("p99_ms", {"p99_ms": {"better": "lower"}}, "lower"),
    ("read_runtime_ms", None, ""), ("whatever", {"whatever": {"unit": "s"}}, ""),
])
def test_metric_direction(metric, declared, direction):
    assert metric_direction(metric, declared) == direction


def test_verdict_follows_the_metric_direction():
    rng = np.random.default_rng(13)
    rows = []
    for level, scale in (("off", 1.0), ("on", 1.2)):
        for _ in range(6):
            rows.append({"cell_id": level, "ht": level, "tps": 100 * scale * rng.normal(1, 0.01),
                         "read_clat_p99_us": 50 * scale * rng.normal(1, 0.01), "other": scale * rng.normal(1, 0.01)})
    table = compare(HT_SPEC, runs_frame(rows), ["tps", "read_clat_p99_us", "other"]).table.set_index("metric")
    assert table.loc["tps", "verdict"] == "better"
    assert table.loc["read_clat_p99_us", "verdict"] == "worse"
    assert table.loc["other", "verdict"] == "higher"


def test_comparisons_csv_columns_and_by_values():
    spec = make_spec({"ra": [0, 4096], "bs": ["8k", "64k"]}, {"factor": "ra", "baseline": 0, "by": ["bs"]})
    rng = np.random.default_rng(14)
    rows = [{"cell_id": f"{ra}-{bs}", "ra": ra, "bs": bs, "read_bw_kib": rng.normal(100 + ra / 100, 2)}
            for ra in (0, 4096) for bs in ("8k", "64k") for _ in range(4)]
    table = compare(spec, runs_frame(rows), ["read_bw_kib"]).table
    assert list(table.columns) == comparison_columns(["bs"])
    assert list(table.columns[:5]) == ["metric", "factor", "level", "baseline", "bs"]
    assert table["bs"].tolist() == ["8k", "64k"]          # spec order, not text order
    assert table["level"].tolist() == [4096, 4096] and table["baseline"].tolist() == [0, 0]
    assert table["p_value"].tolist() == pytest.approx(holm(table["p_value_unadjusted"]).tolist())
    text = sentence(table.iloc[0].to_dict(), ["bs"])
    assert text.startswith("ra=4096 vs 0: +") and "read_bw_kib at bs=8k [Holm-adjusted CI +" in text
    assert text.endswith("better (p<0.001, welch)")


def test_by_factor_named_like_a_column_is_prefixed():
    assert comparison_columns(["level"])[4] == "by_level"


def test_levels_match_across_text_and_numbers():
    assert level_key(4096) == level_key(4096.0) == level_key("4096")
    assert level_key(True) == level_key("True") == "true"


def test_one_sided_data_gives_insufficient_data():
    runs = runs_frame([{"cell_id": "off", "ht": "off", "tps": 1.0}, {"cell_id": "off", "ht": "off", "tps": 2.0},
                       {"cell_id": "on", "ht": "on", "tps": 3.0}])
    row = compare(HT_SPEC, runs, ["tps"]).table.iloc[0]
    assert row["verdict"] == "insufficient_data" and row["n_level"] == 1
    assert "not enough data" in sentence(row.to_dict(), [])


def test_no_compare_configured_gives_empty_table():
    spec = make_spec({"ht": ["off", "on"]})
    result = compare(spec, two_level_campaign(np.random.default_rng(1), 3), ["tps"])
    assert result.config is None and result.table.empty


# ----------------------------------------------------------------- verdicts at the edges

def test_direction_comes_from_the_difference_with_a_negative_baseline():
    # A higher-is-better metric at -10 (baseline) and -5 (level): the level is higher,
    # so better, and the relative difference (level - baseline) / |baseline| is +50 %.
    rng = np.random.default_rng(41)
    rows = [{"cell_id": lv, "ht": lv, "tps": v}
            for lv, centre in (("off", -10.0), ("on", -5.0)) for v in rng.normal(centre, 0.2, 6)]
    row = compare(HT_SPEC, runs_frame(rows), ["tps"]).table.iloc[0]
    assert row["verdict"] == "better"
    assert row["rel_diff_pct"] == pytest.approx(50.0, abs=5.0)
    assert 0 < row["ci_low_pct"] < row["rel_diff_pct"] < row["ci_high_pct"]
    text = sentence(row.to_dict(), [])
    assert text.startswith("ht=on vs off: +") and "– better" in text


def test_negative_baseline_worse_when_lower():
    rng = np.random.default_rng(42)
    rows = [{"cell_id": lv, "ht": lv, "tps": v}
            for lv, centre in (("off", -10.0), ("on", -15.0)) for v in rng.normal(centre, 0.2, 6)]
    row = compare(HT_SPEC, runs_frame(rows), ["tps"]).table.iloc[0]
    assert row["verdict"] == "worse" and row["rel_diff_pct"] == pytest.approx(-50.0, abs=5.0)


def test_two_sides_without_variation_give_insufficient_data():
    # Every run of both sides gave the same number: there is no noise estimate, so no
    # test; p must not be 0 and the row must not take a place in Holm's family.
    runs = runs_frame([{"cell_id": lv, "ht": lv, "tps": v} for lv, v in (("off", 5.0), ("on", 6.0)) for _ in range(4)])
    result = compare(HT_SPEC, runs, ["tps"])
    row = result.table.iloc[0]
    assert row["verdict"] == "insufficient_data"
    assert math.isnan(row["p_value"]) and math.isnan(row["p_value_unadjusted"])
    assert row["rel_diff_pct"] == pytest.approx(20.0)        # still shown: it is what was measured
    assert any("no run-to-run variation" in n for n in result.notes)


def test_whole_plot_factor_with_two_visits_per_level_is_inconclusive_with_a_warning():
    # Two visits per level: the mixed model has 2 error degrees of freedom and little
    # power, so its interval holds both no change and a change beyond the threshold.
    rng = np.random.default_rng(43)
    result = compare(SPLIT_SPEC, split_plot_campaign(rng, visits_per_level=2), ["tps"])
    assert set(result.table["analysis"]) == {"mixed_model"}
    assert set(result.table["verdict"]) == {"inconclusive"}
    assert result.warnings and result.warnings[0]["check"] == "few_units"
    assert "2 visits" in result.warnings[0]["message"] and "ht" in result.warnings[0]["message"]
    # A difference the test does find is still reported: the test itself is valid.
    strong = compare(SPLIT_SPEC, split_plot_campaign(rng, visits_per_level=2, visit_sd=0.002, effect=0.5), ["tps"])
    assert set(strong.table["verdict"]) == {"better"}


def test_three_visits_per_level_find_no_change_and_no_warning():
    rng = np.random.default_rng(44)
    result = compare(SPLIT_SPEC, split_plot_campaign(rng, visits_per_level=3), ["tps"])
    assert not set(result.table["verdict"]) & CHANGED and not result.warnings


def many_comparisons(rng, effect_at=0, effect=0.03, n=5, sd=0.03, k=16):
    """One factor 'ht' compared within 'users' (k levels), one real effect."""
    rows = []
    for u in range(k):
        for ht in ("off", "on"):
            scale = 1 + (effect if ht == "on" and u == effect_at else 0.0)
            for v in rng.normal(100.0 * scale, 100.0 * sd, n):
                rows.append({"cell_id": f"{ht}-{u}", "ht": ht, "users": u, "tps": v})
    return runs_frame(rows)


MANY_SPEC = make_spec({"ht": ["off", "on"], "users": list(range(16))},
                      {"factor": "ht", "baseline": "off", "by": ["users"]},
                      metrics={"tps": {"better": "higher"}})


def test_adjusted_interval_agrees_with_the_holm_verdict():
    # Holm-consistent intervals: each excludes 0 % exactly when the verdict is a
    # difference, and contains the unadjusted 95 % interval (kept in the csv).
    rng = np.random.default_rng(45)
    disagreements = 0
    for _ in range(40):
        table = compare(MANY_SPEC, many_comparisons(rng), ["tps"]).table
        assert {"ci_low_adj_pct", "ci_high_adj_pct"} <= set(table.columns)
        lo, hi = table["ci_low_adj_pct"], table["ci_high_adj_pct"]
        excludes = (lo > 0) | (hi < 0)
        assert (excludes == significant(table)).all()
        # better/worse: significant and the estimate beyond the 5 % threshold.
        assert (table["verdict"].isin(["better", "worse"]) == (excludes & (table["rel_diff_pct"].abs() > 5.0))).all()
        assert (lo <= table["ci_low_pct"] + 1e-9).all() and (hi >= table["ci_high_pct"] - 1e-9).all()
        raw = (table["ci_low_pct"] > 0) | (table["ci_high_pct"] < 0)
        disagreements += int((raw & ~excludes).sum())
    assert disagreements > 0        # the unadjusted interval alone would contradict some verdicts


def test_adjusted_interval_consistent_after_the_first_retained_comparison():
    # Holm stops at the first p above its threshold: every later comparison is kept,
    # even one whose own threshold it would pass; its interval must contain 0.
    from benchmatrix.analyze.verdict import adjusted_levels

    levels = adjusted_levels(np.array([0.001, 0.03, 0.02, np.nan, 0.5]), 0.05)
    # m = 4 finite: 0.001 < 0.05/4 is rejected; 0.02 > 0.05/3 is kept, and so is every later one.
    assert levels[0] == pytest.approx(1 - 0.05 / 4)
    assert levels[2] == pytest.approx(1 - 0.05 / 3) and levels[1] == pytest.approx(1 - 0.05 / 3)
    assert levels[4] == pytest.approx(1 - 0.05 / 3) and math.isnan(levels[3])


def test_family_is_the_primary_metrics_and_the_rest_is_descriptive():
    from benchmatrix.analyze.comparisons import family_metrics

    rng = np.random.default_rng(46)
    rows = []
    for lv, scale in (("off", 1.0), ("on", 1.2)):
        for _ in range(6):
            rows.append({"cell_id": lv, "ht": lv, "tps": 100 * scale * rng.normal(1, 0.01),
                         "iops": 50 * scale * rng.normal(1, 0.01)})
    runs = runs_frame(rows)
    spec = make_spec({"ht": ["off", "on"]}, {"factor": "ht", "baseline": "off", "by": []},
                     metrics={"tps": {"better": "higher"}, "iops": {"better": "higher"}})
    spec.data["report"].update(metrics=["tps", "iops"], primary=["tps"])
    assert family_metrics(spec) == ["tps"]
    table = compare(spec, runs, ["tps", "iops"]).table.set_index("metric")
    assert table.loc["tps", "verdict"] == "better"
    assert table.loc["tps", "p_value"] == pytest.approx(table.loc["tps", "p_value_unadjusted"])  # family of one
    assert table.loc["iops", "verdict"] == "descriptive"
    assert math.isnan(table.loc["iops", "p_value"]) and table.loc["iops", "p_value_unadjusted"] < 0.001
    assert math.isnan(table.loc["iops", "ci_low_adj_pct"]) and table.loc["iops", "ci_low_pct"] > 0
    assert "descriptive" in sentence({**table.loc["iops"].to_dict(), "metric": "iops"}, [])
    spec.data["report"].pop("primary")
    assert family_metrics(spec) == ["tps", "iops"]            # the safe default: every report metric
    assert family_metrics(spec, ["a", "b"]) == ["tps", "iops"]
    spec.data["report"]["metrics"] = []
    assert family_metrics(spec, ["a", "b"]) == ["a", "b"]     # report.metrics empty: every measured metric


# ----------------------------------------------------------------- sanity checks

def test_outliers_by_median_mad_and_normal_noise_stays_quiet():
    rng = np.random.default_rng(15)
    rows = [{"cell_id": f"c{c}", "m": v} for c in range(200) for v in rng.normal(100, 2, 5)]
    eff = runs_frame(rows)
    quiet = sanity.outliers(eff, ["m"])
    assert len(quiet) <= 0.01 * len(eff)      # a fifth of the cells would flag with the cell MAD alone
    eff.loc[7, "m"] = 130.0
    loud = sanity.outliers(eff, ["m"])
    assert "r7" in set(loud["run_id"])


def test_warmup_effect_in_first_measured_run_is_flagged():
    rng = np.random.default_rng(16)
    rows = []
    for c in range(10):
        rows.append({"cell_id": f"c{c}", "warmup": True, "m": 50.0})
        for i in range(5):
            rows.append({"cell_id": f"c{c}", "m": 100 * (0.9 if i == 0 else 1.0) * rng.normal(1, 0.005)})
    runs = runs_frame(rows)
    from benchmatrix.analyze.stats import effective_runs

    found = sanity.warmup_warnings(runs, effective_runs(runs), ["m"], 1, ALPHA, 0.01, {})
    assert len(found) == 1
    assert found[0]["runs_total"] >= 10          # the ten first measured runs
    assert "r1" in found[0]["runs"]
    assert any("Wilcoxon" in d for d in found[0]["details"])


def test_warmup_check_with_one_measured_run_per_cell_is_quiet():
    # Nothing to compare a cell's first measured run with: no warning, and no crash
    # (the report job failed with a pandas TypeError on such campaigns).
    rows = []
    for c in range(4):
        rows.append({"cell_id": f"c{c}", "warmup": True, "m": 50.0})
        rows.append({"cell_id": f"c{c}", "m": 100.0 + c})
    runs = runs_frame(rows)
    from benchmatrix.analyze.stats import effective_runs

    assert sanity.warmup_warnings(runs, effective_runs(runs), ["m"], 1, ALPHA, 0.01, {}) == []


def test_record_notes_find_knob_mismatch_fact_change_overlap_and_tool_warnings():
    records = [
        {"run_id": "a", "attempt": 1, "host": "h", "started_at": "2025-01-01T00:00:00Z",
         "knobs": {"read_ahead_kb": {"intended": 4096, "actual": "4096", "changed": True, "seconds": 0.1}},
         "host_facts": {"kernel": "6.1", "gathered_at": "x"}},
        {"run_id": "b", "attempt": 1, "host": "h", "started_at": "2025-01-01T00:01:00Z",
         "knobs": {"read_ahead_kb": {"intended": 4096, "actual": 128}},
         "host_facts": {"kernel": "6.1", "gathered_at": "y"},
         "details": {"warnings": ["fio: note: both iodepth >= 1 and synchronous I/O engine"],
                     "job_timing": [{"name": "seq", "start_ms": 0, "end_ms": 5000},
                                    {"name": "rand", "start_ms": 1000, "end_ms": 4000}]}},
        {"run_id": "c", "attempt": 1, "host": "h", "started_at": "2025-01-01T00:02:00Z",
         "host_facts": {"kernel": "6.8", "gathered_at": "z"}},
        {"run_id": "d", "attempt": 1, "host": "h", "started_at": "2025-01-01T00:03:00Z"},   # old record: no fields
    ]
    notes = sanity.record_notes(records)
    by_check = {c: part for c, part in notes.groupby("check")}
    assert by_check["knob"]["run_id"].tolist() == ["b"]
    assert "intended 4096, actual 128" in by_check["knob"]["detail"].iloc[0]
    assert by_check["host_facts"]["run_id"].tolist() == ["c"]
    assert "kernel: 6.1 → 6.8" in by_check["host_facts"]["detail"].iloc[0]
    assert by_check["fio_overlap"]["run_id"].tolist() == ["b"]
    assert by_check["tool"]["run_id"].tolist() == ["b"]
    warns = {w["check"]: w for w in sanity.note_warnings(notes)}
    assert set(warns) == {"knob", "host_facts", "fio_overlap", "tool"}
    assert warns["knob"]["runs"] == ["b"]


def test_failed_rerun_and_missing_cells_are_reported():
    runs = runs_frame([
        {"cell_id": "c1", "m": 1.0}, {"cell_id": "c1", "m": 1.0, "status": "failed", "reason": "exit 1"},
        {"cell_id": "c2", "m": 1.0},
    ])
    runs.loc[2, "run_id"] = "r0"                 # r0 ran twice
    runs.loc[2, "attempt"] = 2
    found = {w["check"]: w for w in sanity.failure_warnings(runs, {})}
    assert found["failed"]["runs"] == ["r1"] and "exit 1" in found["failed"]["details"][0]
    assert found["rerun"]["runs"] == ["r0"]
    plan = pd.DataFrame({"run_id": ["r0", "r1", "r9"], "cell_id": ["c1", "c1", "c2"],
                         "warmup": "false", "control": "false"})
    from benchmatrix.analyze.stats import effective_runs

    missing = sanity.missing_warnings(plan, effective_runs(runs), {})
    assert set(missing[0]["runs"]) == {"r1", "r9"}


# ----------------------------------------------------------------- several hosts

# The effects of these tests are 4-10 %: a practical threshold of 2 % makes them matter.
HOST_SPEC = make_spec({"ht": ["off", "on"], "users": [10, 20]}, {"factor": "ht", "baseline": "off", "by": ["users"]},
                      metrics={"tps": {"better": "higher", "unit": "tx/s"}}, threshold="2%")


def host_spec(mode, base=HOST_SPEC):
    report = {k: v for k, v in base.data["report"].items() if k != "compare"}
    spec = make_spec(base.data["factors"], base.data["report"]["compare"], strategy=base.data["order"]["strategy"],
                     knobs=base.knobs, metrics=base.data["workload"]["metrics"], **report)
    spec.data["hosts_mode"] = mode
    return spec


def host_campaign(rng, offsets, effect, per_host, sd=0.01, share=None):
    """Cells ht x users on each host: ``per_host`` runs of every cell on every host,
    or ``share[(ht, host)]`` runs; host ``h`` multiplies every value by offsets[h]."""
    rows = []
    for host, offset in offsets.items():
        for ht in ("off", "on"):
            for users in (10, 20):
                n = share[(ht, host)] if share else per_host
                for v in rng.normal(1.0, sd, n):
                    rows.append({"cell_id": f"{ht}-{users}", "ht": ht, "users": users, "host": host,
                                 "tps": 100.0 * offset * (1 + effect * (ht == "on")) * (1.5 if users == 20 else 1) * v})
    return runs_frame(rows)


def one_host(runs):
    # The same runs as if they came from one machine: the analysis that ignores hosts.
    return runs.assign(host="h1")


def test_replicate_hosts_compare_within_each_host_and_name_it():
    # Three hosts with very different speeds, a real +5 % effect on each: pooled over
    # the hosts the offsets swamp the effect; within each host it is plain.
    rng = np.random.default_rng(21)
    runs = host_campaign(rng, {"h1": 1.0, "h2": 1.3, "h3": 0.75}, 0.05, 5)
    result = compare(host_spec("replicate"), runs, ["tps"])
    table = result.table
    assert list(table.columns) == comparison_columns(["users"], host=True)
    assert list(table.columns[:6]) == ["metric", "factor", "level", "baseline", "host", "users"]
    assert table["host"].tolist() == ["h1", "h1", "h2", "h2", "h3", "h3"]
    assert set(table["verdict"]) == {"better"} and set(table["analysis"]) == {"welch"}
    assert ((table["ci_low_pct"] <= 5.0) & (5.0 <= table["ci_high_pct"])).sum() >= 4
    # Holm runs across every row of every host.
    assert table["p_value"].tolist() == pytest.approx(holm(table["p_value_unadjusted"]).tolist())
    assert "within one host" in result.explanations[0]["why"]
    text = sentence(table.iloc[2].to_dict(), ["users"])
    assert " at users=10 on h2 [Holm-adjusted CI +" in text and text.endswith(", welch)") and "– better (p" in text
    pooled = compare(HOST_SPEC, one_host(runs), ["tps"]).table
    assert not set(pooled["verdict"]) & CHANGED          # the offsets mask the effect


def test_replicate_host_shows_an_effect_found_on_one_host_only():
    rng = np.random.default_rng(22)
    runs = host_campaign(rng, {"h1": 1.0, "h2": 1.0}, 0.0, 5)
    runs.loc[(runs["host"] == "h1") & (runs["ht"] == "on"), "tps"] *= 1.1
    table = compare(host_spec("replicate"), runs, ["tps"]).table
    assert set(table.loc[table["host"] == "h1", "verdict"]) == {"better"}
    assert not set(table.loc[table["host"] == "h2", "verdict"]) & CHANGED
    found = sanity.host_effect_warnings(table, ["users"])
    assert len(found) == 1 and found[0]["check"] == "host_effects"
    assert any("better on h1" in d and ("equivalent on h2" in d or "inconclusive on h2" in d)
               for d in found[0]["details"])


def test_partition_blocking_removes_a_host_offset_that_masks_an_effect():
    # Each cell's runs spread evenly over three hosts 25 % apart, a real +4 % effect:
    # Welch on the pooled runs sees the hosts' spread as noise, the blocked fit does not.
    rng = np.random.default_rng(23)
    runs = host_campaign(rng, {"h1": 1.0, "h2": 1.25, "h3": 0.8}, 0.04, 2)
    result = compare(host_spec("partition"), runs, ["tps"])
    table = result.table
    assert table["host"].tolist() == ["all", "all"]
    assert set(table["analysis"]) == {"blocked_by_host"} and set(table["verdict"]) == {"better"}
    assert table["rel_diff_pct"].between(2.0, 6.0).all()
    assert table["df"].tolist() == [12 - 2 - 2] * 2             # runs - cells - (hosts - 1), per comparison
    assert result.explanations[0]["analysis"] == "blocked_by_host"
    assert "host" in result.explanations[0]["why"]
    assert "on all hosts" in sentence(table.iloc[0].to_dict(), ["users"])
    naive = compare(HOST_SPEC, one_host(runs), ["tps"]).table
    assert not set(naive["verdict"]) & CHANGED


def test_partition_blocking_removes_a_host_offset_that_fakes_an_effect():
    # No effect at all, but "on" ran mostly on the fast host: Welch on the pooled runs
    # finds an "effect" that is the host's; the blocked fit finds none (false
    # detections near alpha over many campaigns, estimates near 0).
    rng = np.random.default_rng(24)
    share = {("off", "h1"): 20, ("off", "h2"): 10, ("on", "h1"): 10, ("on", "h2"): 20}
    sims, naive_hits, blocked_hits, worst = 100, 0, 0, 0.0
    for _ in range(sims):
        runs = host_campaign(rng, {"h1": 1.0, "h2": 1.2}, 0.0, 0, share=share)
        naive = compare(HOST_SPEC, one_host(runs), ["tps"]).table
        naive_hits += (naive["verdict"] == "better").any()
        table = compare(host_spec("partition"), runs, ["tps"]).table
        blocked_hits += table["verdict"].isin(CHANGED).any()
        worst = max(worst, table["rel_diff_pct"].abs().max())
    assert naive_hits >= 0.6 * sims, naive_hits               # the host's share shows as +6.7 %
    assert blocked_hits <= sps.binom.ppf(0.999, sims, ALPHA), blocked_hits
    assert worst < 1.5


def test_blocked_fit_matches_least_squares_with_host_fixed_effects():
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(25)
    share = {("off", "h1"): 3, ("off", "h2"): 5, ("off", "h3"): 2, ("on", "h1"): 4, ("on", "h2"): 2, ("on", "h3"): 3}
    runs = host_campaign(rng, {"h1": 1.0, "h2": 1.1, "h3": 0.9}, 0.03, 0, sd=0.02, share=share)
    row = compare(host_spec("partition"), runs, ["tps"]).table.iloc[0]
    # tps (tx/s) is a positive metric: the fit is on its log values, the means geometric.
    sub = runs[runs["users"] == 10].assign(log_tps=lambda t: np.log(t["tps"]))
    fit = smf.ols("log_tps ~ C(ht) + C(host, Sum)", data=sub).fit()
    assert row["scale"] == "log"
    assert math.log(row["mean_level"] / row["mean_baseline"]) == pytest.approx(fit.params["C(ht)[T.on]"])
    assert row["p_value_unadjusted"] == pytest.approx(fit.pvalues["C(ht)[T.on]"])
    assert row["df"] == fit.df_resid


def test_partition_blocking_keeps_false_detections_near_alpha():
    rng = np.random.default_rng(26)
    sims, hits = 200, 0
    spec = host_spec("partition", HT_SPEC)
    for _ in range(sims):
        offsets = dict(zip(["h1", "h2", "h3"], rng.normal(1.0, 0.2, 3)))
        rows = [{"cell_id": f"c_{ht}", "ht": ht, "host": h, "tps": 100 * o * rng.normal(1, 0.02)}
                for h, o in offsets.items() for ht in ("off", "on") for _ in range(2)]
        hits += significant(compare(spec, runs_frame(rows), ["tps"]).table).iloc[0]
    low, high = sps.binom.interval(0.999, sims, ALPHA)
    assert low <= hits <= high, hits


def test_partition_with_host_confounded_with_the_level_gives_insufficient_data():
    rng = np.random.default_rng(27)
    share = {("off", "h1"): 4, ("off", "h2"): 0, ("on", "h1"): 0, ("on", "h2"): 4}
    runs = host_campaign(rng, {"h1": 1.0, "h2": 1.2}, 0.0, 0, share=share)
    result = compare(host_spec("partition"), runs, ["tps"])
    assert set(result.table["verdict"]) == {"insufficient_data"}
    assert any("cannot be separated" in n for n in result.notes)


def test_partition_whole_plot_factor_uses_the_mixed_model_with_host_blocks():
    rng = np.random.default_rng(28)
    runs = split_plot_campaign(rng, effect=0.3)
    # Replicates alternate between two hosts; h2 is 20 % faster.
    runs["host"] = np.where(((runs["visit"] - 1) // 2) % 2 == 0, "h1", "h2")
    runs.loc[runs["host"] == "h2", "tps"] *= 1.2
    spec = host_spec("partition", SPLIT_SPEC)
    result = compare(spec, runs, ["tps"])
    row = result.table.iloc[0]
    assert row["analysis"] == "mixed_model_blocked_by_host" and row["host"] == "all"
    assert row["df"] == 12 - 2 - 1                  # visits - whole-plot settings - (hosts - 1)
    assert row["verdict"] == "better"
    assert row["rel_diff_pct"] == pytest.approx(30.0, abs=8.0)
    assert "fixed effect per host" in result.explanations[0]["why"]


def test_single_host_comparisons_have_no_host_column():
    runs = two_level_campaign(np.random.default_rng(29), 5, ratio=1.1)
    table = compare(host_spec("partition", HT_SPEC), runs, ["tps"]).table
    assert "host" not in table.columns and list(table.columns) == comparison_columns([])
    assert table["analysis"].iloc[0] == "welch"
    assert " on " not in sentence(table.iloc[0].to_dict(), [])


def test_hosts_disagree_warning_names_the_cells_and_stays_quiet_for_identical_hosts():
    rng = np.random.default_rng(30)
    rows = [{"cell_id": f"c{c}", "host": h, "m": 100 * (1.08 if (h == "h2" and c < 3) else 1.0) * rng.normal(1, 0.01)}
            for c in range(30) for h in ("h1", "h2", "h3") for _ in range(4)]
    runs = runs_frame(rows)
    from benchmatrix.analyze.stats import effective_runs

    eff = effective_runs(runs)
    table = sanity.host_differences(eff, ["m"], ALPHA, 0.01)
    assert len(table) == 30 and set(table["hosts"]) == {3}
    flagged = set(table.loc[table["flagged"].astype(bool), "cell_id"])
    assert {"c0", "c1", "c2"} <= flagged and len(flagged) <= 4     # Holm: rarely a false alarm
    row = table.set_index("cell_id").loc["c0"]
    assert set(row["host_means"]) == {"h1", "h2", "h3"} and row["spread"] == pytest.approx(0.08, abs=0.02)
    # The F test agrees with scipy's one-way analysis of variance.
    part = eff[eff["cell_id"] == "c5"]
    expected = sps.f_oneway(*[g["m"].to_numpy() for _, g in part.groupby("host")]).pvalue
    assert table.set_index("cell_id").loc["c5", "p_value_unadjusted"] == pytest.approx(expected)
    found = sanity.host_warnings(table, eff, {}, "replicate", 0.01)
    assert len(found) == 1 and found[0]["check"] == "hosts" and f"{len(flagged)} cell(s)" in found[0]["title"]
    assert "generalizing from one machine" in found[0]["message"]
    assert all("h2" in d for d in found[0]["details"][:3])
    spec = make_spec({"f": ["x"]})
    spec.data["hosts_mode"] = "replicate"
    warns, _ = sanity.sanity_warnings(spec, pd.DataFrame(), runs, pd.DataFrame(columns=["cell_id", "metric", "cv"]),
                                      ["m"], pd.DataFrame(columns=sanity.NOTE_COLUMNS))
    assert "hosts" in {w["check"] for w in warns}
    quiet = runs.assign(m=rng.normal(100, 1, len(runs)))
    assert sanity.host_differences(effective_runs(quiet), ["m"], ALPHA, 0.01)["flagged"].astype(bool).sum() <= 1


def test_wilcoxon_p_equals_scipy_bit_for_bit():
    # The warm-up check's test without importing scipy.stats (0.7 s of every collect
    # job): the same p-values, on the exact path and on the ones left to scipy.
    from benchmatrix.analyze.sanity import wilcoxon_p

    rng = np.random.default_rng(21)
    for n in [1, 2, 5, 6, 7, 8, 10, 13, 20, 33, 50, 51, 80]:
        for shift in (0.0, 0.3, 1.5):
            d = rng.normal(shift, 1, n)
            assert wilcoxon_p(d) == sps.wilcoxon(d).pvalue, (n, shift)
            d_all_positive = np.abs(d) + 0.01  # the smallest possible p-value
            assert wilcoxon_p(d_all_positive) == sps.wilcoxon(d_all_positive).pvalue
    tied = np.array([0.1, -0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7])
    zero = np.array([0.0, -0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7])
    for d in (tied, zero):
        assert wilcoxon_p(d) == sps.wilcoxon(d).pvalue


@pytest.mark.parametrize(("low", "high", "shown"), [
    (-100.0, 8213105.8, "[Holm-adjusted CI unbounded]"),
    (-99.999, 50.0, "[Holm-adjusted CI unbounded, +50.0]"),
    (262.9, 1234.5, "[Holm-adjusted CI +262.9, unbounded]"),
    (3.2, 7.0, "[Holm-adjusted CI +3.2, +7.0]"),
])
def test_a_findings_sentence_prints_wild_bounds_by_the_one_unbounded_rule(low, high, shown):
    # The terminal's and the report's findings printed bounds such as +8213105.8 as
    # numbers while the tables said unbounded (issue 38, item 6; issue 33, item 6).
    row = {"factor": "ht", "level": "on", "baseline": "off", "metric": "tps", "rel_diff_pct": 5.1,
           "ci_low_adj_pct": low, "ci_high_adj_pct": high, "verdict": "better", "p_value": 0.003,
           "analysis": "welch"}
    assert shown in sentence(row, [])
