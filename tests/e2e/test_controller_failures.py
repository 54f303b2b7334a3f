"""The controller under stress (issue 13): a batch job that dies, a second controller,
a killed controller, a full disk. Real Snakemake, ansible-runner and workload_command on
localhost; the knob is knob_sysfs pointed at a plain file the test owns (its
``knob_sysfs_root``), so that restores are visible without touching the machine. The
two restore tests share one knob campaign (:func:`knob_campaign`). The knob-less
campaigns (:func:`plain_spec`) go through the fake Ansible port (tests/fake_ansible.py),
but for the one whose every controller process is killed, ansible-playbook included;
their runs wait for the test (:func:`set_pace`) instead of sleeping long enough.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import host_layout
import pytest
from conftest import copy_project, read_csv
from fake_ansible import use_fake_port

from benchmatrix.files import atomic_write

pytestmark = pytest.mark.slow

SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  {factor}: [{levels}]
{knobs}workload:
  role: workload_command
  vars:
    argv: [{py}, -c, "import time; time.sleep({sleep}); print('value = 1', '{{{{ {factor} }}}}'){tail}"]
  metrics:
    score: {{regex: 'value = (?P<value>[0-9.]+)', unit: count, better: higher}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: sequential}}
"""
KNOB = """\
knobs:
  mode: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{knob}", knob_sysfs_root: "{root}"}}}}
"""


def write_spec(project, name, sleep=0, replicates=1):
    """A two-level knob campaign, a batch per level (``batch_live_knobs: false``: these
    tests fail a later batch); returns (spec path, knob file holding 'base')."""
    root = project.root / "knobs"
    root.mkdir(exist_ok=True)
    knob = root / "mode"
    knob.write_text("base\n")
    spec = project.write_spec(name, SPEC.format(name=name, factor="mode", levels="a, b",
                                                knobs=KNOB.format(knob=knob, root=root), py=sys.executable,
                                                sleep=sleep, replicates=replicates, tail="")
                               .replace("order: {strategy: sequential}",
                                        "order: {strategy: sequential, batch_live_knobs: false}"))
    return spec, knob


@pytest.fixture(scope="module")
def knob_campaign(tmp_path_factory):
    """One knob campaign for the two restore tests (their first batch is the same), left
    with its second batch pending: planned, then run once with a workload template that
    fails for the second batch's run only (:func:`test_a_template_error_in_a_later_batch_restores_the_host`
    checks that run), then the template is fixed. Returns what the tests read."""
    project = copy_project(tmp_path_factory.mktemp("knob_campaign"))
    spec, knob = write_spec(project, "restore_case")
    assert project.bmx("plan", str(spec)).returncode == 0
    exp = project.exp("restore_case")
    plan = read_csv(exp / "plan.csv")
    assert plan[-1]["mode"] == "b" and plan[0]["mode"] == "a"
    bad = plan[-1]["run_id"]
    good = spec.read_text()
    text = good.replace('''{{ mode }}')"]''',
                        f'''{{{{ mode }}}}')", "{{{{ (1 // 0) if run_id == '{bad}' else 1 }}}}"]''')
    assert text != good
    spec.write_text(text)
    res = project.bmx("run", str(spec), "--cores", "1")
    log = exp / "logs" / "batches" / f"{plan[-1]['batch']}.log"
    first = SimpleNamespace(res=res, knob=knob.read_text(), log=log.read_text() if log.is_file() else "")
    spec.write_text(good)
    return SimpleNamespace(project=project, spec=spec, knob=knob, exp=exp, plan=plan, bad=bad, first=first)


def test_a_template_error_in_a_later_batch_restores_the_host(knob_campaign):
    """13.9: the second batch's workload variables cannot be rendered for one run (a
    template that only fails at run time, for that run id) after the first batch set
    the knob: the batch job fails before any Ansible call of its own, and the host is
    put back all the same."""
    c = knob_campaign
    res = c.first.res
    assert res.returncode == 1, res.stdout + res.stderr
    assert c.bad in res.stderr and "ZeroDivisionError" in res.stderr, res.stderr
    assert c.first.knob.strip() == "base", "the host was left reconfigured"
    # At once, by the failing job itself (its host's later batches can never come),
    # not only when the whole workflow ends (the Snakefile's onerror).
    assert "benchmatrix: host localhost is back at its baseline (mode=base)" in c.first.log


