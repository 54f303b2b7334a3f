"""What ``bmx run``, ``report``, ``validate`` and ``export`` print, on a real small
campaign (real Snakemake and batch runner, the fake Ansible port: tests/fake_ansible.py):
snapshot tests (``bmx compare`` and ``bmx history``: test_verdicts_e2e.py).

A command workload whose latency grows with ``size``, its noise a fixed sequence (a
counter file outside the spec), so every number is the same on every run of the test.
The snapshots (tests/snapshot.py) hold the output with paths and durations masked.
"""

from __future__ import annotations

import json
import re

import pytest
from snapshot import matches_snapshot

pytestmark = pytest.mark.slow

SPEC = """\
name: terminal
description: A latency growing with size; the noise a fixed sequence, the level set by a file outside the spec
hosts: localhost
inventory: config/inventory/test.yml
factors:
  size: [1, 2, 4]
workload:
  role: workload_command
  vars:
    argv:
      - python3
      - -c
      - >-
        import pathlib; c = pathlib.Path('{counter}'); k = int(c.read_text()) if c.exists() else 0;
        c.write_text(str(k + 1)); f = float(pathlib.Path('{factor}').read_text());
        print('lat=%.4f' % (400 * {{{{ size }}}} * f * (1 + 0.03 * ((k * 7) % 5 - 2))))
  metrics:
    lat: {{regex: 'lat=(?P<value>[0-9.]+)', unit: us, better: lower}}
  timeout: 60
replicates: 3
warmup: 0
order: {{strategy: random, seed: 5}}
report:
  metrics: [lat]
  compare: {{factor: size, baseline: 1}}
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """One campaign; ``bmx run``'s output kept."""
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("terminal")))
    factor = project.root / "factor"
    factor.write_text("1")
    spec = project.write_spec("terminal", SPEC.format(factor=factor, counter=project.root / "counter"))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return project, spec, res


def test_run_ends_with_the_findings_largest_first_the_warnings_and_the_reports_path(campaign):
    _, _, run = campaign
    text = run.stdout
    tail = text[text.index("findings"):]
    assert matches_snapshot("run_findings", _without_host_noise(tail)), tail
    changes = [float(m) for m in re.findall(r": \+([0-9.]+)% lat", tail)]
    assert len(changes) == 2 and changes == sorted(changes, reverse=True), tail


def _without_host_noise(text: str) -> str:
    """The output without the warnings of how busy or tuned this machine was while the
    test ran (host_busy, host_untuned: they depend on the machine, not on the code)."""
    return _recount("".join(line for line in text.splitlines(keepends=True)
                            if not line.startswith(("  host_busy:", "  host_untuned:"))))


def _recount(text: str) -> str:
    """``warnings (N):`` with N the warning lines left under it."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("warnings ("):
            n = 0
            for nxt in lines[i + 1:]:
                if not nxt.startswith("  "):
                    break
                n += 1
            lines[i] = f"warnings ({n}):\n"
    return "".join(lines)


def test_report_prints_the_same_and_its_json_has_every_finding(campaign):
    project, spec, run = campaign
    res = project.bmx("report", str(spec))
    assert res.returncode == 0, res.stderr
    run_tail = run.stdout[run.stdout.index("findings"):]
    assert res.stdout == run_tail
    digest = json.loads(project.bmx("report", str(spec), "--json").stdout)
    assert digest["counts"] == {"worse": 2} and [f["verdict"] for f in digest["findings"]] == ["worse"] * 2
    assert digest["report"]["html"].endswith("results/terminal/report.html")


def test_no_color_wins_over_a_terminal(monkeypatch):
    import io

    from benchmatrix.report.terminal import use_color

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert use_color(Tty()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty()) and use_color(Tty(), "always")


def test_validate_and_export_print_json_on_request(campaign, tmp_path):
    project, spec, _ = campaign
    res = project.bmx("validate", str(spec), "--json")
    assert json.loads(res.stdout) == {"spec": str(spec), "ok": True, "experiment": "terminal", "factors": 1,
                                      "cells": 3, "measured_runs_per_host": 9, "runs_per_host_with_warmups": 9,
                                      "warnings": []}
    out = tmp_path / "t.csv"
    res = project.bmx("export", str(spec), "--format", "csv", "--out", str(out), "--json")
    assert json.loads(res.stdout) == {"format": "csv", "path": str(out)} and out.is_file()


def test_run_json_is_one_document_on_stdout_and_the_progress_on_stderr(campaign):
    project, spec, _ = campaign
    res = project.bmx("run", str(spec), "--cores", "1", "--json")   # nothing left to run
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) == {"experiment", "exit_code", "elapsed_s", "totals", "failed", "findings"}
    assert data["totals"]["ok"] == 9 and data["failed"] == [] and data["findings"]["counts"] == {"worse": 2}
    assert "bmx: running terminal" in res.stderr
