"""bmx check reads a knob's current value where the knob will write it (issue 38, item 7):
knob_read_ahead on fio's loop file system (workload_fio_loopfs_mb), which the campaign
mounts later, is not shown as the read-ahead of the disk under the empty mount point.
Real Ansible on localhost; nothing is written."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: ra_check
inventory: config/inventory/test.yml
factors:
  ra: [0, 4096]
knobs:
  ra: {role: knob_read_ahead, cost: none}
workload:
  role: workload_fio
  vars: {rw: read, bs: 8k, size: 4m, runtime: 1, time_based: 1, ioengine: psync}
  timeout: 60
replicates: 1
warmup: 0
"""


def test_check_shows_the_loop_device_to_come_not_the_disk_below(project):
    project.inventory.write_text(project.inventory.read_text() + "      workload_fio_loopfs_mb: 16\n")
    spec = project.write_spec("ra_check", SPEC)
    res = project.bmx("check", str(spec), "--json")
    assert "Traceback" not in res.stderr, res.stderr
    got = json.loads(res.stdout)["hosts"][0]["knobs"]["ra"]
    assert got["current"] == (f"not there yet: the loop device of the 16 MiB loop file system the role mounts at "
                              f"{project.scratch} when the campaign prepares localhost"), got
    assert got["levels"] == {"0": "", "4096": ""}, got
    assert not project.scratch.exists() or not any(project.scratch.iterdir())  # nothing written
