"""bmx check's directory of the workload's files (issue 34, item 3): the host variable
and its default come from the workload's descriptor (``files_var``, ``files_default``),
not from parsing the role's defaults/main.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.execute import check
from benchmatrix.spec.load import load_spec


def spec_of(tmp_path: Path, workload: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: t\nfactors:\n  a: [1, 2]\nworkload:\n{workload}")
    return load_spec(path)


@pytest.mark.parametrize(("workload", "wanted"), [
    ("  role: workload_fio\n  vars: {rw: read, bs: '{{ a }}k', size: 1m}\n",
     ("workload_fio_directory", "/var/tmp/benchmatrix/scratch")),
    ("  role: workload_sysbench\n  vars: {test: cpu, threads: '{{ a }}'}\n",
     ("workload_sysbench_directory", "/var/tmp/benchmatrix/{{ bmx_experiment | default('default') }}-sysbench")),
    ("  role: workload_stress_ng\n  vars: {stressors: {cpu: '{{ a }}'}}\n", ("", "")),
    # A project's own role: its host variable by the roles' naming, no default.
    ("  role: workload_mytool\n  vars: {x: '{{ a }}'}\n", ("workload_mytool_directory", "")),
])
def test_the_directory_comes_from_the_descriptor(tmp_path, workload, wanted):
    assert check.role_directory(spec_of(tmp_path, workload)) == wanted
    assert not hasattr(check, "role_default"), "bmx check still parses a role's defaults file"


@pytest.mark.parametrize(("workload", "wanted"), [
    ("  role: workload_fio\n  vars: {rw: read, bs: '{{ a }}k', size: 1m}\n",
     {"binary": "workload_fio_binary", "install": "workload_fio_install", "loopfs_mb": "workload_fio_loopfs_mb"}),
    ("  role: workload_command\n  vars: {argv: [/bin/true, '{{ a }}']}\n",
     {"binary": "", "install": "workload_command_install", "loopfs_mb": ""}),
    ("  role: workload_mytool\n  vars: {x: '{{ a }}'}\n",
     {"binary": "workload_mytool_binary", "install": "workload_mytool_install",
      "loopfs_mb": "workload_mytool_loopfs_mb"}),
])
def test_the_role_variables_the_check_reads_come_from_the_descriptor(tmp_path, workload, wanted):
    assert check.role_variables(spec_of(tmp_path, workload)) == wanted


def test_check_host_names_no_role_variable_by_convention():
    text = (Path(__file__).resolve().parents[3] / "playbooks" / "check_host.yml").read_text()
    assert "bmx_workload_role +" not in text and "bmx_workload_role ~" not in text
