"""Unknown roles, options and metric names get "did you mean" (issue 38, item 7): one
FILE:LINE error each, with the closest known name when one is close."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_spec_view import MINIMAL

from benchmatrix.errors import SpecErrors
from benchmatrix.spec.load import did_you_mean, load_spec, shipped_roles

ROOT = Path(__file__).resolve().parents[3]


def errors(tmp_path: Path, text: str, **kw) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecErrors) as info:
        load_spec(path, **kw)
    return str(info.value).splitlines()


def test_the_helper_offers_the_closest_name_or_nothing():
    assert did_you_mean("knob_sysct", ["knob_sysctl", "knob_sysfs"]) == "; did you mean 'knob_sysctl'?"
    assert did_you_mean("zzz", ["knob_sysctl", "knob_sysfs"]) == ""


def test_an_unknown_knob_role(tmp_path):
    lines = errors(tmp_path, MINIMAL + "knobs:\n  a: {role: knob_read_ahed}\n", roles=shipped_roles(ROOT / "x.yaml"))
    assert len(lines) == 1 and "unknown knob role 'knob_read_ahed'" in lines[0], lines
    assert lines[0].endswith("; did you mean 'knob_read_ahead'?"), lines


def test_an_unknown_workload_role(tmp_path):
    text = MINIMAL.replace("role: workload_command", "role: workload_fi")
    lines = errors(tmp_path, text, roles=shipped_roles(ROOT / "x.yaml"))
    assert any("unknown workload role 'workload_fi'" in ln and ln.endswith("did you mean 'workload_fio'?")
               for ln in lines), lines


def test_an_unknown_knob_variable(tmp_path):
    lines = errors(tmp_path, MINIMAL + "knobs:\n  a:\n    role: knob_read_ahead\n    vars:\n"
                             "      knob_read_ahead_devce: loop0\n")
    assert len(lines) == 1 and "has no variable 'knob_read_ahead_devce'" in lines[0], lines
    assert lines[0].endswith("; did you mean 'knob_read_ahead_device'?"), lines


def test_a_primary_metric_not_in_report_metrics(tmp_path):
    lines = errors(tmp_path, MINIMAL + "report:\n  metrics: [read_iops, read_bw_kib]\n  primary: [read_iop]\n")
    assert len(lines) == 1 and "report.primary names 'read_iop'" in lines[0], lines
    assert lines[0].endswith("; did you mean 'read_iops'?"), lines


def test_bmx_run_refuses_an_unknown_role_before_anything_runs(in_project, capsys):
    # Issue 38's trial: bmx validate named the typo, but bmx run ran every run into it.
    from benchmatrix.cli import main

    spec = in_project.root / "typo.yaml"
    spec.write_text(MINIMAL.replace("role: workload_command", "role: workload_comand"))
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "unknown workload role 'workload_comand'" in err and "did you mean 'workload_command'?" in err, err
    assert not (in_project.root / "results" / "t").exists()
