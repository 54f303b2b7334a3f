"""The batch runner's parts that knobs rely on: the affinity a workload really got
(knob_cpu_affinity's run setting cpus) and the fstrim before_run action."""

from __future__ import annotations

import os
import shutil
import sys

import host_layout
import pytest

from benchmatrix.host import batch_runner


def test_affinity_applied_is_read_back_from_the_workload(tmp_path):
    cpu = min(os.sched_getaffinity(0))
    run = {"run_id": "r1", "attempt": 1, "seq": 1, "timeout": 30, "before_run": [], "cpus": [cpu],
           "argv": [sys.executable, "-c", "import os, time; print(sorted(os.sched_getaffinity(0))); time.sleep(0.2)"]}
    result = batch_runner.execute(run, str(tmp_path))
    assert result["outcome"] == "exited" and result["exit_code"] == 0, result
    assert result["affinity"]["cpus"] == [cpu]
    assert result["affinity_applied"] == [cpu]
    stored = host_layout.result(tmp_path, "r1")
    assert stored["affinity_applied"] == [cpu]
    assert host_layout.file(tmp_path, "r1", "stdout").read_text().strip() == f"[{cpu}]"


def test_no_affinity_recorded_without_cpus(tmp_path):
    run = {"run_id": "r2", "attempt": 1, "timeout": 30, "before_run": [], "argv": [sys.executable, "-c", "pass"]}
    result = batch_runner.execute(run, str(tmp_path))
    assert "affinity" not in result and "affinity_applied" not in result


@pytest.mark.slow
def test_fstrim_is_run_and_recorded():
    if shutil.which("fstrim") is None:
        pytest.skip("fstrim (util-linux) is not installed")
    records, err = batch_runner._before_run(["fstrim"])
    assert err is None, records
    assert records[0]["action"] == "fstrim" and records[0]["seconds"] >= 0
    assert "output" in records[0]


def test_fstrim_failure_is_recorded(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no fstrim to run: the action fails, the run does not start
    records, err = batch_runner._before_run(["fstrim", "sync"])
    assert err and err.startswith("before_run fstrim failed") and len(records) == 1
    assert records[0]["error"]
