"""A run's processes end with the run (issue 13.5): real processes, real batch runner.

The runner is driven as Ansible drives it (``batch_runner.py MANIFEST``, its own
process, so it can be the child subreaper it is on a host), once with a cgroup v2 per
run (skipped where this machine has no writable cgroup v2) and once with the
process-tree containment every host falls back to. Each workload writes the PIDs
it started to a file; the batch's next run checks that none of them is alive, which
proves the runner waited for the sweep before starting it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import host_layout
import pytest

from benchmatrix.host import batch_runner

RUNNER = Path(batch_runner.__file__)

# A parent that sleeps, with a child that ignores SIGTERM (the parent dies on SIGTERM).
IGNORES_TERM = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
open(sys.argv[1], "a").write("%d\\n%d\\n" % (os.getpid(), child.pid))
time.sleep(300)
"""

# A child that calls setsid (leaving the workload's process group and session).
SETSID = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
open(sys.argv[1], "a").write("%d\\n%d\\n" % (os.getpid(), child.pid))
time.sleep(float(sys.argv[2]))
"""

# The batch's last run: fails when any PID listed in the file is still a live process.
NONE_ALIVE = """
import sys
alive = []
for pid in open(sys.argv[1]).read().split():
    try:
        state = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        continue
    if state not in ("Z", "X"):
        alive.append(pid)
