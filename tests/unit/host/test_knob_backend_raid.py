"""knob_raid_level's backend in the bmx_knob module (playbooks/library/bmx_knob.py).

This machine's kernel has no md driver and no loadable modules, so no array can be
built here: the refusals are tested for real (this kernel, and an mdstat/mdadm the
test points the backend at), the parsing of ``mdadm --detail`` against recorded
output, and mdadm's command lines as the backend builds them. The refusal through
Ansible, with real loop devices left untouched, is tests/e2e/test_knob_unavailable.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from unit.host.test_knob_backend_mssql import role_default
from unit.host.test_knob_module import bmx_knob

ROOT = Path(__file__).resolve().parents[3]

DETAIL = """/dev/md/benchmatrix:
           Version : 1.2
        Raid Level : raid5
        Array Size : 31744 (31.00 MiB 32.51 MB)
      Raid Devices : 3
             State : clean
        Chunk Size : 512K

    Number   Major   Minor   RaidDevice State
       0       7        1        0      active sync   /dev/loop1
       1       7        2        1      active sync   /dev/loop2
       3       7        3        2      active sync   /dev/loop3
"""
DEVICES = ["/dev/loop1", "/dev/loop2", "/dev/loop3"]


def raid_knob(value, **more) -> dict:
    return {"factor": "raid", "role": "knob_raid_level", "value": value, "cost": "restart",
            "vars": {"knob_raid_level_devices": DEVICES, "knob_raid_level_destroy": True, **more}}


@pytest.fixture
def md_host(tmp_path, monkeypatch):
    """A host with md and mdadm, as far as the backend's checks look (no array is built)."""
    (tmp_path / "mdstat").write_text("Personalities : [raid6] [raid5] [raid4]\nunused devices: <none>\n")
    mdadm = tmp_path / "mdadm"
    mdadm.write_text("#!/bin/sh\nexit 0\n")
    mdadm.chmod(0o755)
    monkeypatch.setattr(bmx_knob.RaidLevel, "PROC_MDSTAT", str(tmp_path / "mdstat"))
    monkeypatch.setattr(bmx_knob.RaidLevel, "MDADM", (str(mdadm),))
    monkeypatch.setattr(bmx_knob.RaidLevel, "DEV_MD", str(tmp_path / "md"))
    return tmp_path


def test_backend_defaults_are_the_roles_defaults():
    for name, value in bmx_knob.RaidLevel.defaults.items():
        assert role_default("knob_raid_level", name) == value, name


def test_raid_detail_parsing():
    """(Was tests/e2e/test_knob_unavailable.py's, on the role's filter plugin; same assertions.)"""
    state, number = bmx_knob.raid_state, bmx_knob.raid_level_number
    assert state(DETAIL, True, "5", DEVICES, 512)["actual"] == "5"
    assert state(DETAIL, True, "raid5", DEVICES, 512)["actual"] == "raid5"
    assert state(DETAIL, True, "10", DEVICES, 512)["actual"] == "raid5 chunk 512K on loop1,loop2,loop3"
    assert state(DETAIL, True, "5", DEVICES, 64)["actual"].startswith("raid5 chunk 512K")
    degraded = DETAIL.replace("State : clean", "State : clean, degraded")
    assert "degraded" in state(degraded, True, "5", DEVICES, 512)["actual"]
    assert state("", False, "5", DEVICES, 512)["actual"] == "absent"
    assert number("RAID10") == 10 and number("absent") == "absent"
    assert number("mirror") is None


@pytest.mark.skipif(os.path.exists("/proc/mdstat"), reason="this kernel has md")
def test_this_kernel_without_md_is_refused_and_bmx_check_says_so_once():
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([raid_knob(5)], host="h1")
    assert str(err.value).startswith("knob_raid_level: h1 has no md (software RAID) driver: /proc/mdstat is absent "
                                     "and 'modprobe md_mod' failed ("), str(err.value)
    found = bmx_knob.inspect([raid_knob(5)], {"raid": ["5", "10"]}, host="h1")["raid"]
    assert found["blocker"].startswith("knob_raid_level: h1 has no md (software RAID) driver")
    assert found["levels"] == {"5": found["blocker"], "10": found["blocker"]}


