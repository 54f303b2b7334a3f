"""A knob's first baseline is kept on the host before anything changes (issue 35, item 1).

When the whole controller dies during a host's first batch, no baseline.json is written,
and the batch runner may go on changing live knobs until its lease ends: the next
campaign then read the leftover value as the baseline and "restored" to it. The knob
backends (host/knobs.py: the bmx_knob module, and the batch runner's live knobs) keep
each knob's value before its first change in a directory on the host (``baseline_dir``;
the runner's manifest ``knob_baseline_dir``) before they write, report that kept value
as the baseline until a restore has put it back, and a restore clears it.

The module's functions and the runner run here as on a host, on a scratch file tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import host_layout
import pytest

from benchmatrix.host import batch_runner
from benchmatrix.host import knobs as bmx_knob

RUNNER = Path(batch_runner.__file__)


def sysfs_knob(path: Path, value, factor: str = "k") -> dict:
    return {"factor": factor, "role": "knob_sysfs", "value": value,
            "vars": {"knob_sysfs_path": str(path), "knob_sysfs_root": str(path.parent)}}


@pytest.fixture
def knob_file(tmp_path) -> Path:
    (tmp_path / "sys").mkdir()
    path = tmp_path / "sys" / "ra"
    path.write_text("2560\n")
    return path


def test_the_first_change_keeps_the_baseline_on_the_host_and_a_crash_does_not_lose_it(tmp_path, knob_file):
    kept = tmp_path / "kept"
    first = bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(kept))
    assert first["k"]["baseline"] == "2560" and knob_file.read_text() == "512"
    assert len(list(kept.iterdir())) == 1
    # The controller died before it wrote baseline.json; the host still holds 512. The
    # next campaign's call reports the value before the first change, not the leftover.
    again = bmx_knob.apply([sysfs_knob(knob_file, "1024")], baseline_dir=str(kept))
    assert again["k"]["baseline"] == "2560" and knob_file.read_text() == "1024"
    # A read (a live knob the call only reads, the runner's costly knobs) reports it too.
    read = bmx_knob.apply([dict(sysfs_knob(knob_file, "512"), live=True)], baseline_dir=str(kept))
    assert read["k"]["baseline"] == "2560" and read["k"]["changed"] is False


def test_restore_goes_back_to_the_kept_baseline_and_then_forgets_it(tmp_path, knob_file):
    kept = tmp_path / "kept"
    bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(kept))
    # baseline.json took the leftover (an older campaign's): the host's record wins.
    done = bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(kept), restore=True)
    assert done["k"]["intended"] == done["k"]["actual"] == "2560" and done["k"]["ok"] is True
    assert knob_file.read_text() == "2560" and not list(kept.iterdir())
    # Back at its baseline: a new campaign starts from what the host holds now.
    knob_file.write_text("4096\n")
    fresh = bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(kept))
    assert fresh["k"]["baseline"] == "4096"


def test_restore_without_a_controller_baseline_uses_the_host_record_or_leaves_the_knob(tmp_path, knob_file):
    kept = tmp_path / "kept"
    other = tmp_path / "sys" / "other"
    other.write_text("x\n")
    bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(kept))
    # bmx restore with no baseline.json: the spec's knobs without a value.
    done = bmx_knob.apply([sysfs_knob(knob_file, None), sysfs_knob(other, None, factor="o")],
                          baseline_dir=str(kept), restore=True)
    assert knob_file.read_text() == "2560" and other.read_text() == "x\n"
    assert set(done) == {"k"} and done["k"]["ok"] is True


def test_nothing_changes_when_the_baseline_cannot_be_kept(tmp_path, knob_file):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the directory should be\n")
    with pytest.raises(bmx_knob.KnobError, match=r"cannot keep .* baseline .*blocked.*nothing was changed"):
        bmx_knob.apply([sysfs_knob(knob_file, "512")], baseline_dir=str(blocked / "kept"))
    assert knob_file.read_text() == "2560\n"


def test_the_key_names_the_knob_not_its_secrets(tmp_path, knob_file):
    kept = tmp_path / "kept"
    item = sysfs_knob(knob_file, "512")
    bmx_knob.apply([item], settings={"knob_sysfs_root": str(knob_file.parent)}, baseline_dir=str(kept))
    # A call from another experiment (another factor name, extra vars) finds the same record.
    other = dict(item, factor="read_ahead", vars=dict(item["vars"], unrelated="x"))
    assert bmx_knob.apply([other], baseline_dir=str(kept))["read_ahead"]["baseline"] == "2560"
    record = json.loads(next(kept.iterdir()).read_text())
    assert record["baseline"] == "2560" and record["role"] == "knob_sysfs"


def _run(run_id: str, knobs: list[dict]) -> dict:
    return {"run_id": run_id, "attempt": 1, "seq": 1, "timeout": 30, "before_run": [], "knobs": knobs,
            "argv": [sys.executable, "-c", "pass"]}


def _start(manifest: dict) -> tuple[int, dict, str]:
    res = subprocess.run([sys.executable, str(RUNNER), "-"], input=json.dumps(manifest),
                         capture_output=True, text=True, timeout=60)
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else {}, res.stderr


def test_the_runner_keeps_the_baseline_before_its_first_live_change(tmp_path, knob_file):
    kept, work = tmp_path / "kept", tmp_path / "w"
    a = dict(sysfs_knob(knob_file, "2560"), live=True)
    b = sysfs_knob(knob_file, "512")
    # The batch call only read the live knob (2560); the runner sets 512 for r2 and, its
    # controller gone, goes on: the host is left at 512 and no baseline.json exists.
    manifest = {"experiment": "t", "batch": "b1", "workdir": str(work), "host": "h1",
                "archive": str(work / "batches" / "b1.tar.gz"), "knob_baseline_dir": str(kept),
                "runs": [_run("r1", [sysfs_knob(knob_file, "2560")]), _run("r2", [b]), _run("r3", [b])],
                "knobs": [a]}
    rc, summary, err = _start(manifest)
    assert rc == 0, err
    assert knob_file.read_text() == "512"
    r2 = host_layout.result(work, "r2")
    assert r2["knobs"]["k"]["baseline"] == "2560" and r2["knobs"]["k"]["changed"] is True
    # The next campaign's batch call reads the live knob: its baseline is the original.
    states = bmx_knob.apply([a], baseline_dir=str(kept))
    assert states["k"]["baseline"] == "2560" and states["k"]["actual"] == "512"


def test_a_runner_that_cannot_keep_the_baseline_changes_nothing(tmp_path, knob_file):
    (tmp_path / "blocked").write_text("")
    work = tmp_path / "w"
    manifest = {"experiment": "t", "batch": "b1", "workdir": str(work), "host": "h1",
                "archive": str(work / "batches" / "b1.tar.gz"),
                "knob_baseline_dir": str(tmp_path / "blocked" / "kept"),
                "runs": [_run("r1", [sysfs_knob(knob_file, "512")])],
                "knobs": [dict(sysfs_knob(knob_file, "2560"), live=True)]}
    rc, _, err = _start(manifest)
    assert rc == 0, err
    r1 = host_layout.result(work, "r1")
    assert r1["outcome"] == "invalid" and "cannot keep" in r1["error"], r1
    assert knob_file.read_text() == "2560\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a loop device needs root")
def test_a_read_ahead_knob_is_one_record_per_disk_however_it_is_named(tmp_path):
    from knobkit import LoopDevice

    dev = LoopDevice(tmp_path / "loop", size_mb=16, mkfs=True)
    try:
        ra = dev.sysfs("read_ahead_kb")
        ra.write_text("2560\n")
        kept = tmp_path / "kept"
        by_path = {"factor": "ra", "role": "knob_read_ahead", "value": "512",
                   "vars": {"knob_read_ahead_path": str(dev.mountpoint / "data")}}
        bmx_knob.apply([by_path], baseline_dir=str(kept))
        assert ra.read_text().strip() == "512"
        # The same disk named as a device (another experiment's vars) finds the same record.
        by_name = dict(by_path, value="1024", vars={"knob_read_ahead_device": dev.name})
        assert bmx_knob.apply([by_name], baseline_dir=str(kept))["ra"]["baseline"] == "2560"
        bmx_knob.apply([dict(by_name, value=None)], baseline_dir=str(kept), restore=True)
        assert ra.read_text().strip() == "2560" and not list(kept.iterdir())
    finally:
        dev.close()