print("alive", alive)
sys.exit(1 if alive else 0)
"""


def cgroup_usable() -> bool:
    """Whether a runner here gets a cgroup per run (a writable cgroup v2)."""
    c = batch_runner.Containment("auto")
    usable = c.mode == "cgroup"
    c.end()
    return usable


MODES = [pytest.param("auto", marks=pytest.mark.skipif(not cgroup_usable(), reason="no writable cgroup v2 here")),
         "process_tree"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _run_batch(tmp_path: Path, mode: str, runs: list[dict]) -> tuple[dict, dict[str, dict]]:
    workdir = tmp_path / "work"
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "experiment": "t", "batch": "b1", "workdir": str(workdir), "archive": str(workdir / "b1.tar.gz"),
        "containment": mode, "kill_grace_s": 0.5, "runs": runs}))
    proc = subprocess.run([sys.executable, str(RUNNER), str(manifest)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The manifest may carry secrets: read once, then gone; the workdir is the owner's only.
    assert not manifest.exists() and (workdir.stat().st_mode & 0o777) == 0o700
    results = {r["run_id"]: host_layout.result(workdir, r["run_id"])
               for r in runs}
    return json.loads(proc.stdout), results


def _run(run_id: str, seq: int, argv: list[str], timeout: float = 30) -> dict:
    return {"run_id": run_id, "attempt": 1, "seq": seq, "timeout": timeout, "before_run": [], "argv": argv}


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_kills_a_child_that_ignores_sigterm(tmp_path, mode):
    pids = tmp_path / "pids"
    pids.write_text("")
    t0 = time.monotonic()
    _, res = _run_batch(tmp_path, mode, [
        _run("r1", 1, [sys.executable, "-c", IGNORES_TERM, str(pids)], timeout=1.5),
        _run("r2", 2, [sys.executable, "-c", NONE_ALIVE, str(pids)])])
    parent, child = map(int, pids.read_text().split())
    assert res["r1"]["outcome"] == "timeout"
    assert res["r1"]["containment"] == ("cgroup" if mode == "auto" else "process_tree")
    killed = {k["pid"]: k for k in res["r1"]["killed"]}
    assert set(killed) == {parent, child}, res["r1"]["killed"]
    assert killed[parent]["signal"] == "SIGTERM" and killed[child]["signal"] == "SIGKILL"
    assert "signal.SIG_IGN" in killed[child]["command"] and killed[child]["after"] == "timeout"
    assert "ignored SIGTERM and got SIGKILL" in res["r1"]["error"]
    # The next run started only once none was left, and nothing outlives the batch.
    assert res["r2"]["outcome"] == "exited" and res["r2"]["exit_code"] == 0, res["r2"]
    assert not _alive(parent) and not _alive(child)
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("mode", MODES)
def test_a_setsid_child_is_killed_at_the_timeout(tmp_path, mode):
    pids = tmp_path / "pids"
    pids.write_text("")
    _, res = _run_batch(tmp_path, mode, [
        _run("r1", 1, [sys.executable, "-c", SETSID, str(pids), "300"], timeout=1.5),
        _run("r2", 2, [sys.executable, "-c", NONE_ALIVE, str(pids)])])
    parent, child = map(int, pids.read_text().split())
    assert res["r1"]["outcome"] == "timeout"
    assert {k["pid"] for k in res["r1"]["killed"]} == {parent, child}
    assert res["r2"]["exit_code"] == 0, res["r2"]
    assert not _alive(child)


@pytest.mark.parametrize("mode", MODES)
def test_what_a_finished_workload_left_running_is_killed_and_recorded(tmp_path, mode):
    pids = tmp_path / "pids"
    pids.write_text("")
    _, res = _run_batch(tmp_path, mode, [
        _run("r1", 1, [sys.executable, "-c", SETSID, str(pids), "0"]),  # exits at once, child stays
        _run("r2", 2, [sys.executable, "-c", NONE_ALIVE, str(pids)])])
    parent, child = map(int, pids.read_text().split())
    assert res["r1"]["outcome"] == "exited" and res["r1"]["exit_code"] == 0
    assert res["r1"]["killed"] == [{"pid": child, "command": res["r1"]["killed"][0]["command"],
                                    "signal": "SIGTERM", "after": "exit"}]
    assert "os.setsid()" in res["r1"]["killed"][0]["command"]
    assert res["r2"]["exit_code"] == 0 and res["r2"]["killed"] == []
    assert not _alive(child)


def test_a_clean_run_kills_nothing_in_process(tmp_path):
    # execute() inside this process (no subreaper): a workload that leaves nothing.
    run = _run("r1", 1, [sys.executable, "-c", "print('x')"])
    result = batch_runner.execute(run, str(tmp_path), containment="process_tree", grace_s=0.5)
    assert result["outcome"] == "exited" and result["killed"] == [] and result["containment"] == "process_tree"


def test_an_orphan_that_left_the_session_is_found_by_its_marker_in_process(tmp_path):
    # execute() inside this process, which is no subreaper: the setsid child's parent
    # exits at once, so it is re-parented to init, out of every process tree of ours.
    pids = tmp_path / "pids"
    pids.write_text("")
    run = _run("r1", 1, [sys.executable, "-c", SETSID, str(pids), "0"])
    result = batch_runner.execute(run, str(tmp_path), containment="process_tree", grace_s=0.5)
    child = int(pids.read_text().split()[1])
    assert [k["pid"] for k in result["killed"]] == [child]
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_stop_kills_the_workload_of_a_runner_killed_outright(tmp_path):
    # A runner killed by SIGKILL leaves its workload: --stop finds it by its cgroup or marker.
    pids = tmp_path / "pids"
    pids.write_text("")
    workdir = tmp_path / "work"
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({
        "experiment": "t", "batch": "b1", "workdir": str(workdir), "archive": str(workdir / "b1.tar.gz"),
        "runs": [_run("r1", 1, [sys.executable, "-c", SETSID, str(pids), "300"], timeout=300)]}))
    runner = subprocess.Popen([sys.executable, str(RUNNER), str(manifest)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while len(pids.read_text().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    parent, child = map(int, pids.read_text().split())
    os.kill(runner.pid, 9)
    runner.wait()
    assert _alive(child)
    # No runner holds the lock now; --stop still ends what workload.json names.
    assert batch_runner.stop(str(workdir)) == {"stopped": False, "killed": 2}
    deadline = time.monotonic() + 5
    while (_alive(parent) or _alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(parent) and not _alive(child)


def test_record_notes_say_what_was_killed():
    from benchmatrix.analyze import sanity

    rec = {"run_id": "r1", "attempt": 1, "host": "h", "started_at": "t",
           "details": {"killed": [{"pid": 7, "command": "sleep 300", "signal": "SIGKILL", "after": "exit"}]}}
    notes = sanity.record_notes([rec, {"run_id": "r2", "attempt": 1, "details": {"killed": []}}])
    assert notes.to_dict("records") == [{"run_id": "r1", "attempt": 1, "host": "h", "started_at": "t",
                                         "check": "killed", "detail": "1 process(es) killed (left running after "
                                                                      "the workload ended): sleep [7] by SIGKILL"}]
    (warn,) = sanity.note_warnings(notes)
    assert warn["check"] == "killed" and "r1" in warn["runs"]


@pytest.mark.parametrize("mode", MODES)
def test_the_next_runner_stops_the_workload_of_a_runner_killed_outright(tmp_path, mode):
    # Issue 35, item 4: the runner SIGKILLed mid-run left its workload running beside the
    # next batch on the host, and its empty run cgroups behind.
    pids = tmp_path / "pids"
    pids.write_text("")
    workdir = tmp_path / "work"

    def manifest(batch: str, runs: list[dict]) -> Path:
        path = tmp_path / f"{batch}.json"
        path.write_text(json.dumps({"experiment": "t", "batch": batch, "workdir": str(workdir),
                                    "archive": str(workdir / f"{batch}.tar.gz"), "containment": mode,
                                    "kill_grace_s": 0.5, "runs": runs}))
        return path

    first = manifest("b1", [_run("r1", 1, [sys.executable, "-c", SETSID, str(pids), "300"], timeout=300)])
    runner = subprocess.Popen([sys.executable, str(RUNNER), str(first)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while len(pids.read_text().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    parent, child = map(int, pids.read_text().split())
    cgroup = json.loads((workdir / "workload.json").read_text())["cgroup"]
    assert (cgroup is not None) == (mode == "auto")
    home = Path(cgroup).parent if cgroup else None
    # Another dead runner's empty run cgroup, and a live one's (this process: never touched).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = home / f"{batch_runner.CGROUP_PREFIX}{dead.pid}-0000" if home else None
    live = home / f"{batch_runner.CGROUP_PREFIX}{os.getpid()}-0000" if home else None
    for path in (stale, live):
        if path:
            path.mkdir()
    try:
        os.kill(runner.pid, 9)
        runner.wait()
        assert _alive(parent) and _alive(child)
        # The next batch's runner on the same work directory ends them before its first run.
        second = manifest("b2", [_run("r2", 1, [sys.executable, "-c", NONE_ALIVE, str(pids)])])
        proc = subprocess.run([sys.executable, str(RUNNER), str(second)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        result = host_layout.result(workdir, "r2")
        assert result["exit_code"] == 0, result  # none of them was alive when r2 ran
        assert not _alive(parent) and not _alive(child)
        if home:
            assert not Path(cgroup).exists(), "the killed runner's run cgroup was left"
            assert not stale.exists(), "a dead runner's empty run cgroup was left"
            assert live.is_dir(), "a live runner's run cgroup was removed"
    finally:
        for pid in (parent, child):
            if _alive(pid):
                os.kill(pid, 9)
        if live and live.is_dir():
            live.rmdir()
        if stale and stale.is_dir():
            stale.rmdir()


# Prints the cgroup v2 path of the process (the "0::" line of /proc/self/cgroup).
OWN_CGROUP = "print([l for l in open('/proc/self/cgroup').read().splitlines() if l.startswith('0::')][0][3:])"
# The cgroup of the workload's parent, the runner, while the run runs.
RUNNER_CGROUP = ("import os; print([l for l in open('/proc/%d/cgroup' % os.getppid()).read().splitlines()"
                 " if l.startswith('0::')][0][3:])")


@pytest.mark.skipif(not cgroup_usable(), reason="no writable cgroup v2 here")
def test_runs_take_turns_in_one_cgroup_unless_one_measures_its_peak_memory(tmp_path):
    pids = tmp_path / "pids"
    pids.write_text("")
    py = [sys.executable, "-c", RUNNER_CGROUP + "\n" + OWN_CGROUP]
    runs = [_run("r1", 1, py), _run("r2", 2, py),
            # Leaves a child behind that the sweep ends: the cgroup is empty again afterwards.
            _run("r3", 3, [sys.executable, "-c", SETSID + "\n" + OWN_CGROUP, str(pids), "0"]),
            _run("r4", 4, py), {**_run("r5", 5, py), "collect": ["process"]}, _run("r6", 6, py)]
    _, res = _run_batch(tmp_path, "auto", runs)
    cgroups = {r: host_layout.file(tmp_path / "work", r, "stdout").read_text().split()[-1] for r in res}
    assert all(c.startswith("/") and batch_runner.CGROUP_PREFIX in c for c in cgroups.values()), cgroups
    shared = cgroups["r1"]
    assert cgroups["r2"] == cgroups["r3"] == cgroups["r4"] == cgroups["r6"] == shared
    assert cgroups["r5"] != shared  # memory.peak counts from the cgroup's creation: a new one
    assert res["r3"]["killed"] and not res["r3"].get("survivors")
    # The runner stays in the shared cgroup while its runs run (no move in and out a run),
    # steps out before a sweep kills what a run left (r3: the runner lived on), and is
    # never inside a cgroup of a run's own (r5).
    runner_in = {r: host_layout.file(tmp_path / "work", r, "stdout").read_text().split()[0]
                 for r in ("r1", "r2", "r4", "r5", "r6")}
    assert runner_in["r1"] == runner_in["r2"] == runner_in["r4"] == runner_in["r6"] == shared, runner_in
    assert runner_in["r5"] not in (shared, cgroups["r5"]), runner_in
    # The v2 hierarchy's mount: this process's cgroup directory less its path in /proc/self/cgroup.
    own = [ln for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln.startswith("0::")][0][3:]
    mount = batch_runner._own_cgroup_v2().removesuffix(own.rstrip("/"))
    for c in set(cgroups.values()):
        assert not Path(mount + c).exists(), f"run cgroup {c} outlived the runner"
