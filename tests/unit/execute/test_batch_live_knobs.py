"""A batch of several live-knob settings (issue 23), controller side: each run's record
takes its knob states from the runner's result.json when present (intended vs actual
of that run, ``changed`` only where that run's apply changed something), an ``invalid``
outcome of the runner is the run's status with the runner's reason, and baseline.json
keeps the first-seen baselines.

No Ansible runs: ``run_playbook`` is replaced by a stand-in that does what
run_batch.yml does, with the real parts where it can: the knob call (the bmx_knob
module's apply, as tasks/knobs.yml calls it), workload_command's builder and the real
batch runner (a subprocess, the manifest on stdin) on a scratch sysfs tree."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmatrix.execute import batch as batch_rule
from benchmatrix.execute.ansible import PlaybookResult
from benchmatrix.host import batch_runner
from benchmatrix.plan.design import PlannedRun, plan_csv_text
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads.command.argv import workload_command_argv

KNOBS = batch_runner._knob_backends()
BATCH = "h1-b0001-00000000"

SPEC = """name: lk_t
hosts: h1
inventory: inv.yml
factors: {{ra: [a, b], lay: [x, y]}}
knobs:
  ra: {{role: knob_sysfs, cost: none, vars: {{knob_sysfs_path: "{sys}/ra", knob_sysfs_root: "{sys}"}}}}
  lay: {{role: knob_sysfs, cost: {{class: restart, seconds: 1}},
         vars: {{knob_sysfs_path: "{sys}/lay", knob_sysfs_root: "{sys}"}}}}
workload:
  role: workload_command
  vars: {{argv: ["{python}", -c, "print(open('{sys}/ra').read().strip())"]}}
