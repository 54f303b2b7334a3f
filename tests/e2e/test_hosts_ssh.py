"""Many hosts over SSH: real sshd hosts in network namespaces (tests/netns.py).

The controller (bmx, Snakemake, ansible-runner) runs inside the test's controller
namespace and reaches three hosts at 198.51.100.11-13 over SSH. Every "host" shares
this machine's file system, so each gets its own runner and scratch directories.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime

import pytest
from conftest import read_csv
from netns import NamespaceHosts, available
from unit.host.test_batch_runner_processes import cgroup_usable

from benchmatrix.execute.lease import first_renewal

pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(available()), reason=available() or "ok")]

SPEC = """\
name: {name}
hosts: all
inventory: config/inventory/ns.yml
factors:
  rw: [randread, read]
  bs: [4k, 64k]
workload:
  role: workload_fio
  vars: {{rw: "{{{{ rw }}}}", bs: "{{{{ bs }}}}", ioengine: psync, size: 4m, runtime: {runtime}, time_based: 1}}
  timeout: 60
replicates: {replicates}
order: {{strategy: random, seed: 11}}
"""


# The unreachable host's campaign: its subject is what bmx does when a host goes away
# after a batch (and comes back for the re-run), not what the runs measure, so short
# commands: 8 runs a host in two batches (--batch-max-runs 4), two waves of one Ansible
# call for both hosts (it was 12 fio runs of 1 s a host: four waves of about 20 s).
DOWN = """\
name: ns_down
hosts: all
inventory: config/inventory/ns.yml
factors:
  step: [1, 2, 3, 4]
workload:
  role: workload_command
  vars:
    argv: [sh, -c, "sleep 0.2; echo 'took 0.2'", "{{ step }}"]
  metrics:
    took: {regex: 'took (?P<value>[0-9.]+)', unit: s}
