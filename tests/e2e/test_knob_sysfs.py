"""knob_sysfs and knob_read_ahead against a loop device the test creates (real Ansible, real sysfs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from knobkit import KnobRunner, LoopDevice, assert_cycle, knob, sh

pytestmark = pytest.mark.slow


@pytest.fixture
def loop(tmp_path):
    dev = LoopDevice(tmp_path, size_mb=64)
    yield dev
    dev.close()


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


def test_sysfs_choice_list_cycle(runner, loop):
    path = str(loop.sysfs("scheduler"))
    current = loop.sysfs("scheduler").read_text().split("[")[1].split("]")[0]
    other = "none" if current != "none" else "mq-deadline"
    state = assert_cycle(runner, lambda v: knob("sched", "knob_sysfs", v, knob_sysfs_path=path), other,
                         lambda: loop.sysfs("scheduler").read_text().strip())
    assert state["baseline"] == current  # the selected word of the choice list


def test_sysfs_refuses_a_path_outside_sys(runner, tmp_path):
    target = tmp_path / "file"
    target.write_text("1\n")
    err = runner.fail([knob("x", "knob_sysfs", 2, knob_sysfs_path=str(target))])
    assert "is not a file under /sys" in str(err)
    assert target.read_text() == "1\n"


@pytest.fixture
def fs_loop(tmp_path):
    dev = LoopDevice(tmp_path, size_mb=64, mkfs=True)
    yield dev
    dev.close()


def read_ahead_of(dev: LoopDevice) -> str:
    return dev.sysfs("read_ahead_kb").read_text().strip()


def test_read_ahead_cycle_through_the_filesystem_of_a_path(runner, fs_loop):
    # The workload file and its directory do not exist yet: the nearest existing parent counts.
    path = str(fs_loop.mountpoint / "scratch" / "fio.dat")
    other = 0 if read_ahead_of(fs_loop) != "0" else 4096
    assert_cycle(runner, lambda v: knob("ra", "knob_read_ahead", v, knob_read_ahead_path=path), other,
                 lambda: read_ahead_of(fs_loop))


def test_read_ahead_of_a_partition_is_set_on_its_disk(runner, tmp_path):
    image = tmp_path / "disk.img"
    with open(image, "wb") as fh:  # an MBR with one Linux partition from sector 2048 to the end
        fh.truncate(16 * 1024 * 1024)
        entry = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little") + (30720).to_bytes(4, "little")
        fh.seek(446)
        fh.write(entry)
        fh.seek(510)
        fh.write(b"\x55\xaa")
    device = sh("losetup", "--find", "--show", "--partscan", str(image))
    try:
        disk = Path(device).name
        part = Path(f"{device}p1")
        for _ in range(50):
            if part.exists():
                break
            time.sleep(0.1)
        if not part.exists():
            pytest.skip("this kernel does not read MBR partition tables of loop devices")
        ra = Path("/sys/block") / disk / "queue" / "read_ahead_kb"
        before = ra.read_text().strip()
        other = "0" if before != "0" else "512"
        states, _ = runner.run([knob("ra", "knob_read_ahead", other, knob_read_ahead_device=str(part))])
        assert states["ra"]["ok"] and states["ra"]["changed"], states
        assert ra.read_text().strip() == other
        states, _ = runner.run([knob("ra", "knob_read_ahead", before, knob_read_ahead_device=f"{disk}p1")])
        assert states["ra"]["ok"] and ra.read_text().strip() == before
    finally:
        sh("losetup", "--detach", device, check=False)


def test_read_ahead_refuses_a_path_on_no_block_device(runner):
    tmpfs = sh("findmnt", "--noheadings", "--first-only", "--types", "tmpfs", "--output", "TARGET")
    if not tmpfs:
        pytest.skip("no tmpfs mounted")
    err = runner.fail([knob("ra", "knob_read_ahead", 128, knob_read_ahead_path=f"{tmpfs}/x")])
    assert "not on a single block device" in str(err) and "localhost" in str(err), str(err)


def test_read_ahead_check_mode_changes_nothing(runner, fs_loop):
    before = read_ahead_of(fs_loop)
    other = 0 if before != "0" else 4096
    states, _ = runner.run([knob("ra", "knob_read_ahead", other, knob_read_ahead_device=fs_loop.device)], check=True)
    assert states["ra"]["changed"] is True and states["ra"]["actual"] == before and not states["ra"]["ok"]
    assert read_ahead_of(fs_loop) == before


def test_sysctl_swappiness_cycle(runner):
    proc = Path("/proc/sys/vm/swappiness")
    other = 61 if proc.read_text().strip() != "61" else 59
    assert_cycle(runner, lambda v: knob("swap", "knob_sysctl", v, knob_sysctl_key="vm.swappiness"), other,
                 lambda: proc.read_text().strip())
