"""Failures and re-runs, end to end: real Snakemake and the batch runner on localhost.

What the controller does with failed runs (states, re-runs, re-planning) runs through
the fake Ansible port (tests/fake_ansible.py) and the command workload: a cell fails
deterministically because its target path is a regular file (``test -d``) until the
test replaces that file by a directory. The timeout's kill of fio on the host runs with
real Ansible and fio. The experiment lock and a killed controller are tested in
test_controller_failures.py (a second `bmx run` refused and a SIGKILLed bmx, in one
campaign).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time

import pytest
from conftest import read_csv
from fake_ansible import use_fake_port

from benchmatrix.files import atomic_write

pytestmark = pytest.mark.slow

# The cells and the plan of both specs below; the workload goes between them.
CELLS = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  target: [good, bad]
  bs: [4k, 64k]
"""
PLAN = """\
replicates: {replicates}
warmup: {warmup}
order: {{strategy: random, seed: 5}}
"""
SPEC = CELLS + """\
workload:
  role: workload_fio
  vars: {{filename: "{targets}/{{{{ target }}}}/fio.dat", rw: read, bs: "{{{{ bs }}}}", ioengine: psync,
          size: 4m, runtime: {runtime}, time_based: 1}}
  timeout: {timeout}
""" + PLAN
# A command that fails (exit status 1) where the target is no directory.
COMMAND_SPEC = CELLS + """\
workload:
  role: workload_command
  vars:
    argv: [sh, -c, 'test -d "$0" && echo "score = 1 ($1)"', "{targets}/{{{{ target }}}}",
           "{{{{ bs }}}}"]
  metrics:
    score: {{regex: 'score = (?P<value>[0-9.]+)', unit: count, better: higher}}
  timeout: 60
""" + PLAN


def write_spec(project, name, runtime="200ms", timeout=60, replicates=2, warmup=0):
    targets = project.root / "targets"
    (targets / "good").mkdir(parents=True, exist_ok=True)
    return project.write_spec(name, SPEC.format(name=name, targets=targets, runtime=runtime,
                                                timeout=timeout, replicates=replicates, warmup=warmup))


def write_command_spec(project, name, replicates=2, warmup=0):
    """COMMAND_SPEC as ``name``, run through the fake Ansible port from now on."""
    use_fake_port(project)
    targets = project.root / "targets"
    (targets / "good").mkdir(parents=True, exist_ok=True)
    return project.write_spec(name, COMMAND_SPEC.format(name=name, targets=targets, replicates=replicates,
                                                        warmup=warmup))


