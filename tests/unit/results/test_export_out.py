"""``bmx export --out``: where the export may go (issue 25 item 1).

The export is renamed into place, so it must never go over something that is not
a regular file (as root, ``--out /dev/null`` would have replaced the device node),
and it creates no directories unless asked to. Real files on a synthetic campaign;
the device node is one made in the test's own directory, never one under /dev.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmatrix import cli

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "config" / "experiments" / "quickstart.yaml")
RUNS = """\
seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,status,reason,started_at,ended_at,duration_s,rw,bs,iodepth,read_iops
1,h1,r1,c1,1,false,false,1,b1,1,ok,,2026-01-01T00:00:00+00:00,2026-01-01T00:00:01+00:00,1,read,4k,1,100
2,h1,r2,c1,2,false,false,1,b1,1,ok,,2026-01-01T00:00:01+00:00,2026-01-01T00:00:02+00:00,1,read,4k,1,110
"""
SUMMARY = """\
cell_id,rw,bs,iodepth,metric,n,mean,median,min,max,sd,cv,ci_low,ci_high,ci_method
c1,read,4k,1,read_iops,2,105,105,100,110,7.07,0.067,41.5,168.5,t
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    exp = tmp_path / "results" / "quickstart"
    exp.mkdir(parents=True)
    (exp / "runs.csv").write_text(RUNS)
    (exp / "summary.csv").write_text(SUMMARY)
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    return tmp_path


def _export(capsys, *args):
    rc = cli.main(["export", QUICKSTART, *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link(path: Path) -> Path:
    target = path.with_name("target.json")
    target.write_text("keep\n")
    path.symlink_to(target)
    return path


def _device(path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of the test's own
    return path


@pytest.mark.parametrize("make, what", [
    (lambda p: (p.mkdir(), p)[1], "a directory"),
    (_fifo, "a FIFO"),
    (_link, "a symbolic link"),
    (_device, "a character device"),
])
def test_out_over_a_non_regular_file_is_refused_and_leaves_it(project, capsys, tmp_path, make, what):
    target = make(tmp_path / "out.json")
    before = os.lstat(target)
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(target))
    assert rc == 1 and out == "" and err.count("\n") == 1, err
    assert f"bmx: --out {target}: is {what}, not a regular file" in err, err
    after = os.lstat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)
    if what == "a symbolic link":
        assert (tmp_path / "target.json").read_text() == "keep\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_out_in_a_missing_directory_is_an_error_unless_asked(project, capsys, tmp_path):
    out_path = tmp_path / "nonexistent" / "dir" / "x.json"
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(out_path))
    assert rc == 1 and err.count("\n") == 1, err
    assert f"bmx: --out {out_path}: the directory {out_path.parent} does not exist (--mkdir creates it)" in err
    assert not (tmp_path / "nonexistent").exists()
    rc, out, err = _export(capsys, "--format", "bmf", "--out", str(out_path), "--mkdir")
    assert rc == 0, err
    assert json.loads(out_path.read_text())["rw=read bs=4k iodepth=1"]["read_iops"]["value"] == 105


def test_out_replaces_a_regular_file(project, capsys, tmp_path):
    out_path = tmp_path / "x.csv"
    out_path.write_text("old\n")
    rc, out, err = _export(capsys, "--format", "csv", "--out", str(out_path))
    assert rc == 0 and out == f"export: {out_path}\n", err
    assert out_path.read_text().startswith("schema_version,")


def test_every_format_streams_to_stdout(project, tmp_path, capsysbinary):
    """``-`` is stdout for the text formats and for Parquet too when stdout is no terminal."""
    for fmt in ("bmf", "csv", "parquet"):
        assert cli.main(["export", QUICKSTART, "--format", fmt, "--out", "-"]) == 0
        out, err = capsysbinary.readouterr()
        assert err == b"", (fmt, err)
        if fmt == "parquet":
            (tmp_path / "s.parquet").write_bytes(out)
            assert pq.read_table(tmp_path / "s.parquet").num_rows == 2
        elif fmt == "csv":
            assert out.startswith(b"schema_version,")
        else:
            json.loads(out)
