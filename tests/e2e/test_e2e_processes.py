"""Processes a run leaves behind, end to end (issue 13.5): real Snakemake, Ansible and
batch runner on localhost. One run outlives its timeout with a child that ignores
SIGTERM, one exits at once leaving a child that called setsid; both children are
killed before the next run, and the records and record_notes.csv say so."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: leftovers
inventory: config/inventory/test.yml
factors:
  mode: [stubborn, setsid]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "{script}", "{{{{ mode }}}}", "{pids}"]
  timeout: 2
replicates: 1
order: {{strategy: sequential}}
"""

SCRIPT = ("import os, signal, subprocess, sys, time; "
          "code = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)' "
          "if sys.argv[1] == 'stubborn' else 'import os, time; os.setsid(); time.sleep(300)'; "
          "c = subprocess.Popen([sys.executable, '-c', code]); "
          "open(sys.argv[2], 'a').write('%d ' % c.pid); "
          "time.sleep(300 if sys.argv[1] == 'stubborn' else 0)")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_run_leaves_no_process_behind_and_the_record_says_what_was_killed(project):
    pids = project.root / "pids"
    pids.write_text("")
    spec = project.write_spec("leftovers", SPEC.format(script=SCRIPT, pids=pids))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr  # the stubborn run timed out
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2 and not any(_alive(p) for p in children)
    exp = project.exp("leftovers")
    recs = {r["factors"]["mode"]: r for r in (json.loads(p.read_text()) for p in exp.glob("runs/*/1/record.json"))}
    stubborn, setsid = recs["stubborn"], recs["setsid"]
    assert stubborn["status"] == "timeout"
    assert "ignored SIGTERM and got SIGKILL" in stubborn["reason"]
    assert {k["signal"] for k in stubborn["details"]["killed"]} == {"SIGTERM", "SIGKILL"}
    assert setsid["status"] == "ok"
    # No declared metric: the runner timed the command (through the real playbooks).
    assert setsid["metrics"]["wall_s"]["unit"] == "s" and setsid["metrics"]["max_rss_kib"]["value"] > 0
    assert len(setsid["details"]["killed"]) == 1 and setsid["details"]["killed"][0]["pid"] in children
    with open(exp / "record_notes.csv", newline="") as fh:
        notes = [n for n in csv.DictReader(fh) if n["check"] == "killed"]
    assert sorted(n["run_id"] for n in notes) == sorted([stubborn["run_id"], setsid["run_id"]])
    assert any("left running after the workload ended" in n["detail"] for n in notes)
    assert "processes killed after runs" in (exp / "report.md").read_text()
