"""``bmx publish`` and the file system, round 4 (issue 35 items 5 and 7).

A hard link is a second name of one file: one planted among the results
(``runs.csv`` -> ``/etc/shadow``) passes every check a symbolic link fails. A copy is
never more readable than the file it copies; a site of an older bmx publish is not
emptied without ``--replace``; a republished site keeps its directory's owner, group
and mode. Real files in a temporary directory, synthetic campaigns
(unit.campaigns.test_publish.history_results).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from unit.campaigns.test_publish import history_results
from unit.campaigns.test_publish_files import REPORT, _bmx_publish

from benchmatrix.campaigns.publish import SITE_MARKER, publish
from benchmatrix.errors import BenchmatrixError

CAMPAIGN = Path("scan") / "campaigns" / "c00aaaaaaaa"


def _results(tmp_path: Path) -> Path:
    results = history_results(tmp_path, 1, 2)
    (results / "scan" / "report.html").write_text(REPORT)
    (results / "scan" / "campaigns" / "c00" / "report.html").write_text(REPORT)
    return results


@pytest.fixture
def umask_022():
    """Files the test and the publish create get 0644/0755, whatever the runner's umask."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_hard_link_to_a_file_outside_the_results_is_not_published(tmp_path, capsys, umask_022):
    results = _results(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret:19000::::::\n")
    secret.chmod(0o600)
    old = results / "scan" / "campaigns" / "c00"
    (old / "runs.csv").unlink()
    os.link(secret, old / "runs.csv")                            # the runs.csv -> /etc/shadow
    rc, said = _bmx_publish(capsys, results, tmp_path / "site")
    assert rc == 0, said
    site = tmp_path / "site"
    assert not (site / CAMPAIGN / "runs.csv").exists()
    assert not any(p.read_bytes() == secret.read_bytes() for p in site.rglob("*") if p.is_file())
    assert (f"publish: skipped {old / 'runs.csv'} (a hard link to a file with a name outside {results / 'scan'})"
            in said), said
    assert (site / CAMPAIGN / "summary.csv").is_file()           # the campaign's other files still are


def test_a_hard_link_whose_names_are_all_inside_the_results_is_published(tmp_path, capsys, umask_022):
    results = _results(tmp_path)
    old = results / "scan" / "campaigns" / "c00"
    os.link(old / "summary.csv", results / "scan" / "summary_c00.csv")   # a second name, inside
    rc, said = _bmx_publish(capsys, results, tmp_path / "site")
    assert rc == 0 and said == "", said
    assert (tmp_path / "site" / CAMPAIGN / "summary.csv").read_bytes() == (old / "summary.csv").read_bytes()


def test_a_copy_is_never_more_readable_than_its_source(tmp_path, umask_022):
    results = _results(tmp_path)
    old = results / "scan" / "campaigns" / "c00"
    (old / "runs.csv").chmod(0o600)
    (old / "summary.csv").chmod(0o640)
    (old / "report.html").chmod(0o600)                          # rewritten with the CSP, not copied
    publish(results, tmp_path / "site")
    site = tmp_path / "site"

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(site / CAMPAIGN / "runs.csv") == 0o600
    assert mode(site / CAMPAIGN / "summary.csv") == 0o640
    assert mode(site / CAMPAIGN / "report.html") == 0o600
    assert mode(site / "scan" / "campaigns" / "c01aaaaaaaa" / "summary.csv") == 0o644   # 0644 stays 0644
    assert mode(site / "index.html") == 0o644


def test_a_site_marker_without_a_file_list_needs_replace(tmp_path, capsys):
    """A marker of a bmx publish before the file list: what it holds cannot be told from
    what a user added, so replacing it (and deleting what the new site lacks) takes --replace."""
    results = _results(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / SITE_MARKER).write_text("written by bmx publish; the whole directory is replaced on the next one\n")
    (site / "index.html").write_text("old")
    (site / "CNAME").write_text("bench.example.org\n")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    rc, err = _bmx_publish(capsys, results, site)
    assert rc == 1 and err.count("\n") == 1, err
    assert (f"bmx: {site}: a site of an older bmx publish that does not list its files (2 file(s)); "
            "publish with --replace to replace it as a whole") in err, err
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before   # nothing touched
    rc, err = _bmx_publish(capsys, results, site, "--replace")
    assert rc == 0, err
    assert "publish: removed 1 file(s) of the earlier site that the new one does not have: CNAME" in err
    assert not (site / "CNAME").exists() and (site / "index.html").read_text() != "old"


def test_a_marker_without_a_list_in_an_otherwise_empty_site_needs_no_replace(tmp_path):
    results = _results(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / SITE_MARKER).write_text("written by bmx publish\n")
    publish(results, site)                                       # nothing to lose: no --replace needed
    assert (site / "index.html").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory another owner needs root")
@pytest.mark.parametrize("first", [True, False], ids=["empty directory", "republish"])
def test_the_site_directory_keeps_its_owner_group_and_mode(tmp_path, umask_022, first):
    results = _results(tmp_path)
    site = tmp_path / "site"
    if first:
        site.mkdir()
    else:
        publish(results, site)
    os.chown(site, 65534, 65534)                                 # nobody:nogroup 2775, a shared web root
    site.chmod(0o2775)
    publish(results, site)
    st = site.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o2775)
    # A set-group-ID directory gives what is made in it its group: the site's files too.
    inside = [p for p in site.rglob("*")]
    assert inside and all(p.lstat().st_gid == 65534 for p in inside)
    assert all(p.stat().st_mode & stat.S_ISGID for p in inside if p.is_dir())


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory another owner needs root")
def test_a_site_without_set_group_id_keeps_owner_and_mode_only(tmp_path, umask_022):
    results = _results(tmp_path)
    site = tmp_path / "site"
    publish(results, site)
    os.chown(site, 65534, 65534)
    site.chmod(0o750)
    publish(results, site)
    st = site.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o750)
    assert (site / "index.html").stat().st_gid == 0               # the files keep the publisher's group


