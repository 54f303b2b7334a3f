"""A host is never left modified after its whole controller died (issue 35, item 1).

Every controller process (bmx, Snakemake, the batch job, ansible-playbook) is SIGKILLed
during the host's first batch, after the batch runner changed a live knob itself: no
baseline.json is written, and the runner goes on changing the knob to the end of its
batch. The next `bmx run`, and `bmx restore`, must still put the knob back to the value
it had before the campaign's first change, which the host kept before that change
(real Snakemake, Ansible and batch runner on localhost; the knob is knob_sysfs on a file
the test owns, as in test_controller_failures.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import host_layout
import pytest
from conftest import read_csv

pytestmark = pytest.mark.slow

ORIGINAL = "2560"  # neither level: a restore to a leftover shows

# Two levels, two replicates, one batch in plan order 512, 512, 1024, 1024: the runner
# sets every setting itself (live), 1024 before the third run. Each run sleeps what the
# pace file says (1 s until the test has cut in, 0 afterwards).
SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  ra: [512, 1024]
knobs:
  ra: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{knob}", knob_sysfs_root: "{root}"}}}}
workload:
  role: workload_command
  vars:
    argv: [{py}, -c, "import time; time.sleep(float(open('{pace}').read())); print('value = 1')"]
  metrics:
    score: {{regex: 'value = (?P<value>[0-9.]+)', unit: count, better: higher}}
  timeout: 60
replicates: 2
warmup: 0
order: {{strategy: sequential, batch_live_knobs: true}}
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_for(pred, timeout: float, what: str, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: bmx ended early: {proc.stdout.read()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        out.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return out


def kill_the_controller_after_the_live_change(project, name: str, live: bool = True) -> tuple[Path, Path, Path]:
    """Start the campaign, SIGKILL every controller process once the runner set 1024
    and its third run is under way (``live`` false: a batch per level, the first set
    to 512 by the batch call, cut in its second run), and wait for the orphaned runner
    to finish the batch: (spec, knob file, pace file)."""
    root = project.root / "knobs"
    root.mkdir()
    knob, pace = root / "ra", project.root / f"{name}.pace"
    knob.write_text(ORIGINAL + "\n")
    pace.write_text("1\n")
    text = SPEC.format(name=name, knob=knob, root=root, py=sys.executable, pace=pace)
    spec = project.write_spec(name, text if live else text.replace("batch_live_knobs: true", "batch_live_knobs: false"))
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    # The plan bmx run writes (atomically) before its first batch: no bmx plan call of its own.
    plan_csv = project.exp(name) / "plan.csv"
    wait_for(plan_csv.is_file, 240, "the plan", proc)
    plan = sorted(read_csv(plan_csv), key=lambda p: int(p["seq"]))
    assert [p["ra"] for p in plan] == ["512", "512", "1024", "1024"]
    assert len({p["batch"] for p in plan}) == (1 if live else 2)
    cut, value = (plan[2], "1024") if live else (plan[1], "512")
    wait_for(lambda: cut["run_id"] in host_layout.in_flight(project.host_runs()), 240, "the run to cut", proc)
    assert knob.read_text().strip() == value, "the knob is not at the cut run's level"
    workdir = project.host_runs().parent
    runner = int((workdir / "runner.pid").read_text())
    # The module, ansible-playbook, then bmx (its wave broker started the call; without a
    # broker: the job, Snakemake, bmx).
    chain = ancestors(runner)[1:]
    first = next(i for i, p in enumerate(chain) if b"ansible-playbook" in Path(f"/proc/{p}/cmdline").read_bytes())
    controller = chain[first:chain.index(proc.pid) + 1]
    sm = int((project.exp(name) / ".bmx.lock").read_text().rsplit("snakemake pid ", 1)[1])
    assert sm != proc.pid and proc.pid in controller, (sm, controller)
    os.killpg(sm, signal.SIGSTOP)  # freeze Snakemake and its jobs: nothing may stop the runner on purpose
    for pid in controller:
        os.kill(pid, signal.SIGKILL)
    os.killpg(sm, signal.SIGKILL)
    proc.wait()
    pace.write_text("0\n")  # the cut is made: the runs left need not wait
    # The runner, alone on the host, ends its batch (its lease is still valid).
    wait_for(lambda: not alive(runner), 60, "the orphaned runner to finish its batch")
    assert knob.read_text().strip() == value, "the premise: the host is left modified"
    assert not (project.exp(name) / "hosts" / "localhost" / "baseline.json").exists(), \
        "the premise: the controller died before it recorded the baseline"
    return spec, knob, pace


@pytest.mark.parametrize("live", [True, False], ids=["set_by_the_runner", "set_by_ansible"])
def test_the_next_run_restores_the_original_value_after_the_whole_controller_died(project, live):
    name = "kept_run" if live else "kept_run_ansible"
    spec, knob, _ = kill_the_controller_after_the_live_change(project, name, live)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert knob.read_text().strip() == ORIGINAL, "the campaign 'restored' to the leftover value"
    baseline = json.loads((project.exp(name) / "hosts" / "localhost" / "baseline.json").read_text())
    assert baseline["ra"]["value"] == ORIGINAL, baseline
    # Back at its baseline: the host keeps no record of it any more.
    assert not list((project.hostwork / "knob_baselines").iterdir())
    runs = read_csv(project.exp(name) / "runs.csv")
    assert sorted(r["status"] for r in runs) == ["ok"] * 4, runs


def test_bmx_restore_without_a_recorded_baseline_restores_the_original_value(project):
    spec, knob, _ = kill_the_controller_after_the_live_change(project, "kept_restore")
    res = project.bmx("restore", str(spec))
    assert res.returncode == 0, res.stdout + res.stderr
    assert knob.read_text().strip() == ORIGINAL, res.stdout + res.stderr
    assert not list((project.hostwork / "knob_baselines").iterdir())
