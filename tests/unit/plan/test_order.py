"""Exact order: on every host, runs start in plan.csv order, across many batches.

Two hosts (both this machine, reached without SSH, each with its own runner
directory) run 24 short runs each in batches of 7; the records' host-clock start
times must follow plan.csv exactly per host.

A real campaign, not synthetic results (docs/contributing.md, "Which grade a test
should use"): it tests how the controller made the results (Snakemake's per-host
chaining of batches, the runner's order), and it is the only real test of the order
across several batches of a host (tests/e2e/test_hosts_ssh.py and test_e2e_local.py
check a host's plan order too, not across this many batches). Ansible only carries
the manifest here: the fake Ansible port (tests/fake_ansible.py) stands in for it.
"""

from __future__ import annotations

import csv
from datetime import datetime

import pytest
from fake_ansible import use_fake_port

pytestmark = pytest.mark.slow

SPEC = """\
name: order_case
hosts: all
inventory: config/inventory/two.yml
factors:
  a: [1, 2, 3, 4]
  b: [x, y, z]
workload:
  role: workload_command
  vars:
    argv: [sleep, "0.01"]
replicates: 2
order: {strategy: random, seed: 9}
"""


def test_every_host_starts_its_runs_in_plan_order(project):
    use_fake_port(project)
    inv = ["all:", "  hosts:"]
    for h in ("h1", "h2"):
        inv += [f"    {h}:", "      ansible_connection: local",
                "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"",
                f"      batch_runner_root: {project.root / 'hostwork' / h}"]
    (project.root / "config" / "inventory" / "two.yml").write_text("\n".join(inv) + "\n")
    spec = project.write_spec("order_case", SPEC)
    res = project.bmx("run", str(spec), "--batch-max-runs", "7")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("order_case")
    with open(exp / "plan.csv", newline="") as fh:
        plan = list(csv.DictReader(fh))
    with open(exp / "runs.csv", newline="") as fh:
        runs = {r["run_id"]: r for r in csv.DictReader(fh)}
    assert len(plan) == len(runs) == 2 * 24
    for host in ("h1", "h2"):
        planned = [p["run_id"] for p in sorted(plan, key=lambda p: int(p["seq"])) if p["host"] == host]
        assert len(planned) == 24 and len({p["batch"] for p in plan if p["host"] == host}) >= 4
        started = sorted(planned, key=lambda rid: datetime.fromisoformat(runs[rid]["started_at"]))
        assert started == planned, f"{host}: runs did not start in plan order"
        for a, b in zip(planned, planned[1:]):
            assert runs[a]["ended_at"] <= runs[b]["started_at"], f"{a} and {b} overlapped on {host}"
    # The two hosts have different orders (seed combined with the host name).
    assert [p["cell_id"] for p in plan if p["host"] == "h1"] != [p["cell_id"] for p in plan if p["host"] == "h2"]
