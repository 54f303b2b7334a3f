"""Host facts are kept per host across campaigns behind a cheap fingerprint (issue 15):
full gathering and the tool's install check only for a new or changed host.

Real Snakemake, ansible-runner and localhost; campaigns of two experiments, as a user
runs them one after the other.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  word: [alpha]
workload:
  role: workload_command
  vars:
    argv: [echo, "n 1"]
  metrics:
    count: {{regex: 'n (?P<value>[0-9]+)', unit: x}}
replicates: 1
warmup: 0
"""


def _campaign(project, name: str) -> dict:
    spec = project.write_spec(name, SPEC.format(name=name))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    # The host's first batch call prepared it (one batch here).
    log = next((project.exp(name) / "logs" / "ansible").glob("localhost-b*.log")).read_text()
    return {"facts": json.loads((project.exp(name) / "hosts" / "localhost" / "facts.json").read_text()), "log": log}


def _device_facts(path: str) -> dict:
    """What the facts say of the workload path's file system and block device, found
    here independently (findmnt, /sys/dev/block) of how tasks/prepare.yml finds them."""
    p = Path(path)
    while not p.exists():
        p = p.parent
    out = subprocess.run(["findmnt", "--json", "--output", "MAJ:MIN,SOURCE,FSTYPE,TARGET", "--target", str(p)],
                         capture_output=True, text=True, check=True).stdout
    fs = json.loads(out)["filesystems"][0]
    entry = Path("/sys/dev/block") / fs["maj:min"]
    want = {"filesystem": fs["fstype"], "filesystem_source": fs["source"], "mount_point": fs["target"]}
    if not entry.exists():
        return want | {"block_device": f"{path} is on {fs['fstype']} {fs['source']} (device {fs['maj:min']}) on "
                                       "localhost, not on a single block device; set knob_read_ahead_device",
                       "read_ahead_kb": "unknown", "io_scheduler": "unknown"}
    real = entry.resolve()
    disk = real.parent if (real / "partition").exists() else real
    queue = Path("/sys/block") / disk.name / "queue"
    sched = (queue / "scheduler").read_text().strip()
    return want | {"block_device": disk.name, "read_ahead_kb": (queue / "read_ahead_kb").read_text().strip(),
                   "io_scheduler": sched.split("[", 1)[1].split("]", 1)[0] if "[" in sched else sched}


def test_a_known_host_keeps_its_facts_and_a_changed_one_is_gathered_again(project):
    with project.inventory.open("a") as fh:
        fh.write("      workload_command_version_argv: [echo, 'tool 1.2']\n")
    first = _campaign(project, "facts_a")
    assert first["facts"]["facts_from"] == "gathered" and first["facts"]["tool_version"] == "tool 1.2"
    device = _device_facts(first["facts"]["workload_path"])
    assert {k: first["facts"][k] for k in device} == device
    cache = project.root / "results" / ".hosts" / "localhost" / "workload_command.json"
    kept = json.loads(cache.read_text())
    assert "boot_id" in kept["fingerprint"] and kept["facts"]["hostname"] == first["facts"]["hostname"]

    second = _campaign(project, "facts_b")
    assert second["facts"]["facts_from"] == "cache"
    same = {k: v for k, v in first["facts"].items() if k not in ("facts_from", "gathered_at")}
    assert {k: second["facts"].get(k) for k in same} == same  # state fields read again, equal here
    # Neither full gathering nor the install check ran: the known host's batch was one
    # module call (run_known_batch.yml, issue 34), which probed it.
    assert "Read the command's version" not in second["log"]
    assert "PLAY [Run one batch of benchmark runs in one call]" in second["log"]
    assert "Gather the facts" not in second["log"] and "Install" not in second["log"]

    kept["fingerprint"] = kept["fingerprint"].replace("boot_id", "boot_id changed")
    cache.write_text(json.dumps(kept))
    third = _campaign(project, "facts_c")
    # The one call found another fingerprint and ran nothing: the batch took run_batch.yml.
    assert third["facts"]["facts_from"] == "gathered"
    assert "Read the command's version" in third["log"] and "in one call" not in third["log"]
    assert "boot_id changed" not in json.loads(cache.read_text())["fingerprint"]