"""


def fake_ansible(host_work: Path, calls: list):
    """run_playbook as run_batch.yml would answer it, on this machine."""
    def run_playbook(playbook, **kw):
        calls.append(playbook)
        assert playbook == "run_batch.yml", f"no {playbook} expected"
        data, extra, host = kw["data"], kw["extravars"], kw["host"]
        run_playbook.prepared.append(bool(extra.get("bmx_prepare")))
        states = KNOBS.apply(data["bmx_knobs"], {}, host)  # tasks/knobs.yml's one call
        run_settings = {f: s.pop("run_settings") for f, s in states.items()}
        commands = workload_command_argv(json.loads(data["bmx_runs"]))
        archive = host_work / "batches" / f"{extra['batch_runner_batch']}.tar.gz"
        manifest = {"experiment": "lk_t", "batch": extra["batch_runner_batch"], "workdir": str(host_work),
                    "archive": str(archive), "runs": commands, "host": host,
                    "runner_digest": extra["batch_runner_digest"], "knobs_digest": extra["batch_runner_knobs_digest"],
                    "run_settings": {k: v for s in run_settings.values() for k, v in s.items()},
                    "knobs": data["bmx_knobs"], "knob_settings": {}}
        res = subprocess.run([sys.executable, batch_runner.__file__, "-"], input=json.dumps(manifest),
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        # The host's first batch also prepares it (tasks/prepare.yml publishes its facts).
        facts = {"bmx_facts": {"gathered": False, "fingerprint": "", "state_files": [], "facts": {}}} \
            if extra.get("bmx_prepare") else {}
        return PlaybookResult(seconds=1.0, playbook=playbook, host=host,
                              payloads={host: {"bmx_knobs": states, **facts,
                                               "bmx_archive": {"in_place": True, "path": str(archive)}}})
    run_playbook.prepared = []  # per call: whether it was asked to prepare the host
    return run_playbook


@pytest.fixture
def project(tmp_path, monkeypatch):
    sysfs = tmp_path / "sys"
    sysfs.mkdir()
    (sysfs / "ra").write_text("base\n")
    (sysfs / "lay").write_text("x\n")
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n      ansible_connection: local\n")
    (tmp_path / "s.yaml").write_text(SPEC.format(sys=sysfs, python=sys.executable))
    calls: list = []
    monkeypatch.setattr(batch_rule, "run_playbook", fake_ansible(tmp_path / "hostwork", calls))
    return tmp_path, sysfs, calls


def _plan(tmp_path: Path, settings: list[tuple[str, str]]) -> Path:
    spec = load_spec(tmp_path / "s.yaml")
    cells = {(c.factors["ra"], c.factors["lay"]): c.cell_id for c in spec.cells}
    runs = [PlannedRun(seq=i, host="h1", run_id=f"r{i}", cell_id=cells[s], replicate=i, warmup=False,
                       control=False, visit=1, batch=BATCH, attempt=1, factors={"ra": s[0], "lay": s[1]})
            for i, s in enumerate(settings, start=1)]
    path = tmp_path / "results" / "lk_t" / "plan.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plan_csv_text(runs, spec.factor_names))
    return path


def _batch(tmp_path: Path, plan: Path) -> dict[str, dict]:
    exp = tmp_path / "results" / "lk_t"
    batch_rule.run_batch(str(tmp_path / "s.yaml"), tmp_path, plan, BATCH, exp / "batches" / f"{BATCH}.done",
                         tmp_path / "log")
    return {p.parent.parent.name: json.loads(p.read_text()) for p in (exp / "runs").glob("*/1/record.json")}


def test_the_hosts_first_batch_prepares_it_in_the_same_call(project):
    """No facts.json yet: the batch's one call also prepares the host, the job writes
    facts.json from its bmx_facts and every record carries them; the next batch of the
    host finds them and only runs."""
    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("b", "x")])
    records = _batch(tmp_path, plan)
    assert calls == ["run_batch.yml"] and batch_rule.run_playbook.prepared == [True]
    facts = json.loads((tmp_path / "results" / "lk_t" / "hosts" / "h1" / "facts.json").read_text())
    assert facts["inventory_name"] == "h1" and facts["facts_from"] == "cache", facts
    assert all(rec["host_facts"] == facts for rec in records.values()), records

    for p in (tmp_path / "results" / "lk_t" / "runs").glob("*/1/record.json"):
        p.unlink()  # the same batch again: its runs have no record, the host has its facts
    (tmp_path / "results" / "lk_t" / "batches" / f"{BATCH}.done").unlink()
    _batch(tmp_path, plan)
    assert batch_rule.run_playbook.prepared == [True, False]


def test_each_record_has_the_knob_states_of_its_own_run(project):
    tmp_path, sysfs, calls = project
    records = _batch(tmp_path, _plan(tmp_path, [("a", "x"), ("b", "x"), ("b", "x"), ("a", "x")]))
    assert calls == ["run_batch.yml"]  # one Ansible call for the four runs of two settings
    assert {r: rec["status"] for r, rec in records.items()} == dict.fromkeys(["r1", "r2", "r3", "r4"], "ok")
    ra = {r: records[r]["knobs"]["ra"] for r in records}
    # r1: the batch call set it (from the baseline); r2 and r4: the runner did; r3: nothing changed.
    assert [(ra[r]["intended"], ra[r]["actual"], ra[r]["changed"]) for r in ("r1", "r2", "r3", "r4")] == [
        ("a", "a", True), ("b", "b", True), ("b", "b", False), ("a", "a", True)]
    assert all(ra[r]["ok"] for r in ra)
    # The costly knob is the batch's throughout, never changed by a run.
    assert all(records[r]["knobs"]["lay"]["changed"] is False and records[r]["knobs"]["lay"]["actual"] == "x"
               for r in records)
    # The run really saw its setting.
    outs = {r: (tmp_path / "results" / "lk_t" / "runs" / r / "1" / "stdout").read_text().strip() for r in records}
    assert outs == {"r1": "a", "r2": "b", "r3": "b", "r4": "a"}
    # The first-seen baseline is what the restore puts back, not a runner's "previous value".
    baseline = json.loads((tmp_path / "results" / "lk_t" / "hosts" / "h1" / "baseline.json").read_text())
    assert baseline["ra"]["value"] == "base" and baseline["lay"]["value"] == "x"


def test_a_run_the_runner_refused_is_recorded_invalid_with_its_reason(project):
    tmp_path, sysfs, calls = project
    # A costly knob changing inside a batch: the planner never does it, the runner refuses it.
    records = _batch(tmp_path, _plan(tmp_path, [("a", "x"), ("b", "y"), ("b", "x")]))
    assert records["r1"]["status"] == "ok" and records["r3"]["status"] == "ok"
    bad = records["r2"]
    assert bad["status"] == "invalid"
    assert bad["reason"].startswith("knob lay (knob_sysfs, cost restart) changes inside batch")
    assert bad["metrics"] == {} and bad["started_at"] is None
    assert bad["knobs"] == {}  # refused before any read: it claims no knob state
    assert (sysfs / "lay").read_text() == "x\n"
    assert records["r3"]["knobs"]["ra"] == {**records["r3"]["knobs"]["ra"], "intended": "b", "changed": True}


def test_baseline_keeps_first_seen_values_from_the_runs_states(tmp_path):
    from benchmatrix.execute.restore import save_baseline

    (tmp_path / "s.yaml").write_text(SPEC.format(sys=tmp_path, python=sys.executable))
    spec = load_spec(tmp_path / "s.yaml")
    exp = tmp_path / "exp"
    batch_rule.save_run_baselines(exp, "h1", spec, [{"knobs": {"ra": {"role": "knob_sysfs", "baseline": "base"}}},
                                                    {"knobs": {"ra": {"role": "knob_sysfs", "baseline": "a"}}}])
    save_baseline(exp, "h1", spec, {"ra": {"role": "knob_sysfs", "baseline": "later"}})
    baseline = json.loads((exp / "hosts" / "h1" / "baseline.json").read_text())
    assert baseline["ra"]["value"] == "base"


def test_a_knob_the_runner_missed_is_recorded_with_both_values():
    states = {"ra": {"role": "knob_sysfs", "intended": "b", "actual": "a", "changed": True, "ok": False}}
    res = {"outcome": "invalid", "error": "knob ra: intended 'b', actual 'a'", "knobs": states}
    assert batch_rule.run_knobs(res, {"ra": {"changed": True}}, first=True) == states
    from benchmatrix.results.judge import judge

    status, reason, metrics, _ = judge(None, res, "", Path("/nonexistent"), lambda *a: None)
    assert (status, reason, metrics) == ("invalid", "knob ra: intended 'b', actual 'a'", {})
    # The runner words a miss as the controller words a batch whose knob call missed.
    assert batch_runner.knob_miss(states) == "knob ra: intended 'b', actual 'a'"


def test_a_batch_whose_host_is_lost_mid_batch_keeps_the_baselines_for_the_restore(project, monkeypatch):
    """The host dies while the runner works through the settings: the playbook fails,
    but the knob states it published before the runner started still give baseline.json
    (a first batch would otherwise leave the restore nothing to put back)."""
    from benchmatrix.errors import HostUnreachableError

    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("b", "x")])

    def lost(playbook, **kw):
        calls.append(playbook)
        states = KNOBS.apply(kw["data"]["bmx_knobs"], {}, kw["host"])
        for state in states.values():
            state.pop("run_settings")
        (sysfs / "ra").write_text("b")  # the runner had set the next run's live knob
        exc = HostUnreachableError("unreachable: ssh: connection reset", host="h1", task="Run the batch")
        exc.payloads = {"h1": {"bmx_knobs": states}}
        raise exc

    monkeypatch.setattr(batch_rule, "run_playbook", lost)
    records = _batch(tmp_path, plan)
    assert {rec["status"] for rec in records.values()} == {"unreachable"}
    baseline = json.loads((tmp_path / "results" / "lk_t" / "hosts" / "h1" / "baseline.json").read_text())
    assert baseline["ra"]["value"] == "base" and baseline["lay"]["value"] == "x"


def test_a_failed_call_hands_on_the_payloads_published_before_it_failed():
    from benchmatrix.execute.ansible import published_before_failure

    state = {"role": "knob_sysfs", "intended": "a", "actual": "a", "changed": True, "baseline": "base",
             "rebooted": False, "seconds": 0.01, "ok": True}
    ok = {"event": "runner_on_ok", "event_data": {"host": "h1", "res": {
        "ansible_stats": {"data": {"bmx_knobs": {"ra": state}}, "per_host": True, "aggregate": False}}}}
    failed = {"event": "runner_on_unreachable", "event_data": {"host": "h1", "res": {"msg": "gone"}}}
    assert published_before_failure([ok, failed], "run_batch.yml") == {"h1": {"bmx_knobs": {"ra": state}}}
    bad = {"event": "runner_on_ok", "event_data": {"host": "h1", "res": {
        "ansible_stats": {"data": {"bmx_knobs": {"ra": {"role": "x"}}}, "per_host": True, "aggregate": False}}}}
    assert published_before_failure([bad, failed], "run_batch.yml") == {}


def test_an_interrupted_batch_saves_the_baselines_before_it_restores(project, monkeypatch):
    from benchmatrix.errors import Interrupted

    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("b", "x")])
    baseline = tmp_path / "results" / "lk_t" / "hosts" / "h1" / "baseline.json"
    seen = []

    def interrupted(playbook, **kw):
        states = KNOBS.apply(kw["data"]["bmx_knobs"], {}, kw["host"])
        for state in states.values():
            state.pop("run_settings")
        stop = Interrupted("host h1: playbook run_batch.yml interrupted")
        stop.payloads = {"h1": {"bmx_knobs": states}}
        raise stop

    monkeypatch.setattr(batch_rule, "run_playbook", interrupted)
    monkeypatch.setattr(batch_rule, "stop_runner", lambda *a: seen.append("stop"))
    monkeypatch.setattr(batch_rule, "restore_quietly",
                        lambda *a: seen.append(json.loads(baseline.read_text())["ra"]["value"]))
    with pytest.raises(Interrupted):
        _batch(tmp_path, plan)
    assert seen == ["stop", "base"]


def test_the_batch_call_only_reads_live_knobs_and_the_runner_sets_them_from_the_first_run(project):
    """With live knobs, the slice's Ansible call reads the cost-none knobs (their
    baselines) and sets only the costly ones: a live value the host refuses or misses
    makes only its runs invalid, even on the batch's first run."""
    tmp_path, sysfs, calls = project
    spec = load_spec(tmp_path / "s.yaml")
    items = {k["factor"]: k for k in batch_rule.batch_call_items(spec, {"ra": "a", "lay": "y"})}
    assert items["ra"]["live"] is True and "live" not in items["lay"]
    states = KNOBS.apply(list(items.values()), {}, "h1")
    assert (sysfs / "ra").read_text() == "base\n" and (sysfs / "lay").read_text().strip() == "y"
    assert states["ra"]["live"] is True and (states["ra"]["actual"], states["ra"]["changed"]) == ("base", False)
    assert states["ra"]["baseline"] == "base" and states["lay"]["changed"] is True
    off = dataclasses.replace(spec, data={**spec.data, "order": {**spec.order, "batch_live_knobs": False}})
    assert not any("live" in k for k in batch_rule.batch_call_items(off, {"ra": "a", "lay": "y"}))