def test_a_batch_job_that_dies_still_restores_its_host(knob_campaign):
    """13.9: an OSError in the batch job (here: a run's result directory cannot be made)
    after the knob changed: the job fails with one line naming the path, and the host
    is back at its baseline when bmx returns. (The campaign's first batch ran in
    :func:`knob_campaign`; its second batch runs here.)"""
    project, spec, knob, exp, plan = (knob_campaign.project, knob_campaign.spec, knob_campaign.knob,
                                      knob_campaign.exp, knob_campaign.plan)
    last = plan[-1]
    (exp / "runs").mkdir(parents=True, exist_ok=True)
    blocker = exp / "runs" / last["run_id"]
    assert not blocker.exists(), "the template's failed run left a directory"
    blocker.write_text("a file where the run's directory goes\n")

    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert str(blocker) in res.stderr, res.stderr
    assert knob.read_text().strip() == "base", "the host was left reconfigured"
    # The first batch's run is kept; the failed one is pending and runs once the path is fixed.
    assert (exp / "runs" / plan[0]["run_id"] / "1" / "record.json").is_file()
    blocker.unlink()
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert knob.read_text().strip() == "base"
    assert sorted(r["status"] for r in read_csv(exp / "runs.csv")) == ["ok", "ok"]


PLAIN_SPEC = """\
name: {name}
inventory: config/inventory/test.yml
factors:
  x: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [{py}, {script}, {pace}, "{{{{ x }}}}", "{out_bytes}"]
  metrics:
    score: {{regex: 'value = (?P<value>[0-9.]+)', unit: count, better: higher}}
  timeout: 60
replicates: {replicates}
warmup: 0
order: {{strategy: sequential}}
"""
# The workload of plain_spec's campaigns. The test paces it through the pace file,
# "SECONDS [FAST]": the first FAST runs of the campaign end at once, every later one
# ends once it has run SECONDS, read again every 50 ms, so that a test sets it to 0
# to end a run it held the moment it no longer needs it (no run waits out a sleep).
PACED = """\
import sys
import time
from pathlib import Path

pace, label, out_bytes = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
started = pace.with_suffix(".started")
with open(started, "a") as fh:
    fh.write(label + "\\n")
number = len(started.read_text().splitlines())
t0 = time.monotonic()
while True:
    seconds, _, fast = pace.read_text().partition(" ")
    if number <= int(fast or 0) or time.monotonic() - t0 >= float(seconds):
        break
    time.sleep(0.05)
print("value = 1", label)
print("y" * out_bytes)
"""


def pace_file(project, name) -> Path:
    """The file pacing the runs of :func:`plain_spec`'s campaign ``name`` (see PACED)."""
    return project.root / f"{name}.pace"


def set_pace(project, name, pace: str) -> None:
    """Pace the runs of campaign ``name`` from now on, the one under way too: "SECONDS [FAST]"."""
    atomic_write(pace_file(project, name), pace + "\n")  # never read half written


def plain_spec(project, name, pace, replicates, out_bytes=0):
    """A knob-less campaign: one batch of 2 x replicates runs paced by :func:`set_pace`
    (``pace``: the first pace), each printing ``out_bytes`` bytes more. :func:`assert_complete`
    sets the pace to 0, so that it finishes what a test cut short without waiting out
    the slow runs the test needed."""
    script = project.root / "paced.py"
    script.write_text(PACED)
    set_pace(project, name, pace)
    return project.write_spec(name, PLAIN_SPEC.format(name=name, py=sys.executable, script=script,
                                                      pace=pace_file(project, name), out_bytes=out_bytes,
                                                      replicates=replicates))


def wait_for(pred, timeout, what, proc=None):
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process ended early: {proc.stdout.read()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:  # it ended (and was reaped) between the two looks
        return False


def lock_text(project, name) -> str:
    path = project.exp(name) / ".bmx.lock"
    return path.read_text() if path.is_file() else ""


def snakemake_pid(project, name) -> int:
    return int(lock_text(project, name).rsplit("snakemake pid ", 1)[1])


def assert_complete(project, spec, name):
    """A last `bmx run` (of runs that no longer wait) succeeds and every planned run is
    ok exactly once."""
    if pace_file(project, name).is_file():
        set_pace(project, name, "0")
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    plan = read_csv(project.exp(name) / "plan.csv")
    runs = read_csv(project.exp(name) / "runs.csv")
    ok = sorted(r["run_id"] for r in runs if r["status"] == "ok")
    assert ok == sorted({p["run_id"] for p in plan if "-rr" not in p["run_id"]}), runs


def plain_snakemake(project, spec, timeout=300):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"spec={spec}"],
                          cwd=project.root, env=project.env(), capture_output=True, text=True, timeout=timeout)


