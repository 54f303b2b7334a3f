"""User report templates (``report.template_dir``) render in a sandbox: no Python
internals, no file outside the template directory, bounded CPU time, memory, output
and recursion, and no output over a file the experiment owns; every refusal is one
line naming the template (issue 35, items 2 and 3)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from test_report import HOST_FACTS, UNITS, make_plan, make_runs

from benchmatrix import layout
from benchmatrix.analyze.stats import summarize
from benchmatrix.errors import BenchmatrixError
from benchmatrix.report import render as report
from benchmatrix.report import sandbox
from benchmatrix.report.render import render_report
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")


@pytest.fixture(scope="module")
def tables(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    return plan, runs, summarize(runs, spec.factor_names, UNITS)


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    # The templates are under test, not the plots: drawing them costs seconds a render.
    context = report.report_context
    monkeypatch.setattr(report, "report_context", lambda *a, **k: context(*a, **{**k, "with_plots": False}))


@pytest.fixture
def small_bounds(monkeypatch):
    """Bounds small enough for a test to reach them in a second or two."""
    monkeypatch.setattr(report, "TEMPLATE_CPU_SECONDS", 1)
    monkeypatch.setattr(report, "TEMPLATE_MEMORY_MB", 256)
    monkeypatch.setattr(report, "TEMPLATE_OUTPUT_MB", 8)


def user_dir(tmp_path: Path, **templates: str) -> Path:
    """A template directory holding ``NAME.j2`` files (keyword ``a_b`` is file ``a.b.j2``)."""
    tdir = tmp_path / "templates"
    tdir.mkdir(exist_ok=True)
    for name, text in templates.items():
        (tdir / (name.replace("_", ".") + ".j2")).write_text(text)
    return tdir


def refused(spec, tables, tmp_path, tdir: Path) -> str:
    """The one-line error of rendering with ``tdir``; nothing may be written."""
    out = tmp_path / "out"
    plan, runs, summary = tables
    with pytest.raises(BenchmatrixError) as caught:
        render_report(spec, plan, runs, summary, HOST_FACTS, out, template_dir=tdir)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message, message
    assert not (out / layout.REPORT_MD).exists() and not (out / layout.REPORT_HTML).exists()
    return message


@pytest.mark.parametrize("expression", [
    "cycler.__init__.__globals__.os.popen('touch {marker}').read()",
    "''.__class__.__mro__[1].__subclasses__()",
    "self._TemplateReference__context.environment.__class__",
    "lipsum.__globals__['os'].system('touch {marker}')",
])
def test_python_internals_are_refused(spec, tables, tmp_path, expression):
    marker = tmp_path / "ran"
    tdir = user_dir(tmp_path, evil_txt="line one\n{{ " + expression.format(marker=marker) + " }}\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert not marker.exists()
    assert f"{tdir / 'evil.txt.j2'}:2:" in message, message


def test_a_file_outside_the_template_directory_is_not_read(spec, tables, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    tdir = user_dir(tmp_path)
    (tdir / "inside.txt").symlink_to(secret)
    for include in ("/etc/passwd", str(secret), "../secret.txt", "inside.txt", "./../secret.txt"):
        (tdir / "leak.txt.j2").write_text("{% include '" + include + "' %}\n")
        message = refused(spec, tables, tmp_path, tdir)
        assert f"{tdir / 'leak.txt.j2'}:1:" in message and include in message, message
        assert not (tmp_path / "out" / "leak.txt").exists()
    # A template that is itself a link out of the directory is not read either.
    (tdir / "leak.txt.j2").unlink()
    (tdir / "shadow.txt.j2").symlink_to(secret)
    message = refused(spec, tables, tmp_path, tdir)
    assert f"{tdir / 'shadow.txt.j2'}: " in message and "TOP-SECRET" not in message, message


def test_a_cpu_bomb_is_stopped(spec, tables, tmp_path, small_bounds):
    # About 25 s of CPU without a bound.
    tdir = user_dir(tmp_path, bomb_txt="{% for i in range(30000) %}{% for j in range(10000) %}"
                                       "{% if i * j == -1 %}x{% endif %}{% endfor %}{% endfor %}done\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "bomb.txt.j2" in message and "1 s of CPU" in message, message


def test_a_memory_bomb_is_stopped(spec, tables, tmp_path, small_bounds):
    # 600 MB in one value, built before anything is printed.
    tdir = user_dir(tmp_path, bomb_txt="{% set x = 'x' * 600000000 %}{{ x|length }}\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "bomb.txt.j2" in message and "256 MB of memory" in message, message


def test_a_huge_output_is_refused(spec, tables, tmp_path, small_bounds):
    # 20 MB of text, a megabyte at a time.
    tdir = user_dir(tmp_path, huge_txt="{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "huge.txt.j2" in message and "8 MB" in message, message
    assert not (tmp_path / "out" / "huge.txt").exists()


def test_deep_macro_recursion_is_one_line(spec, tables, tmp_path):
    tdir = user_dir(tmp_path, deep_txt="{% macro down(n) %}{{ down(n + 1) }}{% endmacro %}\n{{ down(0) }}\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "deep.txt.j2" in message and "recursion" in message, message
    # Brackets nested past Python's recursion limit, which Jinja2's parser recurses on.
    (tdir / "deep.txt.j2").write_text("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "deep.txt.j2" in message and "recursion" in message, message


def test_template_errors_name_the_file_and_line(spec, tables, tmp_path):
    tdir = user_dir(tmp_path, typo_txt="{{ name }}\n{{ no_such_key }}\n")
    assert f"{tdir / 'typo.txt.j2'}:2:" in refused(spec, tables, tmp_path, tdir)
    (tdir / "typo.txt.j2").write_text("{{ name }}\n\n{% if %}\n")
    assert f"{tdir / 'typo.txt.j2'}:3:" in refused(spec, tables, tmp_path, tdir)


def test_a_template_extending_the_builtin_report_still_works(spec, tables, tmp_path):
    tdir = user_dir(
        tmp_path,
        report_html='{% extends "builtin/report.html.j2" %}{% block spec %}<p>custom {{ name }}</p>{% endblock %}',
        report_md='{% extends "builtin/report.md.j2" %}{% block spec %}custom {{ name }}\n{% endblock %}',
        summary_txt='{% import "macros.inc" as m %}{{ m.count(progress) }}\n',
    )
    (tdir / "macros.inc").write_text("{% macro count(p) %}{{ p.ok_measured }} runs{% endmacro %}")
    plan, runs, summary = tables
    out = tmp_path / "out"
    html_path, md_path = render_report(spec, plan, runs, summary, HOST_FACTS, out, template_dir=tdir)
    html, md = html_path.read_text(), md_path.read_text()
    assert "<p>custom quickstart</p>" in html and md.rstrip().endswith("custom quickstart")
    assert "## Results" in md and "<h2" in html
    assert (out / "summary.txt").read_text() == "24 runs\n"
    # The same blocks as the built-in report, which renders without the sandbox.
    plain = tmp_path / "plain"
    builtin_md = render_report(spec, plan, runs, summary, HOST_FACTS, plain)[1].read_text()
    assert builtin_md.split("## Results")[1].split("## ")[0] == md.split("## Results")[1].split("## ")[0]


@pytest.mark.parametrize("name", [layout.PLAN, layout.RUNS, layout.SUMMARY, layout.COMPARISONS,
                                  layout.CAMPAIGN, layout.SPEC, layout.FINDINGS, layout.LOCK,
                                  layout.HOSTS_DIR, layout.RUNS_DIR, layout.CAMPAIGNS_DIR, layout.PLOTS_DIR,
                                  ".hidden.txt"])
def test_a_template_may_not_write_over_the_experiments_files(spec, tables, tmp_path, name):
    tdir = user_dir(tmp_path)
    (tdir / f"{name}.j2").write_text("overwritten\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / layout.PLAN).write_text("seq,run_id\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert f"{name}.j2" in message and "owns" in message, message
    assert (out / layout.PLAN).read_text() == "seq,run_id\n"
    assert not (out / name).is_file() or (out / name).read_text() != "overwritten\n"


def test_the_builtin_report_without_a_user_directory_is_not_forked(spec, tables, tmp_path, monkeypatch):
    # The built-in templates are the package's own: they keep the in-process path.
    def no_fork():
        raise AssertionError("forked for the built-in templates")
    monkeypatch.setattr(os, "fork", no_fork)
    plan, runs, summary = tables
    assert render_report(spec, plan, runs, summary, HOST_FACTS, tmp_path)[1].is_file()


@pytest.mark.parametrize("name", ["new\nline.txt", "esc\x1b[31m.txt", "rtl\u202etxt.exe", " padded.txt"])
def test_an_output_name_that_breaks_the_name_rule_is_refused(spec, tables, tmp_path, name):
    tdir = user_dir(tmp_path)
    (tdir / f"{name}.j2").write_text("text\n")
    message = refused(spec, tables, tmp_path, tdir)
    assert "report template output" in message and message.isprintable(), message
    assert not (tmp_path / "out" / name).exists()


# ----------------------------------------------------------------- a seeded corpus

SEED = 35
#: Hand-written attacks of the kinds the drill of issue 35 found, ``{marker}`` a file
#: the attack would create and ``{secret}`` one it would read.
ATTACKS = [
    "{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}",
    "{{ joiner.__init__.__globals__['os'].system('touch {marker}') }}",
    "{{ namespace.__init__.__globals__.__builtins__.open('{secret}').read() }}",
    "{{ lipsum.__globals__.__builtins__.__import__('os').system('touch {marker}') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ self.__dict__ }}",
    "{{ '{0.__class__.__init__.__globals__}'.format(cycler) }}",
    "{{ [].append(1) }}{{ {}.update(a=1) }}{{ progress.clear() }}",
    "{% include '{secret}' %}",
    "{% include ['missing.j2', '{secret}'] %}",
    "{% import '../secret.txt' as s %}",
    "{% from '/proc/self/environ' import x %}",
    "{% extends 'builtin/../../../../etc/passwd' %}",
    "{% include 'link.txt' %}",
    "{{ 'x' * 10**9 }}",
    "{{ range(10**9)|list|length }}",
    "{{ 'x'|center(10**9) }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{{ 9 ** 99999999 }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(200) %}{{ 'y' * 100000 }}{% endfor %}",
    "{% include 'corpus.txt.j2' %}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{{ " + "[" * 2000 + "]" * 2000 + " }}",
    "{% if %}", "{{ }}", "{% endfor %}", "{{ 1 / 0 }}", "{{ none.x.y }}", "{{ 'a' + 1 }}",
    "{{ no_such_name }}", "{{ '\\udcff' }}", "{{ name|no_such_filter }}", "{% set x = 1 %}{{ x.y.z }}",
]
#: Pieces the generator combines: text, a harmless expression, and one attack above.
_HARMLESS = ["plain text\n", "{{ name }}\n", "{% for i in range(3) %}{{ i }}{% endfor %}\n",
             "{{ progress.ok_measured|string|length }}\n", "{% raw %}{{ x }}{% endraw %}\n"]


def _corpus() -> list[str]:
    rng = random.Random(SEED)
    cases = list(ATTACKS)
    for _ in range(30):
        parts = rng.sample(_HARMLESS, rng.randint(0, 3)) + [rng.choice(ATTACKS)]
        rng.shuffle(parts)
        cases.append("".join(parts))
    return cases


@pytest.mark.parametrize("text", _corpus())
def test_the_corpus_of_hostile_templates_renders_or_fails_in_one_line(tmp_path, small_bounds, text):
    marker, secret = tmp_path / "ran", tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    tdir = user_dir(tmp_path)
    (tdir / "link.txt").symlink_to(secret)
    (tdir / "corpus.txt.j2").write_text(text.replace("{marker}", str(marker)).replace("{secret}", str(secret)))
    env = report._environment(tdir)
    context = {"name": "quickstart", "progress": {"ok_measured": 24}}
    try:
        texts = sandbox.render_bounded(env, {"corpus.txt": "corpus.txt.j2"}, context,
                                       cpu_seconds=report.TEMPLATE_CPU_SECONDS,
                                       memory_mb=report.TEMPLATE_MEMORY_MB, output_mb=report.TEMPLATE_OUTPUT_MB)
    except sandbox.ReportTemplateError as exc:
        message = str(exc)
        assert "\n" not in message and message.isprintable(), message
        assert message.startswith(str(tdir / "corpus.txt.j2")), message
        assert "TOP-SECRET" not in message
    else:
        assert len(texts["corpus.txt"].encode()) <= report.TEMPLATE_OUTPUT_MB * 2**20
        assert "TOP-SECRET" not in texts["corpus.txt"]
    assert not marker.exists()
