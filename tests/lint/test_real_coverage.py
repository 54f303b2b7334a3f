"""No behaviour loses its only real test (issue 36): docs/contributing.md's "What runs for
real" names, for every playbook, knob backend and workload, a test that runs it with real
Ansible; checked here against the playbooks, the registries and the test files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from benchmatrix.host.knobs import BACKENDS
from benchmatrix.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (playbook|knob|workload|behaviour) \| `?([^|`]+?)`? \| `([^`]+)::(\w+)` \|$")
#: What makes a test use the fake Ansible port (tests/fake_ansible.py).
FAKE = ("use_fake_port(", "fake_port=True", "fake_run_playbook", "BMX_PLAYBOOK_PORT")
#: Runs each playbook real and fake by design (the last test here checks the real half).
CONTRACT = "tests/e2e/test_fake_port_contract.py"


def listed() -> list[tuple[str, str, str, str]]:
    """(kind, name, test file, test function) of each row of the section."""
    text = (ROOT / "docs" / "contributing.md").read_text()
    section = text.split("### What runs for real", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines() if line.startswith(("| playbook", "| knob",
                                                                                 "| workload", "| behaviour"))]
    assert all(rows), "a row of 'What runs for real' is not | kind | name | `FILE::TEST` |"
    return [m.groups() for m in rows]


def reached(function: str, functions: dict[str, ast.FunctionDef]) -> set[str]:
    """``function`` and the module's functions it reaches: the helpers it calls and the
    fixtures it takes, and theirs."""
    seen, todo = set(), [function]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        node = functions[name]
        todo += [a.arg for a in node.args.args]
        todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return seen


def test_every_playbook_knob_and_workload_is_listed():
    names = {(kind, name) for kind, name, _, _ in listed()}
    want = ({("playbook", p.name) for p in (ROOT / "playbooks").glob("*.yml")}
            | {("knob", role) for role in BACKENDS} | {("workload", role) for role in WORKLOADS})
    assert sorted(want - names) == [], "not in docs/contributing.md, 'What runs for real'"
    assert sorted({n for n in names if n[0] != "behaviour"} - want) == [], "listed, but no such thing"


def test_each_listed_test_exists_runs_for_real_and_names_what_it_covers():
    for kind, name, path, function in listed():
        file = ROOT / path
        assert file.is_file(), f"{path} (for {name}) does not exist"
        source = file.read_text()
        functions = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
        assert function in functions, f"{path} has no {function} (for {name})"
        body = "\n".join(ast.get_source_segment(source, functions[f]) or "" for f in reached(function, functions))
        assert path == CONTRACT or not any(f in body for f in FAKE), \
            f"{path}::{function} uses the fake Ansible port"
        if kind != "behaviour":
            assert name in source, f"{path} never names {name}"


def test_the_fake_ports_contract_test_runs_real_ansible_beside_it():
    # The contract test is listed for playbooks: it must call the real run_playbook too.
    source = (ROOT / CONTRACT).read_text()
    assert "from benchmatrix.execute.ansible import run_playbook" in source
    assert 'calls(tmp, "real", run_playbook)' in source