def test_values_are_checked_first(md_host):
    for value, more in (("mirror", {}), (5, {"knob_raid_level_devices": ["/dev/loop1"]})):
        with pytest.raises(bmx_knob.KnobError, match=r"is not a RAID level \(0, 1, 5, 6, 10 or raidN\) or absent, "
                                                     "or knob_raid_level_devices names fewer than two devices"):
            bmx_knob.apply([raid_knob(value, **more)], host="h1")


def test_no_mdadm_is_refused_unless_it_may_be_installed(md_host, monkeypatch):
    monkeypatch.setattr(bmx_knob.RaidLevel, "MDADM", (str(md_host / "none"),))
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([raid_knob(5)], host="h1")
    assert str(err.value) == ("knob_raid_level: mdadm is not installed on h1; install the mdadm package or set "
                              "knob_raid_level_install: true")
    assert bmx_knob.inspect([raid_knob(5)], {"raid": ["5"]}, host="h1")["raid"]["blocker"] == str(err.value)
    # With knob_raid_level_install the campaign installs it: bmx check installs nothing and sees no blocker.
    found = bmx_knob.inspect([raid_knob(5, knob_raid_level_install=True)], {"raid": ["5"]}, host="h1")["raid"]
    assert "blocker" not in found and found["current"] == "absent"


def test_destroying_the_devices_needs_permission(md_host):
    with pytest.raises(bmx_knob.KnobError) as err:
        bmx_knob.apply([raid_knob(5, knob_raid_level_destroy=False)], host="h1")
    assert str(err.value) == ("knob_raid_level: building a RAID 5 array on h1 destroys everything on /dev/loop1, "
                              "/dev/loop2, /dev/loop3; set knob_raid_level_destroy: true to allow it")
    # No array and none wanted: nothing to destroy, nothing to do.
    state = bmx_knob.apply([raid_knob("absent", knob_raid_level_destroy=False)], host="h1")["raid"]
    assert state == {**state, "actual": "absent", "baseline": "absent", "changed": False, "ok": True}


def test_an_existing_array_reads_back_from_mdadm_detail(md_host):
    (md_host / "md").mkdir()
    (md_host / "md" / "benchmatrix").write_text("")
    (md_host / "detail").write_text(DETAIL)
    mdadm = md_host / "mdadm"
    mdadm.write_text(f'#!/bin/sh\n[ "$1 $2" = "--detail {md_host}/md/benchmatrix" ] && cat {md_host}/detail\n')
    state = bmx_knob.apply([raid_knob("raid5")], mode="read", host="h1")["raid"]
    assert state == {**state, "actual": "raid5", "baseline": "raid5", "ok": True}
    assert bmx_knob.apply([raid_knob(10)], mode="read", host="h1")["raid"]["actual"] == (
        "raid5 chunk 512K on loop1,loop2,loop3")


def test_mdadm_create_argv(md_host):
    b = bmx_knob.backend(raid_knob(10), {}, "h1")
    mdadm, md = str(md_host / "mdadm"), str(md_host / "md" / "benchmatrix")
    assert b.create_argv("raid10") == [mdadm, "--create", md, "--run", "--metadata=1.2", "--level=10",
                                       "--raid-devices=3", "--chunk=512K", *DEVICES]
    quick = bmx_knob.backend(raid_knob(1, knob_raid_level_wait_resync=False, knob_raid_level_chunk_kb=64), {}, "h1")
    assert quick.create_argv(1) == [mdadm, "--create", md, "--run", "--metadata=1.2", "--level=1",
                                    "--raid-devices=3", "--assume-clean", *DEVICES]
