"""The bmx_knob module's knob_file_layout backend (playbooks/library/bmx_knob.py) on this
machine's own filesystem, with small files: layouts read back through the real filefrag,
contiguous and absent written for real, and the refusals. Fragmenting for real needs a
small filesystem of its own: tests/e2e/test_knob_file_layout.py (a loop device)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest
from test_knob_backend_cpu_affinity import role_defaults

ROOT = Path(__file__).resolve().parents[3]
PATH = ROOT / "playbooks" / "library" / "bmx_knob.py"
_spec = importlib.util.spec_from_file_location("bmx_knob_layout", PATH)
bmx_knob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bmx_knob)

MIB = 1024 * 1024


def knob(value, path: Path, **role_vars) -> dict:
    return {"factor": "layout", "role": "knob_file_layout", "value": value,
            "vars": {"knob_file_layout_path": str(path), "knob_file_layout_size_mb": 1, **role_vars}}


def test_defaults_are_the_roles():
    found = role_defaults("knob_file_layout")
    assert bmx_knob.FileLayout.defaults == {k: v for k, v in found.items() if k != "knob_file_layout_value"}
    # The path's default is fio's scratch file, from the workload's own variables when the host has them.
    text = (ROOT / "playbooks" / "roles" / "knob_file_layout" / "defaults" / "main.yml").read_text()
    assert "'/var/tmp/benchmatrix/scratch'" in text and "'benchmatrix-fio.dat'" in text
    b = bmx_knob.backend({"factor": "f", "role": "knob_file_layout", "value": "absent"}, {}, "h1")
    assert b.path == "/var/tmp/benchmatrix/scratch/benchmatrix-fio.dat"
    b = bmx_knob.backend({"factor": "f", "role": "knob_file_layout", "value": "absent"},
                         {"workload_fio_directory": "/srv/d", "workload_fio_filename": "x.dat"}, "h1")
    assert b.path == "/srv/d/x.dat"


def test_contiguous_is_written_in_new_directories_then_left_alone_then_removed(tmp_path):
    data = tmp_path / "a" / "b" / "fio.dat"
    state = bmx_knob.apply([knob("contiguous", data)], host="h1")["layout"]
    assert state == {**state, "ok": True, "changed": True, "baseline": "absent", "actual": "contiguous"}, state
    assert data.stat().st_size == MIB and oct(data.parent.stat().st_mode & 0o777) == "0o755"
    mtime = data.stat().st_mtime_ns
    again = bmx_knob.apply([knob("contiguous", data)])["layout"]
    assert again == {**again, "ok": True, "changed": False, "baseline": "contiguous"}
    assert data.stat().st_mtime_ns == mtime, "a second apply rewrote the file"
    gone = bmx_knob.apply([knob("absent", data)])["layout"]
    assert gone == {**gone, "ok": True, "changed": True, "baseline": "contiguous", "actual": "absent"}
    assert not data.exists()


def test_layouts_read_back_by_extent_count_and_size(tmp_path):
    data = tmp_path / "fio.dat"
    with open(data, "wb") as fh:  # 12 blocks written last to first, each synced: ext4 gives about 12 extents
        for i in reversed(range(12)):
            fh.seek(i * 4096)
            fh.write(os.urandom(4096))
            fh.flush()
            os.fsync(fh.fileno())
    found = subprocess.run(["filefrag", str(data)], capture_output=True, text=True, check=True).stdout
    extents = int(re.search(r"(\d+) extents? found", found).group(1))
    assert extents > 2, found
    size = f", {data.stat().st_size / MIB:.1f} MiB"  # not the 1 MiB of knob_file_layout_size_mb
    cases = [({"knob_file_layout_contiguous_max": extents}, "contiguous"),
             ({"knob_file_layout_contiguous_max": 1, "knob_file_layout_fragmented_min": extents}, "fragmented"),
             ({"knob_file_layout_contiguous_max": 1, "knob_file_layout_fragmented_min": extents + 1},
              f"{extents} extents")]
    for thresholds, layout in cases:
        state = bmx_knob.apply([knob("fragmented", data, **thresholds)], check_mode=True)["layout"]
        assert state == {**state, "actual": layout + size, "baseline": layout + size, "ok": False}, (thresholds, state)
    # The default thresholds: at most max(4, size_mb / 32) extents is contiguous.
    state = bmx_knob.apply([knob("contiguous", data, knob_file_layout_size_mb=192)], check_mode=True)["layout"]
    assert state["actual"] == ("contiguous" if extents <= 6 else f"{extents} extents") + size, state


def test_refusals_name_role_and_host_and_change_nothing(tmp_path):
    data = tmp_path / "fio.dat"
    data.write_bytes(b"x" * 4096)
    for bad in ("5 extents", "ext4", ""):
        with pytest.raises(bmx_knob.KnobError, match=rf"^knob_file_layout: '{bad}' is not contiguous, fragmented or "
                           r"absent \(a layout in between, e.g. a baseline of \"N extents\", cannot be recreated\)"):
            bmx_knob.apply([knob(bad, data)])
    with pytest.raises(bmx_knob.KnobError, match="^knob_file_layout: knob_file_layout_size_mb must be at least 1"):
        bmx_knob.apply([knob("contiguous", data, knob_file_layout_size_mb=0)])
    with pytest.raises(bmx_knob.KnobError, match="^knob_file_layout: knob_file_layout_extents is 'many', not a whole"):
        bmx_knob.apply([knob("contiguous", data, knob_file_layout_extents="many")])
    with pytest.raises(bmx_knob.KnobError, match=f"^knob_file_layout: {tmp_path} is not a regular file on h1"):
        bmx_knob.apply([knob("absent", tmp_path)], host="h1")
    # This machine's filesystem is far larger than 1 MiB: fragmenting would fill it.
    with pytest.raises(bmx_knob.KnobError, match=f"^knob_file_layout: fragmenting {data} on h1 means filling its "
                       r"filesystem, which has \d+ MiB free, more than max_fill_mb \(1\)"):
        bmx_knob.apply([knob("fragmented", data, knob_file_layout_max_fill_mb=1)], host="h1")
    assert data.read_bytes() == b"x" * 4096, "a refused layout touched the file"
    assert not (tmp_path / ".benchmatrix-filler").exists()


def test_inspect_tells_the_levels_that_cannot_be_laid_out(tmp_path):
    data = tmp_path / "new" / "fio.dat"
    found = bmx_knob.inspect([knob("contiguous", data, knob_file_layout_max_fill_mb=1)],
                             {"layout": ["contiguous", "fragmented", "absent", "7 extents"]}, host="h1")["layout"]
    assert found["current"] == "absent" and not data.parent.exists()
    assert found["levels"]["contiguous"] == "" and found["levels"]["absent"] == ""
    assert "means filling its filesystem" in found["levels"]["fragmented"]
    assert "cannot be recreated" in found["levels"]["7 extents"]
