"""End to end on localhost: real Snakemake, real ansible-runner, real fio; the interrupt
and resume through the fake Ansible port with the command workload.

Each test works in a copy of the project (tests/conftest.py) whose inventory points
the batch runner and fio's scratch file into the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import host_layout
import pytest
from conftest import read_csv
from fake_ansible import use_fake_port

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
description: end-to-end test matrix
inventory: config/inventory/test.yml
factors:
  rw: [randread, read]
  bs: [{levels}]
workload:
  role: workload_fio
  vars: {{rw: "{{{{ rw }}}}", bs: "{{{{ bs }}}}", ioengine: psync, size: 8m, runtime: {runtime}, time_based: 1}}
  timeout: 60
replicates: 2
warmup: 1
order: {{strategy: random, seed: 3}}
{extra}"""


def spec_text(name: str, levels: str = "4k, 64k", runtime: str = "300ms", extra: str = "") -> str:
    return SPEC.format(name=name, levels=levels, runtime=runtime, extra=extra)


def ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def records(exp: Path) -> dict[str, dict]:
    out = {}
    for path in exp.glob("runs/*/*/record.json"):
        rec = json.loads(path.read_text())
        out[f"{rec['run_id']}/{rec['attempt']}"] = rec
    return out


def assert_complete(exp: Path, only: set[str] | None = None) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Every planned run exactly once and ok; the runs (or those in ``only``) started
    in plan order and never overlapped."""
    plan = read_csv(exp / "plan.csv")
    runs = read_csv(exp / "runs.csv")
    assert sorted(r["run_id"] for r in runs) == sorted(p["run_id"] for p in plan)
    assert len({r["run_id"] for r in runs}) == len(runs), "a run was recorded twice"
    assert all(r["status"] == "ok" for r in runs), [(r["run_id"], r["reason"]) for r in runs if r["status"] != "ok"]
    for r in runs:
        if r["warmup"] == "false":
            assert float(r["read_iops"]) > 0 and float(r["read_bw_kib"]) > 0, r
    checked = [r for r in runs if only is None or r["run_id"] in only]
    by_seq = sorted(checked, key=lambda r: int(r["seq"]))
    by_start = sorted(checked, key=lambda r: ts(r["started_at"]))
    assert [r["run_id"] for r in by_start] == [r["run_id"] for r in by_seq], "runs did not start in plan order"
    for a, b in zip(by_seq, by_seq[1:]):
        assert ts(a["ended_at"]) <= ts(b["started_at"]), f"{a['run_id']} overlapped {b['run_id']}"
    return plan, runs


def assert_reports_name_cells(exp: Path, plan: list[dict[str, str]]) -> None:
    summary = read_csv(exp / "summary.csv")
    cells = {p["cell_id"] for p in plan}
    assert {s["cell_id"] for s in summary} == cells
    for name in ("report.html", "report.md"):
        text = (exp / name).read_text()
        for cell in cells:
            assert cell in text, f"{name} does not name cell {cell}"


def test_run_extend_and_rerun_only_new_cells(project):
    spec = project.write_spec("e2e_extend", spec_text("e2e_extend"))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("e2e_extend")
    assert f"report: {exp / 'report.html'}" in res.stdout
    plan, runs = assert_complete(exp)
    assert len(plan) == 2 * 2 * (2 + 1)
    assert_reports_name_cells(exp, plan)
    # localhost is the controller: its batches' archives are read where the runner
    # left them, not fetched (a module call and a copy less per batch).
    batch_logs = list(exp.glob("logs/ansible/localhost-b*.log"))
    assert batch_logs and all(re.search(r"Fetch the batch's results\] \*+\nskipping", p.read_text())
                              for p in batch_logs)
    first = records(exp)
    record_mtimes = {p: p.stat().st_mtime_ns for p in exp.glob("runs/*/*/record.json")}

    # Nothing changed: a second run executes nothing.
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert {p: p.stat().st_mtime_ns for p in exp.glob("runs/*/*/record.json")} == record_mtimes

    # Add a level and an exclude: only the new cells run.
    project.write_spec("e2e_extend", spec_text("e2e_extend", levels="4k, 64k, 16k",
                                               extra="exclude:\n  - {rw: read, bs: 16k}\n"))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    after = records(exp)
    new = set(after) - set(first)
    # The extended plan is a fresh shuffle: the new runs follow its order among themselves.
    plan2, runs2 = assert_complete(exp, only={k.split("/")[0] for k in new})
    assert len(plan2) == 5 * (2 + 1)
    for key, rec in first.items():
        assert after[key]["started_at"] == rec["started_at"], f"{key} was measured again"
    assert len(new) == 3 and all(after[k]["factors"] == {"rw": "randread", "bs": "16k"} for k in new)
    assert_reports_name_cells(exp, plan2)


#: test_sigint_during_batch_then_resume's workload, in place of SPEC's fio: runs of 0.5 s
#: of the command workload. What it tests is the controller's interrupt and resume, not
#: fio (test_run_extend_and_rerun_only_new_cells runs fio for real; the interrupt with
#: real Ansible and a knob: test_e2e_states.py).
SLEEPS = """\
  role: workload_command
  vars: {argv: [sh, -c, "sleep 0.5; echo 'took 1'", "{{ rw }}", "{{ bs }}"]}
  metrics:
    took: {regex: 'took (?P<value>[0-9]+)', unit: s}
