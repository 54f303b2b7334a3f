"""Live knobs inside one batch (issue 23) when the batch is cut short: the batch runner
killed on the host, or the user's Ctrl-C to `bmx run`, right after the runner changed
the knob between two runs of the campaign's only batch. The host ends at its baseline,
the runs finished before are kept, and the records say which setting each run had
(real Snakemake, Ansible, fio and the read-ahead of a loop device).
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import host_layout
import pytest
from conftest import read_csv
from knobkit import LoopDevice

pytestmark = pytest.mark.slow

BASELINE = "256"  # neither level: every change and every restore shows

# Two levels, two replicates, in plan order: 0, 0, 512, 512, all in one batch; the
# runner sets 512 itself before the third run. The runs at 512 take 1 s, which leaves
# time to cut in; the two before it 100 ms.
SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  read_ahead_kb: [0, 512]
knobs:
  read_ahead_kb: {{role: knob_read_ahead, cost: none, vars: {{knob_read_ahead_path: "{mnt}/data"}}}}
workload:
  role: workload_fio
  vars: {{filename: "{mnt}/fio.dat", rw: read, bs: 64k, ioengine: psync, size: 1m, time_based: 1,
         runtime: "{{{{ '1' if read_ahead_kb | int == 512 else '100ms' }}}}"}}
  timeout: 60
replicates: 2
warmup: 0
order: {{strategy: sequential, batch_live_knobs: true}}
"""


@pytest.fixture
def fs_loop(tmp_path):
    dev = LoopDevice(tmp_path / "loop", size_mb=64, mkfs=True)
    dev.sysfs("read_ahead_kb").write_text(BASELINE + "\n")
    yield dev
    dev.close()