def test_a_refused_site_is_not_touched(tmp_path):
    """The checks come before any change: a refused republish changes neither the site's
    files nor its directory."""
    results = _results(tmp_path)
    site = tmp_path / "site"
    publish(results, site)
    site.chmod(0o700)
    (site / "notes.html").write_text("mine")
    with pytest.raises(BenchmatrixError, match="bmx publish did not write"):
        publish(results, site)
    assert stat.S_IMODE(site.stat().st_mode) == 0o700 and (site / "notes.html").read_text() == "mine"


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_file_swapped_for_a_link_after_its_check_is_not_copied(tmp_path, monkeypatch, link):
    """The file checked is the file copied: a runs.csv swapped for a link to a private file
    between the check (reading the campaign's page) and the copy stops the publish, and the
    earlier site stays. The swap happens in a wrapper of the real campaign_page."""
    from benchmatrix.campaigns import publish as publish_mod

    results = _results(tmp_path)
    site = tmp_path / "site"
    publish(results, site)
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret:19000::::::\n")
    runs = results / "scan" / "campaigns" / "c00" / "runs.csv"
    real = publish_mod.campaign_page

    def page_then_swap(campaign, *args, **kwargs):
        page = real(campaign, *args, **kwargs)
        if campaign.path == runs.parent:
            runs.unlink()
            runs.symlink_to(secret) if link == "symbolic" else os.link(secret, runs)
        return page

    monkeypatch.setattr(publish_mod, "campaign_page", page_then_swap)
    now = ("now a symbolic link" if link == "symbolic"
           else f"now a hard link to a file with a name outside {results / 'scan'}")
    with pytest.raises(BenchmatrixError) as refused:
        publish(results, site)
    assert str(refused.value) == f"{runs}: changed while it was published ({now}); publish again"
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site")]
