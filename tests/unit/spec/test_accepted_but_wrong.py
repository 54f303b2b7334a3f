"""Specs and options that were accepted and then meant something else (issue 35, item 8).

Each case here validated (or was taken by the command line) and silently changed what
was asked: a number in another base, a threshold under a misspelt metric, a budget
that never ends. Each must be refused with one line naming ``FILE:LINE`` (a spec) or
the option (the command line).
"""

from __future__ import annotations

import pytest
from test_spec import BASE, assert_one_error, write

from benchmatrix.spec.load import load_spec

# ---------------------------------------------------------------- numbers in other YAML 1.1 forms

@pytest.mark.parametrize("value, line, fragment", [
    ("replicates: 0x1F\n", 9, "'0x1F' is read by YAML as the hexadecimal number 31"),
    ("replicates: 0b101\n", 9, "'0b101' is read by YAML as the binary number 5"),
    ("replicates: 1_0\n", 9, "'1_0' is read by YAML as the number 10"),
    ("warmup: -0x1\n", 9, "'-0x1' is read by YAML as the hexadecimal number -1"),
    ("report: {alpha: 0.0_5}\n", 9, "'0.0_5' is read by YAML as the number 0.05"),
])
def test_integers_must_be_plain_decimals(tmp_path, value, line, fragment):
    assert_one_error(write(tmp_path, BASE + value), line, fragment, "plain decimal")


def test_level_in_another_base_is_refused_and_quoted_one_kept(tmp_path):
    assert_one_error(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, 0x1F]")), 3,
                     "'0x1F' is read by YAML as the hexadecimal number 31", "quote it")
    assert_one_error(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, 1_000]")), 3,
                     "'1_000' is read by YAML as the number 1000")
    assert_one_error(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, 1:30.5]")), 3,
                     "'1:30.5' is read by YAML as the base-60 number 90.5")
    spec = load_spec(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, '0x1F', +3, -4, 1.5e3]"), "ok.yaml"))
    assert spec.data["factors"]["a"] == [1, "0x1F", 3, -4, "1.5e3"]


# ---------------------------------------------------------------- levels that are one number as floats

@pytest.mark.parametrize("levels", [
    "[9007199254740993, 9007199254740992.0]",  # 2^53 + 1 beside 2^53.0: distinct, yet one float
    "[9007199254740992.0, 9007199254740993]",
    "[9007199254740993, 9007199254740992, 0.5]",  # with a float beside them runs.csv reads floats
    "[1, 100000000000000000001, 100000000000000000000.0]",
])
def test_levels_that_are_one_floating_point_number_are_refused(tmp_path, levels):
    assert_one_error(write(tmp_path, BASE.replace("a: [1, 2]", f"a: {levels}")), 3,
                     "factor 'a' lists level", "floating-point")


def test_large_distinct_levels_stay_exact(tmp_path):
    huge = "1" + "0" * 400  # no float can hold it, nor equal it
    text = BASE.replace("a: [1, 2]", f"a: [9007199254740992, 9007199254740994, {huge}, '9007199254740993']")
    spec = load_spec(write(tmp_path, text))
    assert spec.data["factors"]["a"] == [2**53, 2**53 + 2, 10**400, "9007199254740993"]
    assert len({c.cell_id for c in spec.cells}) == 8


# ---------------------------------------------------------------- report.threshold's metric keys

DECLARED = BASE.replace("  vars:", "  metrics:\n    tps: {regex: 't=(?P<value>[0-9]+)', unit: tx/s}\n"
                                   "    p99_ms: {regex: 'p=(?P<value>[0-9]+)', unit: ms}\n  vars:")


@pytest.mark.parametrize("text, line, fragments", [
    (BASE + "report:\n  metrics: [read_bw_kib, read_clat_p99_us]\n  threshold: {default: 5%, read_bw_kb: 10%}\n",
     11, ("report.threshold names 'read_bw_kb', which is no metric of the report",
          "did you mean 'read_bw_kib'?")),
    (DECLARED + "report:\n  threshold:\n    default: 5%\n    p99ms: 20%\n", 15, ("'p99ms'", "did you mean 'p99_ms'?")),
    (DECLARED + "report:\n  threshold: {zzz: 20%}\n", 13, ("'zzz'", "(metrics: p99_ms, tps)")),
])
def test_threshold_for_a_metric_the_report_does_not_have_is_refused(tmp_path, text, line, fragments):
    assert_one_error(write(tmp_path, text), line, *fragments)


def test_threshold_keys_of_the_report_metrics_are_taken(tmp_path):
    text = (DECLARED + "report:\n  metrics: [tps, p99_ms]\n  primary: [tps]\n"
            "  threshold: {default: 4%, p99_ms: 20%, tps: 0.1}\n")
    report = load_spec(write(tmp_path, text)).report
    assert (report.threshold, report.threshold_for("p99_ms"), report.threshold_for("tps")) == (0.04, 0.2, 0.1)


def test_threshold_keys_are_left_to_the_runs_when_the_spec_names_no_metric(tmp_path):
    # fio's metrics come from its parser, which validation does not know: nothing to check against.
    text = BASE.replace("workload_command", "workload_fio") + "report:\n  threshold: {read_clat_p99_us: 20%}\n"
    assert load_spec(write(tmp_path, text)).report.threshold_for("read_clat_p99_us") == 0.2
