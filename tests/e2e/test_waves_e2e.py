"""One Ansible call per wave of hosts (issue 34, item 2): real sshd hosts in
network namespaces (tests/netns.py), real bmx, Snakemake and ansible-runner.

One campaign serves every assertion (the suite's time): h1 and h2 are known (an earlier
campaign of one run each), h3 and h4 are new; h2 dies in the middle of its batch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime

import pytest
from conftest import read_csv
from netns import available
from test_hosts_ssh import bmx, ns_env, ns_project  # noqa: F401 (ns_project: the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(available()), reason=available() or "ok")]

SPEC = """\
name: {name}
hosts: "{hosts}"
inventory: config/inventory/ns.yml
factors:
  x: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [{py}, -c, "import time; time.sleep({sleep}); print('value = 1')"]
  metrics:
    score: {{regex: 'value = (?P<value>[0-9.]+)', unit: count}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: sequential}}
"""


def ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def test_a_wave_of_known_and_new_hosts_is_one_call_a_dying_host_fails_only_its_runs(ns_project, tmp_path):  # noqa: F811
    project, make = ns_project
    net = make(4)
    warm = project.write_spec("wave_warm", SPEC.format(name="wave_warm", hosts="h1:h2", py=sys.executable,
                                                       sleep=0, replicates=1))
    res = bmx(project, net, "run", str(warm))
    assert res.returncode == 0, res.stdout + res.stderr

    spec = project.write_spec("wave", SPEC.format(name="wave", hosts="all", py=sys.executable, sleep=1.5,
                                                  replicates=3))
    # --keep-going-on-failures: h2's records, all unreachable, come first; without it the
    # campaign would stop as doomed.
    proc = subprocess.Popen(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", "run", str(spec),
                                         "--keep-going-on-failures"]),
                            cwd=project.root, env=ns_env(project, net), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    # h2's runner takes this campaign's lease as it starts: let it finish a run or so, then the host dies.
    warm_leases = set((tmp_path / "hosts" / "h2").glob("*/batches/*.lease"))
    deadline = time.monotonic() + 300
    while not set((tmp_path / "hosts" / "h2").glob("*/batches/*.lease")) - warm_leases:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "h2's runner never started"
        time.sleep(0.1)
    time.sleep(2)
    net.stop_sshd("h2")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out

    exp = project.exp("wave")
    runs = read_csv(exp / "runs.csv")
    plan = read_csv(exp / "plan.csv")
    by_host = {h: [r for r in runs if r["host"] == h] for h in ("h1", "h2", "h3", "h4")}
    # The known h1 and the new h3 and h4 finished every run, each in its plan order.
    for host in ("h1", "h3", "h4"):
        assert len(by_host[host]) == 6 and all(r["status"] == "ok" for r in by_host[host]), by_host[host]
        planned = [p["run_id"] for p in sorted(plan, key=lambda p: int(p["seq"])) if p["host"] == host]
        assert [r["run_id"] for r in sorted(by_host[host], key=lambda r: ts(r["started_at"]))] == planned
    # The host that died failed only its own runs.
    assert by_host["h2"] and {r["status"] for r in by_host["h2"]} <= {"ok", "unreachable", "failed"}
    assert any(r["status"] != "ok" for r in by_host["h2"])

    # The known hosts' batches and the new hosts' first batches were one call (each job
    # keeps a copy of the wave's log, naming every host): a new host's batch was built
    # with a known host's role variables, and the call gathered its facts first.
    logs = {h: next(p for p in exp.glob(f"logs/ansible/{h}-b*.log") if p.stem.count("-") == 2).read_text()
            for h in ("h1", "h2", "h3", "h4")}
    assert logs["h1"] == logs["h2"] == logs["h3"] == logs["h4"]
    assert "Set the knobs and run the batch in one call" in logs["h1"]
    assert all(f"[{h}]" in logs["h1"] for h in ("h1", "h2", "h3", "h4"))
    assert "PLAY [Run one batch of benchmark runs]" not in logs["h1"]
    # Only the new hosts checked the tool's install, in a play of their own; no host
    # gathered facts (the call describes a new host itself).
    prepared = logs["h1"].split("PLAY [Prepare the hosts new to benchmatrix")[1].split("PLAY [")[0]
    assert "[h3]" in prepared and "[h4]" in prepared and "Read the command's version" in prepared
    assert "[h1]" not in prepared and "[h2]" not in prepared and "Gathering Facts" not in logs["h1"]
    # A known host's batch is one task on a worker: the workload role's ensure tasks are
    # imported (a command's are none), the hidden call's tasks end for a call that hides
    # nothing (each included or skipped task was a worker fork per host and batch).
    batch_play = logs["h1"].split("PLAY [Run one batch of benchmark runs in one call]")[1]
    h1_lines = [line for line in batch_play.splitlines() if "[h1]" in line]
    assert len(h1_lines) == 1 and h1_lines[0].startswith(("ok:", "changed:")), batch_play
    for host in ("h3", "h4"):
        facts = json.loads((exp / "hosts" / host / "facts.json").read_text())
        assert facts["facts_from"] == "gathered" and facts["hostname"] and facts["workload_path"], facts
        assert facts["cpu_count"] > 0 and facts["memory_mb"] > 0 and facts["distribution"], facts
        cache = json.loads((project.root / "results" / ".hosts" / host / "workload_command.json").read_text())
        assert cache["role_vars"] and "boot_id" in cache["fingerprint"], cache
