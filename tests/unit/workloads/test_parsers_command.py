"""Tests of workload_command's declared metrics and of the success criteria.

The outputs are real: pgbench's and fio's fixtures and dd's standard error
(tests/fixtures/command)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmatrix.errors import ParseError
from benchmatrix.workloads import PARSERS, check_declarations, check_success, parse_command

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PGBENCH = (FIXTURES / "pgbench" / "two_scripts_think_time.txt").read_text()
FIO = (FIXTURES / "fio" / "randread_4k_libaio.json").read_text()
FIO_TWO = (FIXTURES / "fio" / "two_jobs.json").read_text()


def wl(**metrics):
    return {"role": "workload_command", "metrics": metrics}


def test_registry():
    assert PARSERS["workload_command"] is parse_command


def test_regex_named_group_value_takes_the_last_match_by_default():
    parsed = parse_command(PGBENCH, wl(tps={"regex": r"tps = (?P<value>[0-9.]+)", "unit": "tx/s"}))
    # "tps = " appears in the summary and in each script's section: the last is script 2's.
    assert parsed.metrics["tps"][1] == "tx/s"
    last = [ln for ln in PGBENCH.splitlines() if "tps = " in ln][-1]
    assert parsed.metrics["tps"][0] == float(last.split("tps = ")[1].rstrip(")"))


@pytest.mark.parametrize("pick,expect", [("first", 0), ("count", None), ("max", None)])
def test_pick(pick, expect):
    decl = {"regex": r"latency average = (?P<value>[0-9.]+) ms", "unit": "ms", "pick": pick}
    value = parse_command(PGBENCH, wl(lat=decl)).metrics["lat"][0]
    values = [float(ln.split("= ")[1].split()[0]) for ln in PGBENCH.splitlines() if "latency average" in ln]
    if pick == "first":
        assert value == values[0]
    elif pick == "count":
        assert value == len(values) == 3
    else:
        assert value == max(values)


def test_regex_anchors_match_at_line_starts():
    decl = {"regex": r"^tps = (?P<value>[0-9.]+)", "unit": "tx/s", "pick": "count"}
    assert parse_command(PGBENCH, wl(n=decl)).metrics["n"][0] == 1


def test_json_path_into_real_fio_output():
    data = json.loads(FIO)
    parsed = parse_command(FIO, wl(iops={"json": "$.jobs[0].read.iops", "unit": "IO/s", "better": "higher"},
                                   p99={"json": "$.jobs[-1].read.clat_ns.percentile['99.000000']", "unit": "ns"}))
    assert parsed.metrics["iops"] == (data["jobs"][0]["read"]["iops"], "IO/s")
    assert parsed.metrics["p99"][0] == data["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"]


def test_json_wildcard_with_pick_sum():
    data = json.loads(FIO_TWO)
    parsed = parse_command(FIO_TWO, wl(iops={"json": "$.jobs[*].read.iops", "unit": "IO/s", "pick": "sum"}))
    assert parsed.metrics["iops"][0] == pytest.approx(sum(j["read"]["iops"] for j in data["jobs"]))


def test_json_after_a_banner_line():
    parsed = parse_command("note: warming up\n" + FIO, wl(v={"json": "$.jobs[0].read.total_ios", "unit": "IO"}))
    assert parsed.metrics["v"][0] > 0


def test_stderr_source_reads_the_run_directory(tmp_path):
    shutil.copy(FIXTURES / "command" / "dd.stderr", tmp_path / "stderr")
    decl = {"regex": r"copied, (?P<value>[0-9.]+) s", "unit": "s", "source": "stderr"}
    parsed = parse_command("", wl(seconds=decl), tmp_path)
    assert parsed.metrics["seconds"] == (0.0119719, "s")


def test_no_declared_metrics_gives_no_metrics():
    assert parse_command("anything", {"role": "workload_command"}).metrics == {}


# --- errors -------------------------------------------------------------------------


def parse_error(stdout, workload, run_dir=None) -> str:
    with pytest.raises(ParseError) as caught:
        parse_command(stdout, workload, run_dir)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_missing_match_names_metric_and_output():
    message = parse_error("pgbench: error: could not connect", wl(tps={"regex": r"tps = (?P<value>\d+)", "unit": "x"}))
    assert message.startswith("metric 'tps': regex") and "pgbench: error: could not connect" in message


def test_empty_output():
    assert "stdout is empty" in parse_error("", wl(tps={"regex": r"tps = (?P<value>\d+)", "unit": "x"}))
    assert "printed nothing" in parse_error("", wl(v={"json": "$.a", "unit": "x"}))


def test_truncated_json():
    truncated = (FIXTURES / "fio" / "truncated.json").read_text()
    assert "not valid JSON" in parse_error(truncated, wl(v={"json": "$.jobs[0].read.iops", "unit": "x"}))


def test_tool_error_message_instead_of_json():
    raw = (FIXTURES / "fio" / "tool_error_bad_option.json").read_text()
    message = parse_error(raw, wl(v={"json": "$.jobs[0].read.iops", "unit": "x"}))
    assert message.startswith("no JSON document in stdout")


def test_path_to_a_non_number():
    assert "not a number" in parse_error(FIO, wl(v={"json": "$.jobs[0].jobname", "unit": "x"}))
    assert "found a dict" in parse_error(FIO, wl(v={"json": "$.jobs[0].read", "unit": "x"}))


def test_regex_capturing_a_non_number():
    message = parse_error(PGBENCH, wl(v={"regex": r"query mode: (?P<value>\w+)", "unit": "x"}))
    assert "'simple' is not a number" in message


def test_bad_declarations_are_reported_by_check_declarations_and_the_parser():
    bad = {
        "a": {"regex": "tps = ([0-9.]+)", "unit": "x"},              # no value group
        "b": {"regex": "tps = (?P<value>[0-9.]+", "unit": "x"},      # does not compile
        "c": {"json": "jobs[0]", "unit": "x"},                       # no $
        "d": {"regex": "x", "json": "$.x", "unit": "x"},             # both
        "e": {"unit": "x"},                                          # neither
        "f": {"json": "$.a", "unit": "x", "pick": "median"},         # unknown pick
    }
    problems = dict((path[0], msg) for path, msg in check_declarations(bad))
    assert set(problems) == set(bad)
    assert "(?P<value>" in problems["a"]
    assert "invalid regex" in problems["b"]
    for name, decl in bad.items():
        parse_error(FIO, wl(**{name: decl}))


# --- success criteria ---------------------------------------------------------------


def test_success_required_and_forbidden_lines():
    assert check_success({"required_line": r"^tps = "}, PGBENCH, "", {}) == []
    problems = check_success({"required_line": [r"^tps = ", r"^done$"], "forbidden_line": "ERROR|FATAL"},
                             PGBENCH, "pgbench: FATAL: boom\n", {})
    assert problems == ["no output line matches required_line '^done$'",
                        "output line matches forbidden_line 'ERROR|FATAL': pgbench: FATAL: boom"]


def test_success_metric_ranges():
    metrics = {"tps": (120.0, "tx/s"), "lat": {"value": 9.0, "unit": "ms"}}
    assert check_success({"metrics": {"tps": {"min": 100}, "lat": {"max": 10}}}, "", "", metrics) == []
    problems = check_success({"metrics": {"tps": {"min": 200, "max": 100}, "lat": {"max": 5}, "gone": {"min": 0}}},
                             "", "", metrics)
    assert problems == ["metric 'tps' = 120 is below its minimum 200",
                        "metric 'tps' = 120 is above its maximum 100",
                        "metric 'lat' = 9 is above its maximum 5",
                        "metric 'gone' required by success.metrics was not measured"]


def test_success_invalid_regex_is_a_problem_not_a_crash():
    assert "not a valid regex" in check_success({"required_line": "("}, "x", "", {})[0]
