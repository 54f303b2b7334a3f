"""bmx run / rerun, bmx check and bmx plan --detect show control and bidirectional
characters escaped (issue 35, item 8, follow-up of tests/unit/report/test_terminal_escapes.py).

A failure reason quotes the tool's output, a host name comes from the inventory, a
metric name from a pilot's runs.csv: an ESC there (``\\x1b[2J`` clears the screen) or a
U+202E (the rest of the line right to left) reached the terminal raw through the
lines ``bmx run`` prints when it ends, ``bmx check``'s table and lines, and the
``--detect`` table of ``bmx plan``.
"""

from __future__ import annotations

from benchmatrix.cli import _replicates_text
from benchmatrix.execute.check import HostCheck, check_lines
from benchmatrix.execute.supervise import done_lines, job_failed_line

EVIL = "x\x1b[2J\u202eevil\x07"
SHOWN = "x\\x1b[2J\\u202eevil\\x07"
RAW = ("\x1b", "\u202e", "\x07", "\u2066", "\x9b")


def assert_escaped(text: str) -> None:
    assert not any(ch in text for ch in RAW), repr(text)
    assert SHOWN in text, repr(text)


def test_run_end_escapes_failure_reasons_and_run_ids():
    status = {"totals": {"planned": 2, "ok": 1, "pending": 0, "failed": 1, "timeout": 0, "unreachable": 0,
                         "invalid": 0},
              "failed": [{"run_id": f"r{EVIL}", "attempt": 1, "host": f"h{EVIL}", "status": "failed",
                          "reason": f"exit status 1: tool says {EVIL}", "log": "runs/r1/1/stderr"}]}
    out, err = done_lines(status, 61.0, f"spec{EVIL}.yaml")
    assert out == ["bmx: done in 0:01:01: 1 of 2 runs ok, 1 failed, 0 pending"]
    text = "\n".join(err)
    assert_escaped(text)
    assert f"bmx: failed: r{SHOWN} (attempt 1): exit status 1: tool says {SHOWN}" in err
    assert f"retry with 'bmx rerun spec{SHOWN}.yaml --failed'" in text


def test_failed_job_line_escapes_the_tool_output_and_log():
    line = job_failed_line("batch", f"benchmatrix: host h{EVIL} unreachable", f"logs/{EVIL}.log")
    assert_escaped(line)
    assert line == f"bmx: job batch failed: benchmatrix: host h{SHOWN} unreachable (log: logs/{SHOWN}.log)"


def test_check_escapes_hosts_levels_notes_and_blockers():
    check = HostCheck(host=f"h{EVIL}", tool=f"fio-3.33{EVIL}",
                      knobs={"ra": {"role": "knob_read_ahead", "current": EVIL, "levels": {EVIL: "", "0": "no"}}},
                      blockers=[f"h{EVIL}: cell b={EVIL}: the workload's command fails: {EVIL}"],
                      dry_runs=[{"command": EVIL, "cells": ["c1"], "ok": False, "error": EVIL}],
                      storage=[{"path": f"/srv/{EVIL}", "note": f"on /dev/{EVIL} (ext4, mounted at /srv)"}],
                      warnings=[f"h{EVIL}: busy now: {EVIL}"])
    out, warnings, blockers = check_lines([check], {"ra": [EVIL, "0"]})
    text = "\n".join(out + warnings + blockers)
    assert_escaped(text)
    table = out[1]  # the header, then the knob's row
    assert table.startswith(f"h{SHOWN}  ra    knob_read_ahead  {SHOWN}  {SHOWN} ok, 0 BLOCKED"), out
    assert f"h{SHOWN}: workload tool fio-3.33{SHOWN}" in out
    assert f"h{SHOWN}: files in /srv/{SHOWN}: on /dev/{SHOWN} (ext4, mounted at /srv)" in out
    assert warnings == [f"bmx check warning: h{SHOWN}: busy now: {SHOWN}"]
    assert blockers == [f"bmx check: h{SHOWN}: cell b={SHOWN}: the workload's command fails: {SHOWN}"]


def test_plan_detect_table_escapes_metric_names_and_notes():
    metric = {"metric": f"lat{EVIL}", "scale": "log", "cells": 2, "sigma": 0.05, "median_sigma": 0.04,
              "max_sigma": 0.06, "needed": 7, "needed_at_median_sigma": 5, "needed_at_max_sigma": 9}
    rp = {"detect": 0.03, "alpha": 0.05, "power": 0.8, "detect_ratio": 0.97, "source": f"results/{EVIL}",
          "family": {"size": 2, "comparisons_per_metric": 1, "metrics": [f"lat{EVIL}", "tps"],
                     "metrics_source": "the pilot", "alpha_per_comparison": 0.025},
          "metrics": [metric], "cheap": {"needed": 7, "planned": 3}, "whole_plot": None,
          "notes": [f"metric lat{EVIL} has one cell"], "warnings": [f"warning: {EVIL}"]}
    text = _replicates_text(rp)
    assert_escaped(text)
    assert f"  lat{SHOWN}" in text
    assert f"(lat{SHOWN}, tps)" in text