def test_the_first_runs_record_keeps_the_calls_change_of_a_costly_knob():
    runner = {"lay": {"role": "knob_sysfs", "intended": "y", "actual": "y", "changed": False, "ok": True},
              "ra": {"role": "knob_sysfs", "intended": "a", "actual": "a", "changed": True, "ok": True}}
    call = {"lay": {"changed": True}, "ra": {"changed": False, "live": True}}
    first = batch_rule.run_knobs({"knobs": runner}, call, first=True)
    assert first["lay"]["changed"] is True and first["ra"]["changed"] is True
    later = batch_rule.run_knobs({"knobs": {**runner, "ra": {**runner["ra"], "changed": False}}}, call, first=False)
    assert later["lay"]["changed"] is False and later["ra"]["changed"] is False


def test_a_live_value_the_check_refuses_is_not_read_by_the_batch_call():
    """The batch call checks a live item too (no SQL or path built from what was not
    validated) but a refusal only marks it: the runner refuses its runs, the batch goes on."""
    item = {"factor": "ra", "role": "knob_read_ahead", "value": "lots", "cost": "none",
            "vars": {"knob_read_ahead_path": "/nonexistent/data"}}
    with pytest.raises(KNOBS.KnobError, match="'lots' is not a read-ahead in KiB"):
        KNOBS.apply([item], {}, "h1")
    state = KNOBS.apply([{**item, "live": True}], {}, "h1")["ra"]
    assert (state["ok"], state["live"], state["actual"], state["baseline"], state["changed"]) == (
        False, True, "", "", False)


