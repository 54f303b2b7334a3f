"""knob_file_layout through real Ansible on real ext4: /var/tmp (this machine's own
ext4) and a small ext4 image mounted through a loop device the test creates."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
from knobkit import KnobRunner, LoopDevice, knob, sh

pytestmark = pytest.mark.slow


@pytest.fixture
def runner(tmp_path):
    return KnobRunner(tmp_path)


@pytest.fixture
def fs_loop(tmp_path):
    dev = LoopDevice(tmp_path, size_mb=128, mkfs=True)
    yield dev
    dev.close()


@pytest.fixture
def var_tmp_dir():
    path = Path(tempfile.mkdtemp(prefix="bmx-layout-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def extents(path: Path) -> int:
    return int(re.search(r"(\d+) extents? found", sh("filefrag", str(path))).group(1))


def test_contiguous_on_var_tmp_apply_noop_reset(runner, var_tmp_dir):
    data = var_tmp_dir / "scratch" / "fio.dat"  # its directory does not exist yet
    make = lambda v: knob("layout", "knob_file_layout", v, knob_file_layout_path=str(data),  # noqa: E731
                          knob_file_layout_size_mb=16)
    states, _ = runner.run([make("contiguous")])
    s = states["layout"]
    assert s["ok"] and s["changed"] and s["baseline"] == "absent", s
    assert data.stat().st_size == 16 * 1024 * 1024 and extents(data) <= 4
    mtime = data.stat().st_mtime_ns
    states, _ = runner.run([make("contiguous")])
    assert states["layout"]["ok"] and not states["layout"]["changed"]
    assert data.stat().st_mtime_ns == mtime, "a second apply rewrote the file"
    states, _ = runner.run([make("absent")])
    assert states["layout"]["ok"] and states["layout"]["changed"] and not data.exists()


def test_fragmenting_var_tmp_is_refused(runner, var_tmp_dir):
    data = var_tmp_dir / "fio.dat"
    err = runner.fail([knob("layout", "knob_file_layout", "fragmented", knob_file_layout_path=str(data),
                            knob_file_layout_size_mb=16, knob_file_layout_max_fill_mb=256)])
    assert "means filling its filesystem" in str(err), str(err)
    assert not data.exists()


def test_fragmented_and_contiguous_on_a_small_ext4(runner, fs_loop):
    data = fs_loop.mountpoint / "fio.dat"
    make = lambda v: knob("layout", "knob_file_layout", v, knob_file_layout_path=str(data),  # noqa: E731
                          knob_file_layout_size_mb=24, knob_file_layout_extents=40)
    states, _ = runner.run([make("fragmented")])
    s = states["layout"]
    assert s["ok"] and s["changed"] and s["baseline"] == "absent", s
    fragmented = extents(data)
    assert fragmented >= 20, fragmented
    assert data.stat().st_size == 24 * 1024 * 1024
    assert not (fs_loop.mountpoint / ".benchmatrix-filler").exists()

    states, _ = runner.run([make("fragmented")])
    assert states["layout"]["ok"] and not states["layout"]["changed"]
    assert extents(data) == fragmented

    states, _ = runner.run([make("contiguous")])
    assert states["layout"]["ok"] and states["layout"]["changed"], states
    assert extents(data) <= 4

    states, _ = runner.run([make("absent")])  # the baseline: no file
    assert states["layout"]["ok"] and not data.exists()
