"""Verdicts end to end: three campaigns of one experiment compared with ``bmx compare``,
``bmx history`` and ``bmx export`` as a user calls them.

The issue's case: a latency that triples between two campaigns (noise CV about 20 %, 3
runs a cell, 4 cells) was called "no difference" in every cell and ``bmx compare``
exited 0. The campaigns measure the same thing and are comparable: two unchanged
campaigns must give no better/worse and exit 0, and the 3x slower one must be worse in
every cell with exit 1. Their results are synthetic (tests/campaign_factory.py, seeded):
what is tested reads them. SPEC, whose level comes from a file outside the spec (as a
kernel or a SAN would change it) and whose lognormal noise is drawn from a seed that a
counter file advances run by run, runs for real in the gate and across-time tests.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from snapshot import matches_snapshot

pytestmark = pytest.mark.slow

SPEC = """\
name: verdicts
description: A latency whose level a file outside the spec sets (x3 in the slow campaign)
hosts: localhost
inventory: config/inventory/test.yml
factors:
  size: [1, 2, 3, 4]
workload:
  role: workload_command
  vars:
    argv:
      - python3
      - -c
      - >-
        import pathlib, random; c = pathlib.Path('{counter}'); k = int(c.read_text()) if c.exists() else 0;
        c.write_text(str(k + 1)); f = float(pathlib.Path('{factor}').read_text());
        print('lat=%.4f' % (100 * {{{{ size }}}} * f * random.Random(k).lognormvariate(0, 0.2)))
  metrics:
    lat: {{regex: 'lat=(?P<value>[0-9.]+)', unit: ms, better: lower}}
  timeout: 60
replicates: 3
warmup: 0
order: {{strategy: random, seed: 3}}
report:
  metrics: [lat]
"""


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """Campaigns ``a1`` and ``a2`` (level 1) compared with each other before ``slow``
    (level 3) is made; then ``a2`` vs ``slow``. Synthetic results of SPEC
    (tests/campaign_factory.py: bmx run's own writers and collect, CV 20 %): what these
    tests check is what reads them, bmx compare, history, export and the report; the
    spec's campaigns run for real in test_gate_against_e2e.py and test_across_time_e2e.py."""
    from datetime import datetime

    from campaign_factory import Campaign, make_experiment
    from conftest import Project

    root = tmp_path_factory.mktemp("verdicts") / "project"
    text = SPEC.format(factor=root / "factor", counter=root / "counter")

    def make(campaigns, seed, start, render=False):
        return make_experiment(root, text, campaigns, name="verdicts", seed=seed, cv=0.2, start=start,
                               means=lambda factors, metric: 100.0 * int(factors["size"]), render=render)

    made = make([Campaign(label="a1"), Campaign(label="a2")], 3, datetime.fromisoformat("2026-01-05T09:00:00+00:00"))
    project = Project(root)
    out = {"aa": project.bmx("compare", "a1", "a2", "--spec", str(made.spec_path))}
    make([Campaign(label="slow", shift=2.0)], 4, datetime.fromisoformat("2026-01-06T09:00:00+00:00"), render=True)
    # The history named, as --history auto would leave out a campaign of a busy host.
    out["slow"] = project.bmx("compare", "a2", "slow", "--spec", str(made.spec_path), *HISTORY)
    return project, made.spec_path, out


HISTORY = ("--history", "a1,a2")


def test_an_unchanged_pair_of_campaigns_gives_no_verdict_of_change_and_exit_0(campaigns):
    project, _, out = campaigns
    res = out["aa"]
    assert res.returncode == 0, res.stdout + res.stderr
    table = pd.read_csv(project.exp("verdicts") / "compare" / "a1_vs_a2" / "compare.csv")
    assert len(table) == 4 and not set(table["verdict"]) & {"better", "worse"}
    assert set(table["verdict"]) <= {"equivalent", "inconclusive"} and set(table["scale"]) == {"log"}
    # Only a1 besides a2: too few campaigns to estimate their variation; the prior alone.
    assert set(table["basis"]) == {"prior"} and "report.campaign_sd, alone" in res.stdout


def test_a_threefold_slowdown_is_worse_in_every_cell_and_exits_1(campaigns):
    project, _, out = campaigns
    res = out["slow"]
    assert res.returncode == 1, res.stdout + res.stderr
    table = pd.read_csv(project.exp("verdicts") / "compare" / "a2_vs_slow" / "compare.csv")
    assert table["verdict"].tolist() == ["worse"] * 4
    assert table["rel_diff_pct"].between(120, 350).all() and (table["ci_low_adj_pct"] > 0).all()
    assert (table["ci_low_pct"] > -100).all() and (table["detectable_pct"] > 0).all()
    # a1 and a2 measured the same thing: their estimate of the campaigns' variation is pooled with the prior.
    assert set(table["basis"]) == {"pooled"} and "pooled with 2 comparable campaigns" in res.stdout
    # The table, largest change first: every cell worse.
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("lat ")]
    assert len(rows) == 4 and all(r[-1] == "worse" and r[2] == "localhost" for r in rows), res.stdout
    changes = [float(r[7].rstrip("%")) for r in rows]
    assert changes == sorted(changes, reverse=True), res.stdout
    # The noise is random here: the snapshot masks the numbers. The host's load is this
    # machine's: a busy host or a load out of range is named or not.
    shown = "".join(line for line in res.stdout.splitlines(keepends=True)
                    if not line.startswith(("bmx: note: busy host", "bmx: environment on localhost: load_before")))
    assert matches_snapshot("compare_slow", re.sub(r"\d+(?:[.,]\d+)*", "N", shown), wide=True), res.stdout


