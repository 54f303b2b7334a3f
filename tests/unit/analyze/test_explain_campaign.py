"""moved_with.csv from the real collect (tests/campaign_factory.py's synthetic results
grade): a campaign whose records hold counters beside the metric gets, for its decided
finding, the counter that moved with it and not the one that stayed (issue 37, item 1)."""

from __future__ import annotations

import pandas as pd

from benchmatrix import layout
from tests.campaign_factory import make_experiment

SPEC = """\
name: explained
description: a synthetic experiment whose device await grows with size
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
  compare: {factor: size, baseline: 1, by: []}
"""


def _means(factors, metric):
    size = int(factors["size"])
    return {"v": 100.0 * size, "disk_vda_read_await_ms": 0.5 * size, "cpu_busy_pct": 30.0}[metric]


def test_collect_writes_the_counter_that_moved_with_the_finding(tmp_path):
    made = make_experiment(tmp_path, SPEC, name="explained", means=_means, cv=0.03,
                           metrics={"v": "ms", "disk_vda_read_await_ms": "ms", "cpu_busy_pct": "%"})
    comparisons = pd.read_csv(made.exp / layout.COMPARISONS)
    assert comparisons["verdict"].tolist() == ["worse"]
    moved = pd.read_csv(made.exp / layout.MOVED_WITH)
    assert moved["counter"].tolist() == ["disk_vda_read_await_ms"]
    row = moved.iloc[0]
    assert row["comparison"] == 0 and row["metric"] == "v" and row["rank"] == 1
    assert 250 < row["rel_diff_pct"] < 350 and row["ci_low_adj_pct"] > 0
    assert row["text"].startswith("disk_vda_read_await_ms 0.5 → 2 ms (+")
