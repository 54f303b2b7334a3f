"""bmx check's current read-ahead is read where the knob will write it (issue 38, item 7):
with fio's loop file system (workload_fio_loopfs_mb) due but not mounted yet, the knob
will tune that loop device, not the disk under the empty mount point."""

from __future__ import annotations

import pytest

from benchmatrix.host.knobs import backend, inspect

KNOB = {"factor": "ra", "role": "knob_read_ahead", "value": "0", "vars": {}, "cost": "none"}


@pytest.mark.parametrize("made", [False, True], ids=["no-mount-point-yet", "empty-mount-point"])
def test_a_loop_file_system_not_mounted_yet_is_not_read_as_the_disk_below(tmp_path, made):
    where = tmp_path / "loopfs"
    if made:
        where.mkdir()
    settings = {"workload_fio_directory": str(where), "workload_fio_loopfs_mb": "512"}
    below = backend(KNOB, {"workload_fio_directory": str(tmp_path)}, "h1").read("0")[1]
    out = inspect([KNOB], {"ra": ["0", "4096"]}, settings, "h1")["ra"]
    assert out["current"] != below, out
    assert out["current"].startswith("not there yet: ") and "512 MiB loop file system" in out["current"], out
    assert str(where) in out["current"] and "blocker" not in out, out
    assert out["levels"] == {"0": "", "4096": ""}, out


def test_without_a_loop_file_system_the_disk_of_the_path_is_read(tmp_path):
    settings = {"workload_fio_directory": str(tmp_path), "workload_fio_loopfs_mb": "0"}
    out = inspect([KNOB], {"ra": ["0"]}, settings, "h1")["ra"]
    assert out["current"] == backend(KNOB, settings, "h1").read("0")[1]
    assert out["current"].isdigit(), out