def test_snakemake_beside_bmx_run_is_refused_and_overwrites_nothing(project):
    """13.7: `snakemake --config spec=...` takes the experiment lock like `bmx run`."""
    use_fake_port(project)
    spec = plain_spec(project, "both_ways", pace="50", replicates=2)  # bmx busy until the test is done
    first = project.popen_bmx("run", str(spec), "--cores", "1")
    try:
        wait_for(lambda: "snakemake pid" in lock_text(project, "both_ways"), 120, "bmx's lock", first)
        second = plain_snakemake(project, spec)
        assert second.returncode == 4, second.stdout + second.stderr
        msg = [ln for ln in second.stderr.splitlines() if ln.startswith("benchmatrix:")]
        assert len(msg) == 1 and "both_ways" in msg[0] and f"pid {first.pid}" in msg[0], second.stderr
        assert "run_batch" not in second.stdout + second.stderr.replace(msg[0], ""), "a job ran"
    finally:
        set_pace(project, "both_ways", "0")
        first.wait(timeout=300)
    assert first.returncode == 0, first.stdout.read()
    records = list(project.exp("both_ways").glob("runs/*/*/record.json"))
    assert len(records) == 4 and all(p.parent.name == "1" for p in records), "one attempt per run"
    assert all(r["status"] == "ok" for r in read_csv(project.exp("both_ways") / "runs.csv"))

    # The other way round: a plain snakemake holds it, bmx is refused naming it.
    spec2 = plain_spec(project, "both_ways2", pace="50", replicates=3)
    sm = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"spec={spec2}"],
                          cwd=project.root, env=project.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    try:
        wait_for(lambda: "(snakemake)" in lock_text(project, "both_ways2"), 120, "snakemake's lock", sm)
        res = project.bmx("run", str(spec2), "--cores", "1")
        assert res.returncode == 4 and res.stderr.count("\n") == 1, res.stderr
        assert f"pid {sm.pid} (snakemake)" in res.stderr
    finally:
        set_pace(project, "both_ways2", "0")
        sm.wait(timeout=300)
    assert sm.returncode == 0
    assert all(r["status"] == "ok" for r in read_csv(project.exp("both_ways2") / "runs.csv"))


def test_sigkill_of_bmx_stops_snakemake_and_the_runner_at_once(project):
    """13.6: Snakemake and its in-flight batch stop with bmx; the next run resumes, and
    every planned run is ok exactly once. While bmx runs, a second `bmx run` of the
    experiment is refused in one line naming it and bmx's pid; the lock dies with its
    holder."""
    use_fake_port(project)
    # One batch of 10 runs: the first ends at once, the second waits for the test.
    spec = plain_spec(project, "kill_bmx", pace="50 1", replicates=5)
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    wait_for(lambda: host_layout.finished(project.host_runs(), 1), 180, "the first run", proc)
    second = project.bmx("run", str(spec), "--cores", "1")
    assert second.returncode == 4, second.stdout + second.stderr
    assert f"pid {proc.pid}" in second.stderr and "kill_bmx" in second.stderr, second.stderr
    assert second.stderr.count("\n") == 1, second.stderr
    sm = snakemake_pid(project, "kill_bmx")
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not alive(sm), 45, "Snakemake to stop after its bmx died")
    runner = project.host_runs().parent / "runner.lock"
    wait_for(lambda: not subprocess.run(["fuser", str(runner)], capture_output=True).stdout.strip(), 10,
             "the batch runner to stop")
    assert time.monotonic() - t0 < 45
    done = len(host_layout.finished(project.host_runs(), 1))
    assert done < 10, "the runner went on with the batch"
    log = (project.exp("kill_bmx") / "logs" / "snakemake.log").read_text()
    assert f"bmx (pid {proc.pid}) is gone" in log
    # The lock died with its holder: the next bmx run is accepted.
    assert_complete(project, spec, "kill_bmx")
    for path in project.exp("kill_bmx").glob("runs/*/*/record.json"):
        json.loads(path.read_text())  # never truncated


