"""bmx compare lists the counters that moved between A and B beside each worse or better
row (issue 37, item 2): two synthetic campaigns (tests/campaign_factory.py) of
test_explain_campaign's experiment whose records hold counters beside the metric; in B the
metric and the device's await are 50 % higher, the CPU counter is unchanged."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from campaign_factory import Campaign, make_experiment
from unit.analyze.test_explain_campaign import SPEC, _means

from benchmatrix.analyze.explain import moved_between
from benchmatrix.campaigns.compare import compare_main

SLOWER = {"v": 0.5, "disk_vda_read_await_ms": 0.5}
#: The device's await in A, in each cell (test_explain_campaign's means: 0.5 ms x size), and in B.
AWAIT = r"disk_vda_read_await_ms (0\.5 → 0\.75|2 → 3) ms \(\+\d+ %\)"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_experiment(tmp_path_factory.mktemp("cmp"), SPEC, name="explained", means=_means, cv=0.02,
                           metrics={"v": "ms", "disk_vda_read_await_ms": "ms", "cpu_busy_pct": "%"},
                           campaigns=[Campaign(label="A"), Campaign(label="B", shift=SLOWER)])


def test_compare_names_the_counters_that_moved_beside_each_worse_row(made, capsys):
    out = made.root / "cmp"
    code = compare_main("A", "B", made.root, str(made.spec_path), out=out, as_json=True, history="none")
    assert code == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    worse = [r for r in rows if r["verdict"] == "worse"]
    assert len(worse) == 2 and all(re.fullmatch(AWAIT, r["moved_with"]) for r in worse), worse
    assert all("cpu_busy_pct" not in r["moved_with"] for r in rows)
    # A row that is not worse or better lists nothing, whatever its counters did.
    runs_a, runs_b = (pd.read_csv(made.campaign_dir(i) / "runs.csv") for i in (0, 1))
    undecided = pd.DataFrame(worse).assign(verdict="inconclusive")
    assert moved_between(runs_a, runs_b, undecided, units={"disk_vda_read_await_ms": "ms"}, alpha=0.05,
                         threshold=0.05) == ["", ""]
    assert re.fullmatch(AWAIT, moved_between(runs_a, runs_b, pd.DataFrame(worse[:1]), units={
        "disk_vda_read_await_ms": "ms"}, alpha=0.05, threshold=0.05)[0])
    csv = (out / "compare.csv").read_text()
    assert "moved_with" in csv.splitlines()[0] and re.search(AWAIT, csv)
    md = (out / "compare.md").read_text()
    line = next(ln for ln in md.splitlines() if "| worse" in ln)
    assert re.search(AWAIT, line), line


def test_the_terminal_prints_the_counters_under_the_table(made, capsys):
    compare_main("A", "B", made.root, str(made.spec_path), out=made.root / "cmp_t", history="none")
    text = capsys.readouterr().out
    assert "moved with it" in text and re.search(AWAIT, text)
    assert "caused" not in text
