"""What docs/failures.md and docs/knobs.md claim, end to end on localhost with a real
knob (the read-ahead of a loop device the test creates), real Snakemake and Ansible:

* a knob that reads back a different value than intended makes its batch's runs
  ``invalid`` (the kernel keeps read_ahead_kb in whole 4 KiB pages: 5 reads back as 4);
* the host is back at its baseline after the campaign, after an interrupt, and after
  ``bmx restore``;
* ``bmx status`` exits 1 with failed runs and 3 with pending ones, and the report
  counts the same states;
* a ``bmx report`` between an interrupt and the resume does not stop ``bmx run`` from
  running the rest (it once saw "nothing to be done" and left the runs pending).
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

BASELINE = "256"   # neither level, so every change and every restore shows

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  read_ahead_kb: [{levels}]
knobs:
  read_ahead_kb: {{role: knob_read_ahead, cost: none, vars: {{knob_read_ahead_device: "{dev}"}}}}
workload:
  role: workload_command
  vars: {{argv: {argv}}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: sequential}}
"""


@pytest.fixture
def loop(tmp_path):
    dev = LoopDevice(tmp_path / "loop", size_mb=16)
    dev.sysfs("read_ahead_kb").write_text(BASELINE + "\n")
    yield dev
    dev.close()


def status_json(project, spec: Path) -> tuple[int, dict]:
    res = project.bmx("status", str(spec), "--json")
    return res.returncode, json.loads(res.stdout)


def test_invalid_knob_status_exit_1_and_bmx_restore(project, loop):
    ra = loop.sysfs("read_ahead_kb")
    spec = project.write_spec("st_invalid", SPEC.format(name="st_invalid", levels="5, 512", dev=loop.device,
                                                        argv='[sleep, "0.05"]', replicates=2))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "2 of 4 runs ok, 2 failed, 0 pending" in res.stdout, res.stdout
    assert "invalid: " in res.stderr and "intended '5', actual '4'" in res.stderr, res.stderr
    exp = project.exp("st_invalid")
    for path in exp.glob("runs/*/*/record.json"):
        rec = json.loads(path.read_text())
        k = rec["knobs"]["read_ahead_kb"]
        if rec["factors"]["read_ahead_kb"] == 5:
            # The controller's invalid path: nothing ran, the knob's states are kept.
            assert rec["status"] == "invalid", rec
            assert rec["reason"] == "knob read_ahead_kb: intended '5', actual '4'", rec["reason"]
            assert rec["metrics"] == {} and (k["intended"], k["actual"], k["ok"]) == ("5", "4", False), k
        else:
            assert rec["status"] == "ok" and k["ok"] and k["actual"] == "512", rec
    assert ra.read_text().strip() == BASELINE, "the campaign's end did not restore the baseline"

    code, js = status_json(project, spec)
    assert code == 1 and js["exit_code"] == 1
    assert (js["totals"]["invalid"], js["totals"]["ok"], js["totals"]["pending"]) == (2, 2, 0)
    assert {f["status"] for f in js["failed"]} == {"invalid"}
    md = (exp / "report.md").read_text()
    assert "2 of 4 measured runs done; 2 failed, 0 pending." in md
    # The timeline shows the campaign's real times (pandas 3 once made them 1970 and
    # microseconds): first start, last end and elapsed as runs.csv has them.
    runs = [r for r in read_csv(exp / "runs.csv") if r["started_at"]]   # invalid runs never started
    assert len(runs) == 2
    first = min(datetime.fromisoformat(r["started_at"]) for r in runs)
    last = max(datetime.fromisoformat(r["ended_at"]) for r in runs)
    # The per-host table comes first; the per-batch table's lines start alike.
    line = next(ln for ln in md.split("## Execution timeline")[1].splitlines() if ln.startswith("| localhost |"))
    cols = [c.strip() for c in line.strip("|").split("|")]
    assert cols[1:3] == [first.isoformat(timespec="seconds"), last.isoformat(timespec="seconds")], line
    assert float(cols[3]) == pytest.approx((last - first).total_seconds(), abs=0.01), line
    assert cols[4:] == ["4", "2", "2"], line

    # A host left reconfigured (by hand here; a SIGKILL or a power cut in real life).
    ra.write_text("1024\n")
    res = project.bmx("restore", str(spec))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"bmx: localhost: back at baseline (read_ahead_kb={BASELINE})" in res.stdout
    assert ra.read_text().strip() == BASELINE
    restored = json.loads((exp / "hosts" / "localhost" / "restored.json").read_text())
    assert restored["knobs"]["read_ahead_kb"]["actual"] == BASELINE and restored["knobs"]["read_ahead_kb"]["ok"]


