"""bmx check's workload tool (execute.check.tool_of): the role descriptor's binary, the
spec's argv for workload_command, the role's name for a role without a descriptor."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.execute.check import tool_of
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
    ("  role: workload_mytool\n  vars: {x: '{{ a }}'}\n", "mytool"),
])
def test_tool_of(tmp_path, workload, tool):
    assert tool_of(spec_of(tmp_path, workload), ROOT) == tool
