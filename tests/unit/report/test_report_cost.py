"""The report is cheap to make: modules imported where used, templates compiled once.

Every collect job (the last job of every campaign) imports the report; scipy.stats
alone costs about 0.7 s and matplotlib about 0.4 s, which a campaign without plots or
without the tests that need them should not pay (issue 15 row c, the quickstart's
fixed cost).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from campaign_factory import make_experiment

from benchmatrix import layout

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(statement: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> set[str]:
    """Every module a fresh interpreter holds after running ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                         check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _loaded_after(statement: str) -> list[str]:
    return sorted({m.split(".")[0] for m in _modules_after(statement)})


def test_importing_the_report_and_a_summary_s_numbers_load_neither_scipy_nor_matplotlib():
    # A time shown in µs or ms (the terminal, a report without plots) must not import
    # matplotlib for its engineering formatter; t's 97.5 % quantile at whole degrees of
    # freedom (every summary interval) comes from t_table, not scipy (test_stats checks it).
    loaded = _loaded_after("import benchmatrix.report.render\n"
                           "from benchmatrix.analyze.stats import CONFIDENCE, t_ppf\n"
                           "from benchmatrix.report.units import quantity\n"
                           "assert quantity(1234.5, 'us') == '1.234 ms', quantity(1234.5, 'us')\n"
                           "t = t_ppf(0.5 + CONFIDENCE / 2, [1.0, 9.0, float('nan')])\n"
                           "assert abs(t[0] - 12.706) < 1e-3 and abs(t[1] - 2.262) < 1e-3, t")
    assert "benchmatrix" in loaded  # the import happened in this interpreter
    assert "scipy" not in loaded
    assert "matplotlib" not in loaded


def test_the_collect_job_draws_its_plots_without_pyplot_or_scipy(tmp_path):
    # Rule collect's job as the Snakefile starts it (scripts/collect.py's entry), on a
    # campaign that compares nothing: its plots are drawn with matplotlib's Figure
    # alone (pyplot imports GUI backends and its figure registry), and no statistic
    # it computes needs scipy (issue 34, item 4). Drawn in the job's own process here
    # (BMX_PLOT_WORKER=0): its plot worker runs the same functions (test_plot_worker.py).
    made = make_experiment(tmp_path)
    argv = ["--spec", str(made.spec_path), "--project-dir", str(made.root), "--plan", str(made.exp / layout.PLAN)]
    loaded = _modules_after("from benchmatrix.execute.entry import entry\n"
                            f"assert entry('collect', {argv!r}) == 0", cwd=made.root,
                            env={"BMX_PLOT_WORKER": "0"})
    drawn = sorted(p.name for p in (made.exp / layout.PLOTS_DIR).glob("*.svg"))
    assert "order.svg" in drawn
    assert 'src="data:image/svg+xml;base64,' in (made.exp / layout.REPORT_HTML).read_text()  # embedded
    assert "matplotlib.figure" in loaded  # this process drew them
    assert "matplotlib.pyplot" not in loaded
    assert not {m for m in loaded if m == "scipy" or m.startswith("scipy.")}


def _compiles(env) -> list[str]:
    """The templates ``env`` compiles from now on (instead of loading them compiled)."""
    names: list[str] = []
    original = env.compile
    env.compile = lambda source, name=None, *a, **k: names.append(name) or original(source, name, *a, **k)
    return names


def test_compiled_templates_are_cached_and_follow_their_source(tmp_path, monkeypatch):
    from benchmatrix.report import render

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    user = tmp_path / "templates"
    user.mkdir()
    (user / "note.md.j2").write_text("one {{ x }}\n")
    env = render._environment(user)
    compiled = _compiles(env)
    assert env.get_template("note.md.j2").render(x=1) == "one 1\n"
    assert compiled == ["note.md.j2"]
    assert len(list((tmp_path / "cache" / "benchmatrix").glob("templates-*/*.cache"))) == 1
    # A later job (a new environment) loads the compiled code instead of compiling ...
    env = render._environment(user)
    compiled = _compiles(env)
    assert env.get_template("note.md.j2").render(x=2) == "one 2\n"
    assert compiled == []
    # ... and an edited template is compiled afresh, never served stale.
    (user / "note.md.j2").write_text("two {{ x }}\n")
    env = render._environment(user)
    compiled = _compiles(env)
    assert env.get_template("note.md.j2").render(x=3) == "two 3\n"
    assert compiled == ["note.md.j2"]


def test_a_cache_that_cannot_be_made_or_written_only_costs_the_compilation(tmp_path, monkeypatch):
    import jinja2.bccache

    from benchmatrix.report import render

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    env = render._environment()
    assert env.bytecode_cache is None
    assert env.get_template("report.md.j2") is not None

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jinja2.bccache.tempfile, "NamedTemporaryFile", full_disk)
    env = render._environment()
    assert env.bytecode_cache is not None
    assert env.get_template("report.md.j2") is not None


def test_the_cache_folder_changes_with_what_is_compiled_into_templates(tmp_path, monkeypatch):
    # Jinja2 checks a cached template against its source only: options that change the
    # compiled code (trim_blocks, the autoescape rule) must lead to another folder.
    from benchmatrix.report import render

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = render._template_cache().directory
    assert render._template_cache().directory == folder
    monkeypatch.setitem(render._JINJA_OPTIONS, "trim_blocks", False)
    assert render._template_cache().directory != folder
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(render, "_autoescape", lambda name: True)
    assert render._template_cache().directory != folder