def test_interrupt_restores_the_host_and_leaves_runs_pending(project, loop):
    ra = loop.sysfs("read_ahead_kb")
    # A batch per level (batch_live_knobs: false), so the first batch's runs are recorded
    # when the second is interrupted (live knobs: test_live_knobs_failures_e2e.py). The
    # first four runs end at once; the fifth and later wait while the hold file exists,
    # which the test removes once it has sent the interrupt (as a run of a second did: the
    # host may finish the batch while the controller stops it).
    started, hold = project.root / "started", project.root / "hold"
    hold.write_text("")
    argv = f"""[sh, -c, 'echo >> "$0"; [ $(wc -l < "$0") -lt 5 ] || while [ -e "$1" ]; do sleep 0.05; done',
         "{started}", "{hold}"]"""
    spec = project.write_spec("st_interrupt", SPEC.format(name="st_interrupt", levels="0, 512", dev=loop.device,
                                                          argv=argv, replicates=3).replace(
        "order: {strategy: sequential}", "order: {strategy: sequential, batch_live_knobs: false}"))
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    host_runs = project.host_runs()
    deadline = time.monotonic() + 240
    # Interrupt in the second batch (read-ahead 512): the first batch's three runs are
    # recorded, the fourth is finished on the host, the fifth under way (held).
    while time.monotonic() < deadline:
        host_runs = project.host_runs()
        if len(host_layout.finished(host_runs, 1)) >= 4 and host_layout.in_flight(host_runs):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    else:
        pytest.fail("the campaign never reached its fifth run")
    assert ra.read_text().strip() == "512"
    os.killpg(proc.pid, signal.SIGINT)
    hold.unlink()
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert ra.read_text().strip() == BASELINE, "the interrupt did not restore the host's baseline"

    # Interrupted: nothing failed, the rest is pending, and bmx status says so with exit 3.
    code, js = status_json(project, spec)
    assert code == 3 and js["exit_code"] == 3, js
    t = js["totals"]
    assert t["ok"] == 3 and t["pending"] == 3 and not any(t[s] for s in ("failed", "timeout", "unreachable",
                                                                         "invalid")), t
    res = project.bmx("report", str(spec))
    assert res.returncode == 0, res.stdout + res.stderr
    md = (project.exp("st_interrupt") / "report.md").read_text()
    assert "partial results: 3 of 6 runs pending, 0 failed" in md

    # Resume (after that report): every run ok once, the interrupted attempt kept, the
    # host restored again.
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = read_csv(project.exp("st_interrupt") / "runs.csv")
    assert sorted({r["run_id"] for r in runs if r["status"] == "ok"}) == \
        sorted({p["run_id"] for p in read_csv(project.exp("st_interrupt") / "plan.csv")}), \
        ([(r["run_id"], r["attempt"], r["status"], r["reason"]) for r in runs], res.stdout, res.stderr)
    assert {r["status"] for r in runs} <= {"ok", "interrupted"}
    assert ra.read_text().strip() == BASELINE
    code, js = status_json(project, spec)
    assert code == 0 and js["totals"]["ok"] == 6 and js["totals"]["pending"] == 0, js


def test_host_names_are_plain_strings():
    # ansible-core 2.19 tags host names (a str subclass); one reaching a later
    # playbook's extra variables made `bmx restore` fail with a YAML traceback.
    from benchmatrix.execute.hosts import resolve_hosts

    hosts = resolve_hosts(Path(__file__).resolve().parents[2] / "config" / "inventory" / "local.yml", "all")
    assert hosts == ["localhost"] and all(type(h) is str for h in hosts)
