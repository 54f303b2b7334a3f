"""An unknown key of ``workload.vars`` is caught by bmx validate, not by the first batch
(issue 38, round 2): an error at the key's FILE:LINE with "did you mean" for a workload
whose variables are all known (command, pgbench, sysbench, stress-ng); a warning for fio,
whose variables are fio's own options (the host's fio, its version and engines decide:
bmx check asks it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix.errors import SpecErrors
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import workload_variables

ROOT = Path(__file__).resolve().parents[3]

HEAD = "name: t\nfactors:\n  k: [1, 2]\nworkload:\n  role: {role}\n  vars:\n"


def spec(tmp_path: Path, role: str, lines: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(HEAD.format(role=role) + lines + "replicates: 2\n")
    return path


@pytest.mark.parametrize("role, lines, line, hint", [
    ("workload_command", "    argv: [sleep, '0']\n    cwdd: /tmp\n", 8, "cwd"),
    ("workload_pgbench", "    clients: 2\n    thredas: 2\n", 8, "threads"),
    ("workload_sysbench", "    test: cpu\n    thredas: 2\n", 8, "threads"),
    ("workload_stress_ng", "    stressors: {cpu: 1}\n    timeuot: 5\n", 8, "timeout"),
])
def test_an_unknown_variable_is_an_error_at_its_line(tmp_path, role, lines, line, hint):
    path = spec(tmp_path, role, lines)
    with pytest.raises(SpecErrors) as info:
        load_spec(path, variables=workload_variables)
    errs = str(info.value).splitlines()
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"{path}:{line}: "), errs
    assert "unknown variable" in errs[0] and errs[0].endswith(f"; did you mean '{hint}'?"), errs


def test_a_misspelt_fio_option_is_a_warning_at_its_line(tmp_path):
    path = spec(tmp_path, "workload_fio", "    rw: read\n    szie: 1m\n    readwrite: read\n    hipri: 1\n")
    warnings = load_spec(path, variables=workload_variables).warnings
    mine = [w for w in warnings if "szie" in w]
    assert len(mine) == 1 and mine[0].startswith(f"{path}:8: warning: "), warnings
    assert mine[0].endswith("; did you mean 'size'?"), mine
    # An alias (readwrite) and an engine's option (hipri) are fio's own: no warning.
    assert not [w for w in warnings if "readwrite" in w or "hipri" in w], warnings


def test_fio_with_a_job_file_takes_any_template_value(tmp_path):
    path = spec(tmp_path, "workload_fio", "    job_file: jobs/x.fio\n    my_block: 4k\n")
    assert not [w for w in load_spec(path, variables=workload_variables).warnings if "my_block" in w]


def test_known_variables_and_other_roles_pass(tmp_path):
    path = spec(tmp_path, "workload_command", "    command: sleep 0\n    env: {A: b}\n    cpus: '0'\n")
    load_spec(path, variables=workload_variables)
    assert workload_variables("workload_own", {"anything": 1}) is None  # a project's own role reads what it reads


def test_bmx_validate_names_the_line(tmp_path):
    path = spec(tmp_path, "workload_command", "    argv: [sleep, '0']\n    cwdd: /tmp\n")
    out = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "validate", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2, out
    assert f"{path}:8: " in out.stderr and "did you mean 'cwd'?" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
