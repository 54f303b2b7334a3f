"""A metric name the runs can never hold gets "did you mean" (issue 38, item 7's rest): report
metrics, primary metrics, tables and success criteria of a built-in workload (or of a command
timed by bmx) are checked against the names its runs can hold, FILE:LINE each."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.errors import SpecErrors
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import metric_names

FIO = """\
name: t
factors:
  bs: [4k, 64k]
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", size: 1m}
"""

TIMED = """\
name: t
factors:
  cmd: [a, b]
workload:
  role: workload_command
  vars: {argv: [echo, "{{ cmd }}"]}
"""


def errors(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecErrors) as info:
        load_spec(path, metric_names=metric_names)
    return str(info.value).splitlines()


def loads(tmp_path: Path, text: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    load_spec(path, metric_names=metric_names)


@pytest.mark.parametrize("report,line,name,hint", [
    ("report:\n  metrics: [read_iops, read_bw_kb]\n", 8, "report.metrics names 'read_bw_kb'", "read_bw_kib"),
    ("report:\n  primary: [read_clat_p99]\n", 8, "report.primary names 'read_clat_p99'", "read_clat_p99_us"),
    ("report:\n  tables:\n    - {rows: bs, metric: read_iop}\n", 9, "report.tables.0.metric names 'read_iop'",
     "read_iops"),
])
def test_a_misspelt_metric_of_a_builtin_workload(tmp_path, report, line, name, hint):
    lines = errors(tmp_path, FIO + report)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{tmp_path / 'spec.yaml'}:{line}: {name}, which no metric of workload_fio can be")
    assert lines[0].endswith(f"; did you mean '{hint}'?"), lines


def test_a_timed_commands_metric_and_a_success_criterion(tmp_path):
    success = "  success: {metrics: {wal_s: {max: 1}}}\n"
    lines = errors(tmp_path, TIMED + success + "report:\n  metrics: [wall_s, max_rss_kb]\n")
    assert len(lines) == 2, lines
    assert "workload.success.metrics names 'wal_s'" in lines[0] and lines[0].endswith("did you mean 'wall_s'?")
    assert "report.metrics names 'max_rss_kb'" in lines[1] and lines[1].endswith("did you mean 'max_rss_kib'?")


def test_names_the_runs_can_hold_are_accepted(tmp_path):
    loads(tmp_path, FIO + "collect: [cpu, disk]\nreport:\n  metrics: [read_iops, cpu_user_pct, disk_sda_util_pct]\n")
    loads(tmp_path, TIMED + "report:\n  metrics: [wall_s, user_s, system_s, max_rss_kib]\n")
    # A declared metric's name is the spec's to give.
    loads(tmp_path, TIMED.replace("vars: {", "metrics: {tps: {regex: 'tps=(?P<value>.*)', unit: tx/s}}\n  vars: {")
          + "report:\n  metrics: [tps]\n")


def test_without_the_descriptors_nothing_is_checked(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(FIO + "report:\n  metrics: [read_bw_kb]\n")
    assert load_spec(path).data["report"]["metrics"] == ["read_bw_kb"]


def test_an_unknown_spec_key_gets_did_you_mean(tmp_path):
    lines = errors(tmp_path, FIO + "replicate: 5\nreport:\n  metric: [read_iops]\n")
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{tmp_path / 'spec.yaml'}:7: unknown key 'replicate' in spec (allowed: ")
    assert lines[0].endswith("; did you mean 'replicates'?"), lines
    assert "unknown key 'metric' in report" in lines[1] and lines[1].endswith("; did you mean 'metrics'?"), lines
