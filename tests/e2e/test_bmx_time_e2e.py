"""``bmx time 'cmd A' 'cmd B'`` end to end (issue 38, item 3): real Snakemake and batch runner
on localhost. One short campaign: the spec it writes, the runs timed by the runner (no
declared metric) and the answer on the terminal, B slower than A on wall time.

The playbook call is the fake Ansible port (tests/fake_ansible.py: the command workload's
own argv filter and the real runner on the same manifest), which keeps the test near 30 s
(issue 36); the real playbooks carry the runner's ``measure`` like any other manifest key
(test_e2e_processes runs an untimed-metric command through them)."""

from __future__ import annotations

import re

import pytest
from conftest import read_csv
from fake_ansible import use_fake_port

from benchmatrix.spec.load import load_spec

pytestmark = pytest.mark.slow


def test_bmx_time_writes_its_spec_runs_it_and_says_b_is_slower(project):
    use_fake_port(project)
    res = project.bmx("time", "sleep 0.05", "sleep 0.2", "-n", "3", "--inventory", "config/inventory/test.yml")
    assert res.returncode == 0, res.stdout + res.stderr
    wrote = re.search(r"^bmx: wrote (config/experiments/time_[0-9a-f]{8}\.yaml) ", res.stdout, re.MULTILINE)
    assert wrote, res.stdout
    path = project.root / wrote.group(1)
    spec = load_spec(path)
    assert spec.data["factors"] == {"command": ["sleep 0.05", "sleep 0.2"]}
    assert spec.data["replicates"] == 3 and not spec.workload.get("metrics")
    assert f"bmx run {wrote.group(1)}" in path.read_text()  # the header says how to run it again

    # The answer: B against A on wall time, worse (slower).
    answer = [ln for ln in res.stdout.splitlines() if "sleep 0.2 vs sleep 0.05" in ln and "wall_s" in ln]
    assert len(answer) == 1 and "worse" in answer[0], res.stdout

    # Each measured run has its time, CPU and memory from the runner; B's wall time is at least its sleep.
    runs = [r for r in read_csv(project.exp(spec.name) / "runs.csv") if r["warmup"] == "False"]
    assert len(runs) == 6 and all(r["status"] == "ok" for r in runs)
    for r in runs:
        assert float(r["max_rss_kib"]) > 0 and float(r["user_s"]) >= 0 and float(r["system_s"]) >= 0
        assert float(r["wall_s"]) >= (0.2 if r["command"] == "sleep 0.2" else 0.05)
    assert "Traceback" not in res.stderr

    # Peak memory has a floor (the timer's own pages until the exec count): bmx time says
    # which, measured here with 'true', and a command as small as sleep reads about that.
    floor = re.findall(r"^bmx: max_rss_kib reads at least ([0-9.]+) MiB on this host ", res.stdout, re.MULTILINE)
    assert len(floor) == 1, res.stdout
    assert all(float(r["max_rss_kib"]) >= 0.8 * float(floor[0]) * 1024 for r in runs), (floor, runs)

    # A kept spec the user changed is never overwritten: one line, nothing runs.
    path.write_text(path.read_text().replace("replicates: 3", "replicates: 4"))
    again = project.bmx("time", "sleep 0.05", "sleep 0.2", "-n", "3", "--inventory", "config/inventory/test.yml")
    assert again.returncode != 0 and again.stdout == ""
    assert again.stderr.strip().splitlines() == [
        f"bmx: {wrote.group(1)}: exists and is not the spec this bmx time writes; run it with "
        f"'bmx run {wrote.group(1)}', or give --spec PATH (or --name) for a new one"]