"""


def test_sigint_during_batch_then_resume(project):
    """Ctrl-C in a batch, then the resume (through the fake Ansible port, tests/fake_ansible.py)."""
    use_fake_port(project)
    fio = ('  role: workload_fio\n  vars: {rw: "{{ rw }}", bs: "{{ bs }}", ioengine: psync, size: 8m, '
           'runtime: 300ms, time_based: 1}\n')
    text = spec_text("e2e_sigint")
    assert text.count(fio) == 1
    spec = project.write_spec("e2e_sigint", text.replace(fio, SLEEPS))
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    deadline = time.monotonic() + 240
    # Interrupt once two runs have finished on the host and a third is under way.
    while time.monotonic() < deadline:
        host_runs = project.host_runs()
        if len(host_layout.finished(host_runs, 1)) >= 2 and host_layout.in_flight(host_runs):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    else:
        pytest.fail("the campaign never reached its third run")
    finished_before = {rid: r["started_at"] for (rid, att), r in host_layout.results(host_runs).items() if att == 1}
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "Resume with: bmx run" in out
    assert not host_layout.in_flight(host_runs), "the interrupted run left its files without a result"
    alive = subprocess.run(["pgrep", "-f", str(project.hostwork)], capture_output=True, text=True)
    assert alive.stdout.strip() == "", "a runner or workload outlived the interrupt"

    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    exp = project.exp("e2e_sigint")
    plan = read_csv(exp / "plan.csv")
    runs = read_csv(exp / "runs.csv")
    # The campaign's own runs (re-run rounds add attempts and warm-ups named ...-rrN).
    planned = {p["run_id"] for p in plan if p["attempt"] == "1" and "-rr" not in p["run_id"]}
    # Every planned run ends with exactly one ok attempt.
    ok = [r for r in runs if r["status"] == "ok"]
    assert sorted(r["run_id"] for r in ok if r["run_id"] in planned) == sorted(planned)
    assert len(planned) == 2 * 2 * 3
    # The run cut short is kept as an interrupted attempt, and its next attempt is ok.
    cut = [r for r in runs if r["status"] == "interrupted"]
    assert len(cut) <= 1 and all(r["took"] == "" for r in cut)
    last_visit = max(int(p["visit"]) for p in plan if p["attempt"] == "1" and p["run_id"] in planned)
    for r in cut:
        nxt = [o for o in ok if o["run_id"] == r["run_id"] and int(o["attempt"]) == int(r["attempt"]) + 1]
        assert len(nxt) == 1
        # It ran after the plan, in a visit of its own: the analysis must not group it with the old one.
        assert int(nxt[0]["visit"]) == last_visit + 1
    assert {r["status"] for r in runs} <= {"ok", "interrupted"}
    recs = records(exp)
    for run_id, started in finished_before.items():
        assert ts(recs[f"{run_id}/1"]["started_at"]) == pytest.approx(started, abs=1e-5), \
            f"{run_id} finished before the interrupt but was measured again"
    status = project.bmx("status", str(spec))
    assert status.returncode == 0, status.stdout + status.stderr
    assert_reports_name_cells(exp, plan)
    # Each Snakemake pass is recorded (the estimates' fixed start and end): the one cut
    # short, then the resume (a pass for the interrupted run's re-run round may follow).
    passes = json.loads((exp / "campaign.json").read_text())["passes"]
    assert [p["outcome"] for p in passes][:2] == ["interrupted", "ok"], passes
    assert all(ts(p["started_at"]) <= ts(p["ended_at"]) for p in passes)
    assert ts(passes[0]["ended_at"]) <= ts(passes[1]["started_at"])
