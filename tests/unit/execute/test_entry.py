"""The rule entry table: every scripts/TASK.py reaches its rule body through ``entry``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmatrix.execute.entry import TASKS, entry

ROOT = Path(__file__).resolve().parents[3]


def test_every_script_names_a_task_of_the_table():
    scripts = {p.stem: p.read_text() for p in (ROOT / "scripts").glob("*.py")}
    called = {name: re.search(r'entry\("(\w+)", sys\.argv\[1:\]\)', text) for name, text in scripts.items()}
    tasks = {name: m.group(1) for name, m in called.items() if m}
    assert tasks, "no script calls entry"
    assert all(name == task for name, task in tasks.items())
    assert set(tasks) == set(TASKS)


def test_unknown_task_exits_with_its_name():
    with pytest.raises(SystemExit, match="unknown task nope"):
        entry("nope", [])


def test_a_missing_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        entry("collect", ["--spec", "x.yaml"])
    assert exc.value.code == 2
    assert "--plan" in capsys.readouterr().err


def test_plan_task_writes_the_plan(tmp_path):
    project = tmp_path / "proj"
    (project / "config" / "inventory").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "inventory" / "local.yml", project / "config" / "inventory" / "local.yml")
    spec = project / "s.yaml"
    spec.write_text("name: entry_t\nfactors: {a: [1, 2]}\n"
                    "workload: {role: workload_command, vars: {argv: [echo, '{{ a }}']}}\n")
    out = project / "results" / "entry_t" / "plan.csv"
    assert entry("plan", ["--spec", str(spec), "--project-dir", str(project), "--out", str(out)]) == 0
    header, *rows = out.read_text().splitlines()
    assert header.startswith("seq,host,run_id,cell_id")
    assert len(rows) == 2 * 3  # two cells x three replicates (the default), no warm-ups


def test_a_task_error_is_one_line_and_exit_1(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert entry("collect", ["--spec", str(missing), "--project-dir", str(tmp_path), "--plan", "p.csv"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("benchmatrix: ") and "missing.yaml" in err[0]
