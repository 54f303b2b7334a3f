"""What moved with each finding (benchmatrix.analyze.explain): counters judged by the
verdict engine in a family of their own, on synthetic runs with a known truth."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from montecarlo import scaled

from benchmatrix.analyze.comparisons import compare
from benchmatrix.analyze.explain import (
    COLUMNS,
    counter_columns,
    distinct_counters,
    explain_comparison,
    finding_lists,
    moved_with,
)
from benchmatrix.spec.load import Spec
from benchmatrix.spec.matrix import Cell

UNITS = {"read_bw_kib": "KiB/s", "disk_loop0_read_kib_per_io": "KiB", "disk_loop0_reads_s": "IO/s",
         "disk_loop0_read_await_ms": "ms", "disk_loop0_util_pct": "%", "cpu_busy_pct": "%",
         "cpu_iowait_pct": "%", "cpu_user_pct": "%", "disk_loop0_read_mib_s": "MiB/s"}
SPEC = Spec("test.yaml", {"factors": {"ra": ["off", "on"]}, "order": {"strategy": "random"},
                          "report": {"compare": {"factor": "ra", "baseline": "off", "by": []}},
                          "workload": {"metrics": {"read_bw_kib": {"better": "higher", "unit": "KiB/s"}}},
                          "warmup": 0},
            "0", [Cell("c0", {"ra": "off"}), Cell("c1", {"ra": "on"})], {})


def campaign(rng, n=5, effect=1.0, planted=None, sd=0.10):
    """Runs of two cells: the metric (times ``effect`` in ``on``) and eight counters,
    each with its own noise; ``planted`` maps a counter to (ratio in ``on``, share of
    the metric's run-to-run noise it follows)."""
    planted = planted or {}
    rows = []
    for i, (level, cell) in enumerate((("off", "c0"), ("on", "c1"))):
        for _ in range(n):
            noise = rng.normal(0.0, sd)
            row = {"cell_id": cell, "ra": level, "status": "ok", "warmup": False, "control": False,
                   "attempt": 1, "host": "h1", "read_bw_kib": 100_000.0 * (effect if i else 1.0) * np.exp(noise)}
            for counter in UNITS:
                if counter == "read_bw_kib":
                    continue
                ratio, follows = planted.get(counter, (1.0, 0.0))
                own = rng.normal(0.0, sd)
                level_value = 50.0 * (ratio if i else 1.0)
                row[counter] = level_value * np.exp(follows * noise + np.sqrt(1 - follows ** 2) * own)
            rows.append(row)
    runs = pd.DataFrame(rows)
    runs["run_id"] = [f"r{i}" for i in range(len(runs))]
    runs["seq"] = range(1, len(runs) + 1)
    return runs


def judged(runs):
    return compare(SPEC, runs, ["read_bw_kib"], UNITS, 0.05)


def test_a_counter_that_follows_a_planted_effect_is_listed_first():
    # Two counters move by the same factor; the one that follows the metric run by run
    # inside the cells ranks first, the request size's huge change is listed too, and
    # the unchanged counters are not listed.
    rng = np.random.default_rng(37)
    runs = campaign(rng, n=6, effect=3.0, planted={"disk_loop0_read_mib_s": (3.0, 0.95),
                                                   "cpu_iowait_pct": (3.0, 0.0),
                                                   "disk_loop0_reads_s": (0.5, 0.0)})
    result = judged(runs)
    assert result.table["verdict"].iloc[0] == "better"
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert list(table.columns) == COLUMNS
    assert table["counter"].tolist()[0] == "disk_loop0_read_mib_s"
    assert set(table["counter"]) == {"disk_loop0_read_mib_s", "cpu_iowait_pct", "disk_loop0_reads_s"}
    first = table.iloc[0]
    assert first["correlation"] > 0.8 and abs(table.iloc[1]["correlation"]) < first["correlation"]
    assert 150 < first["rel_diff_pct"] < 300 and first["ci_low_adj_pct"] > 0
    assert first["text"].startswith("disk_loop0_read_mib_s ") and "→" in first["text"] and "MiB/s" in first["text"]
    lists = finding_lists(result.table, table)
    assert [m["counter"] for m in lists[0]] == table["counter"].tolist()


def test_a_request_size_that_grows_44_fold_reads_like_the_case_study():
    rng = np.random.default_rng(7)
    runs = campaign(rng, n=3, effect=14.0, planted={"disk_loop0_read_kib_per_io": (44.0, 0.9)}, sd=0.03)
    result = judged(runs)
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert table["counter"].tolist() == ["disk_loop0_read_kib_per_io"]
    assert re.fullmatch(r"disk_loop0_read_kib_per_io \d+(\.\d)? → \d+ KiB \(\+\d+ %\)", table["text"].iloc[0])
    assert 3500 < table["rel_diff_pct"].iloc[0] < 5500


def test_a_request_size_constant_in_each_cell_is_listed_first():
    # The read-ahead scan on a loop device (tests/e2e/test_live_knobs_e2e.py): nothing
    # else reads the device, so every run of a cell reads in requests of exactly one
    # size (4 KiB off, 745 KiB on). Welch has no spread to judge such a counter by, yet
    # no noise makes a counter take one value per cell: it moved with the finding, with
    # certainty (p 0, its interval the point). It comes before the reads per second,
    # which follow the metric run by run but moved less.
    rng = np.random.default_rng(11)
    runs = campaign(rng, n=3, effect=40.0, planted={"disk_loop0_reads_s": (1 / 30, 0.95)}, sd=0.4)
    # Sums of sectors over reads: one value per cell to the last bits of a float.
    runs["disk_loop0_read_kib_per_io"] = (np.where(runs["ra"] == "on", 744.909091, 4.0)
                                          * (1 + 1e-14 * rng.normal(size=len(runs))))
    result = judged(runs)
    assert result.table["verdict"].iloc[0] == "better"
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert table["counter"].tolist()[0] == "disk_loop0_read_kib_per_io", table
    first = table.iloc[0]
    assert first["p_value"] == 0 and first["ci_low_adj_pct"] == first["ci_high_adj_pct"] == first["rel_diff_pct"]
    # Its run-to-run wobble is rounding: no correlation to speak of.
    assert np.isnan(first["correlation"]), first["correlation"]
    assert 18000 < first["rel_diff_pct"] < 19000
    assert "disk_loop0_reads_s" in table["counter"].tolist()[1:]
    # A counter constant in both cells at one value did not move.
    runs["disk_loop0_read_kib_per_io"] = 4.0
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert "disk_loop0_read_kib_per_io" not in table["counter"].tolist()


def test_a_counter_identical_to_another_is_one_test_named_by_the_device():
    # With one physical disk the sums over the disks (disk_reads_s) are that disk's own
    # columns: one counter, one test in the family, listed by the device's name.
    rng = np.random.default_rng(37)
    runs = campaign(rng, n=6, effect=3.0, planted={"disk_loop0_read_mib_s": (3.0, 0.95)})
    runs["disk_read_mib_s"] = runs["disk_loop0_read_mib_s"]
    assert distinct_counters(runs, counter_columns(runs)) == [c for c in counter_columns(runs)
                                                              if c != "disk_read_mib_s"]
    result = judged(runs)
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert table["counter"].tolist() == ["disk_loop0_read_mib_s"]


def test_undecided_comparisons_list_nothing():
    rng = np.random.default_rng(3)
    runs = campaign(rng, n=5, planted={"disk_loop0_reads_s": (5.0, 0.0)})
    result = judged(runs)
    assert result.table["verdict"].iloc[0] not in ("better", "worse")
    table = moved_with(runs, result.table, factor="ra", by=[], scales=result.scales, units=UNITS, alpha=0.05,
                       threshold=0.05)
    assert table.empty and finding_lists(result.table, table) == []


def unchanged_campaign(rng, strata, n, follows, sd=0.10):
    """An A/A campaign of ``strata`` independent comparisons (``blk``, the ``by`` factor)
    of ``n`` runs a side: nothing changes with ``ra``. Every counter and the metric share
    a run's device noise by ``follows`` (0: independent), as a device's reads/s, MiB/s,
    await and utilisation move together run by run."""
    cells = np.repeat(np.arange(2 * strata), n)
    common = rng.normal(0.0, 1.0, len(cells))
    names = [c for c in UNITS if c != "read_bw_kib"]
    own = rng.normal(0.0, 1.0, (len(names) + 1, len(cells)))
    shared = follows * common + np.sqrt(1 - follows ** 2) * own
    runs = pd.DataFrame({"cell_id": [f"c{c}" for c in cells], "ra": np.where(cells % 2, "on", "off"),
                         "blk": cells // 2, "status": "ok", "warmup": False, "control": False, "attempt": 1,
                         "host": "h1", "read_bw_kib": 100_000.0 * np.exp(sd * shared[0])})
    for i, counter in enumerate(names, start=1):
        runs[counter] = 50.0 * np.exp(sd * shared[i])
    runs["run_id"] = [f"r{i}" for i in range(len(runs))]
    runs["seq"] = range(1, len(runs) + 1)
    return runs


@pytest.mark.parametrize(("n", "follows"), [(5, 0.0), (3, 0.9)])
def test_a_a_comparisons_list_a_counter_in_at_most_5_percent(n, follows):
    # Unchanged campaigns: every comparison is findings-free, so any counter listed is a
    # false alarm. Holm's adjustment within the counters' family keeps the share of
    # comparisons listing any of the eight counters at alpha or below, whether the
    # counters are independent or move together (without it, eight tests at 5 % each
    # would list one about a third of the time). explain_comparison is called on every
    # comparison, not only the decided ones moved_with explains, so that the family's
    # own error rate is measured (docs/report.md "Calibration").
    rng = np.random.default_rng(2026 + n)
    strata, listed, sims = 50, 0, scaled(300)
    for _ in range(sims // strata):
        runs, cache = unchanged_campaign(rng, strata, n, follows), {}
        for blk in range(strata):
            row = {"metric": "read_bw_kib", "level": "on", "baseline": "off", "blk": blk, "analysis": "welch"}
            found = explain_comparison(runs, row, factor="ra", by=["blk"], scale="log", units=UNITS, alpha=0.05,
                                       threshold=0.05, cache=cache)
            listed += bool(len(found))
    assert listed / sims <= 0.05, listed
    # The comparisons were judged (not skipped for want of runs): a family of one counter
    # at alpha near 1 and no threshold lists it.
    loose = explain_comparison(runs, row, factor="ra", by=["blk"], scale="log", units=UNITS, alpha=0.999,
                               threshold=0.0, counters=["cpu_busy_pct"])
    assert loose["counter"].tolist() == ["cpu_busy_pct"], loose
