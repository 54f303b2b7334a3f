"""The controller under stress (issue 13): a batch job that dies, a second controller,
a killed controller, a full disk. Real Snakemake, ansible-runner and workload_command on
localhost; the knob is knob_sysfs pointed at a plain file the test owns (its
``knob_sysfs_root``), so that restores are visible without touching the machine.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  mode: [a, b]
knobs:
  mode: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{knob}", knob_sysfs_root: "{root}"}}}}
workload:
  role: workload_command
  vars:
    argv: [{py}, -c, "import time; time.sleep({sleep}); print('value = 1')"]
  metrics:
    value: {{regex: 'value = (?P<value>[0-9.]+)', unit: count, better: higher}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: sequential}}
"""


def write_spec(project, name, sleep=0, replicates=1):
    """A two-level knob campaign; returns (spec path, knob file holding 'base')."""
    root = project.root / "knobs"
    root.mkdir(exist_ok=True)
    knob = root / "mode"
    knob.write_text("base\n")
    spec = project.write_spec(name, SPEC.format(name=name, knob=knob, root=root, py=sys.executable,
                                                sleep=sleep, replicates=replicates))
    return spec, knob


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_batch_job_that_dies_still_restores_its_host(project):
    """13.9: an OSError in the batch job (here: a run's result directory cannot be made)
    after the knob changed: the job fails with one line naming the path, and the host
    is back at its baseline when bmx returns."""
    spec, knob = write_spec(project, "restore_case")
    assert project.bmx("plan", str(spec)).returncode == 0
    exp = project.exp("restore_case")
    plan = read_csv(exp / "plan.csv")
    last = plan[-1]
    assert last["mode"] == "b" and plan[0]["mode"] == "a"
    (exp / "runs").mkdir(parents=True, exist_ok=True)
    blocker = exp / "runs" / last["run_id"]
    blocker.write_text("a file where the run's directory goes\n")

    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert str(blocker) in res.stderr, res.stderr
    assert knob.read_text().strip() == "base", "the host was left reconfigured"
    # The first batch's run is kept; the failed one is pending and runs once the path is fixed.
    assert (exp / "runs" / plan[0]["run_id"] / "1" / "record.json").is_file()
    blocker.unlink()
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert knob.read_text().strip() == "base"
    assert sorted(r["status"] for r in read_csv(exp / "runs.csv")) == ["ok", "ok"]
