"""Rule ``collect`` declares every file collect writes, reports included, in one job.

Read from the rule file itself: an output Snakemake does not know about is neither
checked nor cleaned up, and a second job for the report would cost one more
Python and Snakemake job start per campaign (issue 15).
"""

from __future__ import annotations

import re
from pathlib import Path

from campaign_factory import make_experiment

from benchmatrix import layout
from benchmatrix.execute.collect import collect

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
    assert _outputs(rules["collect"]) == {*layout.COLLECTED, layout.REPORT_HTML, layout.REPORT_MD,
                                               layout.FINDINGS, layout.PLOTS_DIR}
    assert _directories(rules["collect"]) == {layout.PLOTS_DIR}
    assert "--no-render" not in rules["collect"]


def test_collect_declares_every_file_a_real_collect_writes(tmp_path):
    # What the rule must declare is what collect really writes, not a list kept beside
    # it: a synthetic campaign (tests/campaign_factory.py) collected without the
    # reports, its collected files removed, then the real collect with the reports.
    # Whatever appears at the top of results/NAME is collect's, and a file it writes
    # that the rule does not declare (moved_with.csv, findings.json were) fails here.
    made = make_experiment(tmp_path)
    planned = {layout.PLAN, layout.SPEC, layout.CAMPAIGN}
    for path in made.exp.iterdir():
        if path.is_file() and path.name not in planned:
            path.unlink()
    before = {p.name for p in made.exp.iterdir()}
    collect(str(made.spec_path), made.root, made.exp / layout.PLAN, render=True)
    written = {p.name for p in made.exp.iterdir()} - before
    declared = _outputs(_rules(RULES.read_text())["collect"])
    assert written == declared - before, (sorted(written), sorted(declared))
    assert {layout.MOVED_WITH, layout.FINDINGS} <= written
