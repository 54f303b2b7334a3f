"""The stress-ng workload: its parser against real stress-ng 0.15.06 output
(tests/fixtures/stress_ng) and its argv builder through the role's filter plugin."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_workloads_units import plugin

from benchmatrix.errors import ParseError, WorkloadVarsError
from benchmatrix.workloads import PARSERS, STRESS_NG_METRICS, WORKLOADS, metric_direction, parse_stress_ng
from benchmatrix.workloads.stress_ng.argv import workload_stress_ng_argv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "stress_ng"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_registry():
    assert PARSERS["workload_stress_ng"] is parse_stress_ng
    assert WORKLOADS["workload_stress_ng"].metrics is STRESS_NG_METRICS
    assert metric_direction("bogo_ops_per_s") == "higher" and metric_direction("bogo_ops_per_s_cpu") == "higher"


def test_one_stressor():
    parsed = parse_stress_ng(text("cpu.yaml"))
    m = parsed.metrics
    assert parsed.extra == {"version": "0.15.06", "stressors": ["cpu"]}
    assert m["bogo_ops"] == (413.0, "ops")
    assert m["bogo_ops_per_s"] == (411.955649, "ops/s") and m["bogo_ops_per_s_cpu"] == (1134.15113, "ops/s")
    assert m["wall_s"] == (1.002535, "s") and m["max_rss_kib"] == (6544.0, "KiB")
    assert parsed.jobs == {"cpu": m}
    assert {name: unit for name, (_, unit) in m.items()} == STRESS_NG_METRICS


def test_two_stressors_are_jobs_and_sum():
    parsed = parse_stress_ng(text("cpu_vm.yaml"))
    assert list(parsed.jobs) == ["cpu", "vm"]
    cpu, vm = parsed.jobs["cpu"], parsed.jobs["vm"]
    assert parsed.metrics["bogo_ops"][0] == cpu["bogo_ops"][0] + vm["bogo_ops"][0] == 5432.0
    assert parsed.metrics["bogo_ops_per_s"][0] == pytest.approx(cpu["bogo_ops_per_s"][0] + vm["bogo_ops_per_s"][0])
    assert parsed.metrics["wall_s"][0] == max(cpu["wall_s"][0], vm["wall_s"][0]) == 1.032475
    assert parsed.metrics["max_rss_kib"] == (18448.0, "KiB")


@pytest.mark.parametrize(("name", "message"), [
    ("empty.yaml", "stress-ng: empty output"),
    ("truncated.yaml", "stress-ng: the report ends before its metrics (truncated"),
    ("error.yaml", "stress-ng: no metrics in the output (an error instead of a report: "
                   "Try 'stress-ng --help' for more information.)"),
])
def test_malformed_output_is_a_parse_error(name, message):
    with pytest.raises(ParseError) as info:
        parse_stress_ng(text(name))
    assert str(info.value).startswith(message), str(info.value)


def test_argv():
    f = plugin("workload_stress_ng")
    options = {"vm-bytes": "16m", "cpu-method": "matrix prod; ls", "aggressive": True, "unused": ""}
    runs = [{"run_id": "r1", "vars": {"stressors": {"cpu": 2, "vm": 1}, "timeout": 3, "options": options,
                                      "cpus": "0-1"}, "factors": {"n": 2}}]
    (cmd,) = f.workload_stress_ng_argv(runs, "/usr/bin/stress-ng")
    assert cmd["argv"] == ["/usr/bin/stress-ng", "--cpu", "2", "--vm", "1", "--timeout", "3s", "--metrics-brief",
                           "--yaml", "/dev/stdout", "--vm-bytes", "16m", "--cpu-method", "matrix prod; ls",
                           "--aggressive"]
    assert cmd["cpus"] == [0, 1] and "vars" not in cmd and "factors" not in cmd


@pytest.mark.parametrize(("run_vars", "message"), [
    ({"stressors": {"cpu": 1}, "threads": 2}, "unknown variable(s) threads (known: cpus, options, stressors, timeout)"),
    ({}, "vars.stressors must be a mapping of stressor to instances"),
    ({"stressors": {"cpu": "two"}}, "stressor cpu: instances must be a whole number"),
    ({"stressors": {"--cpu": 1}}, "'--cpu' is not a stressor name"),
    ({"stressors": {"cpu": 1}, "timeout": 0}, "timeout must be whole seconds > 0"),
    ({"stressors": {"cpu": 1}, "options": {"yaml": "/tmp/x"}}, "option 'yaml' is not an option name, or is set by"),
    ({"stressors": {"cpu": 1}, "options": {"vm-bytes": "1\n--x"}}, "option vm-bytes must be a string or number on one"),
])
def test_argv_refusals_name_the_role_and_run(run_vars, message):
    with pytest.raises(WorkloadVarsError) as info:  # the builder itself: the filter turns it into Ansible's error
        workload_stress_ng_argv([{"run_id": "r9", "vars": run_vars}])
    assert str(info.value).startswith("workload_stress_ng: run r9: ") and message in str(info.value), str(info.value)