replicates: 2
order: {strategy: random, seed: 11}
"""


def ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


@pytest.fixture
def ns_project(project, tmp_path):
    """The project copy plus namespace hosts and an inventory for them."""
    if not shutil.which("fio"):
        # The hosts have no network: fio must be on the (shared) file system already.
        subprocess.run(["apt-get", "install", "-y", "-qq", "fio"], check=True, capture_output=True)

    def make(n: int) -> NamespaceHosts:
        net = NamespaceHosts(tmp_path / "net", n)
        net.__enter__()
        made.append(net)
        per_host = {h: {"batch_runner_root": str(tmp_path / "hosts" / h),
                        "workload_fio_directory": str(tmp_path / "scratch" / h)} for h in net.hosts}
        inv = net.inventory(per_host, group_vars="workload_fio_install: false")
        (project.root / "config" / "inventory" / "ns.yml").write_text(inv)
        return net

    made: list[NamespaceHosts] = []
    yield project, make
    for net in made:
        net.teardown()


def ns_env(project, net) -> dict[str, str]:
    """The project's environment with a private SSH ControlPath directory: master sockets
    are files named after the address, and other tests' namespace hosts (other sessions
    at the same time) use the same addresses."""
    return {**project.env(), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(net.workdir / "cp")}


def bmx(project, net, *args, timeout=600):
    return subprocess.run(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", *args]), cwd=project.root,
                          env=ns_env(project, net), capture_output=True, text=True, timeout=timeout)


def test_three_hosts_in_parallel_each_in_plan_order(ns_project, tmp_path):
    project, make = ns_project
    net = make(3)
    spec = project.write_spec("ns_three", SPEC.format(name="ns_three", runtime="1", replicates=2))
    res = bmx(project, net, "run", str(spec))
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("ns_three")
    plan = read_csv(exp / "plan.csv")
    runs = read_csv(exp / "runs.csv")
    assert sorted(r["run_id"] for r in runs) == sorted(p["run_id"] for p in plan)
    assert all(r["status"] == "ok" for r in runs)
    assert {r["host"] for r in runs} == {"h1", "h2", "h3"}
    for host in ("h1", "h2", "h3"):
        mine = [r for r in runs if r["host"] == host]
        assert len(mine) == 8
        planned = [p["run_id"] for p in sorted(plan, key=lambda p: int(p["seq"])) if p["host"] == host]
        started = [r["run_id"] for r in sorted(mine, key=lambda r: ts(r["started_at"]))]
        assert started == planned, f"{host} did not run in plan order"
        for a, b in zip(sorted(mine, key=lambda r: ts(r["started_at"])),
                        sorted(mine, key=lambda r: ts(r["started_at"]))[1:]):
            assert ts(a["ended_at"]) <= ts(b["started_at"])
    # Each host has its own random order.
    orders = {h: [p["cell_id"] for p in plan if p["host"] == h] for h in ("h1", "h2", "h3")}
    assert len({tuple(o) for o in orders.values()}) > 1
    # Parallelism is real: runs of different hosts overlapped in time.
    overlaps = sum(1 for a in runs for b in runs if a["host"] < b["host"]
                   and ts(a["started_at"]) < ts(b["ended_at"]) and ts(b["started_at"]) < ts(a["ended_at"]))
    assert overlaps > 0
    facts = {p.parent.name for p in exp.glob("hosts/*/facts.json")}
    assert facts == {"h1", "h2", "h3"}
    # Over SSH the archive is fetched (only a local-connection host's is read in place).
    batch_logs = [p for h in ("h1", "h2", "h3") for p in exp.glob(f"logs/ansible/{h}-b*.log")]
    assert batch_logs and all(re.search(r"Fetch the batch's results\] \*+\n(ok|changed):", p.read_text())
                              for p in batch_logs)
    # Each runner took the controller's lease itself as it started: a batch whose runs end
    # before the first renewal (lease.first_renewal: 10 s after the runner's start) costs
    # no renewal playbook (a second ansible-playbook per batch); a longer one renews.
    assert all(list((tmp_path / "hosts" / h).glob("*/batches/*.lease")) for h in ("h1", "h2", "h3"))
    spans: dict[str, list[float]] = {}
    for r in runs:
        spans.setdefault(r["batch"], []).extend([ts(r["started_at"]), ts(r["ended_at"])])
    renewed = {p.stem.removeprefix("lease-") for p in exp.glob("logs/ansible/lease-*.log")}
    # (2 s for the runner's start before its first run and its end after the last)
    early = {b for b in renewed if max(spans[b]) - min(spans[b]) < first_renewal(300) - 2}
    assert not early, ("a batch renewed its lease before its first renewal was due", early, spans)
    # The report has per-host tables naming every host; comparisons are made per host.
    html = (exp / "report.html").read_text()
    per_host = html[html.index('<section id="per-host">'):]
    per_host = per_host[:per_host.index("</section>")]
    for host in ("h1", "h2", "h3"):
        assert f"<td>{host}</td>" in per_host, host
    assert (exp / "summary_by_host.csv").is_file()
    # The runner on a namespace host sees the machine's cgroup v2 hierarchy, as on a
    # real host (netns.py mounts it in sshd's mount namespace): a cgroup per run, not
    # the slower process-tree containment.
    if cgroup_usable():
        records = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
        assert {r["details"].get("containment") for r in records} == {"cgroup"}


def test_unreachable_host_then_rerun_failed(ns_project):
    project, make = ns_project
    net = make(2)
    spec = project.write_spec("ns_down", DOWN)
    proc = subprocess.Popen(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", "run", str(spec),
                                         "--batch-max-runs", "4"]),
                            cwd=project.root, env=ns_env(project, net), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    exp = project.exp("ns_down")
    deadline = time.monotonic() + 300
    # Let h2 finish its first batch, then take it away in the middle of the next one.
    while time.monotonic() < deadline:
        if list(exp.glob("batches/h2-b0001-*.done")):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.1)
    else:
        pytest.fail("h2 never finished a batch")
    stopped_at = time.monotonic()
    net.stop_sshd("h2")
    out, _ = proc.communicate(timeout=600)
    took = time.monotonic() - stopped_at
    assert proc.returncode == 1, out
    runs = read_csv(exp / "runs.csv")
    h1 = [r for r in runs if r["host"] == "h1"]
    h2 = [r for r in runs if r["host"] == "h2"]
    assert len(h1) == 8 and all(r["status"] == "ok" for r in h1)
    down = [r for r in h2 if r["status"] == "unreachable"]
    assert down and all(r["status"] in ("ok", "unreachable") for r in h2)
    assert len(h2) == 8
    assert took < 240, f"unreachable runs took {took:.0f}s to be recorded"
    status = bmx(project, net, "status", str(spec))
    assert status.returncode == 1 and "unreachable" in status.stdout

    net.start_sshd("h2")
    net._wait_port("h2")
    res = bmx(project, net, "rerun", str(spec), "--failed")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = read_csv(exp / "runs.csv")
    plan = read_csv(exp / "plan.csv")
    planned = {p["run_id"] for p in plan if p["attempt"] == "1" and "-rr" not in p["run_id"]}
    ok = [r["run_id"] for r in runs if r["status"] == "ok" and r["run_id"] in planned]
    assert sorted(ok) == sorted(planned), "every planned run ok exactly once"
    assert bmx(project, net, "status", str(spec)).returncode == 0
