"""Adaptive replication end to end: a real campaign of a command workload that stops
early where the data is clear and adds rounds where it is not (real Snakemake and batch
runner, the fake Ansible port: tests/fake_ansible.py).

Three comparisons of ``v=new`` against ``v=old``: ``clear`` (latency doubles, CV 5 %)
is decided after the first round, ``quiet`` (no change, CV 1 %) is futile at once (a
10 % change is ruled out), ``noisy`` (no change, CV 60 %) gets rounds of new replicates
until its cells reach ``max``. The noise is drawn from a seed that a counter file
outside the spec advances run by run, so every run of the test sees the same draws.
"""

from __future__ import annotations

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: adaptive
description: Stops early where the data is clear
hosts: localhost
inventory: config/inventory/test.yml
factors:
  v: [old, new]
  kind: [clear, quiet, noisy]
workload:
  role: workload_command
  vars:
    argv:
      - python3
      - -c
      - >-
        import pathlib, random; c = pathlib.Path('{counter}'); k = int(c.read_text()) if c.exists() else 0;
        c.write_text(str(k + 1)); s = {{'clear': 0.05, 'quiet': 0.01, 'noisy': 0.6}}['{{{{ kind }}}}'];
        f = 2.0 if '{{{{ v }}}}' == 'new' and '{{{{ kind }}}}' == 'clear' else 1.0;
        print('lat=%.5f' % (100 * f * random.Random(k).lognormvariate(0, s)))
  metrics:
    lat: {{regex: 'lat=(?P<value>[0-9.]+)', unit: ms, better: lower}}
  timeout: 60
replicates: {{min: 3, max: 8, until: decided}}
warmup: 0
order: {{strategy: random, seed: 4}}
report:
  metrics: [lat]
  compare: {{factor: v, baseline: old, by: [kind]}}
"""


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory):
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("adaptive")))
    spec = project.write_spec("adaptive", SPEC.format(counter=project.root / "counter"))
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return project, spec, res


def test_clear_comparisons_stop_after_the_first_round_and_the_unclear_one_gets_rounds(adaptive):
    project, _, res = adaptive
    runs = pd.read_csv(project.exp("adaptive") / "runs.csv")
    per_cell = runs[runs["status"] == "ok"].groupby(["kind", "v"]).size()
    assert per_cell.loc["clear"].tolist() == [3, 3] and per_cell.loc["quiet"].tolist() == [3, 3]
    assert per_cell.loc["noisy"].tolist() == [8, 8]                  # 3 -> 5 -> 8 = max
    assert "look 1: 1 decided, 1 futile, 1 running; round 1 adds runs to 2 cell(s)" in res.stdout
    assert "look 3: 1 decided, 1 futile, 1 max; replicates until decided: stopped" in res.stdout


def test_the_report_shows_the_rounds_and_why_each_comparison_stopped(adaptive):
    project, _, _ = adaptive
    exp = project.exp("adaptive")
    md = (exp / "report.md").read_text()
    rounds = md.split("### Replicates until decided")[1]
    assert "every verdict is judged at α / 3 = 0.01667" in rounds and "3 → 5 → 8" in rounds
    assert "This campaign: look 3, 28 measured runs (58 % of the 48" in rounds
    lines = {line.split("|")[3].strip(): line for line in rounds.splitlines() if line.startswith("| lat |")}
    assert "| worse | decided |" in lines["clear"] and "futile" in lines["quiet"]
    assert "| 8 |" in lines["noisy"] and "at max replicates" in lines["noisy"]
    comparisons = pd.read_csv(exp / "comparisons.csv").set_index("kind")
    assert comparisons.loc["clear", "verdict"] == "worse" and comparisons.loc["noisy", "n_level"] == 8
    # Every round was planned like a re-run round: in reruns.csv, with new run ids.
    reruns = pd.read_csv(exp / "reruns.csv")
    assert set(reruns["reason"]) == {"until_decided"} and reruns["run_id"].str.endswith(("-r4", "-r5", "-r6",
                                                                                          "-r7", "-r8")).all()


def test_a_budget_without_until_decided_is_one_line(adaptive):
    project, _, _ = adaptive
    spec = project.write_spec("fixed", SPEC.format(counter="c").replace("{min: 3, max: 8, until: decided}", "3")
                              .replace("name: adaptive", "name: fixed"))
    res = project.bmx("run", str(spec), "--budget", "1h")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--budget needs --until-decided" in res.stderr