def test_compare_json_has_every_row_and_colour_only_marks_the_verdicts(campaigns):
    from benchmatrix.report.terminal import compare_table

    project, spec, out = campaigns
    res = project.bmx("compare", "a2", "slow", "--spec", str(spec), "--json", *HISTORY)
    rows = json.loads(res.stdout)["rows"]
    # Whatever the verdicts (test_a_threefold_slowdown... asserts them), the same as the table's.
    assert res.returncode == out["slow"].returncode and len(rows) == 4 and {r["unit"] for r in rows} == {"ms"}
    assert [r["rel_diff_pct"] for r in rows] == sorted((r["rel_diff_pct"] for r in rows), reverse=True)
    plain = compare_table(rows, ["size"])
    assert "\033[" not in out["slow"].stdout and plain in out["slow"].stdout   # not a terminal: no colour
    coloured = compare_table(rows, ["size"], color=True)
    assert re.sub(r"\033\[\d+m", "", coloured) == plain
    colours = {"worse": "31", "better": "32", "inconclusive": "33"}   # the verdict only; equivalent stays plain
    for r in rows:
        if r["verdict"] in colours:
            assert f"\033[{colours[r['verdict']]}m{r['verdict']}\033[0m" in coloured, coloured


def test_history_lists_the_steps_as_text(campaigns):
    project, spec, _ = campaigns
    res = project.bmx("history", str(spec))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "history: 3 campaigns, oldest first: a1, a2, slow", res.stdout
    # Three campaigns barely test a step: detected (a table) or not, every series is counted.
    assert lines[1] == "steps: none detected" or lines[1].startswith("steps ("), res.stdout
    steps = json.loads(project.bmx("history", str(spec), "--json").stdout)["steps"]
    assert len(steps) == 4 and {s["metric"] for s in steps} == {"lat"} and {s["unit"] for s in steps} == {"ms"}


def test_the_slow_campaigns_summary_and_report_stay_in_range_and_say_the_scale(campaigns):
    project, _, _ = campaigns
    exp = project.exp("verdicts")
    summary = pd.read_csv(exp / "summary.csv")
    assert (summary["ci_low"] > 0).all() and set(summary["ci_method"]) == {"cox"}
    md = (exp / "report.md").read_text()
    assert "positive metrics (lat: rates, times, sizes) the modified Cox interval" in md


def test_the_bencher_export_of_a_positive_metric_has_no_negative_bound(campaigns):
    import json

    project, spec, _ = campaigns
    res = project.bmx("export", str(spec), "--format", "bmf", "--out", "-")
    assert res.returncode == 0, res.stderr
    measures = [m for cell in json.loads(res.stdout).values() for m in cell.values()]
    assert len(measures) == 4 and all(0 < m["lower_value"] < m["value"] < m["upper_value"] for m in measures)
