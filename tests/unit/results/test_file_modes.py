"""Result files are readable by the team: every file benchmatrix writes under
results/NAME honours the user's umask (0644 under 022, 0640 under 027), through the
one atomic writer, benchmatrix.files.atomic_write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from benchmatrix import layout
from benchmatrix.execute.collect import collect
from benchmatrix.execute.planning import plan
from benchmatrix.files import atomic_write
from benchmatrix.plan.design import read_plan
from benchmatrix.plan.reruns import append_round
from benchmatrix.report import render as report
from benchmatrix.results.records import write_record
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
UMASKS = [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)]


@pytest.fixture(params=UMASKS, ids=lambda u: f"umask{u[0]:03o}")
def umask(request):
    mask, file_mode, dir_mode = request.param
    old = os.umask(mask)
    yield file_mode, dir_mode
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_honours_the_umask(umask, tmp_path):
    file_mode, dir_mode = umask
    atomic_write(tmp_path / "new" / "a.txt", "text ✓\n")
    atomic_write(tmp_path / "new" / "b.bin", b"\x00\x01")
    atomic_write(tmp_path / "new" / "a.txt", "replaced\n")   # a replaced file gets the mode again
    assert mode(tmp_path / "new" / "a.txt") == file_mode
    assert mode(tmp_path / "new" / "b.bin") == file_mode
    assert mode(tmp_path / "new") == dir_mode
    assert (tmp_path / "new" / "a.txt").read_text(encoding="utf-8") == "replaced\n"
    assert (tmp_path / "new" / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["a.txt", "b.bin"]


def test_the_report_has_no_writer_of_its_own():
    assert not hasattr(report, "_write_atomic")
    assert report.atomic_write is atomic_write


def test_every_result_file_of_a_campaign_honours_the_umask(umask, tmp_path):
    """plan.csv, campaign.json, every record.json, reruns.csv, runs.csv, summary.csv,
    every table collect writes and the report, written by the functions the
    workflow calls (no Ansible: the records stand for runs that finished)."""
    file_mode, dir_mode = umask
    project = tmp_path / "project"
    (project / "config" / "inventory").mkdir(parents=True)
    (project / "config" / "inventory" / "local.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    spec_path = project / "config" / "modes.yaml"
    spec_path.write_text((ROOT / "config" / "experiments" / "quickstart.yaml").read_text()
                         .replace("name: quickstart ", "name: modes ").replace("replicates: 3 ", "replicates: 2 "))
    spec = load_spec(spec_path)
    exp = layout.exp_dir_of(project, spec)
    runs = plan(str(spec_path), project, exp / "plan.csv", 50)
    for i, run in enumerate(runs):
        write_record(exp, {"run_id": run.run_id, "attempt": run.attempt, "cell_id": run.cell_id,
                           "host": run.host, "seq": run.seq, "warmup": run.warmup, "control": run.control,
                           "status": "ok", "started_at": f"2026-03-01T10:00:{i:02d}+00:00",
                           "ended_at": f"2026-03-01T10:00:{i:02d}.5+00:00", "duration_s": 0.5,
                           "factors": run.factors, "metrics": {"read_iops": {"value": 1000.0 + i, "unit": "IO/s"}}})
    append_round(exp, [(runs[-1].run_id, 2)], "test")
    plan(str(spec_path), project, exp / "plan.csv", 50)
    collect(str(spec_path), project, exp / "plan.csv")
    plan_rows, _ = read_plan(exp / "plan.csv")
    assert any(r.attempt == 2 for r in plan_rows)

    files = {p.relative_to(exp).as_posix(): mode(p) for p in exp.rglob("*") if p.is_file()}
    dirs = {p.relative_to(exp).as_posix(): mode(p) for p in exp.rglob("*") if p.is_dir()}
    for name in ("plan.csv", "campaign.json", "reruns.csv", *layout.COLLECTED, "report.html", "report.md"):
        assert name in files, sorted(files)
    assert sum(name.endswith("/record.json") for name in files) == len(runs)
    wrong = {name: oct(m) for name, m in files.items() if m != file_mode and not name.endswith(".lock")}
    assert not wrong, f"not {oct(file_mode)}: {wrong}"
    assert not {name: oct(m) for name, m in dirs.items() if m != dir_mode}
    assert not [name for name in files if name.endswith(".tmp")]
