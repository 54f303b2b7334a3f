"""Knobs whose real part may not exist on this machine: the clear failure, for real.

No SQL Server client and no Oracle client here; each of those tests skips itself
where the client exists, because then the failure cannot happen. md (software RAID)
differs by kernel: this machine has none (/proc/mdstat is absent and the
kernel has no loadable modules), a stock Debian kernel loads md_mod on demand. The
RAID test finds out which kind of kernel it runs on and asserts what the role must
do there: refuse clearly without md, refuse clearly without mdadm, and otherwise
build and take down a real array on loop devices. It never skips. The parsing of
``mdadm --detail`` is tested in tests/unit/host/test_knob_backend_raid.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from knobkit import KnobRunner, LoopDevice, assert_cycle, knob

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


def md_loadable() -> tuple[bool, str]:
    """Whether this kernel has md or can load it, and why (judged without the role)."""
    if Path("/proc/mdstat").exists():
        return True, "/proc/mdstat exists"
    modprobe = shutil.which("modprobe") or next(
        (p for p in ("/usr/sbin/modprobe", "/sbin/modprobe") if Path(p).exists()), None)
    if modprobe is None:
        return False, "no modprobe"
    dry = subprocess.run([modprobe, "--dry-run", "md_mod"], capture_output=True, text=True)
    return dry.returncode == 0, f"modprobe --dry-run md_mod: exit {dry.returncode} {dry.stderr.strip()}"


def mdadm_path() -> str | None:
    return next((p for p in ("/sbin/mdadm", "/usr/sbin/mdadm") if Path(p).exists()), None)


def arrays_on(devices: list[LoopDevice]) -> list[str]:
    """The arrays built on these devices, as "raid5 loop1 loop2 loop3", read from
    /proc/mdstat without the role."""
    if not Path("/proc/mdstat").exists():
        return []
    names = {d.name for d in devices}
    out = []
    for line in Path("/proc/mdstat").read_text().splitlines():
        words = line.split()
        members = sorted(w.split("[")[0] for w in words if w.split("[")[0] in names)
        if " : " in line and members:
            out.append(" ".join([next((w for w in words if w.startswith("raid")), "?"), *members]))
    return sorted(out)


def test_raid_knob_on_this_kernel(runner, tmp_path):
    """Without md: a clear refusal naming the host, nothing touched. With md but no
    mdadm: a clear refusal, nothing touched. With both: a real RAID 5 on three loop
    devices, verified, kept on a second apply, taken down by the reset."""
    has_md, why = md_loadable()
    name = f"bmxtest{os.getpid()}"
    devs = [LoopDevice(tmp_path / f"d{i}", size_mb=16) for i in range(3)]
    paths = [d.device for d in devs]

    def make(value):
        return knob("raid", "knob_raid_level", value, cost="restart", knob_raid_level_destroy=True,
                    knob_raid_level_devices=paths, knob_raid_level_name=name,
                    knob_raid_level_wait_resync=False, knob_raid_level_mount_point=str(tmp_path / "raid"))

    try:
        images = [d.image.read_bytes()[:4096] for d in devs]
        if not has_md or mdadm_path() is None:
            err = runner.fail([make(5)])
            if not has_md:
                assert "localhost has no md (software RAID) driver" in str(err), (why, str(err))
                assert "modprobe md_mod" in str(err), str(err)
            else:
                assert "mdadm is not installed on localhost" in str(err), (why, str(err))
            assert [d.image.read_bytes()[:4096] for d in devs] == images, "a device was touched"
            assert arrays_on(devs) == []
            return
        state = assert_cycle(runner, make, 5, lambda: arrays_on(devs))
        assert state["baseline"] == "absent", state
        assert arrays_on(devs) == [], "the reset left the array"
    finally:
        mdadm = mdadm_path()
        if mdadm and Path(f"/dev/md/{name}").exists():
            subprocess.run(["umount", str(tmp_path / "raid")], capture_output=True)
            subprocess.run([mdadm, "--stop", f"/dev/md/{name}"], capture_output=True)
        for d in devs:
            d.close()

