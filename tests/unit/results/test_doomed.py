"""A doomed campaign (issue 38, item 4): the rule over the failed attempts of a pass,
the normalised failure reasons, and the reasons printed once with their count."""

from __future__ import annotations

from benchmatrix.cli import _status_text
from benchmatrix.execute.supervise import done_lines
from benchmatrix.results.status import (
    DOOMED_CELLS,
    DOOMED_RUNS,
    doomed_reason,
    group_failures,
    same_reason,
)

MISSING = "could not start /opt/x/bin/nope: [Errno 2] No such file or directory: '/opt/x/bin/nope'"


def attempt(run, cell, reason=MISSING, status="failed"):
    return {"run_id": run, "cell_id": cell, "status": status, "reason": reason}


def test_the_rule_needs_enough_runs_over_enough_cells():
    assert DOOMED_RUNS == 5 and DOOMED_CELLS == 2
    four = [attempt(f"r{i}", f"c{i % 2}") for i in range(4)]
    assert doomed_reason(four) is None
    five = four + [attempt("r4", "c0")]
    assert doomed_reason(five) == MISSING
    one_cell = [attempt(f"r{i}", "c0") for i in range(8)]
    assert doomed_reason(one_cell) is None


def test_any_ok_run_or_a_second_reason_means_not_doomed():
    runs = [attempt(f"r{i}", f"c{i % 3}") for i in range(9)]
    assert doomed_reason(runs + [attempt("r9", "c1", "", "ok")]) is None
    assert doomed_reason(runs + [attempt("r9", "c1", "exit status 1: fio: out of memory")]) is None


def test_interrupted_attempts_are_not_failures_of_the_campaign():
    runs = [attempt(f"r{i}", f"c{i % 2}") for i in range(5)]
    assert doomed_reason(runs + [attempt("r9", "c1", "interrupted by Ctrl-C", "interrupted")]) == MISSING
    assert doomed_reason([attempt(f"r{i}", f"c{i % 2}", "x", "interrupted") for i in range(9)]) is None


def test_run_specific_numbers_ids_and_paths_do_not_make_reasons_differ():
    a = "timeout after 31.2 s: results/e/runs/c0a1b2-r3/1/stdout (pid 4711)"
    b = "timeout after 30.9 s: results/e/runs/c9f8e7-r12/2/stdout (pid 815)"
    assert same_reason(a, b)
    assert same_reason("exit status 1: /tmp/pytest-of-u/pytest-12/x/fio.dat",
                       "exit status 1: /tmp/pytest-of-u/pytest-13/x/fio.dat")
    assert not same_reason("exit status 1: Not a directory", "exit status 1: Permission denied")
    runs = [attempt(f"r{i}", f"c{i % 2}", f"exit status 1: run r{i} wrote /tmp/run-{i}/out") for i in range(5)]
    assert doomed_reason(runs) == runs[0]["reason"]


def test_group_failures_counts_each_reason_once_in_order_of_first_sight():
    failed = [attempt("r1", "c0", "exit status 1: Not a directory /x/1"),
              attempt("r2", "c1", "timeout after 3 s"),
              attempt("r3", "c1", "exit status 1: Not a directory /x/2"),
              attempt("r4", "c0", "exit status 1: Not a directory /x/3")]
    groups = group_failures(failed)
    assert [(g["first"]["run_id"], g["count"]) for g in groups] == [("r1", 3), ("r2", 1)]
    assert [r["run_id"] for r in groups[0]["runs"]] == ["r1", "r3", "r4"]


def status_of(n):
    failed = [{**attempt(f"run{i}", f"c{i % 2}"), "host": "h1", "attempt": 1, "log": ""} for i in range(n)]
    return {"totals": {"planned": n, "ok": 0, "pending": 0, "failed": n, "timeout": 0, "unreachable": 0,
                       "invalid": 0}, "cells": [], "failed": failed, "elapsed_s": 1.0, "remaining_s": None}


def test_bmx_run_summary_prints_a_repeated_reason_once_with_its_count():
    _, err = done_lines(status_of(30), 5.0, "s.yaml")
    reasons = [ln for ln in err if "No such file" in ln]
    assert len(reasons) == 1, err
    assert "30 runs" in reasons[0] and "run0" in reasons[0]
    _, err = done_lines(status_of(1), 5.0, "s.yaml")
    assert err[0] == f"bmx: failed: run0 (attempt 1): {MISSING}"


def test_bmx_status_prints_a_repeated_reason_once_with_its_count():
    text = _status_text("e", status_of(30), [])
    assert text.count("No such file") == 1, text
    assert "30 runs" in text
