"""The spec ``bmx time 'cmd A' 'cmd B'`` writes (issue 38, item 3): a spec the user can keep
and extend, loaded by the package's own loader; the commands reach the host as data."""

from __future__ import annotations

import re

import pytest

from benchmatrix.errors import BenchmatrixError
from benchmatrix.spec.load import load_spec
from benchmatrix.spec.time_spec import TimeOptions, time_spec_name, time_spec_text
from benchmatrix.workloads import WORKLOADS, metric_names
from benchmatrix.workloads.command.argv import workload_command_argv


def written(tmp_path, commands, **options):
    path = tmp_path / "t.yaml"
    path.write_text(time_spec_text(commands, TimeOptions(**options)))
    return load_spec(path, metric_names=metric_names)


def test_two_commands_become_one_factor_compared_with_the_first_on_their_time(tmp_path):
    spec = written(tmp_path, ["sleep 0.05", "sleep 0.2"], replicates=3, warmup=0)
    assert spec.data["factors"] == {"command": ["sleep 0.05", "sleep 0.2"]}
    assert spec.data["replicates"] == 3 and spec.data["warmup"] == 0
    assert spec.workload["role"] == "workload_command" and not spec.workload.get("metrics")
    assert WORKLOADS["workload_command"].measure(spec.workload)
    assert spec.report.compare is not None
    assert (spec.report.compare.factor, spec.report.compare.baseline) == ("command", "sleep 0.05")
    assert spec.data["report"]["metrics"] == ["wall_s", "user_s", "system_s", "max_rss_kib"]
    assert spec.data["hosts"] == "localhost"


def test_the_commands_reach_the_host_as_arguments_without_a_shell(tmp_path):
    hostile = "echo '$(touch /tmp/x)' \"a b\" ; rm -rf /"
    spec = written(tmp_path, ["true", hostile])
    from benchmatrix.spec.load import render_vars

    runs = [{"run_id": "r", "vars": render_vars(spec.workload["vars"], cell.factors)} for cell in spec.cells]
    argvs = [command["argv"] for command in workload_command_argv(runs)]
    assert argvs == [["true"], ["echo", "$(touch /tmp/x)", "a b", ";", "rm", "-rf", "/"]]


def test_one_command_is_timed_without_a_comparison(tmp_path):
    spec = written(tmp_path, ["python3 -c pass"])
    assert spec.report.compare is None and len(spec.cells) == 1


def test_the_name_follows_the_commands_and_options_and_is_a_valid_experiment_name():
    a = time_spec_name(["sleep 0.05", "sleep 0.2"], TimeOptions(replicates=3, warmup=0))
    assert a == time_spec_name(["sleep 0.05", "sleep 0.2"], TimeOptions(replicates=3, warmup=0))
    assert a != time_spec_name(["sleep 0.05", "sleep 0.2"], TimeOptions(replicates=5, warmup=0))
    assert a != time_spec_name(["sleep 0.2", "sleep 0.05"], TimeOptions(replicates=3, warmup=0))
    assert a.startswith("time_")


@pytest.mark.parametrize("commands,message", [
    ([], "give at least one command"),
    (["true", "true"], "the command 'true' is given twice"),
    (["true", "echo 'open"], "command 2 .*cannot be split into arguments: No closing quotation"),
    (["  "], "command 1 is empty"),
])
def test_bad_commands_are_refused_in_one_line(commands, message):
    with pytest.raises(BenchmatrixError, match=message):
        time_spec_text(commands)


def test_bmx_time_says_whether_it_wrote_the_spec_or_found_it(in_project, capsys):
    from benchmatrix.cli import main

    # A missing inventory stops the run before anything runs: only the spec's part is exercised.
    call = ["time", "true", "--inventory", "config/inventory/missing.yml"]
    assert main(call) == 2
    first = capsys.readouterr()
    written = re.search(r"^bmx: wrote (config/experiments/time_[0-9a-f]{8}\.yaml) ", first.out, re.MULTILINE)
    assert written, first.out
    text = (in_project.root / written.group(1)).read_text()
    assert "inventory file not found" in first.err
    assert main(call) == 2
    second = capsys.readouterr()
    assert second.out.splitlines()[0] == (f"bmx: spec {written.group(1)} (written by an earlier bmx time; each call "
                                          "measures a new campaign)")
    assert (in_project.root / written.group(1)).read_text() == text