def test_an_orphan_is_named_and_can_be_stopped(project):
    """13.6: a Snakemake that outlived its bmx (here: stopped, so it cannot notice) is named
    by the next `bmx run`, and `--stop-orphan` stops it and runs the campaign."""
    use_fake_port(project)
    spec = plain_spec(project, "orphan", pace="50 1", replicates=2)  # the second run waits for the test
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    wait_for(lambda: host_layout.finished(project.host_runs(), 1), 180, "the first run", proc)
    sm = snakemake_pid(project, "orphan")
    os.killpg(sm, signal.SIGSTOP)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        res = project.bmx("run", str(spec), "--cores", "1")
        assert res.returncode == 4 and res.stderr.count("\n") == 1, res.stderr
        assert f"pid {sm} (" in res.stderr and f"pid {proc.pid} which is gone" in res.stderr, res.stderr
        assert "--stop-orphan" in res.stderr
        set_pace(project, "orphan", "0")
        res = project.bmx("run", str(spec), "--cores", "1", "--stop-orphan")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"stopped the orphan holding orphan (pid {sm})" in res.stderr
        assert not alive(sm)
    finally:
        try:
            os.killpg(sm, signal.SIGCONT)
            os.killpg(sm, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert_complete(project, spec, "orphan")


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        out.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return out


def test_the_host_runner_stops_when_the_whole_controller_is_gone(project):
    """13.6: every controller process SIGKILLed at once (bmx, Snakemake, the batch job,
    ansible-playbook): only the runner is left on the host, and it stops before its next
    run once the controller's lease (runner_lease_seconds, 12 s here) is not renewed.
    Runs of 1.5 s: the lease runs out before the batch of 20 could end (30 s)."""
    cfg = project.root / "config" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("runner_lease_seconds: 300", "runner_lease_seconds: 12"))
    # Real Ansible: the processes killed include ansible-playbook.
    spec = plain_spec(project, "lease_case", pace="1.5", replicates=10)
    proc = project.popen_bmx("run", str(spec), "--cores", "1")
    wait_for(lambda: host_layout.finished(project.host_runs(), 1), 180, "the first run", proc)
    workdir = project.host_runs().parent
    wait_for(lambda: list((workdir / "batches").glob("*.lease")), 60, "the first lease renewal", proc)
    runner = int((workdir / "runner.pid").read_text())
    # The module, ansible-playbook, then bmx (its wave broker started the call; without a
    # broker: the job, Snakemake, bmx).
    chain = _ancestors(runner)[1:]
    assert proc.pid in chain, chain
    # The controller's processes: from the first ansible-playbook up to bmx (over SSH, the
    # module between it and the runner would live on the host and stay).
    first = next(i for i, p in enumerate(chain) if b"ansible-playbook" in Path(f"/proc/{p}/cmdline").read_bytes())
    controller = chain[first:chain.index(proc.pid) + 1]
    sm = snakemake_pid(project, "lease_case")
    assert sm != proc.pid and proc.pid in controller
    os.killpg(sm, signal.SIGSTOP)  # first freeze Snakemake and its jobs: nothing may stop the runner on purpose
    for pid in controller:
        os.kill(pid, signal.SIGKILL)
    os.killpg(sm, signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    wait_for(lambda: not alive(runner), 40, "the orphaned runner to stop")
    assert time.monotonic() - t0 < 12 + 3 + 10
    done = len(host_layout.finished(project.host_runs(), 1))
    assert done < 20, "the runner measured on without its controller"
    # Nothing of the runner is left to measure on: no process holds its lock.
    holders = subprocess.run(["fuser", str(workdir / "runner.lock")], capture_output=True, text=True).stdout
    assert not holders.strip(), holders
    assert len(host_layout.finished(project.host_runs(), 1)) == done
    assert_complete(project, spec, "lease_case")


@pytest.fixture
def tiny_results(project):
    """results/ on a 5 MiB tmpfs the test mounts (root only), unmounted in teardown."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = project.root / "results"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_stops_cleanly_names_the_path_and_resumes(project, tiny_results):
    """13.8: six runs of 1.5 MB output each cannot fit in a 5 MiB results directory.
    bmx says which path and how much space is left, stops, releases the lock, leaves
    no staging or partial run directory; after space is freed, nothing is lost."""
    use_fake_port(project)
    spec = plain_spec(project, "full_disk", pace="0", replicates=3, out_bytes=1500000)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    err = res.stderr
    assert "No space left on device" in err and str(tiny_results) in err and "MiB free" in err, err
    assert "job run_batch failed:  (" not in err, "an empty message"
    assert "Traceback" not in err
    exp = project.exp("full_disk")
    assert not any((exp / ".staging").glob("*")), "a staging directory was left behind"
    for run in (exp / "runs").glob("*/*"):
        assert (run / "record.json").is_file(), f"{run}: a partial run directory was left behind"
    assert not lock_text(project, "full_disk"), "the lock is still held"

    subprocess.run(["mount", "-o", "remount,size=64m", str(tiny_results)], check=True)
    assert_complete(project, spec, "full_disk")
    lines = (project.host_runs() / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6 and set(host_layout.results(project.host_runs())) == {
        (rid, 1) for rid in host_layout.finished(project.host_runs())}, "a run was measured twice or lost"