#: The run task's result when its runner was SIGKILLed on the host (as ansible-core's
#: command module reports it; a hidden result fails the next task instead, HIDDEN_KILL).
PLAIN_KILL = {"event": "runner_on_failed", "event_data": {"host": "h1", "task": "Run the batch", "res": {
    "changed": True, "failed": True, "rc": -9, "msg": "non-zero return code", "stdout": "", "stderr": "",
    "cmd": ["python3", "/var/tmp/benchmatrix/batch_runner.py", "-"]}}}
HIDDEN_KILL = {"event": "runner_on_failed", "event_data": {
    "host": "h1", "task": "Report why the batch runner failed",
    "res": {"changed": False, "failed": True, "msg": "the batch runner on h1 was killed by signal 9"}}}


def runner_dies_after(finished: int, host_work: Path, calls: list, *, started: bool = True,
                      failed: dict = HIDDEN_KILL):
    """run_playbook as run_batch.yml and collect_batch.yml answer it when the batch runner
    dies on the host after ``finished`` runs (here: it is given only those), and as
    collect_batch.yml answers it (the real runner in collect mode). The run_batch.yml
    call fails as run_playbook makes the error of its ``failed`` event."""
    from types import SimpleNamespace

    from benchmatrix.execute.ansible import _failure

    def run_playbook(playbook, **kw):
        calls.append(playbook)
        data, extra, host = kw["data"], kw["extravars"], kw["host"]
        batch = extra["batch_runner_batch"]
        archive = host_work / "batches" / f"{batch}.tar.gz"
        manifest = {"experiment": "lk_t", "batch": batch, "workdir": str(host_work), "archive": str(archive),
                    "host": host, "knob_settings": {}}
        if playbook == "collect_batch.yml":
            res = subprocess.run([sys.executable, batch_runner.__file__, "-"], capture_output=True, text=True,
                                 input=json.dumps({**manifest, "runs": data["bmx_runs"], "collect_only": True}),
                                 timeout=60)
            assert res.returncode == 0, res.stderr
            return PlaybookResult(seconds=1.0, playbook=playbook, host=host,
                                  payloads={host: {"bmx_archive": {"in_place": True, "path": str(archive)}}})
        assert playbook == "run_batch.yml"
        states = KNOBS.apply(data["bmx_knobs"], {}, host)
        for state in states.values():
            state.pop("run_settings")
        if started:
            kw["on_started"]()
            commands = workload_command_argv(json.loads(data["bmx_runs"]))
            commands = (json.loads(commands) if isinstance(commands, str) else commands)[:finished]
            res = subprocess.run([sys.executable, batch_runner.__file__, "-"], capture_output=True, text=True,
                                 input=json.dumps({**manifest, "runs": commands, "knobs": data["bmx_knobs"]}),
                                 timeout=60)
            assert res.returncode == 0, res.stderr
            (host_work / "batches" / f"{batch}.tar.gz").unlink()  # a killed runner archives nothing
        exc = _failure([failed], SimpleNamespace(status="failed", rc=2), playbook, host,
                       host_work / "no-stdout", "")
        exc.payloads = {"h1": {"bmx_knobs": states}}
        raise exc
    return run_playbook


