"""Across time end to end (issue 33): real campaigns of a command workload whose level a
file outside the spec sets, as a kernel or a SAN would change it, compared with
``bmx compare``; one experiment serves both tests.

The campaigns: ``old1`` at the first level; from ``new1`` on the workload takes twice as
long (a step in the history); ``a`` at that level; ``b`` 30 % slower than ``a`` (the
real change), run while the test keeps the host busy (CPU hogs it starts for that
campaign only and kills after). The noise is lognormal with CV 3 %, drawn from a seed
that a counter file outside the spec advances run by run, so every run of the test sees
the same values.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

from benchmatrix.campaigns.store import list_campaigns

pytestmark = pytest.mark.slow


def _spec() -> str:
    """test_verdicts_e2e's spec (its workload and counter), renamed, 2 cells, CV 3 %."""
    from test_verdicts_e2e import SPEC as VERDICTS

    text = VERDICTS
    for old, new in (("name: verdicts", "name: across"), ("size: [1, 2, 3, 4]", "size: [1, 2]"),
                     ("lognormvariate(0, 0.2)", "lognormvariate(0, 0.03)"), ("seed: 3", "seed: 5")):
        assert old in text, old
        text = text.replace(old, new)
    return text


#: CPU hogs that make the host busy for one campaign: enough runnable processes to
#: lift the load average well past twice any other campaign's within seconds, each at
#: SCHED_IDLE so that together they take little CPU from the other tests on the machine.
HOGS = 100


def _idle():
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _run(project, spec, label: str) -> None:
    res = project.bmx("run", str(spec), "--cores", "1", "--campaign", label)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


@pytest.fixture(scope="module")
def across(tmp_path_factory):
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("across")))
    factor = project.root / "factor"
    spec = project.write_spec("across", _spec().format(factor=factor, counter=project.root / "counter"))
    for label, level in (("old1", "1"), ("new1", "2"), ("a", "2")):
        factor.write_text(level)
        _run(project, spec, label)
    factor.write_text("2.6")
    # Busy: over twice the load the campaigns before had, and over 2 (the CPUs).
    busy = 2 * os.getloadavg()[0] + 2
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=_idle) for _ in range(HOGS)]
    try:
        # The 1-minute load average follows with a lag (it is updated every 5 s): one
        # update is mostly enough (it was a fixed 6 s, short of it on a loaded machine).
        deadline = time.monotonic() + 30
        while os.getloadavg()[0] <= busy and time.monotonic() < deadline:
            time.sleep(0.2)
        _run(project, spec, "b")
    finally:
        for hog in hogs:
            hog.send_signal(signal.SIGKILL)
        for hog in hogs:
            hog.wait()
    out = {"json": project.bmx("compare", "a", "b", "--spec", str(spec), "--json"),
           "text": project.bmx("compare", "a", "b", "--spec", str(spec))}
    for res in out.values():
        assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-2000:]
    return project, out["json"].returncode, json.loads(out["json"].stdout), out["text"]


def test_compare_uses_only_as_side_of_the_step_and_flags_the_real_change(across):
    _, code, out, text = across
    hist = out["history"]
    used = [c["name"] for c in hist["used"]]
    why = {c["name"]: c["why"] for c in hist["left_out"]}
    # The step at new1: the latency doubled (the levels are against a's). A campaign
    # whose load before its runs was over twice a's is left out before the step test
    # (this machine's load is the other tests' too): then the note says so instead.
    assert hist["rule"] == "auto" and set(why) | set(used) == {"old1", "new1", "a"} and used[-1] == "a", hist
    assert "the other side of a step at new1 (+" in why["old1"] or "load_before" in why["old1"], why
    assert "new1" in used or "load_before" in why["new1"], why
    note = f"history (auto, --history): {', '.join(used)}; left out: old1 ("
    assert any(n.startswith(note) for n in out["notes"]), out["notes"]
    assert code == 1 and [r["verdict"] for r in out["rows"]] == ["worse", "worse"], out["rows"]
    assert all(20 < r["rel_diff_pct"] < 40 for r in out["rows"]), out["rows"]
    # The terminal says the same in words.
    assert text.returncode == 1 and note in text.stdout, text.stdout


def test_compare_names_the_busy_host_beside_the_verdict(across):
    project, _, out, text = across
    (made_busy,) = [c for c in list_campaigns(project.exp("across")) if c.label == "b"]
    loads = pd.to_numeric(pd.read_csv(made_busy.path / "runs.csv")["env_load_before"])
    assert loads.median() > 2, loads.tolist()     # the hogs' doing: 2 CPUs
    busy = [line for line in out["busy"] if "before b's runs" in line]
    assert len(busy) == 1 and busy[0].startswith("busy host: localhost had load "), out["busy"]
    assert busy[0] in out["notes"]
    assert ("load_before", "localhost") in {(e["what"], e["host"]) for e in out["environment"]}, out["environment"]
    # Beside each verdict: the load that changed.
    assert all("load_before" in r["environment"] for r in out["rows"]), out["rows"]
    assert "bmx: note: busy host: localhost" in text.stdout and "before b's runs" in text.stdout, text.stdout
    assert "load_before" in text.stdout, text.stdout