def test_failed_cells_status_rerun_failed_and_where(project):
    """Failed runs in bmx run, bmx status and the records; `bmx rerun --failed` and
    `--where` as new attempts in visits of their own. The campaign is planned by `bmx
    plan` first, which writes plan.csv itself, without Snakemake's record of the plan
    rule's params (the spec's and reruns.csv's digest): `bmx rerun --failed` after it
    once said "re-run round 1" and ran nothing, and a level added to the spec later was
    never planned (the end of this test)."""
    spec = write_command_spec(project, "fail_rerun")
    blocker = project.root / "targets" / "bad"
    blocker.write_text("a regular file where fio expects a directory\n")
    assert project.bmx("plan", str(spec)).returncode == 0

    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "4 failed" in res.stdout and "bmx rerun" in res.stderr
    exp = project.exp("fail_rerun")
    runs = read_csv(exp / "runs.csv")
    assert len(runs) == 8
    for r in runs:
        if r["target"] == "bad":
            assert r["status"] == "failed" and r["reason"].startswith("exit status 1"), r
            assert r["score"] == "", "a failed run must carry no metric"
        else:
            assert r["status"] == "ok" and float(r["score"]) > 0

    status = project.bmx("status", str(spec))
    assert status.returncode == 1, status.stdout
    # The four runs failed for one reason: said once, with their count (issue 38, item 4).
    assert "failed runs:" in status.stdout and status.stdout.count("exit status 1") == 1, status.stdout
    assert "4 runs, first" in status.stdout, status.stdout
    js = json.loads(project.bmx("status", str(spec), "--json").stdout)
    assert js["totals"]["failed"] == 4 and js["totals"]["ok"] == 4 and js["exit_code"] == 1
    rec = json.loads((exp / "runs" / js["failed"][0]["run_id"] / "1" / "record.json").read_text())
    assert rec["status"] == "failed" and rec["metrics"] == {} and rec["raw"]["stderr"]

    blocker.unlink()
    blocker.mkdir()
    res = project.bmx("rerun", str(spec), "--failed", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = read_csv(exp / "runs.csv")
    assert len(runs) == 12  # 8 first attempts, 4 second attempts
    for run_id in {r["run_id"] for r in runs}:
        attempts = sorted((int(r["attempt"]), r["status"]) for r in runs if r["run_id"] == run_id)
        bad = run_id in {r["run_id"] for r in runs if r["target"] == "bad"}
        assert attempts == ([(1, "failed"), (2, "ok")] if bad else [(1, "ok")])
    # The re-runs ran after every planned run.
    last_planned = max(r["ended_at"] for r in runs if r["attempt"] == "1")
    assert all(r["started_at"] >= last_planned for r in runs if r["attempt"] == "2")
    # ... in a visit of their own after the plan's, which the analysis groups by.
    planned_visit = max(int(r["visit"]) for r in runs if r["attempt"] == "1")
    assert {int(r["visit"]) for r in runs if r["attempt"] == "2"} == {planned_visit + 1}
    assert project.bmx("status", str(spec)).returncode == 0

    # Re-measure runs one no longer trusts: a new attempt, the old one kept.
    res = project.bmx("rerun", str(spec), "--where", "bs == '64k' and target == 'good'", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = read_csv(exp / "runs.csv")
    again = [r for r in runs if r["bs"] == "64k" and r["target"] == "good"]
    assert sorted(int(r["attempt"]) for r in again) == [1, 1, 2, 2]
    # Visits follow the order the runs actually ran in: every round a later visit.
    visits = [int(r["visit"]) for r in sorted(runs, key=lambda r: r["started_at"])]
    assert visits == sorted(visits) and max(visits) == planned_visit + 2
    summary = read_csv(exp / "summary.csv")
    cell = again[0]["cell_id"]
    n = {s["metric"]: s["n"] for s in summary if s["cell_id"] == cell}
    assert n["score"] == "2", "the newest ok attempt of each run counts once"

    res = project.bmx("rerun", str(spec), "--where", "bs == ", "--cores", "1")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "--where" in res.stderr

    # A level added to the spec after `bmx plan` and the re-runs: its runs are planned and run.
    spec.write_text(spec.read_text().replace("bs: [4k, 64k]", "bs: [4k, 64k, 1m]"))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    added = [r for r in read_csv(exp / "runs.csv") if r["bs"] == "1m"]
    assert sorted((r["target"], r["attempt"], r["status"]) for r in added) == \
        [("bad", "1", "ok")] * 2 + [("good", "1", "ok")] * 2, added


def test_timeout_kills_the_workload_on_the_host(project):
    # One run: fio for 30 s with a timeout of 2 s.
    spec = write_spec(project, "timeout_case", runtime="30", timeout=2, replicates=1)
    spec.write_text(spec.read_text().replace("target: [good, bad]\n  bs: [4k, 64k]", "target: [good]\n  bs: [4k]"))
    assert "target: [good]" in spec.read_text()
    t0 = time.monotonic()
    res = project.bmx("run", str(spec), "--cores", "1")
    elapsed = time.monotonic() - t0
    assert res.returncode == 1, res.stdout + res.stderr
    runs = read_csv(project.exp("timeout_case") / "runs.csv")
    good = [r for r in runs if r["target"] == "good"]
    assert good and all(r["status"] == "timeout" for r in good), good
    assert all(float(r["duration_s"]) < 10 for r in good)
    assert elapsed < 120
    alive = subprocess.run(["pgrep", "-f", str(project.root / "targets")], capture_output=True, text=True)
    assert alive.stdout.strip() == "", "fio outlived its timeout"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_full_disk_leaves_no_truncated_file(tmp_path):
    # A real full file system: a 64 KiB tmpfs the test mounts and unmounts.
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        atomic_write(mnt / "record.json", "{}\n")
        with pytest.raises(OSError) as info:
            atomic_write(mnt / "record.json", "x" * (1 << 20))
        assert info.value.errno == errno.ENOSPC
        assert (mnt / "record.json").read_text() == "{}\n", "the old file must survive intact"
        assert [p.name for p in mnt.iterdir()] == ["record.json"], "no temporary file left behind"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