def records(exp: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for p in exp.glob("runs/*/*/record.json"):
        rec = json.loads(p.read_text())
        out[(rec["run_id"], rec["attempt"])] = rec
    return out


def start_and_cut_at_the_live_change(project, fs_loop, name):
    """Start `bmx run` and return once the runner set the second level itself and that
    level's first run is under way: (the process, plan rows in order, the run ids
    finished on the host with their start times)."""
    spec = project.write_spec(name, SPEC.format(name=name, mnt=fs_loop.mountpoint))
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    # The plan bmx run writes (atomically) before its first batch: no bmx plan call of its own.
    plan_csv = project.exp(name) / "plan.csv"
    deadline = time.monotonic() + 240
    while not plan_csv.is_file():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "bmx run wrote no plan"
        time.sleep(0.05)
    plan = sorted(read_csv(plan_csv), key=lambda p: int(p["seq"]))
    assert [p["read_ahead_kb"] for p in plan] == ["0", "0", "512", "512"] and len({p["batch"] for p in plan}) == 1
    changed_at = plan[2]["run_id"]
    ra = fs_loop.sysfs("read_ahead_kb")
    while changed_at not in host_layout.in_flight(project.host_runs()):
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "the campaign never reached its third run"
        time.sleep(0.05)
    assert ra.read_text().strip() == "512", "the runner did not set the knob between runs"
    finished = {rid: r["started_at"] for (rid, att), r in host_layout.results(project.host_runs()).items()
                if att == 1}
    assert sorted(finished) == sorted(p["run_id"] for p in plan[:2]), finished
    return spec, proc, plan, finished


def assert_finished_campaign(project, fs_loop, name, plan, kept):
    """Every planned run ok exactly once, each ok record's knob state its own level (the
    first ok run of each level changed the knob), the runs in ``kept`` (run id: start
    time on the host) not measured again, the host at its baseline."""
    exp = project.exp(name)
    runs = read_csv(exp / "runs.csv")
    ok = [r for r in runs if r["status"] == "ok"]
    assert sorted(r["run_id"] for r in ok) == sorted(p["run_id"] for p in plan), \
        [(r["run_id"], r["attempt"], r["status"]) for r in runs]
    recs = records(exp)
    level = {p["run_id"]: p["read_ahead_kb"] for p in plan}
    seen = set()
    for rec in sorted((r for r in recs.values() if r["status"] == "ok"), key=lambda r: ts(r["started_at"])):
        k = rec["knobs"]["read_ahead_kb"]
        want = level[rec["run_id"]]
        assert (k["intended"], k["actual"], k["ok"]) == (want, want, True), (rec["run_id"], rec["attempt"], k)
        if want not in seen:
            assert k["changed"] is True, (rec["run_id"], k)
            seen.add(want)
    for run_id, started in kept.items():
        rec = recs[(run_id, 1)]
        assert rec["status"] == "ok" and ts(rec["started_at"]) == pytest.approx(started, abs=1e-5), \
            f"{run_id} finished before the cut but was measured again"
    assert fs_loop.sysfs("read_ahead_kb").read_text().strip() == BASELINE, "the host is not back at its baseline"
    baseline = json.loads((exp / "hosts" / "localhost" / "baseline.json").read_text())
    assert baseline["read_ahead_kb"]["value"] == BASELINE, baseline


def ts(value) -> float:
    return value if isinstance(value, (int, float)) else datetime.fromisoformat(value).timestamp()


def test_interrupt_after_a_live_change_restores_the_baseline_and_keeps_finished_runs(project, fs_loop):
    """Ctrl-C (SIGINT to bmx's process group) during the third run, which the runner
    set to 512 itself: bmx exits 130 with how to resume, the host is at its baseline,
    the two runs finished before are kept (fetched, not measured again), and the resume
    ends every run ok with its own setting recorded and the host at its baseline."""
    name = "live_sigint"
    spec, proc, plan, finished = start_and_cut_at_the_live_change(project, fs_loop, name)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert "Resume with: bmx run" in out, out
    assert fs_loop.sysfs("read_ahead_kb").read_text().strip() == BASELINE, "the interrupt left the host reconfigured"
    assert not host_layout.in_flight(project.host_runs()), "the interrupted run left its files without a result"

    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert_finished_campaign(project, fs_loop, name, plan, finished)


def test_a_runner_killed_after_a_live_change_restores_the_baseline(project, fs_loop):
    """The batch runner SIGKILLed on the host during the third run (the host's side of
    the batch dies; nothing of it can clean up, the knob stays at the runner's 512): the
    two runs it finished before are taken in (collect_batch.yml), the others fail with
    the runner's task named, the campaign's end puts the baseline the batch call read
    back, and `bmx rerun --failed` ends every run ok with its own setting recorded, the
    finished runs not measured again, and the host at its baseline."""
    name = "live_kill"
    spec, proc, plan, finished = start_and_cut_at_the_live_change(project, fs_loop, name)
    runner = int((project.host_runs().parent / "runner.pid").read_text())
    os.kill(runner, signal.SIGKILL)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, out
    assert fs_loop.sysfs("read_ahead_kb").read_text().strip() == BASELINE, "the host was left reconfigured"
    exp = project.exp(name)
    recs = records(exp)
    assert sorted(recs) == sorted((p["run_id"], 1) for p in plan), recs
    kept = [recs[(p["run_id"], 1)] for p in plan[:2]]
    assert all(r["status"] == "ok" and r["knobs"]["read_ahead_kb"]["actual"] == "0" for r in kept), kept
    failed = [recs[(p["run_id"], 1)] for p in plan[2:]]
    assert {r["status"] for r in failed} == {"failed"}, failed
    # The run task's result is hidden (the manifest carries the knob settings): the next
    # task says why, without the manifest.
    assert all(r["failed_task"] == "Report why the batch runner failed" for r in failed), failed
    assert all("the batch runner on localhost was killed by signal 9 (SIGKILL)" in r["reason"] for r in failed), \
        [r["reason"] for r in failed]
    assert not any(r.get("knobs") for r in failed), "a run that never ran claims a knob setting"
    assert (exp / "logs" / "ansible" / f"{plan[0]['batch']}-collect.log").is_file()

    res = project.bmx("rerun", str(spec), "--failed", "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert_finished_campaign(project, fs_loop, name, plan, kept=finished)
