"""A workload_command without declared metrics is timed by bmx (issue 38, item 3): the
batch runner measures the command (usage.json) and the parser gives wall time, user and
system CPU and peak memory as metrics, lower is better; declared metrics are unchanged."""

from __future__ import annotations

import json
import re

import host_layout
import pytest

from benchmatrix.host import batch_runner
from benchmatrix.workloads import WORKLOADS, metric_direction, parse_command

TIMED = {"wall_s": "s", "user_s": "s", "system_s": "s", "max_rss_kib": "KiB"}


def measured_dir(tmp_path, argv):
    run = {"run_id": "r1", "attempt": 1, "timeout": 60, "before_run": [], "argv": argv, "measure": True}
    batch_runner.execute(run, str(tmp_path))
    return host_layout.run_dir(tmp_path, "r1")


def test_without_declared_metrics_the_runners_measurement_is_the_runs_metrics(tmp_path):
    run_dir = measured_dir(tmp_path, ["sleep", "0.1"])
    usage = json.loads((run_dir / "usage.json").read_text())
    parsed = parse_command("", {"role": "workload_command", "vars": {"argv": ["sleep", "0.1"]}}, run_dir)
    assert {name: unit for name, (_, unit) in parsed.metrics.items()} == TIMED
    assert {name: value for name, (value, _) in parsed.metrics.items()} == usage
    assert parsed.metrics["wall_s"][0] >= 0.1


def test_declared_metrics_are_read_as_before_and_not_timed(tmp_path):
    run_dir = measured_dir(tmp_path, ["echo", "tps = 12.5"])
    workload = {"role": "workload_command", "metrics": {"tps": {"regex": r"tps = (?P<value>[0-9.]+)",
                                                                 "unit": "tx/s", "better": "higher"}}}
    assert parse_command("tps = 12.5\n", workload, run_dir).metrics == {"tps": (12.5, "tx/s")}


def test_without_a_measurement_there_is_no_metric():
    assert parse_command("hello\n", {"role": "workload_command"}, None).metrics == {}


def test_a_broken_usage_file_is_a_parse_error_naming_it(tmp_path):
    from benchmatrix.errors import ParseError

    (tmp_path / "usage.json").write_text("{not json")
    with pytest.raises(ParseError, match="usage.json"):
        parse_command("", {"role": "workload_command"}, tmp_path)


def test_the_descriptor_measures_only_without_declared_metrics_and_knows_the_names():
    command = WORKLOADS["workload_command"]
    assert command.measure is not None
    assert command.measure({"role": "workload_command", "vars": {"argv": ["true"]}})
    assert not command.measure({"role": "workload_command", "metrics": {"tps": {"regex": "(?P<value>.)"}}})
    assert all(WORKLOADS[r].measure is None for r in WORKLOADS if r != "workload_command")
    for name in TIMED:
        assert metric_direction(name) == "lower"
        assert command.names().matches(name)


def test_the_timed_metrics_have_units_the_report_knows():
    from benchmatrix.report.units import quantity

    assert re.fullmatch(r"12\.3\d* ms", quantity(0.0123, "s"))
    assert quantity(13428, "KiB").endswith(" MiB")


def argv_of(**variables):
    from benchmatrix.workloads.command.argv import workload_command_argv

    return workload_command_argv([{"run_id": "r1", "vars": variables}])[0]["argv"]


def test_a_command_line_is_split_into_arguments_as_a_shell_splits_words_without_a_shell():
    assert argv_of(command="sleep 0.05") == ["sleep", "0.05"]
    assert argv_of(command="sh -c 'echo $HOME | wc -c'") == ["sh", "-c", "echo $HOME | wc -c"]


@pytest.mark.parametrize("variables,message", [
    ({"command": "echo 'unclosed"}, "vars.command cannot be split into arguments: No closing quotation"),
    ({"command": "  "}, "vars.command is empty"),
    ({"command": "true", "argv": ["true"]}, "give vars.argv or vars.command, not both"),
    ({}, "vars.argv must be a non-empty list"),
])
def test_a_bad_command_line_is_one_line_naming_the_run(variables, message):
    from benchmatrix.errors import WorkloadVarsError

    with pytest.raises(WorkloadVarsError, match="^workload_command: run r1: " + re.escape(message)):
        argv_of(**variables)


def _build(role, variables):
    """The role's own argv filter on one run with ``variables``."""
    from benchmatrix.workloads.command.argv import workload_command_argv
    from benchmatrix.workloads.pgbench.argv import workload_pgbench_plan
    from benchmatrix.workloads.stress_ng.argv import workload_stress_ng_argv
    from benchmatrix.workloads.sysbench.argv import workload_sysbench_plan

    runs = [{"run_id": "r1", "vars": variables}]
    if role == "workload_pgbench":
        return workload_pgbench_plan(runs, {}, "pgbench", "/tmp", "/tmp")
    if role == "workload_sysbench":
        return workload_sysbench_plan(runs, "sysbench", "/tmp")
    return {"workload_command": workload_command_argv, "workload_stress_ng": workload_stress_ng_argv}[role](runs)


@pytest.mark.parametrize("role,variables,hint", [
    ("workload_command", {"argv": ["true"], "cwdir": "/tmp"}, "did you mean 'cwd'?"),
    ("workload_command", {"argvs": ["true"]}, "did you mean 'argv'?"),
    ("workload_pgbench", {"client": 4}, "did you mean 'clients'?"),
    ("workload_sysbench", {"test": "cpu", "thread": 2}, "did you mean 'threads'?"),
    ("workload_stress_ng", {"stressors": {"cpu": 1}, "timout": 5}, "did you mean 'timeout'?"),
])
def test_an_unknown_workload_variable_gets_did_you_mean(role, variables, hint):
    from benchmatrix.errors import WorkloadVarsError

    with pytest.raises(WorkloadVarsError, match=r"^" + role + r": run r1: unknown variable.*" + re.escape(hint) + "$"):
        _build(role, variables)
