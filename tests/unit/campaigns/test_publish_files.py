"""``bmx publish`` and the file system (issue 25 items 2 and 6).

What a results directory holds is copied into a site other people read, so only
regular files inside the experiment's directory leave it; the site directory is
replaced only as far as bmx publish wrote it; every HTML page, the copied reports
too, carries the Content-Security-Policy. Real files and links in a temporary
directory, synthetic campaigns (unit.campaigns.test_publish.history_results).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import pytest
from unit.campaigns.test_publish import history_results

from benchmatrix import cli
from benchmatrix.campaigns.publish import CSP, SITE_MARKER, publish
from benchmatrix.errors import BenchmatrixError

REPORT = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>r</title>\n</head>\n"
          "<body><p>report</p></body>\n</html>\n")


def _results(tmp_path: Path) -> Path:
    results = history_results(tmp_path, 1, 2)
    (results / "scan" / "report.html").write_text(REPORT)
    return results


def _bmx_publish(capsys, results: Path, to: Path, *extra: str) -> tuple[int, str]:
    """``bmx publish`` through the CLI's main: its exit status and stderr."""
    capsys.readouterr()
    rc = cli.main(["publish", "--to", str(to), "--results", str(results), *extra])
    return rc, capsys.readouterr().err


def test_links_and_special_files_do_not_leave_the_results(tmp_path, capsys):
    results = _results(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret:19000::::::\n")
    exp = results / "scan"
    old = exp / "campaigns" / "c00"
    (old / "runs.csv").unlink()
    (old / "runs.csv").symlink_to(secret)                         # the runs.csv -> /etc/shadow
    os.mkfifo(old / "comparisons.csv")                             # would block a copy forever
    cmp_dir = exp / "compare" / "a_vs_b"
    cmp_dir.mkdir(parents=True)
    (cmp_dir / "compare.html").write_text(REPORT)
    (cmp_dir / "compare.csv").symlink_to(secret)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "compare.html").write_text(REPORT)
    (outside / "compare.csv").write_text("secret\n")
    (exp / "compare" / "escape").symlink_to(outside)               # a whole directory pointing out
    rc, said = _bmx_publish(capsys, results, tmp_path / "site")
    assert rc == 0, said
    site = tmp_path / "site"
    copied = [p for p in site.rglob("*") if p.is_file()]
    assert not any(p.read_bytes() in (secret.read_bytes(), b"secret\n") for p in copied)
    assert not any(p.is_symlink() for p in site.rglob("*"))
    assert not (site / "scan" / "campaigns" / "c00aaaaaaaa" / "runs.csv").exists()
    assert (site / "scan" / "campaigns" / "c00aaaaaaaa" / "summary.csv").is_file()   # the regular files still are
    assert (site / "scan" / "compare" / "a_vs_b" / "compare.html").is_file()
    assert not (site / "scan" / "compare" / "escape").exists()
    for skipped in (old / "runs.csv", old / "comparisons.csv", cmp_dir / "compare.csv", exp / "compare" / "escape"):
        assert f"publish: skipped {skipped} (" in said, said
    assert "symbolic link" in said and "FIFO" in said


def test_to_a_symlink_publishes_into_its_target_and_leaves_no_debris(tmp_path):
    results = _results(tmp_path)
    real = tmp_path / "www" / "real"
    real.mkdir(parents=True)
    link = tmp_path / "site"
    link.symlink_to(real)
    for _ in range(2):                                             # a new site, then a republish
        publish(results, link)
        assert link.is_symlink() and os.readlink(link) == str(real)
        assert (real / SITE_MARKER).is_file() and (real / "index.html").is_file()
    debris = [p.name for d in (tmp_path, tmp_path / "www") for p in d.iterdir() if p.name.startswith(".")]
    assert debris == []


def test_republish_refuses_to_delete_a_file_it_did_not_write_unless_told(tmp_path, capsys):
    results = _results(tmp_path)
    site = tmp_path / "site"
    publish(results, site)
    (site / "scan" / "notes.html").write_text("mine")
    (site / "CNAME").write_text("bench.example.org\n")
    before = sorted(p.name for p in site.rglob("*"))
    rc, err = _bmx_publish(capsys, results, site)
    assert rc == 1 and err.count("\n") == 1, err
    assert "holds 2 file(s) bmx publish did not write (CNAME, scan/notes.html)" in err
    assert sorted(p.name for p in site.rglob("*")) == before      # nothing touched
    rc, err = _bmx_publish(capsys, results, site, "--replace")
    assert rc == 0, err
    assert "publish: removed 2 file(s) bmx publish did not write: CNAME, scan/notes.html" in err
    assert not (site / "CNAME").exists() and (site / "index.html").is_file()
    rc, err = _bmx_publish(capsys, results, site)                 # its own files only: replaced silently
    assert rc == 0 and err == "", err


def test_every_published_page_carries_the_csp(tmp_path):
    results = _results(tmp_path)
    cmp_dir = results / "scan" / "compare" / "a_vs_b"
    cmp_dir.mkdir(parents=True)
    (cmp_dir / "compare.html").write_text(REPORT)
    publish(results, tmp_path / "site")
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert any(p.name == "report.html" for p in pages) and any(p.name == "compare.html" for p in pages)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
    for page in pages:
        text = page.read_text(encoding="utf-8")
        head = html.unescape(text[text.index("<head"):text.index("</head>")])
        assert meta in head, page                                  # in the head, before anything it could load
    assert (results / "scan" / "report.html").read_text() == REPORT  # the results stay as they were


def test_a_site_of_another_tool_is_still_refused(tmp_path):
    results = _results(tmp_path)
    other = tmp_path / "docs"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(BenchmatrixError, match="not empty and not a site bmx publish wrote"):
        publish(results, other, replace=True)
    assert (other / "keep.txt").read_text() == "mine"


def test_a_site_from_before_the_file_list_says_what_it_loses(tmp_path):
    """A marker that lists no files (bmx publish before issue 25): with --replace (issue 35
    item 7; without it the publish stops), the files the new site does not have are removed,
    each named, none silently."""
    results = _results(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / SITE_MARKER).write_text("written by bmx publish; the whole directory is replaced on the next one\n")
    (site / "index.html").write_text("old")
    (site / "gone").mkdir()
    (site / "gone" / "index.html").write_text("old experiment")
    said: list[str] = []
    publish(results, site, replace=True, say=said.append)
    assert said == ["removed 1 file(s) of the earlier site that the new one does not have: gone/index.html"]
    assert (site / "index.html").read_text() != "old" and not (site / "gone").exists()
