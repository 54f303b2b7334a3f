"""The synthetic-results factory (tests/campaign_factory.py) makes trees the real readers take.

Every reader runs as ``bmx`` runs it (``cli.main`` in-process, on the factory's
project): campaigns, status, compare, history, export, publish, report.
"""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from campaign_factory import Campaign, make_experiment

from benchmatrix import cli, layout
from benchmatrix.campaigns.store import list_campaigns


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Three campaigns of one experiment: ``before``, ``after`` (10 % slower, one run
    failed) and ``kernel`` (a new kernel, 30 % slower); the last is the current one."""
    return make_experiment(tmp_path_factory.mktemp("factory") / "project", campaigns=[
        Campaign(label="before"), Campaign(label="after", shift=0.1, failed=[0]),
        Campaign(label="kernel", shift=0.3, facts={"kernel": "6.6.0-synthetic"})], seed=3)


@pytest.fixture
def bmx(made, monkeypatch, capsys):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(made.root))
    monkeypatch.chdir(made.root)

    def run(*args: str) -> tuple[int, str, str]:
        rc = cli.main(list(args))
        out, err = capsys.readouterr()
        return rc, out, err
    return run


def test_every_campaign_is_kept_and_listed_with_its_runs(made, bmx):
    found = list_campaigns(made.exp)
    assert [c.name for c in found] == ["before", "after", "kernel"] and [c.id for c in found] == made.ids
    assert found[-1].path == made.exp and made.campaign_dir(0) == found[0].path
    rc, out, err = bmx("campaigns", str(made.spec_path), "--json")
    rows = json.loads(out)
    assert rc == 0 and [r["label"] for r in rows] == ["before", "after", "kernel"], err
    assert [r["runs"] for r in rows] == [{"planned": 6, "ok": 6, "failed": 0, "pending": 0},
                                         {"planned": 6, "ok": 5, "failed": 1, "pending": 0},
                                         {"planned": 6, "ok": 6, "failed": 0, "pending": 0}]
    for c in found:
        meta = c.meta
        assert meta["hosts"] == ["localhost"] and meta["ended_at"] > meta["created_at"]
        runs = pd.read_csv(c.path / layout.RUNS)
        # The host's noise settings reach runs.csv's env_* columns.
        assert len(runs) == 6 and set(runs["env_governor"]) == {"performance"} and runs["env_load_after"].notna().all()
        assert set(pd.read_csv(c.path / layout.SUMMARY)["metric"]) == {"v"}


def test_status_reads_the_current_campaign(made, bmx):
    rc, out, err = bmx("status", str(made.spec_path))
    assert rc == 0, out + err
    assert out.startswith("experiment synth: 6 runs planned (warm-ups and controls included), "
                          "6 ok, 0 pending, 0 failed"), out


def test_compare_sees_the_shift_and_names_the_new_kernel(made, bmx, tmp_path):
    rc, out, err = bmx("compare", "before", "kernel", "--spec", str(made.spec_path), "--out", str(tmp_path / "c"))
    # 30 % slower on a metric where lower is better: worse (exit 1), not refused.
    assert rc == 1, out + err
    table = pd.read_csv(tmp_path / "c" / "compare.csv")
    assert len(table) == 2 and set(table["verdict"]) == {"worse"}
    assert table["rel_diff_pct"].between(20, 40).all(), table["rel_diff_pct"]
    assert "kernel 6.1.0-synthetic -> 6.6.0-synthetic" in (tmp_path / "c" / "compare.md").read_text()


def test_history_export_and_report_read_every_campaign(made, bmx, tmp_path):
    rc, out, err = bmx("history", str(made.spec_path))
    assert rc == 0 and out.startswith("history: 3 campaigns, oldest first: before, after, kernel\n"), out + err
    rc, out, err = bmx("export", str(made.spec_path), "--campaign", "before", "--format", "csv", "--out", "-")
    table = pd.read_csv(io.StringIO(out))
    assert rc == 0 and set(table["campaign"]) == {made.ids[0]} and len(table) == 6, err
    rc, out, err = bmx("report", str(made.spec_path))
    assert rc == 0 and (made.exp / layout.REPORT_HTML).is_file(), out + err
    # The terminal's findings: each cell's mean and interval, the report's paths.
    assert "  v (lower is better, best first):" in out and f"report: {made.exp / layout.REPORT_MD}" in out
    assert "size=2" in (made.exp / layout.REPORT_MD).read_text()


def test_publish_writes_a_page_per_campaign(made, bmx, tmp_path):
    site = tmp_path / "site"
    rc, out, err = bmx("publish", "--to", str(site))
    assert rc == 0, out + err
    assert "3 campaign(s)" in out
    for cid in made.ids:
        assert len(pd.read_csv(site / "synth" / "campaigns" / cid / layout.RUNS)) == 6
    history = pd.read_csv(site / "synth" / "history.csv")
    assert set(history["campaign"]) == set(made.ids), history.columns


def test_an_edited_workload_starts_a_new_campaign_without_a_label(tmp_path):
    from campaign_factory import SPEC

    edited = SPEC.format(name="synth").replace("100 *", "101 *")
    made = make_experiment(tmp_path / "p", campaigns=[Campaign(label="first"), Campaign(spec=edited)])
    first, second = list_campaigns(made.exp)
    assert first.label == "first" and second.current and not second.label
    rec = json.loads(next(second.path.glob("runs/*/1/record.json")).read_text())
    # The record holds the command the role built for its cell, rendered.
    assert rec["workload"]["argv"][2] in ("print('v=%.4f' % (101 * 1))", "print('v=%.4f' % (101 * 2))")
    assert rec["host_facts"]["kernel"] == "6.1.0-synthetic" and rec["spec_digest"] == second.meta["spec_digest"]


def test_two_hosts_and_a_cell_that_always_fails(tmp_path):
    made = make_experiment(tmp_path / "p", campaigns=[Campaign(failed_cells=[{"size": 2}])], hosts=("h1", "h2"))
    runs = pd.read_csv(made.exp / layout.RUNS)
    assert sorted(runs["host"].unique()) == ["h1", "h2"] and len(runs) == 12
    assert set(runs.loc[runs["size"] == 2, "status"]) == {"failed"}
    assert set(runs.loc[runs["size"] == 1, "status"]) == {"ok"}
    assert runs.loc[runs["size"] == 2, "v"].isna().all()
    by_host = pd.read_csv(made.exp / layout.SUMMARY_BY_HOST)
    assert sorted(by_host["host"].unique()) == ["h1", "h2"]
    assert {p.parent.name for p in made.exp.glob("hosts/*/facts.json")} == {"h1", "h2"}
    # Each host's runs follow one another on its own clock, in plan order.
    for host in ("h1", "h2"):
        mine = runs[runs["host"] == host].sort_values("seq")
        assert mine["started_at"].is_monotonic_increasing


def test_a_campaign_cut_short_is_pending_for_status_and_collect(tmp_path, monkeypatch, capsys):
    made = make_experiment(tmp_path / "p", campaigns=[Campaign(pending=1)], batch_max_runs=4)
    runs = pd.read_csv(made.exp / layout.RUNS)
    # The record of the unfinished batch's first run is read although it left no rows file.
    assert len(runs) == 5 and set(runs["status"]) == {"ok"}
    assert not list((made.exp / "batches").glob(f"{runs['batch'].iloc[-1]}*"))
    assert len(list((made.exp / "batches").glob("*.done"))) == 1
    assert "ended_at" not in json.loads((made.exp / layout.CAMPAIGN).read_text())
    monkeypatch.setenv("BMX_PROJECT_DIR", str(made.root))
    monkeypatch.chdir(made.root)
    assert cli.main(["status", str(made.spec_path)]) == 3         # some pending
    out = capsys.readouterr().out
    assert out.startswith("experiment synth: 6 runs planned (warm-ups and controls included), 5 ok, 1 pending"), out
