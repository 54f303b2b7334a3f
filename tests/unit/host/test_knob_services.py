"""The services a batch's knobs need before the knob call (issue 34, item 3): each
backend says which (Backend.services(): knob_postgresql_setting's private cluster,
unless its provision option is off), and tasks/knobs.yml starts them through the
bmx_knob_services filter without naming any knob or service."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from benchmatrix.host import knobs

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOKS = ROOT / "playbooks"
sys.path.insert(0, str(PLAYBOOKS / "filter_plugins"))


def pg(factor: str, **role_vars):
    return {"factor": factor, "role": "knob_postgresql_setting", "value": "1",
            "vars": {"knob_postgresql_setting_name": "work_mem", **role_vars}, "cost": "none"}


SYSCTL = {"factor": "swap", "role": "knob_sysctl", "value": "10", "vars": {"knob_sysctl_name": "vm.swappiness"},
          "cost": "none"}


@pytest.mark.parametrize(("items", "settings", "wanted"), [
    ([SYSCTL], {}, []),
    ([pg("a"), SYSCTL, pg("b")], {}, ["service_postgresql"]),  # once, however many knobs
    ([pg("a", knob_postgresql_setting_provision=False)], {}, []),
    ([pg("a", knob_postgresql_setting_provision="no"), pg("b")], {}, ["service_postgresql"]),
    # The host's own setting wins over the knobs' vars, as for every role variable.
    ([pg("a"), pg("b")], {"knob_postgresql_setting_provision": "false"}, []),
    ([pg("a", knob_postgresql_setting_provision=False)], {"knob_postgresql_setting_provision": True},
     ["service_postgresql"]),
])
def test_services_come_from_the_backends(items, settings, wanted):
    assert knobs.services(items, settings) == wanted


def test_an_unknown_role_needs_nothing_here():
    # The knob call itself refuses it, naming the roles it knows.
    assert knobs.services([{"factor": "x", "role": "knob_nope", "value": 1, "vars": {}}, pg("a")], {}) \
        == ["service_postgresql"]


def test_the_host_settings_are_the_backends_own():
    pattern = knobs.setting_names([pg("a"), SYSCTL])
    assert re.fullmatch(pattern, "service_postgresql_conn") and re.fullmatch(pattern, "knob_sysctl_name")
    assert not re.fullmatch(pattern, "workload_fio_directory"), "read-ahead's setting without a read-ahead knob"
    read_ahead = {"factor": "ra", "role": "knob_read_ahead", "value": 128, "vars": {}}
    pattern = knobs.setting_names([read_ahead])
    assert re.fullmatch(pattern, "workload_fio_directory") and re.fullmatch(pattern, "bmx_workload_path")
    assert not re.fullmatch(pattern, "service_postgresql_conn") and not re.fullmatch(pattern, "bmx_workload_pathx")


def test_the_filter_is_the_backends_answer():
    from bmx_knob_services import FilterModule

    filters = FilterModule().filters()
    assert filters["bmx_knob_services"]([pg("a")], {}) == ["service_postgresql"]
    assert filters["bmx_knob_setting_names"]([pg("a")]) == knobs.setting_names([pg("a")])


@pytest.mark.parametrize("playbook", ["tasks/knobs.yml", "check_host.yml"])
def test_the_knob_tasks_name_no_knob_and_no_service(playbook):
    text = (PLAYBOOKS / playbook).read_text()
    roles = [p.name for p in (PLAYBOOKS / "roles").iterdir() if p.name.startswith(("knob_", "service_"))]
    assert roles and [r for r in roles if r in text] == []
