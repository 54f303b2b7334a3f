"""bmx compare chooses its history and names the host state that changed (issue 33,
items 2 and 3), on synthetic campaigns (tests/campaign_factory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from campaign_factory import Campaign, make_experiment

from benchmatrix.campaigns.compare import compare_main
from benchmatrix.campaigns.store import list_campaigns


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    # Two campaigns at twice the level (a step since), one with another CPU governor,
    # then A and the one before it at the present level, and B: 30 % slower, with THP
    # switched to always and a host that was busy before its runs.
    made = make_experiment(tmp_path_factory.mktemp("hist"), campaigns=[
        Campaign(label="old1", shift=1.0), Campaign(label="old2", shift=1.0),
        Campaign(label="pow", host_env={"governor": "powersave"}), Campaign(label="new1"), Campaign(label="A"),
        Campaign(label="B", shift=0.3, host_env={"thp": "always"})], seed=7, cv=0.01)
    runs = pd.read_csv(made.exp / "runs.csv")
    runs["env_load_before"] = 6.0  # the factory draws 0-0.3: made busy here (2 CPUs)
    runs.to_csv(made.exp / "runs.csv", index=False)
    return made


def _json(made, capsys, history="auto"):
    code = compare_main("A", "B", made.root, str(made.spec_path), out=made.root / f"cmp_{history}", as_json=True,
                        history=history)
    return code, json.loads(capsys.readouterr().out)


def test_auto_history_leaves_out_the_other_side_of_a_step_and_another_host_state(made, capsys):
    code, out = _json(made, capsys)
    hist = out["history"]
    assert hist["rule"] == "auto"
    assert [c["name"] for c in hist["used"]] == ["new1", "A"]
    why = {c["name"]: c["why"] for c in hist["left_out"]}
    assert set(why) == {"old1", "old2", "pow"}
    assert "step" in why["old1"] and "step" in why["old2"]
    assert "governor" in why["pow"] and "powersave" in why["pow"]
    assert any(n.startswith("history (auto") and "new1, A" in n for n in out["notes"])
    assert code == 1 and {r["verdict"] for r in out["rows"]} == {"worse"}


def test_host_state_changes_are_named_beside_the_verdicts_and_a_busy_host_in_one_line(made, capsys):
    _, out = _json(made, capsys)
    changed = {(d["what"], d["a"], d["b"]) for d in out["environment"]}
    assert ("thp", "madvise", "always") in changed
    assert any(w == "load_before" and b == "6" for w, _, b in changed)
    assert all("thp madvise -> always" in r["environment"] for r in out["rows"])
    assert len(out["busy"]) == 1 and "before B's runs" in out["busy"][0] and out["busy"][0] in out["notes"]
    md = (made.root / "cmp_auto" / "compare.md").read_text()
    assert "| thp | madvise | always |" in md and "busy host: localhost" in md and "new1, A" in md
    prov = pd.read_csv(made.root / "cmp_auto" / "provenance.csv")
    assert {"thp", "load_before"} <= set(prov["what"])


@pytest.mark.parametrize(("rule", "used"), [("none", []), (1, ["A"]), (["old1", "old2"], ["old1", "old2"])])
def test_history_overrides(made, capsys, rule, used):
    _, out = _json(made, capsys, rule)
    assert [c["name"] for c in out["history"]["used"]] == used
    if rule == "none":
        assert {r["basis"] for r in out["rows"]} == {"prior"}


def test_the_option_on_the_command_line(made):
    def bmx(*args):
        return subprocess.run([sys.executable, "-m", "benchmatrix.cli", "compare", "A", "B", "--spec",
                               str(made.spec_path), "--out", str(made.root / "cli"), *args], cwd=made.root,
                              capture_output=True, text=True, env={**os.environ, "BMX_PROJECT_DIR": str(made.root)})

    done = bmx("--history", "old1,new1", "--json")
    assert done.stdout, done.stderr
    assert [c["name"] for c in json.loads(done.stdout)["history"]["used"]] == ["old1", "new1"], done.stderr
    done = bmx("--history", "old1,nope")
    assert done.returncode == 2 and "--history: no campaign 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(list_campaigns(made.exp)) == 6
