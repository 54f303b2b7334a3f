"""One rule for every name a user gives (issue 25 item 5).

Names become directories (``results/NAME/``), CSV columns, file names and lines of
tables: a trailing newline, a path separator, a leading dot, a control or
right-to-left override character, or an endless name must be refused where the
name enters (``bmx validate``, ``bmx run --campaign``), with one line.
"""

from __future__ import annotations

import json

import pytest
from test_spec import BASE, assert_one_error, write

from benchmatrix import cli
from benchmatrix.campaigns.store import campaigns_table, start_campaign
from benchmatrix.errors import BenchmatrixError
from benchmatrix.spec.load import load_spec

METRIC = "  metrics:\n    m: {regex: 'v=(?P<value>[0-9]+)', unit: x}\n  vars:"


@pytest.mark.parametrize("text, line, fragment", [
    (BASE.replace("name: t", 'name: "t\\n"'), 1, "experiment name 't\\n'"),
    (BASE.replace("name: t", 'name: "t\\u202e"'), 1, "experiment name 't\\u202e'"),
    (BASE.replace("  a: [1, 2]", '  "a\\n": [1, 2]').replace("{{ a }}", "x"), 3, "factor name 'a\\n'"),
    (BASE.replace("  vars:", METRIC.replace("    m:", '    "m\\n":')), 8, "metric name 'm\\n'"),
    (BASE + 'report:\n  metrics: ["m\\n"]\n', 10, "metric name 'm\\n'"),
    (BASE.replace("role: workload_command", 'role: "workload_command\\n"'), 6, "role 'workload_command\\n'"),
    (BASE + 'knobs:\n  a: {role: "knob_sysctl\\n", cost: none}\n', 10, "role 'knob_sysctl\\n'"),
])
def test_names_with_a_newline_or_bidi_character_are_refused(tmp_path, text, line, fragment):
    assert_one_error(write(tmp_path, text), line, fragment)


@pytest.mark.parametrize("value, line, fragment", [
    ("replicates: 017\n", 9, "'017' is read by YAML as the octal number 15"),
    ("warmup: 010\n", 9, "'010' is read by YAML as the octal number 8"),
    ("replicates: 1:30\n", 9, "'1:30' is read by YAML as the base-60 number 90"),
])
def test_numbers_yaml_reads_in_another_base_are_refused(tmp_path, value, line, fragment):
    assert_one_error(write(tmp_path, BASE + value), line, fragment)


def test_octal_looking_factor_level_is_refused_and_quoted_one_kept(tmp_path):
    assert_one_error(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, 0755]")), 3,
                     "'0755' is read by YAML as the octal number 493")
    spec = load_spec(write(tmp_path, BASE.replace("a: [1, 2]", "a: [1, '0755', 0]"), "ok.yaml"))
    assert spec.data["factors"]["a"] == [1, "0755", 0]


@pytest.mark.parametrize("label", [".", "..", "/", "a/b", "x\ny", "\u202eevil", "tab\there", "a\\b", ".hidden",
                                   "l" * 101, "\x00"])
def test_bad_campaign_labels_are_refused_before_anything_changes(tmp_path, label):
    spec = load_spec(write(tmp_path, BASE))
    exp = tmp_path / "results" / "t"
    exp.mkdir(parents=True)
    with pytest.raises(BenchmatrixError) as info:
        start_campaign(exp, spec, label)
    msg = str(info.value)
    assert msg.startswith("--campaign ") and "\n" not in msg and len(msg) < 300, msg
    assert list(exp.iterdir()) == []


def test_good_labels_pass():
    from benchmatrix.names import name_problem

    for label in ("kernel-6.6", "week 12", "vor Änderung", "2026-11-30_a"):
        assert name_problem(label, "label", 100) is None


def test_bmx_run_refuses_a_bad_label_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    path = write(tmp_path, BASE)
    assert cli.main(["run", str(path), "--campaign", ".."]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bmx: --campaign '..': "), err
    assert not (tmp_path / "results").exists()


def test_stored_label_with_control_characters_prints_on_one_line(tmp_path):
    rows = [{"current": True, "id": "abc", "label": "x\ny\u202e", "started_at": "", "ended_at": "", "hosts": [],
             "runs": {"planned": 0, "ok": 0, "failed": 0, "pending": 0}}]
    table = campaigns_table(rows)
    assert table.count("\n") == 1 and "\u202e" not in table and "x\\ny\\u202e" in table
    json.dumps(rows)  # --json keeps the label as stored (JSON escapes it)


def test_inventory_host_name_ending_in_a_newline_is_refused(tmp_path):
    from benchmatrix.errors import PlanError
    from benchmatrix.execute.hosts import resolve_hosts

    inventory = tmp_path / "inv.yml"
    inventory.write_text('all:\n  hosts:\n    "h1\\n":\n      ansible_connection: local\n')
    with pytest.raises(PlanError) as info:
        resolve_hosts(inventory, "all")
    assert "\n" not in str(info.value) and "host name 'h1\\n'" in str(info.value)


CONN = {"host": "h", "port": 5432, "user": "u", "database": "d"}


@pytest.mark.parametrize("call", [
    lambda: __import__("benchmatrix.workloads.fio.argv", fromlist=["x"]).fio_argv({"rw\n": "read"}),
    lambda: __import__("benchmatrix.workloads.command.argv", fromlist=["x"]).workload_command_argv(
        [{"run_id": "r1", "vars": {"argv": ["true"], "env": {"X\n": "1"}}}]),
    lambda: __import__("benchmatrix.workloads.sysbench.argv", fromlist=["x"])._options(
        {"run_id": "r1", "vars": {"options": {"threads\n": 1}}}),
    lambda: __import__("benchmatrix.workloads.pgbench.argv", fromlist=["x"]).pgbench_run(
        {"run_id": "r1", "vars": {"define": {"v\n": 1}}}, CONN, "pgbench", ".", ".", {}, 1),
    lambda: __import__("benchmatrix.workloads.pgbench.argv", fromlist=["x"]).pgbench_run(
        {"run_id": "r1", "vars": {"options": {"jobs\n": 1}}}, CONN, "pgbench", ".", ".", {}, 1),
])
def test_workload_option_and_variable_names_ending_in_a_newline_are_refused(call):
    from benchmatrix.errors import WorkloadVarsError

    with pytest.raises(WorkloadVarsError) as info:
        call()
    assert "\n" not in str(info.value) and "\\n'" in str(info.value), str(info.value)
