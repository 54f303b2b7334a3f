"""Tests of the statistics against a known truth: comparisons, intervals, drift, the
split-plot analysis, and the sanity checks.

Simulations are seeded, so every run of the suite sees the same data; the tolerances
are binomial intervals wide enough that a correct method passes with almost any seed.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchmatrix import sanity
from benchmatrix.analysis import compare, comparison_columns, level_key, sentence
from benchmatrix.matrix import Cell
from benchmatrix.spec import Knob
from benchmatrix.stats import (fieller_ratio_ci, holm, metric_direction, summarize, welch_test)

ALPHA = 0.05


def make_spec(factors, compare_cfg=None, strategy="random", knobs=None, control=None, metrics=None, **report):
    """A stand-in for a loaded Spec with just what analysis and sanity read."""
    cells = [Cell(f"c{i}", dict(zip(factors, combo)))
             for i, combo in enumerate(pd.MultiIndex.from_product(list(factors.values())).tolist())]
    data = {"factors": factors, "order": {"strategy": strategy, "control": control},
            "report": {"compare": compare_cfg, **report}, "workload": {"metrics": metrics or {}}, "warmup": 0}
    spec = SimpleNamespace(data=data, knobs=knobs or {}, factor_names=list(factors), cells=cells)
    spec.control_cell = lambda: Cell("ctl", control) if control else None
    return spec


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


# ----------------------------------------------------------------- known truth

def test_false_detection_rate_stays_near_alpha():
    # 200 campaigns without a real difference: the share of "detectable difference"
    # verdicts must be compatible with alpha (99.9 % binomial interval).
    rng = np.random.default_rng(20240601)
    hits = 0
    for _ in range(200):
        result = compare(HT_SPEC, two_level_campaign(rng, 5), ["tps"])
        hits += result.table["verdict"].iloc[0] != "no_difference"
    low, high = sps.binom.interval(0.999, 200, ALPHA)
    assert low <= hits <= high, hits


def test_ratio_interval_covers_the_true_effect():
    # With a real +5 % effect the 95 % interval of the relative difference covers 5 %
    # in about 95 % of campaigns, and the effect is usually detected.
    rng = np.random.default_rng(7)
    covered = detected = 0
    sims = 300
    for _ in range(sims):
        row = compare(HT_SPEC, two_level_campaign(rng, 8, ratio=1.05, sd=0.03), ["tps"]).table.iloc[0]
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


def test_skewed_cells_get_a_bootstrap_interval_that_covers():
    rng = np.random.default_rng(3)
    cells, n = 300, 20
    values = rng.exponential(10.0, (cells, n))
    runs = runs_frame([{"cell_id": f"c{i}", "f": 0, "m": v} for i in range(cells) for v in values[i]])
    summary = summarize(runs, ["f"], {"m": "ms"})
    boot = summary["ci_method"] == "bootstrap"
    assert boot.mean() > 0.5
    # A BCa interval follows the skew: longer towards the long tail.
    b = summary[boot]
    assert ((b["ci_high"] - b["mean"]) > (b["mean"] - b["ci_low"])).mean() > 0.9
    coverage = ((summary["ci_low"] <= 10.0) & (10.0 <= summary["ci_high"])).mean()
    assert coverage >= 0.90, coverage   # small skewed samples under-cover somewhat with any method


def test_bootstrap_interval_is_reproducible():
    rng = np.random.default_rng(4)
    runs = runs_frame([{"cell_id": "c", "f": 0, "m": v} for v in rng.lognormal(0, 1.2, 30)])
    a = summarize(runs, ["f"], {"m": ""})
    b = summarize(runs.sample(frac=1.0, random_state=1), ["f"], {"m": ""})
    assert a["ci_method"].iloc[0] == "bootstrap"
    assert (a["ci_low"].iloc[0], a["ci_high"].iloc[0]) == (b["ci_low"].iloc[0], b["ci_high"].iloc[0])


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
    for rep in range(visits_per_level):
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
        mixed += compare(SPLIT_SPEC, runs, ["tps"]).table["verdict"].iloc[0] != "no_difference"
        naive += compare(NAIVE_SPEC, runs, ["tps"]).table["verdict"].iloc[0] != "no_difference"
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
    assert text.startswith("ra=4096 vs 0: +") and "read_bw_kib at bs=8k [95% CI +" in text
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
    from benchmatrix.stats import effective_runs

    found = sanity.warmup_warnings(runs, effective_runs(runs), ["m"], 1, ALPHA, 0.01, {})
    assert len(found) == 1
    assert found[0]["runs_total"] >= 10          # the ten first measured runs
    assert "r1" in found[0]["runs"]
    assert any("Wilcoxon" in d for d in found[0]["details"])


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
    from benchmatrix.stats import effective_runs

    missing = sanity.missing_warnings(plan, effective_runs(runs), {})
    assert set(missing[0]["runs"]) == {"r1", "r9"}
