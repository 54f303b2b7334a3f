"""Live knobs set by the batch runner between runs (issue 23): a batch carries runs of
several settings of `cost: none` knobs; before each run whose knob items differ from
the last applied values, the runner calls the knob backends (host/knobs.py, installed
beside it) in-process, writes the per-knob states into the run's result.json, and a
knob that missed its value makes the run `invalid` without running the workload.

The runner is driven as Ansible drives it (the manifest on stdin) on a scratch sysfs
tree, or in-process where a backend is made to miss its value."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import host_layout
import pytest

from benchmatrix.host import batch_runner

RUNNER = Path(batch_runner.__file__)
KNOBS = RUNNER.parent / "knobs.py"


def _item(factor: str, value, path: Path, cost: str = "none", role: str = "knob_sysfs") -> dict:
    return {"factor": factor, "role": role, "value": value, "cost": cost,
            "vars": {"knob_sysfs_path": str(path), "knob_sysfs_root": str(path.parent)}}


def _run(run_id: str, knobs: list[dict], show: Path) -> dict:
    # The workload prints the knob file as it finds it: the run really saw the value.
    return {"run_id": run_id, "attempt": 1, "seq": 1, "timeout": 30, "before_run": [], "knobs": knobs,
            "argv": [sys.executable, "-c", f"print(open({str(show)!r}).read().strip())"]}


def _manifest(workdir: Path, runs: list[dict], applied: list[dict], **extra) -> dict:
    return {"experiment": "t", "batch": "b1", "workdir": str(workdir), "host": "h1",
            "archive": str(workdir / "batches" / "b1.tar.gz"), "runs": runs, "knobs": applied, **extra}


def _start(runner: Path, manifest: dict) -> tuple[int, dict, str]:
    res = subprocess.run([sys.executable, str(runner), "-"], input=json.dumps(manifest),
                         capture_output=True, text=True, timeout=60)
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else {}, res.stderr


def _result(workdir: Path, run_id: str) -> dict:
    return host_layout.result(workdir, run_id)


def _stdout(workdir: Path, run_id: str) -> str:
    return host_layout.file(workdir, run_id, "stdout").read_text().strip()


def test_runner_sets_each_runs_live_knob_and_records_intended_and_actual(tmp_path):
    sysfs = tmp_path / "sys"
    sysfs.mkdir()
    knob = sysfs / "ra"
    knob.write_text("a\n")  # what Ansible set before the runner started
    a, b = _item("ra", "a", knob), _item("ra", "b", knob)
    runs = [_run("r1", [a], knob), _run("r2", [b], knob), _run("r3", [b], knob), _run("r4", [a], knob)]
    rc, summary, err = _start(RUNNER, _manifest(tmp_path / "w", runs, [a]))
    assert rc == 0, err
    assert summary["executed"] == ["r1", "r2", "r3", "r4"]
    w = tmp_path / "w"
    assert [_stdout(w, r) for r in ("r1", "r2", "r3", "r4")] == ["a", "b", "b", "a"]
    # r1 runs in Ansible's setting: the controller records the batch call's states for it.
    assert "knobs" not in _result(w, "r1")
    r2 = _result(w, "r2")["knobs"]["ra"]
    assert r2 == {**r2, "role": "knob_sysfs", "intended": "b", "actual": "b", "changed": True, "baseline": "a",
                  "rebooted": False, "ok": True}
    assert "run_settings" not in r2 and r2["seconds"] >= 0
    # Same setting as the run before: nothing set, the states carried on unchanged.
    r3 = _result(w, "r3")["knobs"]["ra"]
    assert r3["changed"] is False and r3["actual"] == "b" and r3["ok"] is True
    r4 = _result(w, "r4")["knobs"]["ra"]
    assert r4["changed"] is True and r4["intended"] == r4["actual"] == "a" and r4["baseline"] == "b"
    assert all(_result(w, r)["outcome"] == "exited" for r in ("r1", "r2", "r3", "r4"))


def test_a_refused_knob_makes_the_run_invalid_without_running_it_and_the_batch_goes_on(tmp_path):
    sysfs = tmp_path / "sys"
    sysfs.mkdir()
    knob = sysfs / "ra"
    knob.write_text("a\n")
    a = _item("ra", "a", knob)
    gone = _item("ra", "b", sysfs / "missing")  # the backend refuses it before any write
    runs = [_run("r1", [gone], knob), _run("r2", [a], knob)]
    rc, summary, err = _start(RUNNER, _manifest(tmp_path / "w", runs, [a]))
    assert rc == 0, err
    w = tmp_path / "w"
    bad = _result(w, "r1")
    assert bad["outcome"] == "invalid" and bad["exit_code"] is None and bad["started_at"] is None
    assert bad["error"].startswith("knob_sysfs: ") and "missing" in bad["error"], bad["error"]
    assert _stdout(w, "r1") == ""  # the workload never ran
    # After a refusal the host's state is unknown to the runner: the next run sets its knobs again.
    ok = _result(w, "r2")
    assert ok["outcome"] == "exited" and ok["knobs"]["ra"]["ok"] is True and _stdout(w, "r2") == "a"
    assert knob.read_text().strip() == "a"


def test_a_knob_that_reads_back_wrong_is_invalid_as_the_controller_phrases_it(tmp_path, monkeypatch):
    knobs_module = batch_runner._knob_backends()
    monkeypatch.setattr(knobs_module.Sysfs, "write", lambda self, value, state: None)  # the write does not stick
    knob = tmp_path / "ra"
    knob.write_text("a\n")
    a, b = _item("ra", "a", knob), _item("ra", "b", knob)
    live = batch_runner.LiveKnobs(_manifest(tmp_path / "w", [], [a]))
    run, knobs = live.prepare(_run("r1", [b], knob))
    assert knobs["error"] == "knob ra: intended 'b', actual 'a'"
    assert knobs["states"]["ra"]["ok"] is False
    result = batch_runner.execute(run, str(tmp_path / "w"), knobs=knobs)
    assert result["outcome"] == "invalid" and result["error"] == "knob ra: intended 'b', actual 'a'"
    assert result["knobs"]["ra"]["actual"] == "a" and result["exit_code"] is None


def test_a_costly_knob_is_never_changed_by_the_runner(tmp_path):
    sysfs = tmp_path / "sys"
    sysfs.mkdir()
    knob, live_knob = sysfs / "layout", sysfs / "ra"
    knob.write_text("a\n")
    live_knob.write_text("x\n")
    fixed = _item("layout", "a", knob, cost="restart")
    moved = _item("layout", "b", knob, cost="restart")
    ra_x, ra_y = _item("ra", "x", live_knob), _item("ra", "y", live_knob)
    runs = [_run("r1", [moved, ra_x], knob), _run("r2", [fixed, ra_y], knob)]
    rc, summary, err = _start(RUNNER, _manifest(tmp_path / "w", runs, [fixed, ra_x]))
    assert rc == 0, err
    w = tmp_path / "w"
    bad = _result(w, "r1")
    assert bad["outcome"] == "invalid"
    assert "knob layout (knob_sysfs, cost restart)" in bad["error"] and "cost none" in bad["error"]
    assert knob.read_text().strip() == "a"
    # A costly knob that stays is read back, never written, beside the live one that changes.
    good = _result(w, "r2")["knobs"]
    assert good["layout"] == {**good["layout"], "intended": "a", "actual": "a", "changed": False, "ok": True}
    assert good["ra"]["changed"] is True and live_knob.read_text() == "y"
    assert list(good) == ["layout", "ra"]  # in the items' order


def test_host_settings_win_over_the_knobs_vars_as_in_the_module(tmp_path):
    sysfs = tmp_path / "sys"
    sysfs.mkdir()
    spec_path, host_path = sysfs / "spec", sysfs / "host"
    spec_path.write_text("a\n")
    host_path.write_text("a\n")
    a, b = _item("ra", "a", spec_path), _item("ra", "b", spec_path)
    manifest = _manifest(tmp_path / "w", [_run("r1", [b], host_path)], [a],
                         knob_settings={"knob_sysfs_path": str(host_path)})
    rc, _, err = _start(RUNNER, manifest)
    assert rc == 0, err
    assert host_path.read_text() == "b" and spec_path.read_text() == "a\n"
    assert _stdout(tmp_path / "w", "r1") == "b"


def test_runs_without_knobs_never_load_the_backends(tmp_path):
    runner = tmp_path / "inst" / "batch_runner.py"
    runner.parent.mkdir()
    shutil.copyfile(RUNNER, runner)
    run = {"run_id": "r1", "attempt": 1, "seq": 1, "timeout": 30, "before_run": [],
           "argv": [sys.executable, "-c", "print('x')"]}
    rc, summary, err = _start(runner, _manifest(tmp_path / "w", [run], []))
    assert rc == 0 and summary["executed"] == ["r1"], err


def test_runner_without_its_knob_backends_records_the_run_invalid(tmp_path):
    runner = tmp_path / "inst" / "batch_runner.py"
    runner.parent.mkdir()
    shutil.copyfile(RUNNER, runner)  # knobs.py not installed beside it
    knob = tmp_path / "ra"
    knob.write_text("a\n")
    runs = [_run("r1", [_item("ra", "b", knob)], knob)]
    rc, _, err = _start(runner, _manifest(tmp_path / "w", runs, [_item("ra", "a", knob)]))
    assert rc == 0, err
    bad = _result(tmp_path / "w", "r1")
    assert bad["outcome"] == "invalid" and "knobs.py" in bad["error"] and "not installed" in bad["error"]


@pytest.mark.parametrize("installed", ["missing", "stale"])
def test_a_missing_or_stale_knobs_file_makes_the_runner_stale(tmp_path, installed):
    """The manifest's knobs_digest names the controller's knobs.py: the playbook
    installs both files again (exit 3, as for a stale runner)."""
    runner = tmp_path / "inst" / "batch_runner.py"
    runner.parent.mkdir()
    shutil.copyfile(RUNNER, runner)
    if installed == "stale":
        (runner.parent / "knobs.py").write_text("# an older copy\n")
    digest = batch_runner._file_digest(str(KNOBS))
    rc, _, err = _start(runner, _manifest(tmp_path / "w", [], [], knobs_digest=digest))
    assert rc == batch_runner.STALE_RUNNER_RC
    assert "knobs.py" in err
    shutil.copyfile(KNOBS, runner.parent / "knobs.py")
    rc, summary, err = _start(runner, _manifest(tmp_path / "w", [], [], knobs_digest=digest))
    assert rc == 0, err


def test_the_role_installs_knobs_py_beside_the_runner_and_hands_it_the_knobs():
    import yaml

    role = Path(__file__).resolve().parents[3] / "playbooks" / "roles" / "batch_runner"
    install = yaml.safe_load((role / "tasks" / "install.yml").read_text())[0]
    assert [i["name"] for i in install["loop"]] == ["batch_runner.py", "knobs.py"]
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert defaults["batch_runner_knobs_source"] == "{{ batch_runner_source | dirname }}/knobs.py"
    manifest = defaults["batch_runner_manifest"]
    assert {"knobs", "knob_settings", "knobs_digest", "host"} <= set(manifest)
    # The same file the controller digests and the runner imports.
    from benchmatrix.execute.prepare import RUNNER_KNOBS_PATH, runner_knobs_digest

    assert RUNNER_KNOBS_PATH == KNOBS and runner_knobs_digest() == batch_runner._file_digest(str(KNOBS))
    assert batch_runner._knobs_path() == str(KNOBS)


def test_a_live_knob_never_restarts_and_a_backend_surprise_fails_only_its_run(monkeypatch):
    """Between runs the runner forbids restarts whatever the host's *_allow_restart says,
    and an unexpected error of a backend becomes that run's refusal, not the batch's end."""
    seen = {}

    class Module:
        KnobError = RuntimeError

        @staticmethod
        def apply(items, settings, host, mode="apply", baseline_dir=""):
            seen.update(settings)
            raise ValueError("psql printed something unexpected")

    monkeypatch.setattr(batch_runner, "_knob_backends", lambda: Module)
    live = batch_runner.LiveKnobs({"knobs": [], "knob_settings": {"knob_postgresql_setting_allow_restart": True},
                                   "host": "h1"})
    item = {"factor": "wm", "role": "knob_postgresql_setting", "value": "64MB", "vars": {}, "cost": "none"}
    run, note = live.prepare({"run_id": "r1", "knobs": [item]})
    assert note == {"error": "bmx_knob on h1: ValueError: psql printed something unexpected"}
    assert seen["knob_postgresql_setting_allow_restart"] is False
