"""Human units: tables, plots and the terminal show MiB/s and ms, the CSVs keep KiB/s and µs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from test_report import ROOT, UNITS, collected, make_plan, make_runs

from benchmatrix.analyze.stats import summarize
from benchmatrix.report import plots
from benchmatrix.report.units import display_unit, quantity
from benchmatrix.spec.load import load_spec


@pytest.mark.parametrize(("unit", "typical", "expected"), [
    ("KiB/s", 500, ("KiB/s", 1.0)),
    ("KiB/s", 80_000, ("MiB/s", 1 / 1024)),
    ("KiB/s", 3_000_000, ("GiB/s", 1 / 1024 ** 2)),
    ("KiB", 2048, ("MiB", 1 / 1024)),
    ("us", 850, ("µs", 1.0)),
    ("us", 2500, ("ms", 1e-3)),
    ("µs", 3e6, ("s", 1e-6)),
    ("ms", 0.02, ("µs", 1000.0)),
    ("IO/s", 1e6, ("IO/s", 1.0)),        # not a family the rule knows: left as it is
    ("KiB/s", float("nan"), ("KiB/s", 1.0)),
])
def test_display_unit_picks_the_largest_unit_with_a_value_of_at_least_one(unit, typical, expected):
    shown, factor = display_unit(unit, typical)
    assert shown == expected[0] and factor == pytest.approx(expected[1])


def test_quantity_reads_as_a_person_would_write_it():
    assert quantity(2_000_000, "KiB/s") == "1.907 GiB/s"
    assert quantity(2500, "us") == "2.500 ms"
    assert quantity(None, "ms") == "–" and quantity(float("nan"), "ms") == "–"


def test_a_time_s_prefix_is_the_one_matplotlib_s_engineering_formatter_picks():
    # display_unit picked the prefix with matplotlib's EngFormatter; it now applies the
    # same rule without importing matplotlib. Every table, plot axis and terminal line
    # must show the same unit as before, rounding edges (999.9996 µs is 1 ms) included.
    from matplotlib.ticker import EngFormatter

    eng = EngFormatter(unit="", places=None, sep="")
    rng = np.random.default_rng(7)
    edges = [m * 10.0 ** p for p in range(-33, 3, 3) for m in (1.0, 999.9994999, 999.9995, 999.99951, 1000.0)]
    seconds = [*edges, *np.nextafter(edges, 0), *np.nextafter(edges, 1), *10.0 ** rng.uniform(-32, 1, 2000)]
    for unit, size in (("us", 1e-6), ("ns", 1e-9), ("ms", 1e-3), ("s", 1.0)):
        for typical in np.asarray(seconds) / size:
            if typical * size >= 1.0:
                continue
            prefix = eng(typical * size).lstrip("-0123456789.,")
            expected = f"{prefix}s" if prefix in ("n", "µ", "m") else "s"
            factor = {"n": 1e-9, "µ": 1e-6, "m": 1e-3}.get(prefix, 1.0)
            assert display_unit(unit, typical) == (expected, float(f"{size / factor:.12g}")), (unit, typical)


def _svg_text(svg: str) -> str:
    return " ".join(re.findall(r">([^<>]+)</text>", svg)) + " " + " ".join(re.findall(r"<!-- (.*?) -->", svg))


def _spec(tmp_path, levels: str):
    path = tmp_path / "s.yaml"
    path.write_text(f"""\
name: s
hosts: localhost
factors:
  threads: {levels}
  mode: [a, b]
workload: {{role: workload_fio, vars: {{rw: read, bs: 4k, size: 1m, runtime: 1}}}}
replicates: 3
warmup: 0
report:
  metrics: [read_bw_kib]
  compare: {{factor: mode, baseline: a}}
""")
    return load_spec(path)


@pytest.mark.parametrize(("levels", "name"), [("[1, 2, 4]", "lines_read_bw_kib"), ("[1, 2]", "dots_read_bw_kib")])
def test_a_line_needs_three_numeric_levels_and_axes_show_display_units_without_offsets(tmp_path, levels, name):
    spec = _spec(tmp_path, levels)
    plan = make_plan(spec)
    runs = make_runs(plan)
    # About 2.4 GiB/s in KiB/s, in a narrow range: matplotlib would otherwise write "1e6" above the axis.
    runs["read_bw_kib"] = 2_500_000 + np.random.default_rng(1).normal(0, 100, len(runs))
    summary = summarize(runs, spec.factor_names, UNITS)
    notes: list[str] = []
    (plot,) = plots.factor_lines(spec, summary, ["read_bw_kib"], UNITS, notes)
    assert plot.name == name
    text = _svg_text(plot.svg)
    assert "read_bw_kib (GiB/s)" in text and "KiB/s" not in text
    assert not re.search(r"1e\d|×10|\+2\.\d+e", text), text
    width_pt = float(re.search(r'width="([0-9.]+)pt"', plot.svg).group(1))
    assert width_pt * 96 / 72 <= 440     # natural width fits a 390 px phone at about 90 %


def test_the_csv_keeps_raw_values_while_the_report_scales(tmp_path):
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    plan = make_plan(spec)
    html = collected(spec, plan, make_runs(plan), tmp_path)[0]
    summary = pd.read_csv(tmp_path / "summary.csv")
    bw = summary[summary["metric"] == "read_bw_kib"]
    assert set(bw["unit"]) == {"KiB/s"} and bw["mean"].between(70_000, 90_000).all()
    assert "Avg (MiB/s)" in html


def test_throughput_bars_draw_an_interval_that_does_not_hold_the_mean(tmp_path):
    # Skewed throughput with few runs: the interval (of the geometric mean, on the log
    # scale) may lie beside the arithmetic mean the bar shows. The plot failed with
    # matplotlib's "'xerr' must not contain negative values" and took collect down.
    spec = _spec(tmp_path, "[1, 2]")
    summary = summarize(make_runs(make_plan(spec)), spec.factor_names, UNITS)
    summary = pd.DataFrame([
        {**row, "metric": metric, "mean": mean, "ci_low": mean * 1.05, "ci_high": mean * 1.3}
        for row in summary.drop_duplicates("cell_id").to_dict("records")
        for metric, mean in (("read_bw_kib", 1000.0), ("read_clat_mean_us", 50.0))])
    plotted = plots.latency_beside_throughput(spec, summary, ["read_bw_kib", "read_clat_mean_us"], UNITS, {}, [])
    assert [p.name for p in plotted] and all(p.svg for p in plotted)


def test_dots_draw_an_interval_that_does_not_hold_the_mean(tmp_path):
    # As above, for the dots of a two-level numeric factor ("'yerr' must not contain
    # negative values" took collect down).
    spec = _spec(tmp_path, "[1, 2]")
    summary = summarize(make_runs(make_plan(spec)), spec.factor_names, UNITS)
    summary = summary[summary["metric"] == "read_bw_kib"].assign(mean=1000.0, ci_low=1050.0, ci_high=1300.0)
    (plot,) = plots.factor_lines(spec, summary, ["read_bw_kib"], UNITS, [])
    assert plot.name == "dots_read_bw_kib" and plot.svg
