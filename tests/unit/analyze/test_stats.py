"""Tests of benchmatrix.analyze.stats: which runs count, and the summary.csv numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchmatrix.analyze.stats import (
    bool_column,
    effective_runs,
    run_hosts,
    summarize,
    summarize_by_host,
    summary_by_host_columns,
    summary_columns,
)
from benchmatrix.errors import BenchmatrixError

FACTORS = ["layout", "bs"]
UNITS = {"read_iops": "IO/s", "read_clat_p99_us": "us"}
EXPECTED_COLUMNS = ["cell_id", "layout", "bs", "metric", "unit", "n", "mean", "median", "min",
                    "max", "sd", "cv", "ci_low", "ci_high", "ci_method"]


def run(run_id, cell_id="c1", layout="contiguous", bs="64k", iops=np.nan, p99=np.nan, *,
        status="ok", warmup="false", control="false", attempt=1):
    """One runs.csv row with the columns the contract names."""
    return {"seq": 0, "host": "h1", "run_id": run_id, "cell_id": cell_id, "replicate": 1,
            "warmup": warmup, "control": control, "visit": 1, "batch": 1, "attempt": attempt,
            "status": status, "reason": "", "started_at": "2025-01-01T00:00:00Z",
            "ended_at": "2025-01-01T00:00:01Z", "duration_s": 1.0, "layout": layout, "bs": bs,
            "read_iops": iops, "read_clat_p99_us": p99}


def frame(*rows):
    table = pd.DataFrame(rows)
    table["seq"] = range(1, len(table) + 1)
    return table


def one(summary, cell_id="c1", metric="read_iops"):
    rows = summary[(summary["cell_id"] == cell_id) & (summary["metric"] == metric)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


#: read_iops declared as not positive: the summary gives Student's t interval.
LINEAR = {"read_iops": {"unit": "IO/s", "positive": False}}


def test_three_values_give_known_statistics():
    runs = frame(run("r1", iops=10.0), run("r2", iops=14.0), run("r3", iops=12.0))
    row = one(summarize(runs, FACTORS, UNITS, declared=LINEAR))
    half = sps.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)
    assert row["n"] == 3
    assert row["mean"] == pytest.approx(12.0)
    assert row["median"] == pytest.approx(12.0)
    assert (row["min"], row["max"]) == (10.0, 14.0)
    assert row["sd"] == pytest.approx(2.0)
    assert row["cv"] == pytest.approx(2.0 / 12.0)
    assert row["ci_low"] == pytest.approx(12.0 - half)
    assert row["ci_high"] == pytest.approx(12.0 + half)
    assert row["unit"] == "IO/s"
    assert (row["layout"], row["bs"]) == ("contiguous", "64k")


def test_interval_agrees_with_scipy_interval_on_random_data():
    rng = np.random.default_rng(3)
    values = rng.normal(100.0, 7.0, 9)
    runs = frame(*[run(f"r{i}", iops=v) for i, v in enumerate(values)])
    row = one(summarize(runs, FACTORS, UNITS, declared=LINEAR))
    assert row["ci_method"] == "t"
    low, high = sps.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=sps.sem(values))
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row["sd"] == pytest.approx(np.std(values, ddof=1))
    assert row["median"] == pytest.approx(np.median(values))


def test_a_positive_metric_gets_the_modified_cox_interval():
    # IO/s is a positive unit: the interval of the mean is computed on the log values
    # (Olsson 2005) and never reaches 0, where the t interval of these three would.
    values = np.array([10.0, 40.0, 12.0])
    runs = frame(*[run(f"r{i}", iops=v) for i, v in enumerate(values)])
    row = one(summarize(runs, FACTORS, UNITS))
    logs = np.log(values)
    m, s2 = logs.mean(), logs.var(ddof=1)
    half = sps.t.ppf(0.975, 2) * math.sqrt(s2 / 3 + s2 * s2 / 4)
    assert row["ci_method"] == "cox"
    assert row["ci_low"] == pytest.approx(math.exp(m + s2 / 2 - half))
    assert row["ci_high"] == pytest.approx(math.exp(m + s2 / 2 + half))
    assert row["mean"] == pytest.approx(values.mean()) and row["ci_low"] > 0
    assert values.mean() - sps.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3) < 0


def test_a_positive_unit_with_a_zero_value_keeps_the_t_interval():
    runs = frame(run("r1", iops=0.0), run("r2", iops=14.0), run("r3", iops=12.0))
    assert one(summarize(runs, FACTORS, UNITS))["ci_method"] == "t"


def test_columns_are_in_contract_order():
    runs = frame(run("r1", iops=1.0, p99=2.0))
    summary = summarize(runs, FACTORS, UNITS)
    assert list(summary.columns) == EXPECTED_COLUMNS
    assert summary_columns(FACTORS) == EXPECTED_COLUMNS


def test_rows_sorted_by_factors_then_metric():
    runs = frame(
        run("r1", "cz", "fragmented", "8k", iops=1.0, p99=1.0),
        run("r2", "cy", "contiguous", "8k", iops=1.0, p99=1.0),
        run("r3", "cx", "contiguous", "64k", iops=1.0, p99=1.0),
    )
    summary = summarize(runs, FACTORS, UNITS)
    assert list(zip(summary["layout"], summary["bs"], summary["metric"])) == [
        ("contiguous", "64k", "read_clat_p99_us"), ("contiguous", "64k", "read_iops"),
        ("contiguous", "8k", "read_clat_p99_us"), ("contiguous", "8k", "read_iops"),
        ("fragmented", "8k", "read_clat_p99_us"), ("fragmented", "8k", "read_iops"),
    ]
    assert list(summary.index) == list(range(6))


def test_numeric_factor_sorts_numerically():
    runs = frame(run("r1", "c1", "x", 4096, iops=1.0), run("r2", "c2", "x", 128, iops=1.0),
                 run("r3", "c3", "x", 0, iops=1.0))
    summary = summarize(runs, FACTORS, UNITS)
    assert summary["bs"].tolist() == [0, 128, 4096]


def test_warmup_control_and_failed_runs_are_excluded():
    counted = [run("r1", iops=10.0), run("r2", iops=12.0), run("r3", iops=14.0)]
    noise = [
        run("w1", iops=1000.0, warmup="true"),
        run("k1", iops=1000.0, control="true"),
        run("f1", iops=1000.0, status="failed"),
        run("t1", iops=1000.0, status="timeout"),
        run("u1", iops=1000.0, status="unreachable"),
        run("i1", iops=1000.0, status="invalid"),
        run("x1", iops=1000.0, status="interrupted"),
    ]
    row = one(summarize(frame(*counted, *noise), FACTORS, UNITS))
    assert row["n"] == 3
    assert row["max"] == 14.0
    assert row["mean"] == pytest.approx(12.0)


def test_flags_already_parsed_as_booleans_are_honoured():
    runs = frame(run("r1", iops=10.0), run("r2", iops=14.0), run("w1", iops=1000.0, warmup="true"))
    runs["warmup"] = runs["warmup"].eq("true")
    runs["control"] = False
    row = one(summarize(runs, FACTORS, UNITS))
    assert (row["n"], row["max"]) == (2, 14.0)


def test_newest_ok_attempt_wins():
    runs = frame(
        run("r1", iops=99.0, attempt=2),          # newer, listed first on purpose
        run("r1", iops=1.0, attempt=1),
        run("r1", status="failed", attempt=3),    # a later failure does not undo attempt 2
        run("r2", iops=11.0, attempt=1),
    )
    eff = effective_runs(runs)
    assert sorted(zip(eff["run_id"], eff["attempt"])) == [("r1", 2), ("r2", 1)]
    row = one(summarize(runs, FACTORS, UNITS))
    assert row["n"] == 2
    assert row["min"] == 11.0 and row["max"] == 99.0


def test_effective_runs_keep_original_order_and_index():
    runs = frame(run("a", iops=1.0), run("w", iops=1.0, warmup="true"), run("b", iops=2.0))
    runs.index = [10, 20, 30]
    eff = effective_runs(runs)
    assert list(eff.index) == [10, 30]
    assert list(eff.columns) == list(runs.columns)


def test_single_value_gives_nan_spread():
    row = one(summarize(frame(run("r1", iops=7.5)), FACTORS, UNITS))
    assert row["n"] == 1
    assert row["mean"] == row["median"] == row["min"] == row["max"] == 7.5
    for col in ("sd", "cv", "ci_low", "ci_high"):
        assert math.isnan(row[col]), col


def test_cv_is_nan_when_mean_is_zero():
    row = one(summarize(frame(run("r1", iops=-1.0), run("r2", iops=1.0)), FACTORS, UNITS))
    assert row["sd"] == pytest.approx(math.sqrt(2.0))
    assert math.isnan(row["cv"])
    assert row["ci_low"] < 0 < row["ci_high"]


def test_missing_metric_values_are_skipped_per_metric():
    runs = frame(run("r1", iops=10.0, p99=5.0), run("r2", iops=20.0),
                 run("r3", "c2", "fragmented", iops=3.0))
    summary = summarize(runs, FACTORS, UNITS)
    assert one(summary, "c1", "read_iops")["n"] == 2
    p99 = one(summary, "c1", "read_clat_p99_us")
    assert (p99["n"], p99["mean"]) == (1, 5.0)
    # c2 never produced a latency: no row rather than an n=0 row of NaNs.
    assert summary[(summary["cell_id"] == "c2") & (summary["metric"] == "read_clat_p99_us")].empty


def test_metric_columns_come_from_units():
    runs = frame(run("r1", iops=1.0, p99=2.0))
    runs["exit_code"] = 0
    assert set(summarize(runs, FACTORS, {"read_iops": "IO/s"})["metric"]) == {"read_iops"}
    assert set(summarize(runs, FACTORS, UNITS)["metric"]) == {"read_iops", "read_clat_p99_us"}


def test_explicit_metrics_select_and_tolerate_absent_columns():
    runs = frame(run("r1", iops=1.0, p99=2.0))
    summary = summarize(runs, FACTORS, UNITS, metrics=["read_clat_p99_us", "write_iops"])
    assert summary["metric"].tolist() == ["read_clat_p99_us"]
    assert summary["unit"].tolist() == ["us"]


def test_csv_round_trip_gives_the_same_summary(tmp_path):
    runs = frame(run("r1", iops=10.0, p99=1.0), run("r2", iops=12.0),
                 run("w1", iops=500.0, warmup="true"), run("f1", status="failed"))
    path = tmp_path / "runs.csv"
    runs.to_csv(path, index=False)
    direct = summarize(runs, FACTORS, UNITS)
    from_file = summarize(pd.read_csv(path), FACTORS, UNITS)
    pd.testing.assert_frame_equal(direct, from_file, check_dtype=False)
    assert one(from_file)["n"] == 2


def test_empty_input_gives_empty_summary_with_columns():
    summary = summarize(pd.DataFrame(), FACTORS, UNITS)
    assert summary.empty
    assert list(summary.columns) == EXPECTED_COLUMNS
    only_failures = frame(run("f1", status="failed"))
    assert summarize(only_failures, FACTORS, UNITS).empty


def test_missing_required_column_is_a_clear_error():
    runs = frame(run("r1", iops=1.0)).drop(columns=["attempt"])
    with pytest.raises(BenchmatrixError, match="attempt"):
        effective_runs(runs)


def test_bool_column_reads_every_spelling():
    values = pd.Series(["true", "False", None, True, np.nan, " TRUE ", "0", False], dtype=object)
    assert bool_column(values).tolist() == [True, False, False, True, False, True, False, False]


def test_many_rows_match_a_plain_groupby():
    rng = np.random.default_rng(11)
    n = 20_000
    cells = rng.integers(0, 7, n)
    runs = pd.DataFrame({
        "run_id": [f"r{i}" for i in range(n)], "cell_id": [f"c{c}" for c in cells],
        "layout": cells % 2, "bs": cells // 2, "status": np.where(rng.random(n) < 0.9, "ok", "failed"),
        "warmup": np.where(rng.random(n) < 0.1, "true", "false"), "control": "false", "attempt": 1,
        "read_iops": rng.normal(1000.0, 30.0, n),
    })
    summary = summarize(runs, FACTORS, UNITS).set_index("cell_id")
    kept = runs[(runs["status"] == "ok") & (runs["warmup"] == "false")]
    truth = kept.groupby("cell_id")["read_iops"].agg(["count", "mean", "std"])
    assert summary["n"].to_dict() == truth["count"].to_dict()
    np.testing.assert_allclose(summary.loc[truth.index, "mean"], truth["mean"])
    np.testing.assert_allclose(summary.loc[truth.index, "sd"], truth["std"])


def test_summary_by_host_has_one_row_per_cell_host_and_metric():
    rows = []
    for host, offset in (("h2", 10.0), ("h1", 0.0)):
        for i, v in enumerate((10.0, 14.0, 12.0)):
            rows.append(run(f"{host}-a{i}", iops=v + offset) | {"host": host})
            rows.append(run(f"{host}-b{i}", cell_id="c2", bs="8k", iops=v * 2 + offset) | {"host": host})
    rows.append(run("h1-w", iops=999.0, warmup="true") | {"host": "h1"})
    runs = frame(*rows)
    table = summarize_by_host(runs, FACTORS, UNITS, declared=LINEAR)
    assert list(table.columns) == summary_by_host_columns(FACTORS)
    assert list(table.columns[:3]) == ["cell_id", "host", "layout"]
    assert table[["cell_id", "host"]].values.tolist() == [["c1", "h1"], ["c1", "h2"], ["c2", "h1"], ["c2", "h2"]]
    row = table[(table["cell_id"] == "c1") & (table["host"] == "h2")].iloc[0]
    half = sps.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)
    assert (row["n"], row["mean"], row["min"], row["max"]) == (3, 22.0, 20.0, 24.0)
    assert row["ci_low"] == pytest.approx(22.0 - half) and row["unit"] == "IO/s"
    pooled = one(summarize(runs, FACTORS, UNITS))
    assert pooled["n"] == 6 and pooled["mean"] == pytest.approx(17.0)    # summary.csv stays pooled
    assert run_hosts(runs) == ["h1", "h2"]


def test_summary_by_host_of_nothing_has_the_columns():
    table = summarize_by_host(pd.DataFrame(), FACTORS, UNITS)
    assert table.empty and list(table.columns) == summary_by_host_columns(FACTORS)
    assert run_hosts(pd.DataFrame()) == []


def test_summarize_by_host_without_any_metric_gives_an_empty_table():
    # A workload without declared metrics: every run ok, no metric column.
    runs = pd.DataFrame({"run_id": ["a", "b"], "cell_id": ["c1", "c1"], "host": ["h1", "h2"],
                         "status": ["ok", "ok"], "warmup": [False, False], "control": [False, False],
                         "attempt": [1, 1], "f": ["x", "x"]})
    from benchmatrix.analyze.stats import summarize_by_host, summary_by_host_columns

    table = summarize_by_host(runs, ["f"], {}, [])
    assert table.empty and list(table.columns) == summary_by_host_columns(["f"])


# ------------------------------------------------------------- interval calibration

#: The populations of the calibration: run-to-run noise as benchmarks show it, symmetric
#: (normal, CV 5 % and 10 %) and right-skewed (lognormal with CV 5 % to 100 %: a noisy
#: benchmark's long tail of slow runs, such as a p99 latency). Each gives (draw, true mean).
def _lognormal(cv):
    sigma = math.sqrt(math.log1p(cv * cv))
    return (lambda rng, shape: 100.0 * rng.lognormal(0.0, sigma, shape), 100.0 * math.exp(sigma * sigma / 2))


CALIBRATION = {
    "normal_cv5": (lambda rng, shape: rng.normal(100.0, 5.0, shape), 100.0),
    "normal_cv10": (lambda rng, shape: rng.normal(100.0, 10.0, shape), 100.0),
    **{f"lognormal_cv{round(cv * 100)}": _lognormal(cv) for cv in (0.05, 0.25, 0.5, 1.0)},
}


def _cells_frame(values: np.ndarray) -> pd.DataFrame:
    """runs.csv rows for a (cells x n) array: one cell per row of ``values``."""
    cells, n = values.shape
    count = cells * n
    return pd.DataFrame({"run_id": np.arange(count).astype(str), "cell_id": np.repeat(np.arange(cells), n).astype(str),
                         "status": "ok", "warmup": False, "control": False, "attempt": 1,
                         "layout": "contiguous", "bs": "64k", "read_iops": values.ravel()})


@pytest.mark.parametrize("population", sorted(CALIBRATION))
@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_summary_intervals_cover_the_true_mean_93_to_97_percent(population, n):
    # 4000 cells: the coverage's standard error is 0.35 points, so 93-97 % is a band
    # of more than 5 standard errors around 95 %. Every interval method the summary
    # uses must cover on its own too: a switch that fires on some cells must not
    # lower their coverage (the skew-triggered bootstrap covered 89 % of the normal
    # cells it chose).
    draw, true_mean = CALIBRATION[population]
    rng = np.random.default_rng(1000 + n)
    summary = summarize(_cells_frame(draw(rng, (4000, n))), FACTORS, UNITS)
    covered = (summary["ci_low"] <= true_mean) & (true_mean <= summary["ci_high"])
    assert 0.93 <= covered.mean() <= 0.97, covered.mean()
    assert (summary["ci_low"] > 0).all()        # a positive metric's interval stays in its range
    for method, hits in covered.groupby(summary["ci_method"]):
        if len(hits) >= 200:
            assert 0.93 <= hits.mean() <= 0.97, (method, len(hits), hits.mean())


def test_welch_test_has_no_p_value_without_any_variation():
    # Two constant sides: no noise estimate, so no test (p = 0 would be a firm verdict).
    from benchmatrix.analyze.stats import welch_test

    p, _ = welch_test([5.0, 5.0, 5.0], [0.0, 0.0, 1.0], [4, 4, 4], [6.0, 5.0, 6.0], [0.0, 0.0, 0.0], [4, 4, 4])
    assert np.isnan(p[0]) and np.isnan(p[1]) and 0 < p[2] < 1


# ----------------------------------------------------------------- t and F without scipy.stats

def _same(a, b) -> bool:
    """Bit for bit, NaN equal to NaN, and the same shape (scalar stays scalar)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def test_t_and_f_from_scipy_special_equal_scipy_stats_bit_for_bit():
    # stats.py computes them from scipy.special so that a collect job need not import
    # scipy.stats (0.7 s); the numbers in summary.csv and comparisons.csv must not move.
    from benchmatrix.analyze.stats import f_sf, t_ppf, t_sf

    rng = np.random.default_rng(3)
    df = np.concatenate([np.arange(1, 60), rng.uniform(0.5, 400, 300), [np.inf, np.nan, 0.0, -2.0, 1e9]])
    q = np.concatenate([rng.uniform(0, 1, len(df) - 6), [0.0, 1.0, 0.975, -0.1, 1.2, np.nan]])
    x = np.concatenate([rng.normal(0, 4, len(df) - 6), [np.inf, -np.inf, 0.0, np.nan, 40.0, -0.0]])
    with np.errstate(all="ignore"):
        assert _same(t_ppf(q, df), sps.t.ppf(q, df))
        assert _same(t_ppf(0.975, df), sps.t.ppf(0.975, df))
        assert _same(t_sf(x, df), sps.t.sf(x, df))
        assert _same(f_sf(np.abs(x) * np.sign(q - 0.2), df, df[::-1]), sps.f.sf(np.abs(x) * np.sign(q - 0.2),
                                                                                 df, df[::-1]))
        for args in [(0.975, 4.0), (0.5 + 0.95 / 2, 17), (1.0, 3.0), (0.975, np.nan)]:
            assert _same(t_ppf(*args), sps.t.ppf(*args)), args
            assert np.ndim(t_ppf(*args)) == 0
        for args in [(2.5, 4.0), (np.inf, 3.0), (-np.inf, 3.0), (1.0, 0.0)]:
            assert _same(t_sf(*args), sps.t.sf(*args)), args
        assert _same(f_sf(3.0, 2.0, 7.0), sps.f.sf(3.0, 2.0, 7.0))


