"""Ansible callback (aggregate) used only by bench/: one JSON line per playbook and task
event with a wall-clock timestamp, appended to $BMX_BENCH_TIMING_FILE.

Enabled by bench/_common.timing_env(); benchmatrix itself never loads it. It writes
a few short lines per task, which costs microseconds.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: bmx_bench_timing
    type: aggregate
    short_description: task timestamps for benchmatrix's benchmarks
    description: Appends one JSON line per playbook, play and task event to $BMX_BENCH_TIMING_FILE.
    requirements:
      - enable in configuration (ANSIBLE_CALLBACKS_ENABLED=bmx_bench_timing)
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bmx_bench_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._path = os.environ.get("BMX_BENCH_TIMING_FILE")
        self._playbook = ""

    def _emit(self, event: str, **fields: object) -> None:
        if not self._path:
            return
        with open(self._path, "a") as fh:
            fh.write(json.dumps({"t": time.time(), "pid": os.getpid(), "event": event,
                                 "playbook": self._playbook, **fields}) + "\n")

    def v2_playbook_on_start(self, playbook) -> None:
        self._playbook = os.path.basename(playbook._file_name)
        self._emit("playbook_start")

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._emit("task_start", task=task.get_name())

    def v2_runner_on_ok(self, result) -> None:
        # The result payloads a task published (set_stats keys): bench finds the end of a
        # phase by what was published, not by a task's name.
        published = sorted((result._result.get("ansible_stats") or {}).get("data") or {})
        self._emit("task_ok", task=result._task.get_name(), **({"published": published} if published else {}))

    def v2_runner_on_skipped(self, result) -> None:
        self._emit("task_skipped", task=result._task.get_name())

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._emit("task_failed", task=result._task.get_name())

    def v2_playbook_on_stats(self, stats) -> None:
        self._emit("playbook_end")
