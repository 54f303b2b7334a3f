"""tasks/prepare.yml records the tool's version from the fact the workload's descriptor
names (``version_var``, passed as ``bmx_workload_version_var``), not by the role-name
convention ``bmx_workload_role + '_version'`` in the playbook (issue 34, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.execute.prepare import preparation
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("workload", "wanted"), [
    ("  role: workload_fio\n  vars: {rw: read, bs: 4k, size: 1m}\n", "workload_fio_version"),
    ("  role: workload_command\n  vars: {argv: [/bin/true]}\n", "workload_command_version"),
    # A project's own role: its <role>_version fact, as docs/workloads.md asks of roles.
    ("  role: workload_mytool\n  vars: {x: 1}\n", "workload_mytool_version"),
])
def test_preparation_names_the_version_fact(tmp_path, workload, wanted):
    (tmp_path / "inventory.yml").write_text("all:\n  hosts:\n    h1:\n")
    (tmp_path / "s.yaml").write_text(f"name: t\ninventory: inventory.yml\nfactors:\n  a: [1]\nworkload:\n{workload}")
    seen = preparation(load_spec(tmp_path / "s.yaml"), tmp_path, "h1").extravars
    assert seen["bmx_workload_version_var"] == wanted


def test_prepare_names_no_role_variable_by_convention():
    text = (ROOT / "playbooks" / "tasks" / "prepare.yml").read_text()
    assert "bmx_workload_role +" not in text and "bmx_workload_role ~" not in text
