"""The workload path's file system and block device for the host's facts (issue 34,
item 3): tasks/prepare.yml asks the bmx_knob module (mode ``facts``), whose backends
describe what they find (knob_read_ahead: the disk whose read-ahead it would set),
instead of a shell lookup of its own. Real findmnt and sysfs of this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix.host import knobs

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "playbooks" / "library" / "bmx_knob.py"


def expected(path: str) -> dict:
    """The device as findmnt and /sys/dev/block say, found here independently."""
    p = Path(path)
    while not p.exists():
        p = p.parent
    fs = json.loads(subprocess.run(["findmnt", "--json", "--output", "MAJ:MIN,SOURCE,FSTYPE,TARGET", "--target",
                                    str(p)], capture_output=True, text=True, check=True).stdout)["filesystems"][0]
    common = {"source": fs["source"], "fstype": fs["fstype"], "target": fs["target"], "maj_min": fs["maj:min"]}
    entry = Path("/sys/dev/block") / fs["maj:min"]
    if not entry.exists():
        return {**common, "name": "", "sysfs": "", "read_ahead_file": "", "scheduler_file": "", "partition": "",
                "error": f"{path} is on {fs['fstype']} {fs['source']} (device {fs['maj:min']}) on h1, "
                         "not on a single block device; set knob_read_ahead_device"}
    real = entry.resolve()
    disk = real.parent if (real / "partition").exists() else real
    return {**common, "name": disk.name, "sysfs": str(disk), "error": "",
            "read_ahead_file": f"/sys/block/{disk.name}/queue/read_ahead_kb",
            "scheduler_file": f"/sys/block/{disk.name}/queue/scheduler",
            "partition": real.name if disk != real else ""}


def cpu_lines() -> list[str]:
    """grep's lines of the CPU and SMT state files every probe reads first (knobs.STATE_FILES), here."""
    return [f"{name}:{line}" for name in knobs.STATE_FILES if Path(name).is_file()
            for line in Path(name).read_text().splitlines()]


@pytest.mark.parametrize("where", ["", "not/made/yet"])
def test_the_device_of_the_workload_path(tmp_path, where):
    path = str(tmp_path / where) if where else str(tmp_path)
    state = tmp_path / "online"
    state.write_text("0-3\n")
    facts = knobs.host_facts(path, [str(state), str(tmp_path / "absent")], "h1")
    assert facts["device"] == expected(path)
    cpu = cpu_lines()
    assert facts["state_lines"][:len(cpu)] == cpu
    lines = facts["state_lines"][len(cpu):]
    assert lines[0] == f"{state}:0-3" and len(lines) == 1 + 2 * (facts["device"]["error"] == "")
    if not facts["device"]["error"]:
        queue = Path(facts["device"]["read_ahead_file"])
        assert lines[1] == f"{queue}:{queue.read_text().strip()}"


def test_a_path_without_a_file_system_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no findmnt: as on a host without util-linux
    facts = knobs.host_facts("/var/tmp/x", [], "h1")
    assert facts["device"]["error"].startswith("cannot find the filesystem of /var/tmp/x on h1: ")
    assert facts["device"]["name"] == "" and facts["state_lines"] == cpu_lines()


def test_the_module_answers_mode_facts(tmp_path):
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"mode": "facts", "knobs": [], "host": "h1", "path": str(tmp_path), "files": []}))
    out = json.loads(subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["changed"] is False and out["device"] == expected(str(tmp_path)), out


def test_prepare_names_no_knob():
    text = (ROOT / "playbooks" / "tasks" / "prepare.yml").read_text()
    roles = [p.name for p in (ROOT / "playbooks" / "roles").iterdir() if p.name.startswith(("knob_", "service_"))]
    assert [r for r in roles if r in text] == []
