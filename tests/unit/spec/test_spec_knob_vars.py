"""A knob's role, cost class and variables checked against its backend's declaration
(benchmatrix.host.knobs): one FILE:LINE error each, at the line of the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_spec_view import MINIMAL

from benchmatrix.errors import SpecErrors
from benchmatrix.spec.load import REBOOT_ROLES, load_spec

BASE = MINIMAL + "knobs:\n  a:\n"


def errors(tmp_path: Path, knob: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + knob)
    with pytest.raises(SpecErrors) as info:
        load_spec(path)
    return str(info.value).splitlines()


def test_declared_variables_of_the_right_type_validate(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + "    role: knob_cpu_affinity\n    vars:\n      knob_cpu_affinity_siblings: false\n"
                    "      knob_cpu_affinity_candidates: 2-15\n"
                    "      knob_cpu_affinity_pin_pidfiles: [/run/x.pid]\n")
    assert load_spec(path).knobs["a"].vars["knob_cpu_affinity_siblings"] is False


def test_an_unknown_variable_is_named_at_its_line(tmp_path):
    lines = errors(tmp_path, "    role: knob_sysfs\n    vars:\n      knob_sysfs_path: /sys/x\n"
                             "      knob_sysfs_pth: 1\n")
    assert lines == [f"{tmp_path / 'spec.yaml'}:13: knob 'a': knob_sysfs has no variable 'knob_sysfs_pth' "
                     "(its variables: knob_sysfs_path, knob_sysfs_root); did you mean 'knob_sysfs_path'?"]


def test_a_value_of_the_wrong_type_is_named_at_its_line(tmp_path):
    lines = errors(tmp_path, "    role: knob_file_layout\n    vars:\n      knob_file_layout_size_mb: lots\n")
    assert lines == [f"{tmp_path / 'spec.yaml'}:12: knob 'a': knob_file_layout_size_mb must be an int, not 'lots'"]


def test_a_reboot_knob_needs_cost_reboot(tmp_path):
    assert REBOOT_ROLES == {"knob_kernel_cmdline"}
    lines = errors(tmp_path, "    role: knob_kernel_cmdline\n    vars: {knob_kernel_cmdline_parameter: mitigations}\n")
    assert lines == [f"{tmp_path / 'spec.yaml'}:9: knob 'a': knob_kernel_cmdline takes effect only after a reboot; "
                     "declare cost: reboot (not none)"]


def test_a_role_without_a_backend_is_left_to_the_roles_check(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + "    role: knob_x\n    vars: {anything: [1]}\n")
    assert load_spec(path).knobs["a"].role == "knob_x"