def test_the_runs_a_killed_runner_finished_are_taken_in_and_only_the_rest_fail(project, monkeypatch):
    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("a", "x"), ("b", "x")])
    monkeypatch.setattr(batch_rule, "run_playbook", runner_dies_after(2, tmp_path / "hostwork", calls))
    records = _batch(tmp_path, plan)
    assert calls == ["run_batch.yml", "collect_batch.yml"]
    assert {k: r["status"] for k, r in records.items()} == {"r1": "ok", "r2": "ok", "r3": "failed"}
    assert records["r1"]["knobs"]["ra"]["actual"] == "a" and records["r2"]["exit_code"] == 0
    assert "the batch runner on h1 was killed by signal 9 (SIGKILL)" in records["r3"]["reason"], records["r3"]
    assert not records["r3"].get("knobs")


def test_the_runs_of_a_runner_killed_by_a_signal_name_it(project, monkeypatch):
    """The run task's result not hidden: Ansible says only "non-zero return code"."""
    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("b", "x")])
    monkeypatch.setattr(batch_rule, "run_playbook",
                        runner_dies_after(1, tmp_path / "hostwork", calls, failed=PLAIN_KILL))
    records = _batch(tmp_path, plan)
    assert (records["r1"]["status"], records["r2"]["status"]) == ("ok", "failed")
    reason = records["r2"]["reason"]
    assert "task 'Run the batch' failed: the command was killed by signal 9 (SIGKILL)" in reason, reason
    assert "non-zero return code" not in reason and records["r2"]["failed_task"] == "Run the batch"


def test_a_call_that_failed_before_its_runner_started_collects_nothing(project, monkeypatch):
    tmp_path, sysfs, calls = project
    plan = _plan(tmp_path, [("a", "x"), ("b", "x")])
    monkeypatch.setattr(batch_rule, "run_playbook",
                        runner_dies_after(0, tmp_path / "hostwork", calls, started=False))
    records = _batch(tmp_path, plan)
    assert calls == ["run_batch.yml"]
    assert {r["status"] for r in records.values()} == {"failed"} and len(records) == 2