def test_the_t_table_holds_scipys_own_quantiles_and_t_ppf_reads_it_only_where_it_holds_them():
    # Every summary interval reads t's 97.5 % quantile from t_table instead of importing
    # scipy: each entry must be scipy's number, and anything else must still come from scipy.
    from scipy import special

    from benchmatrix.analyze.stats import t_ppf
    from benchmatrix.analyze.t_table import T975

    df = np.arange(1.0, 1001.0)
    assert _same(np.asarray(T975), special.stdtrit(df, 0.975))
    assert _same(t_ppf(0.975, df), sps.t.ppf(0.975, df))
    grid = np.array([[3.0, np.nan], [1000.0, 7.0]])
    assert _same(t_ppf(0.975, grid), sps.t.ppf(0.975, grid))
    assert _same(t_ppf(0.975, 12), sps.t.ppf(0.975, 12)) and np.ndim(t_ppf(0.975, 12)) == 0
    for beyond in (1001.0, 2.5, 0.0, -1.0, np.inf):
        with np.errstate(all="ignore"):
            assert _same(t_ppf(0.975, [2.0, beyond]), sps.t.ppf(0.975, [2.0, beyond])), beyond
    assert _same(t_ppf([0.975, 0.95], 4.0), sps.t.ppf([0.975, 0.95], 4.0))


def test_welch_test_equals_scipy_ttest_ind_from_stats_bit_for_bit():
    from benchmatrix.analyze.stats import welch_test

    rng = np.random.default_rng(8)
    n = 400
    mean_a, mean_b = rng.normal(100, 5, n), rng.normal(100, 5, n)
    var_a, var_b = rng.gamma(2, 3, n), rng.gamma(2, 3, n)
    n_a, n_b = rng.integers(2, 40, n).astype(float), rng.integers(2, 40, n).astype(float)
    var_a[:5] = 0.0  # one constant side: Welch's df from the other side alone
    p, _ = welch_test(mean_a, var_a, n_a, mean_b, var_b, n_b)
    with np.errstate(all="ignore"):
        _, expected = sps.ttest_ind_from_stats(mean_a, np.sqrt(var_a), n_a, mean_b, np.sqrt(var_b), n_b,
                                               equal_var=False)
    assert _same(p, expected)
