"""Headless Chromium for tests: find the binary, drive it over the DevTools protocol on a
pipe (``--remote-debugging-pipe``: JSON messages separated by NUL bytes on file
descriptors 3 and 4, so no extra Python package and no open port), and render a real,
self-contained report to open in it (``campaign``).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze.stats import summarize
from benchmatrix.plan.design import make_plan, plan_csv_text
from benchmatrix.report.render import render_report
from benchmatrix.spec.load import load_spec

SPEC = """\
name: readahead_scan
description: Sequential scan with read-ahead on and off, on contiguous and fragmented files
hosts: localhost
factors:
  layout: [contiguous, fragmented]
  read_ahead_kb: [0, 4096]
  bs: [8k, 64k, 256k]
knobs:
  layout: {role: knob_file_layout, cost: {class: restart, seconds: 120}}
  read_ahead_kb: {role: knob_read_ahead, cost: none}
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", size: 256m, runtime: 5, direct: 0}
replicates: 5
warmup: 1
order:
  strategy: random
  seed: 7
  control: {layout: contiguous, read_ahead_kb: 4096, bs: 64k}
  control_every: 2                # control runs go only where the host is in their setting: 12 here
report:
  metrics: [read_bw_kib, read_clat_p99_us]
  compare: {factor: read_ahead_kb, baseline: 0, by: [layout, bs]}
  tables:
    - {rows: bs, columns: layout, metric: read_bw_kib}
"""
UNITS = {"read_bw_kib": "KiB/s", "read_iops": "IO/s", "read_clat_p50_us": "µs",
         "read_clat_p99_us": "µs", "read_clat_mean_us": "µs"}


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: scripts/bootstrap.sh installs it")
    pytest.skip("chromium is not installed (scripts/bootstrap.sh installs it)")


def campaign(tmp_path: Path):
    """A finished campaign with a 6 % level shift in the control cell halfway."""
    spec_path = tmp_path / "readahead_scan.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    import io

    plan = pd.read_csv(io.StringIO(plan_csv_text(make_plan(spec, ["localhost"]), spec.factor_names)))
    rng = np.random.default_rng(3)
    runs = plan.copy()
    n = len(runs)
    start = pd.Timestamp("2025-03-01T10:00:00Z") + pd.to_timedelta(np.arange(n) * 7, unit="s")
    runs["started_at"] = [t.isoformat() for t in start]
    runs["ended_at"] = [(t + pd.Timedelta(seconds=5)).isoformat() for t in start]
    runs["duration_s"] = 5.0
    runs["status"] = "ok"
    runs["reason"] = ""
    bw = (25000 * runs["bs"].map({"8k": 1.0, "64k": 1.6, "256k": 2.0})
          * np.where(runs["read_ahead_kb"] == 4096, 4.0, 1.0)
          * np.where(np.arange(n) > n // 2, 0.94, 1.0) * rng.normal(1, 0.01, n))
    runs["read_bw_kib"] = bw
    runs["read_iops"] = bw / 8
    runs["read_clat_p50_us"] = 2e6 / bw * rng.normal(1, 0.02, n)
    runs["read_clat_mean_us"] = runs["read_clat_p50_us"] * 1.1
    runs["read_clat_p99_us"] = 8e6 / bw * rng.normal(1, 0.02, n)
    runs.loc[5, ["status", "reason"]] = ["failed", "exit status 1 (expected 0): fio: err=5"]
    runs.loc[5, list(UNITS)] = np.nan
    summary = summarize(runs, spec.factor_names, UNITS)
    out = tmp_path / "results"
    render_report(spec, plan, runs, summary, {"localhost": {"hostname": "bench1", "kernel": "6.1"}}, out)
    return out / "report.html"


def _high(fd: int) -> int:
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class DevTools:
    """A minimal DevTools-protocol client over Chromium's debugging pipe."""

    def __init__(self, binary: str, profile: Path):
        # Move the pipe ends above fd 10 first: dup2 onto 3 and 4 in the child must
        # not clobber one end with another, and dup2(fd, fd) would keep close-on-exec.
        to_chrome_r, self._to_chrome = (_high(fd) for fd in os.pipe())
        self._from_chrome, from_chrome_w = (_high(fd) for fd in os.pipe())

        def wire() -> None:
            # Chromium reads commands on fd 3 and writes replies and events on fd 4.
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
                "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--window-size=1280,1600", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=wire, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe: " + self.proc.stderr.read().decode()[-2000:])
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        for event in self.events:
            if event.get("method") == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def page_session(self) -> str:
        """A new tab with the network, runtime, log and page events on: its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        return session

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
