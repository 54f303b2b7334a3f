"""bmx compare lists the counters that moved between A and B beside each worse or better
row (issue 37, item 2): two synthetic campaigns (tests/campaign_factory.py) whose records
hold counters beside the metric; in B the metric and the device's await are 50 % higher
in one cell, the CPU counter is unchanged."""

from __future__ import annotations

import json

import pytest
from campaign_factory import Campaign, make_experiment

from benchmatrix.campaigns.compare import compare_main

SPEC = """\
name: cmp_explained
description: a synthetic experiment whose device await grows in B
inventory: config/inventory/test.yml
factors:
  size: [1, 4]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "print('v=%.4f' % (100 * {{ size }}))"]
  metrics:
    v: {regex: 'v=(?P<value>[0-9.]+)', unit: ms, better: lower}
  timeout: 60
replicates: 5
warmup: 0
order: {strategy: random, seed: 5}
report:
  metrics: [v]
"""
SLOWER = {"v": 0.5, "disk_vda_read_await_ms": 0.5}


def _means(factors, metric):
    return {"v": 100.0 * int(factors["size"]), "disk_vda_read_await_ms": 0.5, "cpu_busy_pct": 30.0}[metric]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_experiment(tmp_path_factory.mktemp("cmp"), SPEC, name="cmp_explained", means=_means, cv=0.02,
                           metrics={"v": "ms", "disk_vda_read_await_ms": "ms", "cpu_busy_pct": "%"},
                           campaigns=[Campaign(label="A"), Campaign(label="B", shift=SLOWER)])


def test_compare_names_the_counters_that_moved_beside_each_worse_row(made, capsys):
    out = made.root / "cmp"
    code = compare_main("A", "B", made.root, str(made.spec_path), out=out, as_json=True, history="none")
    assert code == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    worse = [r for r in rows if r["verdict"] == "worse"]
    assert worse and all(r["moved_with"].startswith("disk_vda_read_await_ms 0.5 → 0.75 ms (+") for r in worse)
    assert all("cpu_busy_pct" not in r["moved_with"] for r in rows)
    assert all(r["moved_with"] == "" for r in rows if r["verdict"] not in ("worse", "better"))
    csv = (out / "compare.csv").read_text()
    assert "moved_with" in csv.splitlines()[0] and "disk_vda_read_await_ms 0.5 → 0.75 ms" in csv
    md = (out / "compare.md").read_text()
    line = next(ln for ln in md.splitlines() if "| worse" in ln)
    assert "disk_vda_read_await_ms 0.5 → 0.75 ms" in line


def test_the_terminal_prints_the_counters_under_the_table(made, capsys):
    compare_main("A", "B", made.root, str(made.spec_path), out=made.root / "cmp_t", history="none")
    text = capsys.readouterr().out
    assert "moved with it" in text and "disk_vda_read_await_ms 0.5 → 0.75 ms" in text
    assert "caused" not in text
