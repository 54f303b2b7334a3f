"""Knobs whose real part does not exist on this machine: the clear failure, for real.

No SQL Server client, no Oracle client and no md (software RAID) driver here
(FACTS.md: /proc/mdstat is absent, and the kernel has no loadable modules). Each test
skips itself where the real part exists, because then the failure cannot happen.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from knobkit import KnobRunner, LoopDevice, knob, role_filters

pytestmark = pytest.mark.slow


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


def test_mssql_without_sqlcmd_fails_clearly(runner):
    if shutil.which("sqlcmd") or Path("/opt/mssql-tools18/bin/sqlcmd").exists():
        pytest.skip("sqlcmd is installed here")
    err = runner.fail([knob("fiber", "knob_mssql_setting", 1, cost="restart",
                            knob_mssql_setting_name="lightweight pooling")])
    assert "sqlcmd not found on localhost" in str(err) and "mssql-tools18" in str(err), str(err)


def test_oracle_without_sqlplus_fails_clearly(runner):
    if shutil.which("sqlplus"):
        pytest.skip("sqlplus is installed here")
    err = runner.fail([knob("mbrc", "knob_oracle_parameter", 128,
                            knob_oracle_parameter_name="db_file_multiblock_read_count")])
    assert "sqlplus not found on localhost" in str(err) and "ORACLE_HOME" in str(err), str(err)


def test_raid_without_md_fails_clearly(runner, tmp_path):
    if Path("/proc/mdstat").exists():
        pytest.skip("this kernel has md: a real RAID test belongs here")
    devs = [LoopDevice(tmp_path / f"d{i}", size_mb=16) for i in range(3)]
    try:
        images = [d.image.read_bytes()[:4096] for d in devs]
        err = runner.fail([knob("raid", "knob_raid_level", 5, cost="restart", knob_raid_level_destroy=True,
                                knob_raid_level_devices=[d.device for d in devs])])
        assert "localhost has no md (software RAID) driver" in str(err), str(err)
        assert [d.image.read_bytes()[:4096] for d in devs] == images, "a device was touched"
    finally:
        for d in devs:
            d.close()


def test_raid_detail_parsing():
    f = role_filters("knob_raid_level")
    detail = """/dev/md/benchmatrix:
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
    devices = ["/dev/loop1", "/dev/loop2", "/dev/loop3"]
    assert f.knob_raid_level_state(detail, True, "5", devices, 512)["actual"] == "5"
    assert f.knob_raid_level_state(detail, True, "raid5", devices, 512)["actual"] == "raid5"
    assert f.knob_raid_level_state(detail, True, "10", devices, 512)["actual"] == "raid5 chunk 512K on loop1,loop2,loop3"
    assert f.knob_raid_level_state(detail, True, "5", devices, 64)["actual"].startswith("raid5 chunk 512K")
    degraded = detail.replace("State : clean", "State : clean, degraded")
    assert "degraded" in f.knob_raid_level_state(degraded, True, "5", devices, 512)["actual"]
    assert f.knob_raid_level_state("", False, "5", devices, 512)["actual"] == "absent"
    assert f.knob_raid_level_number("RAID10") == 10 and f.knob_raid_level_number("absent") == "absent"
    assert f.knob_raid_level_number("mirror") is None
