"""While a long batch runs, `bmx status` sees the runs its runner already finished
(issue 15): the runner appends each finished run to a progress file on the host, the
batch job reads it with every lease renewal.

Real Snakemake, ansible-runner, batch runner and `bmx status` on localhost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: progress_case
inventory: config/inventory/test.yml
factors:
  step: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
workload:
  role: workload_command
  vars:
    argv: [sh, -c, "sleep 2; echo 'took 2'", "{{ step }}"]
  metrics:
    took: {regex: 'took (?P<value>[0-9]+)', unit: s}
replicates: 1
warmup: 0
"""


def test_status_counts_runs_finished_on_the_host_before_the_batch_returns(project):
    config = project.root / "config" / "config.yaml"
    # A short lease: renewed (and the progress read) every 7.5 s.
    config.write_text(config.read_text().replace("runner_lease_seconds: 300", "runner_lease_seconds: 30"))
    spec = project.write_spec("progress_case", SPEC)
    run = subprocess.Popen([sys.executable, "-m", "benchmatrix.cli", "run", str(spec), "--cores", "1"],
                           cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    seen = []
    try:
        while run.poll() is None:
            res = project.bmx("status", str(spec), "--json", timeout=120)
            if res.stdout.strip().startswith("{"):
                totals = json.loads(res.stdout)["totals"]
                seen.append((totals["ok"], totals["finished_on_host"]))
            time.sleep(0.5)
        out = run.communicate()[0]
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out
    # Some runs were seen finished on the host while none of them was recorded yet ...
    assert any(ok == 0 and on_host > 0 for ok, on_host in seen), seen
    # ... and once the batch is back, they are ok and nothing is left "on the host".
    final = json.loads(project.bmx("status", str(spec), "--json").stdout)["totals"]
    assert final["ok"] == 10 and final["finished_on_host"] == 0
    assert list(project.exp("progress_case").glob("batches/*.progress.json")) == []


SLICED = """\
name: sliced_case
inventory: config/inventory/test.yml
factors:
  step: [1, 2, 3, 4]
workload:
  role: workload_command
  vars:
    argv: [sh, -c, "sleep 0.6; echo 'took 1'", "{{ step }}"]
  metrics:
    took: {regex: 'took (?P<value>[0-9]+)', unit: s}
replicates: 1
warmup: 0
"""


def test_a_batch_of_unknown_durations_returns_its_results_every_batch_max_seconds(project):
    """Runs of unknown duration fill one batch (up to batch_max_runs), and the runner
    hands back what it finished after each batch_max_seconds of execution: the batch
    job writes those records, then starts the rest, all in one Snakemake job."""
    config = project.root / "config" / "config.yaml"
    config.write_text(config.read_text().replace("batch_max_seconds: 300", "batch_max_seconds: 1"))
    spec = project.write_spec("sliced_case", SLICED)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("sliced_case")
    plan = (exp / "plan.csv").read_text().splitlines()
    batches = {row.split(",")[8] for row in plan[1:]}
    assert len(batches) == 1, batches  # 4 runs of unknown duration: one batch
    (batch,) = batches
    marker = json.loads((exp / "batches" / f"{batch}.done").read_text())
    records = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
    assert sorted(r["status"] for r in records) == ["ok"] * 4
    # Each 0.6 s run takes a 1 s slice past its end at the second run at the latest.
    assert 2 <= marker["slices"] <= 4 and marker["executed"] == 4
    assert len({r["batch_started_at"] for r in records}) == marker["slices"]
