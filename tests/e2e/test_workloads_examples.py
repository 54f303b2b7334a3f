"""The example experiments of config/experiments that reproduce the seeds.

They run as shipped on this machine (docs/workloads.md); the suite validates them and
runs the read-ahead one at a tiny size on a loop filesystem of the test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["readahead_scan", "fragmentation_mbrc", "oltp_users"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_validates(name):
    done = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "validate", f"config/experiments/{name}.yaml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in (done.stdout + done.stderr).lower()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: loop mount, read_ahead_kb, drop_caches")
def test_readahead_scan_small_on_a_loop_filesystem(project):
    loopfs = project.root / "loopfs"
    text = (project.root / "config" / "experiments" / "readahead_scan.yaml").read_text()
    text = (text.replace("inventory: config/inventory/local_loopfs.yml", "inventory: config/inventory/test.yml")
                .replace("size: 256m", "size: 32m").replace("replicates: 5", "replicates: 1"))
    spec = project.write_spec("readahead_scan", text)
    with open(project.inventory) as fh:
        inventory = fh.read()
    inventory = inventory.replace(f"workload_fio_directory: {project.scratch}", f"workload_fio_directory: {loopfs}")
    project.inventory.write_text(inventory + "      workload_fio_loopfs_mb: 64\n")
    try:
        # The first warm-up run lays the file out (fio writes it); then each cell.
        res = project.bmx("run", str(spec), "--cores", "1")
        recs = [json.loads(p.read_text()) for p in project.exp("readahead_scan").glob("runs/*/*/record.json")]
        assert res.returncode == 0, res.stdout + res.stderr + str([r.get("reason") for r in recs])
        # The loop file system is unmounted at campaign end (the workload's finish step);
        # the host facts gathered at the start name its device.
        mounted = subprocess.run(["findmnt", "-no", "SOURCE", "--mountpoint", str(loopfs)],
                                 capture_output=True, text=True).stdout.strip()
        assert mounted == "", "the scratch file system outlived the campaign"
        device = recs[0]["host_facts"]["block_device"]
        assert device.startswith("/dev/loop") or device.startswith("loop"), device
        key = f"disk_{Path(device).name}_read_kib_per_io"
        assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
        by_ra = {r["factors"]["read_ahead_kb"]: r for r in recs if not r["warmup"]}
        assert set(by_ra) == {0, 4096}
        for ra, rec in by_ra.items():
            assert rec["knobs"]["read_ahead_kb"]["actual"] == str(ra)
        # The seed's explanation, measured: without read-ahead the device saw small reads.
        assert by_ra[0]["metrics"][key]["value"] < 16
        assert by_ra[4096]["metrics"][key]["value"] > 4 * by_ra[0]["metrics"][key]["value"]
    finally:
        subprocess.run(["umount", str(loopfs)], capture_output=True)
