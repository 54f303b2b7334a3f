"""The CI gate end to end (issue 33, item 5): ``bmx run SPEC --campaign B --until-decided
--against A`` on real campaigns of a command workload (real Snakemake and batch runner,
the fake Ansible port: tests/fake_ansible.py).

Campaign A measures a latency whose level a file outside the spec sets (as the code under
test would); B runs after the level rose 20 %, a change the first round of B cannot tell
from the noise (CV 10 %, 8 runs a cell). The gate adds rounds to B's cell until its
comparison with A is decided, says ``worse`` and exits 1. The noise is drawn from a seed
that a counter file outside the spec advances run by run, so every run of the test sees
the same draws. The refusals (no ``--until-decided``, an unknown A, A = B, an A that
measured something else) cost no run and share the experiment.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytestmark = pytest.mark.slow


def _gate_spec() -> str:
    """test_verdicts_e2e's experiment (its level from a file, its noise seeded by a counter),
    renamed, one cell of 8 runs at CV 10 %, campaigns said to move by 1 %."""
    from test_verdicts_e2e import SPEC as VERDICTS

    edits = {"name: verdicts\n": "name: gate\n", "(x3 in the slow campaign)": "(20 % up in campaign b)",
             "size: [1, 2, 3, 4]": "size: [1]",
             "lognormvariate(0, 0.2)": "lognormvariate(0, 0.1)", "replicates: 3\n": "replicates: 8\n",
             "  metrics: [lat]\n": "  metrics: [lat]\n  campaign_sd: 1%\n"}
    text = VERDICTS
    for old, new in edits.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


SPEC = _gate_spec()


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """Campaign ``a`` at level 1, then the gate run of ``b`` at level 1.2 against it."""
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("gate")))
    factor = project.root / "factor"
    spec = project.write_spec("gate", SPEC.format(factor=factor, counter=project.root / "counter"))
    factor.write_text("1")
    res = project.bmx("run", str(spec), "--cores", "1", "--campaign", "a")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    factor.write_text("1.2")
    res = project.bmx("run", str(spec), "--cores", "1", "--campaign", "b", "--until-decided", "--against", "a")
    return project, spec, res


def test_the_gate_adds_rounds_to_b_until_its_cell_is_decided_worse_and_exits_1(gate):
    project, _, res = gate
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    runs = pd.read_csv(project.exp("gate") / "runs.csv")
    ok = int((runs["status"] == "ok").sum())
    assert ok > 8, res.stdout  # at least one round beyond the first 8 runs
    assert "round 1 adds runs to 1 cell(s)" in res.stdout and "against " in res.stdout
    # The verdicts are said as bmx compare says them, at the gate's level (8, 16, 30 runs:
    # the exact constant level of 3 looks).
    assert "bmx: gate: b against a, judged at 0.02101 (alpha 0.05 held exactly over 3 looks)" in res.stdout, \
        res.stdout
    assert "bmx: 1 worse" in res.stdout
    table = pd.read_csv(project.exp("gate") / "compare" / "a_vs_b" / "compare.csv")
    assert table["verdict"].tolist() == ["worse"] and table["n_b"].tolist() == [ok]
    assert (table["ci_low_adj_pct"] > 0).all() and set(table["basis"]) == {"prior"}
    meta = json.loads((project.exp("gate") / "campaign.json").read_text())
    assert meta["until_decided"]["max"] == 30 and meta["against"] != meta["id"]
    assert meta["until_decided"]["levels"] == "exact" and meta["until_decided"]["growth"] == 2.0


def test_the_gate_is_refused_in_one_line_before_anything_runs(gate):
    project, spec, _ = gate
    runs_before = (project.exp("gate") / "runs.csv").read_text()

    def refused(*args: str, code: int = 2) -> str:
        res = project.bmx("run", str(spec), "--cores", "1", *args)
        assert res.returncode == code, res.stdout + res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        return lines[0]

    assert "--against a needs --until-decided" in refused("--against", "a")
    assert "--against nosuch:" in refused("--until-decided", "--against", "nosuch")
    # b is the campaign this run would add to: A = B.
    assert "the campaign this run adds runs to (B)" in refused("--until-decided", "--against", "b")
    # A spec that measures something else (another workload variable) cannot gate against a.
    other = project.write_spec("gate_other", spec.read_text().replace("lognormvariate(0, 0.1)",
                                                                      "lognormvariate(0, 0.2)"))
    res = project.bmx("run", str(other), "--until-decided", "--against", "a", "--campaign", "c")
    assert res.returncode == 3 and "not comparable" in res.stderr and "workload.vars" in res.stderr, res.stderr
    assert (project.exp("gate") / "runs.csv").read_text() == runs_before
