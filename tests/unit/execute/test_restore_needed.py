"""Rule restore_host runs only for a host that may have something to put back (issue 34,
item 4): a knob of the spec, or a workload whose finish.yml has work on that host. A
campaign without either has no restore job (a Python and a Snakemake job start less)
and no ``restored.json``; collect waits for the restores that do run.

``InputFunctions.restore_markers`` decides it once plan.csv exists, as in the workflow
(tests/unit/execute/test_batch_chain.py's stand-in for Snakemake's checkpoints).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from unit.execute.test_batch_chain import ROWS, PlanCheckpoint, write_plan
from unit.execute.test_restore_skip import SPEC

from benchmatrix.execute.snakefile import InputFunctions
from benchmatrix.spec.load import load_spec

# test_restore_skip's fio spec over every host of the inventory, and the same with workload_command.
FIO = SPEC.replace("name: rs_t", "name: exp").replace("hosts: nowhere", "hosts: all")
COMMAND = FIO[:FIO.index("  role: workload_fio")] + "  role: workload_command\n  vars: {argv: [/bin/true]}\n"
KNOB = COMMAND.replace("factors: {bs: [4k]}", "factors: {ra: [0, 128]}") + \
    "knobs: {ra: {role: knob_read_ahead, cost: none}}\n"
BOTH = ["results/exp/hosts/a/restored.json", "results/exp/hosts/b/restored.json"]


def _restores(tmp_path, monkeypatch, text: str, facts: dict[str, dict] | None = None) -> list[str]:
    monkeypatch.chdir(tmp_path)  # input functions run in the project directory
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    a: {}\n    b: {}\n")
    (tmp_path / "s.yaml").write_text(text)
    write_plan(tmp_path / "results", ROWS)
    for host, host_facts in (facts or {}).items():
        path = tmp_path / "results" / "exp" / "hosts" / host / "facts.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(host_facts))
    fn = InputFunctions(PlanCheckpoint(tmp_path / "results"), load_spec(tmp_path / "s.yaml"))
    return fn.restore_markers(SimpleNamespace(experiment="exp"))


def test_nothing_to_undo_means_no_restore_job(tmp_path, monkeypatch):
    assert _restores(tmp_path, monkeypatch, COMMAND) == []


def test_a_knob_restores_every_host(tmp_path, monkeypatch):
    assert _restores(tmp_path, monkeypatch, KNOB) == BOTH


@pytest.mark.parametrize(("facts", "expected"), [
    (None, BOTH),  # not prepared yet: its first batch may set up what finish.yml removes
    ({"a": {"workload_cleanup": False}, "b": {"workload_cleanup": True}}, BOTH[1:]),
    ({"a": {"workload_cleanup": False}, "b": {"workload_cleanup": False}}, []),
])
def test_a_workload_cleanup_restores_the_hosts_that_may_need_it(tmp_path, monkeypatch, facts, expected):
    assert _restores(tmp_path, monkeypatch, FIO, facts) == expected
