"""bmx check's workload tool (execute.check.tool_of): the role descriptor's binary, the
spec's argv for workload_command, the role's name for a role without a descriptor."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.execute.check import dry_runs, tool_of
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]


def spec_of(tmp_path: Path, workload: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: t\nfactors:\n  a: [1, 2]\nworkload:\n{workload}")
    return load_spec(path)


@pytest.mark.parametrize(("workload", "tool"), [
    ("  role: workload_fio\n  vars: {rw: read, bs: '{{ a }}k', size: 1m}\n", "fio"),
    ("  role: workload_pgbench\n  vars: {clients: '{{ a }}'}\n", "pgbench"),  # its role's binary default is ""
    ("  role: workload_sysbench\n  vars: {test: cpu, threads: '{{ a }}'}\n", "sysbench"),
    ("  role: workload_stress_ng\n  vars: {stressors: {cpu: '{{ a }}'}}\n", "stress-ng"),
    ("  role: workload_command\n  vars: {argv: [/usr/bin/stress-ng, '{{ a }}']}\n", "/usr/bin/stress-ng"),
    ("  role: workload_command\n  vars: {argv: ['{{ a }}']}\n", ""),
    # vars.command, a command line: its first word, as the role splits it (issue 38, round 2)
    ("  role: workload_command\n  vars: {command: '/opt/no such/tool --n {{ a }}'}\n", "/opt/no"),
    ("  role: workload_command\n  vars: {command: \"'/opt/my tool' -n {{ a }}\"}\n", "/opt/my tool"),
    ("  role: workload_command\n  vars: {command: '{{ a }} --n 1'}\n", ""),
    ("  role: workload_command\n  vars: {command: \"'unclosed\"}\n", ""),
    ("  role: workload_mytool\n  vars: {x: '{{ a }}'}\n", "mytool"),
])
def test_tool_of(tmp_path, workload, tool):
    assert tool_of(spec_of(tmp_path, workload), ROOT) == tool


@pytest.mark.parametrize(("workload", "tries"), [
    ("  role: workload_fio\n  vars: {rw: read, bs: '{{ a }}k', size: 1m}\n",
     [("parse", ["fio", "--parse-only"])] * 2),
    ("  role: workload_sysbench\n  vars: {test: cpu, threads: '{{ a }}'}\n",
     [("options", ["sysbench", "cpu", "help"]), ("general", ["sysbench", "--help"])]),
    ("  role: workload_pgbench\n  vars: {clients: '{{ a }}'}\n", [("options", ["pgbench", "--help"])]),
    ("  role: workload_stress_ng\n  vars: {stressors: {cpu: '{{ a }}'}, timeout: 2}\n",
     [("parse", ["stress-ng", "--dry-run"])] * 2),
    ("  role: workload_command\n  vars: {argv: [stress-ng, --cpu, '{{ a }}', --timeout, 1s]}\n",
     [("parse", ["stress-ng", "--dry-run"])] * 2),
    ("  role: workload_command\n  vars: {argv: [sleep, '{{ a }}']}\n", []),
])
def test_dry_runs_come_from_the_descriptors(tmp_path, workload, tries):
    """Each cell's command as the role builds it, tried the way its tool's descriptor says."""
    spec = spec_of(tmp_path, workload)
    got = dry_runs(spec, ROOT, tool_of(spec, ROOT))
    assert [(d.kind, d.argv[:len(want)]) for d, (_, want) in zip(got, tries)] == tries
    assert len(got) == len(tries) and all(d.cells for d in got if d.kind != "general")


def test_dry_run_options_are_the_commands_long_options(tmp_path):
    spec = spec_of(tmp_path, "  role: workload_sysbench\n  vars: {test: cpu, threads: '{{ a }}', time: 1}\n")
    options, general = dry_runs(spec, ROOT, "sysbench")
    assert {"--threads", "--time"} <= set(options.options) and options.cells == ["a=1", "a=2"]
    assert general.kind == "general" and not general.cells


def test_a_command_the_role_refuses_is_a_problem(tmp_path):
    spec = spec_of(tmp_path, "  role: workload_stress_ng\n  vars: {stressors: {cpu: '{{ a }}'}, timeout: 0}\n")
    problems = dry_runs(spec, ROOT, "stress-ng")  # the message names the run, so one per cell
    assert [(p.kind, p.cells) for p in problems] == [("problem", ["a=1"]), ("problem", ["a=2"])]
    assert all("workload_stress_ng" in p.problem and "timeout" in p.problem for p in problems)
