"""A doomed campaign stops (issue 38, item 4): real Snakemake and batch runner on
localhost through the fake Ansible port (tests/fake_ansible.py: what the controller does
with the runs' results), a workload_command whose program does not exist, so every run
fails alike."""

from __future__ import annotations

import json

import pytest
from conftest import read_csv
from fake_ansible import use_fake_port

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  x: [a, b, c]
workload:
  role: workload_command
  vars: {{argv: ["{prog}"]}}
  timeout: 60
replicates: 10
warmup: 0
order: {{strategy: random, seed: 3}}
"""


def test_thirty_runs_that_all_fail_alike_stop_after_at_most_ten(project):
    use_fake_port(project)
    prog = project.root / "bin" / "bench-tool"
    spec = project.write_spec("doomed", SPEC.format(name="doomed", prog=prog))
    # One batch holds all 30 runs (their time is unknown): its runner ends the slice after
    # the first runs failed alike, and bmx stops the campaign when it sees their records.
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    said = [ln for ln in res.stderr.splitlines() if "all failed the same way" in ln]
    assert len(said) == 1, res.stderr
    assert "bench-tool" in said[0] and "--keep-going-on-failures" in said[0], said[0]
    exp = project.exp("doomed")
    records = [json.loads(p.read_text()) for p in (exp / "runs").glob("*/*/record.json")]
    failed = [r for r in records if r["status"] == "failed"]
    assert 5 <= len(failed) <= 10, [r["status"] for r in records]
    assert "Traceback" not in res.stderr

    status = project.bmx("status", str(spec))
    assert status.returncode == 1, status.stdout
    assert status.stdout.count("bench-tool") == 1, status.stdout  # said once, with its count
    assert f"{len(failed)} runs, first" in status.stdout, status.stdout

    # Run again unfixed: it stops as early again, not after the rest of the batch.
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1 and "all failed the same way" in res.stderr, res.stdout + res.stderr
    records = [json.loads(p.read_text()) for p in (exp / "runs").glob("*/*/record.json")]
    more = [r for r in records if r["status"] == "failed"]
    assert 5 <= len(more) - len(failed) <= 10, (len(failed), len(more))
    failed = more

    # Fixed: the next bmx run runs the rest, and bmx rerun --failed the failed ones.
    prog.parent.mkdir(parents=True, exist_ok=True)
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(0o755)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr  # the failed runs stay failed until re-run
    assert f"{30 - len(failed)} of 30 runs ok, {len(failed)} failed, 0 pending" in res.stdout, res.stdout + res.stderr
    res = project.bmx("rerun", str(spec), "--failed", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = read_csv(exp / "runs.csv")
    assert {r["run_id"] for r in runs if r["status"] == "ok"} == {r["run_id"] for r in runs}


def test_keep_going_on_failures_runs_every_doomed_run(project):
    use_fake_port(project)
    prog = project.root / "bin" / "absent-tool"
    spec = project.write_spec("doomed_on", SPEC.format(name="doomed_on", prog=prog).replace(
        "replicates: 10", "replicates: 3"))
    res = project.bmx("run", str(spec), "--cores", "1", "--keep-going-on-failures")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "all failed the same way" not in res.stderr
    assert "0 of 9 runs ok, 9 failed, 0 pending" in res.stdout, res.stdout
    said = [ln for ln in res.stderr.splitlines() if "absent-tool" in ln]
    assert len(said) == 1 and "9 runs, first" in said[0], res.stderr
