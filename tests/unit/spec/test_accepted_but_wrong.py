"""Specs and options that were accepted and then meant something else (issue 35, item 8).

Each case here validated (or was taken by the command line) and silently changed what
was asked: a number in another base, a threshold under a misspelt metric, a budget
that never ends. Each must be refused with one line naming ``FILE:LINE`` (a spec) or
the option (the command line).
"""

from __future__ import annotations

import pytest
from test_spec import BASE, assert_one_error, write

from benchmatrix.cli import main
from benchmatrix.spec.load import load_spec, parse_duration, threshold_fraction

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


# ---------------------------------------------------------------- thresholds: one parser for the spec and --threshold

#: Accepted by ``float()`` but not what the spec's threshold is: a subnormal, another
#: script's digits, digits grouped with '_', infinity, no number at all.
BAD_THRESHOLDS = ["1e-320", "\u0665%", "1_0%", "inf", "nan%", "", " % ", "0%", "100%", "1", "-5%",
                  "0.00001%", "5 %%", "\uff15%"]


@pytest.mark.parametrize("value", BAD_THRESHOLDS)
def test_bad_thresholds_are_refused_by_the_parser(value):
    with pytest.raises(ValueError, match="write a percentage such as 5% or a fraction such as 0.05"):
        threshold_fraction(value)


@pytest.mark.parametrize("value", [1e-300, 1e-7, float("inf"), float("nan"), 1.0, True])
def test_bad_threshold_numbers_are_refused_by_the_parser(value):
    with pytest.raises(ValueError):
        threshold_fraction(value)


def test_thresholds_the_spec_takes():
    assert [threshold_fraction(v) for v in ("5%", " 2.5 % ", ".5%", "0.05", 0.05, "0.0001%")] == \
        pytest.approx([0.05, 0.025, 0.005, 0.05, 0.05, 1e-6])


@pytest.mark.parametrize("value", ["1e-320", "\u0665%", "1_0%"])
def test_compare_threshold_refuses_what_the_spec_refuses(tmp_path, monkeypatch, capsys, value):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    assert main(["compare", "a", "b", "--threshold", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bmx: --threshold {value!r}: write a percentage"), err


def test_spec_threshold_in_a_number_form_float_takes_is_refused(tmp_path):
    assert_one_error(write(tmp_path, BASE + "report:\n  threshold: 0.0000000001\n"), 10, "report.threshold")


# ---------------------------------------------------------------- budgets

BAD_BUDGETS = ["", " ", "inf", "nan", "0h", "0s", "-1h", "\u0663h", "1_0m", "0.1s", "9999h", "1" * 400 + "s",
               "2 days", "1e3s"]


@pytest.mark.parametrize("value", BAD_BUDGETS)
def test_bad_budgets_are_refused_by_the_parser(value):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


def test_budgets_that_are_taken():
    assert [parse_duration(v) for v in ("2h", "90m", "1h30m", "45s", "1s", "8784h")] == \
        [7200, 5400, 5400, 45, 1, 8784 * 3600]


UNTIL = ("report:\n  compare: {factor: b, baseline: x}\n"
         "replicates: {min: 2, max: 4, until: decided, budget: BUDGET}\n")


@pytest.mark.parametrize("budget", ["''", "inf", "0h", "9999h", "'\u0663h'"])
def test_bad_spec_budgets_are_refused(tmp_path, budget):
    assert_one_error(write(tmp_path, BASE + UNTIL.replace("BUDGET", budget)), 11, "replicates.budget",
                     "duration")


def test_spec_budget_is_taken(tmp_path):
    spec = load_spec(write(tmp_path, BASE + UNTIL.replace("BUDGET", "90m")))
    assert spec.data["replicates_until"]["budget"] == "90m"


@pytest.mark.parametrize("value", ["", "inf", "0s"])
def test_run_budget_option_is_refused_before_anything(tmp_path, monkeypatch, capsys, value):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    assert main(["run", "missing.yaml", "--until-decided", "--budget", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bmx: --budget {value!r}: "), err


# ---------------------------------------------------------------- control and bidi characters in levels

@pytest.mark.parametrize("level, code", [('"x\\e[2J"', "U+001B"), ('"\\u202eevil"', "U+202E"),
                                         ('"a\\tb"', "U+0009"), ('"x\\u2066"', "U+2066"), ('"x\\n"', "U+000A")])
def test_levels_with_control_or_bidi_characters_are_refused(tmp_path, level, code):
    assert_one_error(write(tmp_path, BASE.replace("b: [x, y]", f"b: [x, {level}]")), 4,
                     "factor 'b': level", code)


def test_include_and_control_values_with_control_characters_are_refused(tmp_path):
    text = BASE + 'include:\n  - {a: 3, b: "z\\e[31m"}\n'
    assert_one_error(write(tmp_path, text), 10, "include entry: level", "U+001B")
    text = BASE + 'order:\n  control: {a: 1, b: "\\u202ey"}\n'
    assert_one_error(write(tmp_path, text, "c.yaml"), 10, "order.control: level", "U+202E")


def test_levels_of_any_script_and_spaces_are_taken(tmp_path):
    spec = load_spec(write(tmp_path, BASE.replace("b: [x, y]", "b: [x, 'read ahead', é, 日本, 'עברית']")))
    assert spec.data["factors"]["b"] == ["x", "read ahead", "é", "日本", "עברית"]


@pytest.mark.parametrize("text, line, where", [
    ("report:\n  threshold: '1_0%'\n", 10, "report.threshold: threshold '1_0%'"),
    ("report:\n  threshold: {default: 5%, m: '\u0665%'}\n", 10, "report.threshold.m: threshold '\u0665%'"),
    ("report:\n  compare: {factor: b, baseline: x}\n"
     "replicates: {min: 2, max: 4, until: decided, detect: '1e-320'}\n", 11, "replicates.detect: threshold '1e-320'"),
])
def test_spec_thresholds_say_what_the_parser_says(tmp_path, text, line, where):
    assert_one_error(write(tmp_path, BASE + text), line, where, "write a percentage such as 5%")
