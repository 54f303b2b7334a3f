"""Rule ``collect`` declares every file collect writes, reports included, in one job.

Read from the rule file itself: an output Snakemake does not know about is neither
checked nor cleaned up, and a second job for the report would cost one more
Python and Snakemake job start per campaign (issue 15).
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmatrix import layout

RULES = Path(__file__).resolve().parents[3] / "workflow" / "rules" / "report.smk"


def _rules(text: str) -> dict[str, str]:
    parts = re.split(r"^rule (\w+):\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _outputs(body: str) -> set[str]:
    block = body.split("    output:\n")[1].split("\n    log:")[0]
    return set(re.findall(r'"results/\{experiment\}/([^"]+)"', block))


def _directories(body: str) -> set[str]:
    block = body.split("    output:\n")[1].split("\n    log:")[0]
    return set(re.findall(r'directory\("results/\{experiment\}/([^"]+)"\)', block))


def test_collect_is_one_rule_that_declares_every_table_and_both_reports():
    rules = _rules(RULES.read_text())
    assert list(rules) == ["collect"]
    assert _outputs(rules["collect"]) == {*layout.COLLECTED, layout.REPORT_HTML, layout.REPORT_MD, layout.PLOTS_DIR}
    assert _directories(rules["collect"]) == {layout.PLOTS_DIR}
    assert "--no-render" not in rules["collect"]
