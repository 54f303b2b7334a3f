"""What bmx prints on a terminal shows control and bidirectional characters escaped
(issue 35, item 8).

A level, host name, campaign or failure reason holding ESC (``\\x1b[2J`` clears the
screen, ``\\x1b]...`` sets the title) or U+202E (the rest of the line shown right to
left) used to reach the terminal raw. Validation refuses such levels in new specs, but
levels also come from plan.csv and records of older versions, and reasons quote a
tool's output: every printed table and line escapes them (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

from benchmatrix.cli import _status_table, _status_text
from benchmatrix.report.terminal import compare_table, findings_text, history_text, text_table

EVIL = "x\x1b[2J\u202eevil\x07"
SHOWN = "x\\x1b[2J\\u202eevil\\x07"
RAW = ("\x1b", "\u202e", "\x07", "\u2066", "\x9b")


def assert_escaped(text: str, colour_codes: int = 0) -> None:
    assert text.count("\x1b") == colour_codes, repr(text)
    assert not any(ch in text for ch in RAW[1:]), repr(text)
    assert SHOWN in text, repr(text)


def test_text_table_escapes_cells_and_headers():
    out = text_table([f"h{EVIL}", "n"], [[EVIL, "1"], ["ok", "2"]])
    assert_escaped(out)
    assert "h" + SHOWN in out.splitlines()[0]


def test_coloured_table_keeps_only_its_own_colour_codes():
    out = text_table(["verdict"], [[EVIL]], keys=["worse"], color=True)
    assert_escaped(out, colour_codes=2)  # the verdict's colour on and off, nothing of the cell's


def test_findings_escape_sentences_warnings_and_paths():
    digest = {"configured": True, "total": 1, "counts": {"worse": 1},
              "findings": [{"sentence": f"level {EVIL} is worse", "verdict": "worse"}],
              "warnings": [{"check": "cv", "title": f"cell {EVIL}", "message": "m\u2066x\x9b"}],
              "report": {"html": f"results/{EVIL}/report.html", "md": "results/t/report.md"}}
    assert_escaped(findings_text(digest))
    assert_escaped(findings_text(digest, color=True), colour_codes=4)


def test_compare_table_escapes_levels_and_hosts():
    record = {"metric": "m", "unit": "ms", "cell_id": "c1", "host": EVIL, "mean_a": 1.0, "mean_b": 2.0,
              "rel_diff_pct": 100.0, "ci_low_adj_pct": 50.0, "ci_high_adj_pct": 150.0, "verdict": "worse", "b": EVIL}
    out = compare_table([record], ["b"])
    assert_escaped(out)
    assert f"b={SHOWN}" in out


def test_history_escapes_cells_and_campaigns():
    step = {"metric": "m", "cell": f"b={EVIL}", "step_campaign": "c2", "before": 1.0, "after": 2.0, "unit": "ms",
            "relative_pct": 100.0, "relative_low_pct": 50.0, "relative_high_pct": 150.0, "verdict": "worse",
            "detected": True}
    assert_escaped(history_text(["c1", EVIL], [step]))


def test_status_escapes_levels_hosts_and_reasons():
    cell = {"cell_id": "c1", "factors": {"b": EVIL}, "planned": 1, "ok": 0, "failed": 1, "timeout": 0,
            "unreachable": 0, "invalid": 0, "pending": 0, "reruns": 0}
    assert_escaped(_status_table({"cells": [cell]}, ["b"]))
    status = {"totals": {"planned": 1, "ok": 0, "pending": 0, "failed": 1, "timeout": 0, "unreachable": 0,
                         "invalid": 0},
              "cells": [cell], "elapsed_s": 3.0, "remaining_s": None,
              "failed": [{"run_id": "r1", "attempt": 1, "host": f"h{EVIL}", "status": "failed",
                          "reason": f"exit status 1: tool says {EVIL}", "log": f"runs/r1/1/{EVIL}.log"}]}
    text = _status_text("t", status, ["b"])
    assert_escaped(text)
    assert f"on h{SHOWN}: failed: exit status 1: tool says {SHOWN} (log: results/t/runs/r1/1/{SHOWN}.log)" in text
