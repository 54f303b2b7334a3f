"""``bmx export --out``, round 4 (issue 35 item 6): one check, one write, own files kept.

The export is written relative to its directory opened once (never through a
symbolic link), so a directory or a target swapped between the check before the
work and the write at its end is refused, not followed; whatever fails, no
temporary file is left. And an export never goes over a file the experiment owns
(``--out results/NAME/plan.csv`` broke ``bmx status`` and ``bmx run``).

The swap happens where the real export does its work: the test wraps the real
``load_tables`` (the seam between the check and the write) with the swap.
Real files, FIFOs and links in the test's own directory; a synthetic campaign
(unit.results.test_export_out.project).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from unit.results.test_export_out import _export, project  # noqa: F401 (the fixture)

from benchmatrix.campaigns import export
from benchmatrix.errors import BenchmatrixError
from benchmatrix.results import tables


def _temporaries(*dirs: Path) -> list[str]:
    return [p.name for d in dirs for p in d.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("name", [
    "plan.csv", "runs.csv", "summary.csv", "campaign.json", "spec.json", "reruns.csv", "analysis.json",
    ".bmx.lock", "runs_long.parquet", "report.html", "hosts/h1/baseline.json", "runs/r1/1/record.json",
    "batches/b1.done", "campaigns/c0/plan.csv", "compare/a_vs_b/compare.csv",
])
def test_out_over_a_file_the_experiment_owns_is_refused(project, capsys, name):  # noqa: F811
    exp = project / "results" / "quickstart"
    target = exp / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_text("own\n")
    before = target.read_bytes()
    rc, out, err = _export(capsys, "--format", "csv", "--out", str(target))
    assert rc == 1 and out == "" and err.count("\n") == 1, err
    assert (f"bmx: --out {target}: {name} is a file of the experiment quickstart's own results "
            "(bmx run and bmx status read them); choose another file") in err, err
    assert target.read_bytes() == before
    assert _temporaries(target.parent) == []


def test_out_relative_to_the_project_over_plan_csv_is_refused(project, capsys, monkeypatch):  # noqa: F811
    """The issue's own command, run from the project directory."""
    monkeypatch.chdir(project)
    plan = project / "results" / "quickstart" / "plan.csv"
    plan.write_text("seq,host\n")
    rc, out, err = _export(capsys, "--format", "bmf", "--out", "results/quickstart/plan.csv")
    assert rc == 1 and "plan.csv is a file of the experiment quickstart's own results" in err, err
    assert plan.read_text() == "seq,host\n"


def test_a_host_cache_file_is_refused_too(project, capsys):  # noqa: F811
    target = project / "results" / ".hosts" / "h1" / "workload_fio.json"
    target.parent.mkdir(parents=True)
    target.write_text("{}\n")
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(target))
    assert rc == 1 and "the project's own results" in err, err
    assert target.read_text() == "{}\n"


@pytest.mark.parametrize("name, fmt", [("bmf.json", "bmf"), ("runs_long.csv", "csv"),
                                       ("runs_long.parquet", "parquet"), ("mine.json", "bmf")])
def test_the_exports_own_names_in_the_results_are_taken(project, capsys, name, fmt):  # noqa: F811
    target = project / "results" / "quickstart" / name
    rc, out, err = _export(capsys, "--format", fmt, "--out", str(target))
    assert rc == 0 and out == f"export: {target}\n", err
    assert target.stat().st_size > 0


def test_out_in_a_directory_that_is_a_symbolic_link_is_refused(project, capsys, tmp_path):  # noqa: F811
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(link / "x.json"))
    assert rc == 1 and err.count("\n") == 1, err
    assert (f"bmx: --out {link / 'x.json'}: its directory {link} is a symbolic link; give the directory "
            "it points to") in err, err
    assert list(real.iterdir()) == []


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(project, capsys, tmp_path,  # noqa: F811
                                                                    monkeypatch):
    """The issue's race, made deterministic: the checked directory is replaced by a link to
    one where the name is a FIFO; the write must not follow the link."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    trap = tmp_path / "trap"
    trap.mkdir()
    os.mkfifo(trap / "x.json")
    real = tables.load_tables

    def swap_then_load(*args, **kwargs):
        out_dir.rename(tmp_path / "moved")
        out_dir.symlink_to(trap)
        return real(*args, **kwargs)

    monkeypatch.setattr(tables, "load_tables", swap_then_load)
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(out_dir / "x.json"))
    assert rc == 1 and err.count("\n") == 1, err
    assert f"its directory {out_dir} is a symbolic link" in err, err
    assert stat.S_ISFIFO(os.lstat(trap / "x.json").st_mode)
    assert _temporaries(trap, tmp_path / "moved") == [] and list((tmp_path / "moved").iterdir()) == []


def test_a_target_swapped_for_a_fifo_after_the_check_is_refused(project, capsys, tmp_path,  # noqa: F811
                                                                monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("old\n")
    real = tables.load_tables

    def swap_then_load(*args, **kwargs):
        target.unlink()
        os.mkfifo(target)
        return real(*args, **kwargs)

    monkeypatch.setattr(tables, "load_tables", swap_then_load)
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(target))
    assert rc == 1 and err.count("\n") == 1, err
    assert f"bmx: --out {target}: is a FIFO, not a regular file" in err, err
    assert stat.S_ISFIFO(os.lstat(target).st_mode) and _temporaries(tmp_path) == []


def test_a_failed_write_leaves_no_temporary_file_and_the_old_file(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        export.write_out(target, "\ud800")                              # fails half-way through the write
    assert target.read_text() == "old\n" and _temporaries(tmp_path) == []


def test_write_out_replaces_a_regular_file_with_the_umasks_mode(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old\n")
    old = os.umask(0o027)
    try:
        export.write_out(target, json.dumps({"a": 1}))
        export.write_out(tmp_path / "new.json", b"{}")
    finally:
        os.umask(old)
    assert json.loads(target.read_text()) == {"a": 1} and (tmp_path / "new.json").read_bytes() == b"{}"
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert _temporaries(tmp_path) == []


def test_write_out_without_a_directory_is_one_line(tmp_path):
    with pytest.raises(BenchmatrixError, match=r"the directory .*/missing does not exist \(--mkdir creates it\)"):
        export.write_out(tmp_path / "missing" / "x.json", "{}")


def test_the_default_file_of_a_kept_campaign_is_taken(project):  # noqa: F811
    """``bmx export --campaign ID`` without --out writes into campaigns/ID/: its own names there."""
    results = project / "results"
    kept = results / "quickstart" / "campaigns" / "c0"
    kept.mkdir(parents=True)
    export.write_out(kept / "bmf.json", "{}\n", results, "bmf")
    assert (kept / "bmf.json").read_text() == "{}\n"
    with pytest.raises(BenchmatrixError, match="campaigns/c0/runs.csv is a file of the experiment quickstart"):
        export.write_out(kept / "runs.csv", "x\n", results, "csv")
    assert not (kept / "runs.csv").exists() and _temporaries(kept) == []
