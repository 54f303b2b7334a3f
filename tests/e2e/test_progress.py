"""What `bmx run` says while a campaign runs (issues 15 and 38): a progress line at least
every 30 s, changed or not, that counts the runs the hosts' runners finished (read with
the lease renewals from the runner's progress file; `bmx status` sees them too), with
an ETA, and after the last run the phase (restoring, collecting, the report); a batch
of runs of unknown duration returns its results every batch_max_seconds; an
until-decided budget is wall time.

Real Snakemake, ansible-runner, batch runner and `bmx status`, on localhost and on a
namespace host over SSH (tests/netns.py) in one campaign.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest
from fake_ansible import use_fake_port
from netns import NamespaceHosts, available

pytestmark = pytest.mark.slow

# 12 runs of 3 s on each host: one 36 s batch a host, both hosts at once (it was 60 s).
# The runs alone span a whole 30 s window, in which a line must come; the first lease
# renewal reads the runners' counts 10 s after their start, and the one over SSH took
# 12 s at load 5: the batch must still run when it comes back.
RUNS = """\
name: progress
hosts: all
inventory: config/inventory/ns.yml
factors:
  step: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
workload:
  role: workload_command
  vars:
    argv: [sh, -c, "sleep 3; echo 'took 3'", "{{ step }}"]
  metrics:
    took: {regex: 'took (?P<value>[0-9.]+)', unit: s}
replicates: 1
warmup: 0
"""

_ELAPSED = re.compile(r"^bmx: .*elapsed (\d+):(\d\d):(\d\d)")
_ON_HOSTS = re.compile(r"^bmx: 0/24 runs done, (\d+) more finished on the hosts")
PHASE = "; collecting the results and writing the report"


def _seconds(line: str) -> int | None:
    m = _ELAPSED.match(line)
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) if m else None


@pytest.mark.skipif(bool(available()), reason=available() or "ok")
def test_a_line_at_least_every_30_s_counting_runs_finished_on_localhost_and_over_ssh(project, tmp_path):
    """One campaign, two hosts (localhost and h1 over SSH), a 36 s batch each: a line at
    least every 30 s by the elapsed time it prints, runs counted on both hosts before
    any record came back (bmx status too), an ETA, and the phase after the last run."""
    with NamespaceHosts(tmp_path / "net", 1) as net:
        inventory = net.inventory({"h1": {"batch_runner_root": str(tmp_path / "hosts" / "h1")}})
        inventory += ("    localhost:\n      ansible_connection: local\n"
                      "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n"
                      f"      batch_runner_root: {project.hostwork}\n")
        (project.root / "config" / "inventory" / "ns.yml").write_text(inventory)
        spec = project.write_spec("progress", RUNS)
        env = {**project.env(), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(net.workdir / "cp")}
        run = subprocess.Popen(net.ctl_cmd([sys.executable, "-m", "benchmatrix.cli", "run", str(spec)]),
                               cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(run.stdout), daemon=True)
        reader.start()
        hosts_seen, status_seen = set(), []
        try:
            while run.poll() is None:
                for path in project.exp("progress").glob("batches/*.progress.json"):
                    try:
                        doc = json.loads(path.read_text())
                    except (OSError, ValueError):
                        continue
                    if doc.get("finished"):
                        hosts_seen.add(doc.get("host"))
                # bmx status costs a Python start: ask until it saw them (at most 3 times).
                if len(status_seen) < 3 and hosts_seen and not any(ok == 0 < on for ok, on in status_seen):
                    res = project.bmx("status", str(spec), "--json", timeout=120)
                    if res.stdout.strip().startswith("{"):
                        totals = json.loads(res.stdout)["totals"]
                        status_seen.append((totals["ok"], totals["finished_on_host"]))
                time.sleep(1)
            reader.join(timeout=30)
        finally:
            if run.poll() is None:
                run.kill()
    out = "".join(lines)
    assert run.returncode == 0, out
    said = [ln for ln in out.splitlines() if _seconds(ln) is not None]
    times = [_seconds(ln) for ln in said]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert times and times[-1] >= 36 and max(gaps) <= 30, said
    # The runners' own counts, from both hosts, before any record came back ...
    assert hosts_seen == {"localhost", "h1"}, hosts_seen
    counted = [int(m.group(1)) for m in map(_ON_HOSTS.match, said) if m]
    assert counted and max(counted) > 0, said
    assert any(ok == 0 and on_host > 0 for ok, on_host in status_seen), status_seen
    # ... with an ETA while runs are left, and the phase once none is.
    assert all("ETA" in ln for ln in said if _ON_HOSTS.match(ln)), said
    assert any(ln.startswith("bmx: 24/24 runs done") and ln.endswith(PHASE) for ln in said), said
    final = json.loads(project.bmx("status", str(spec), "--json").stdout)["totals"]
    assert final["ok"] == 24 and final["finished_on_host"] == 0
    assert list(project.exp("progress").glob("batches/*.progress.json")) == []


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
    job writes those records, then starts the rest, all in one Snakemake job (the
    controller's slicing: through the fake Ansible port, tests/fake_ansible.py)."""
    use_fake_port(project)
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


#: The until-decided budget: a first round (6 runs of 1 s and a pass, 10-15 s on 2
#: loaded cores) and the rounds that fit after it (it was 50 s: 20 s more of the same).
BUDGET_S = 30

# Two levels with the same values in the same order (100, 1000, 100, ... each level its
# own count): every look sees two equal samples, far too noisy for an interval to be
# narrower than the detectable change, so the campaign is never decided and never futile,
# and only the budget can stop it (values drawn at random made a look decide now and then:
# the full suite failed so). Each run 1 s.
BUDGETED = """\
name: budgeted
inventory: config/inventory/test.yml
factors:
  side: [a, b]
workload:
  role: workload_command
  vars:
    argv: [sh, -c, "f=%(scratch)s/n.$0; n=$(cat $f 2>/dev/null || echo 0); echo $((n + 1)) > $f;
           sleep 1; echo value=$((n %% 2 * 900 + 100))", "{{ side }}"]
  metrics:
    speed: {regex: 'value=(?P<value>[0-9]+)', unit: ops/s, better: higher}
replicates: {min: 3, max: 20, until: decided, budget: %(budget)ds}
warmup: 0
report:
  compare: {factor: side, baseline: a}
"""


def test_an_until_decided_budget_is_wall_time(project):
    """``budget: 8m`` took 11:10: a round of short runs looked free while its pass (plan,
    batch, collect, the report) took most of the time. The campaign now ends within its
    budget plus one run's time, stopped by the budget."""
    use_fake_port(project)
    project.scratch.mkdir(exist_ok=True)
    spec = project.write_spec("budgeted", BUDGETED % {"budget": BUDGET_S, "scratch": project.scratch})
    res = project.bmx("run", str(spec), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    m = re.search(r"^bmx: done in (\d+):(\d\d):(\d\d)", res.stdout, re.M)
    assert m, res.stdout
    took = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
    assert took <= BUDGET_S + 1, res.stdout
    assert "replicates until decided: stopped" in res.stdout and "budget" in res.stdout, res.stdout
    meta = json.loads((project.exp("budgeted") / "campaign.json").read_text())
    assert meta.get("until_decided_stop") == "budget", meta
