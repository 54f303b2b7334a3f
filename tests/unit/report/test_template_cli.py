"""``bmx report --templates DIR`` as a user runs it, on a synthetic campaign
(tests/campaign_factory.py): a hostile or misnamed user template is one line on
stderr naming the template, and the experiment's own files stay as they were
(issue 35, items 2 and 3)."""

from __future__ import annotations

import pytest
from campaign_factory import make_experiment

from benchmatrix import cli, layout


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_experiment(tmp_path_factory.mktemp("tplcli") / "project", seed=5, render=True)


def _report(made, monkeypatch, capsys, templates):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(made.root))
    monkeypatch.chdir(made.root)
    rc = cli.main(["report", str(made.spec_path), "--templates", str(templates)])
    return (rc, *capsys.readouterr())


@pytest.mark.parametrize(("name", "text", "said"), [
    ("report.md.j2", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "report.md.j2:1:"),
    ("plan.csv.j2", "seq\n", "a name the experiment owns"),
    ("notes.md.j2", "{% for i in range(10**7) %}{% for j in range(10**7) %}x{% endfor %}{% endfor %}",
     "notes.md.j2:1:"),
])
def test_a_hostile_or_misnamed_template_is_one_line_and_changes_nothing(made, monkeypatch, capsys, tmp_path,
                                                                         name, text, said):
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / name).write_text(text)
    owned = {f: (made.exp / f).read_bytes() for f in (layout.PLAN, layout.REPORT_MD, layout.RUNS)}
    rc, out, err = _report(made, monkeypatch, capsys, templates)
    assert rc != 0, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and said in lines[0] and str(templates / name) in lines[0], err
    assert "Traceback" not in err
    assert {f: (made.exp / f).read_bytes() for f in owned} == owned


def test_a_template_that_extends_the_builtin_report_renders(made, monkeypatch, capsys, tmp_path):
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "report.md.j2").write_text('{% extends "builtin/report.md.j2" %}')
    (templates / "summary.txt.j2").write_text("{{ name }}: {{ cells|length }} cells\n")
    rc, out, err = _report(made, monkeypatch, capsys, templates)
    assert rc == 0, out + err
    assert (made.exp / "summary.txt").read_text() == "synth: 2 cells\n"
