"""The batch runner times a run's process itself when the run asks (``measure``: a
workload_command without declared metrics): wall time, user and system CPU and peak
resident memory of the command alone, in the run's usage.json (issue 38, item 3).

Real child processes; no bound on how fast anything is, only what must hold."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import host_layout

from benchmatrix.host import batch_runner

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2:\n    pass\n"


def measured(tmp_path: Path, run_id: str, argv: list[str], **extra) -> tuple[dict, dict | None]:
    run = {"run_id": run_id, "attempt": 1, "seq": 1, "timeout": 60, "before_run": [], "argv": argv,
           "measure": True, **extra}
    result = batch_runner.execute(run, str(tmp_path))
    usage = host_layout.file(tmp_path, run_id, "usage.json")
    return result, json.loads(usage.read_text()) if usage.is_file() else None


def own_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_sleeping_command_gets_its_wall_time_cpu_and_peak_memory(tmp_path):
    result, usage = measured(tmp_path, "sleep", ["sleep", "0.3"])
    assert result["outcome"] == "exited" and result["exit_code"] == 0, result
    assert usage is not None, "no usage.json in the run's directory"
    assert usage["wall_s"] >= 0.3
    assert usage["user_s"] >= 0 and usage["system_s"] >= 0
    assert usage["max_rss_kib"] > 0
    assert result["usage"] == usage
    # The command alone: a child forked by this (large) test process would carry its
    # memory into the peak; the command's own is far below it.
    assert usage["max_rss_kib"] < own_rss_kib()


def test_a_cpu_burner_gets_user_cpu(tmp_path):
    result, usage = measured(tmp_path, "burn", [sys.executable, "-c", BURN])
    assert result["outcome"] == "exited" and result["exit_code"] == 0, result
    assert usage["user_s"] > 0
    assert usage["user_s"] + usage["system_s"] >= 0.2
    assert usage["wall_s"] > 0 and usage["max_rss_kib"] > 0


def test_the_exit_status_and_a_signal_are_the_commands_own(tmp_path):
    result, usage = measured(tmp_path, "exit3", ["sh", "-c", "exit 3"])
    assert result["outcome"] == "exited" and result["exit_code"] == 3, result
    assert usage is not None
    result, _ = measured(tmp_path, "killed", ["sh", "-c", "kill -9 $$"])
    assert result["exit_code"] == -signal.SIGKILL, result


def test_a_missing_program_fails_to_start_as_without_measuring(tmp_path):
    result, _ = measured(tmp_path, "missing", ["no-such-program-bmx"])
    plain = batch_runner.execute({"run_id": "plain", "attempt": 1, "timeout": 60, "before_run": [],
                                  "argv": ["no-such-program-bmx"]}, str(tmp_path))
    assert result["outcome"] == plain["outcome"] == "start_failed", result
    assert result["error"] == plain["error"] == "cannot start no-such-program-bmx: No such file or directory"


def test_a_timeout_ends_the_command_and_leaves_nothing_running(tmp_path):
    result, _ = measured(tmp_path, "slow", ["sleep", "30"], timeout=0.5)
    assert result["outcome"] == "timeout", result
    assert not [k for k in result["killed"] if k["signal"] == "SIGKILL"], result["killed"]


def test_a_run_that_does_not_ask_is_not_measured(tmp_path):
    result = batch_runner.execute({"run_id": "plain", "attempt": 1, "timeout": 60, "before_run": [],
                                   "argv": ["true"]}, str(tmp_path))
    assert result["outcome"] == "exited" and "usage" not in result
    assert not host_layout.file(tmp_path, "plain", "usage.json").exists()
