"""Finding and naming campaigns (benchmatrix.campaigns.store)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from benchmatrix.campaigns.store import find_campaign, list_campaigns
from benchmatrix.errors import BenchmatrixError


def _make(path, **meta):
    path.mkdir(parents=True, exist_ok=True)
    (path / "campaign.json").write_text(json.dumps(meta))


def test_campaigns_are_listed_oldest_first_with_the_current_one_last(tmp_path):
    exp = tmp_path / "results" / "x"
    _make(exp, id="cur000000000", created_at="2026-03-01T00:00:00+00:00")
    _make(exp / "campaigns" / "b", id="bbb111111111", created_at="2026-02-01T00:00:00+00:00", label="kernel-6.6")
    _make(exp / "campaigns" / "a", id="aaa222222222", created_at="2026-01-01T00:00:00+00:00")
    (exp / "campaigns" / "junk").mkdir()
    found = list_campaigns(exp)
    assert [c.id for c in found] == ["aaa222222222", "bbb111111111", "cur000000000"]
    assert [c.current for c in found] == [False, False, True]
    assert found[1].name == "kernel-6.6" and found[0].name == "aaa222222222"


def test_a_campaign_is_found_by_id_prefix_label_or_directory(tmp_path):
    exp = tmp_path / "x"
    _make(exp, id="cur000000000")
    _make(exp / "campaigns" / "b", id="bbb111111111", label="before")
    assert find_campaign(exp, "bbb111111111").label == "before"
    assert find_campaign(exp, "before").id == "bbb111111111"
    assert find_campaign(exp, "cur").current
    assert find_campaign(exp, str(exp / "campaigns" / "b")).id == "bbb111111111"
    with pytest.raises(BenchmatrixError, match="no campaign 'zzz'; campaigns: bbb111111111 \\(before\\), cur000000000"):
        find_campaign(exp, "zzz")


def test_an_ambiguous_prefix_is_refused(tmp_path):
    exp = tmp_path / "x"
    _make(exp / "campaigns" / "a", id="ab1")
    _make(exp / "campaigns" / "b", id="ab2")
    with pytest.raises(BenchmatrixError, match="names 2 campaigns"):
        find_campaign(exp, "ab")


# ---------------------------------------------------------------- keeping campaigns (units)

import os  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from benchmatrix.campaigns import store as cmod  # noqa: E402
from benchmatrix.campaigns.store import (  # noqa: E402
    ARCHIVE_MARKER,
    archive_current,
    campaign_rows,
    finish_archive,
    start_campaign,
)
from benchmatrix.results.campaign import mark_progress, mark_progress_from_tables, read_meta  # noqa: E402
from benchmatrix.results.records import write_record  # noqa: E402

WORKLOAD = {"role": "workload_command", "vars": {"argv": ["true"]}}


def _campaign(exp, cid, runs_ok=2, pending=0, digest="d1", label=None):
    """A campaign directory with a real plan.csv, spec.json and one record per finished run."""
    meta = {"id": cid, "created_at": "2026-01-01T00:00:00+00:00", "spec_digest": digest}
    if label:
        meta["label"] = label
    _make(exp, **meta)
    (exp / "spec.json").write_text(json.dumps({"name": "x", "workload": WORKLOAD, "factors": {"x": [1]}}))
    lines = ["seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,x"]
    for i in range(runs_ok + pending):
        lines.append(f"{i + 1},h1,h1-c1-r{i + 1},c1,{i + 1},false,false,1,b1,1,1")
    (exp / "plan.csv").write_text("\n".join(lines) + "\n")
    for i in range(runs_ok):
        write_record(exp, {"run_id": f"h1-c1-r{i + 1}", "attempt": 1, "status": "ok", "cell_id": "c1", "host": "h1",
                           "started_at": f"2026-01-01T00:0{i}:00+00:00", "ended_at": f"2026-01-01T00:0{i}:30+00:00"})
    for name in ("runs.csv", "report.md", "logs"):
        p = exp / name
        p.mkdir() if name == "logs" else p.write_text(name)
    (exp / ".bmx.lock").write_text("")
    return exp


def _spec(digest="d1", argv=("true",), levels=(1,)):
    data = {"name": "x", "workload": {**WORKLOAD, "vars": {"argv": list(argv)}}, "factors": {"x": list(levels)}}
    return SimpleNamespace(digest=digest, factor_names=["x"], path="config/experiments/x.yaml", data=data)


def test_keeping_a_campaign_moves_every_entry_but_the_experiments_own(tmp_path):
    exp = _campaign(tmp_path / "x", "old000000001")
    (exp / "compare").mkdir()
    kept = archive_current(exp)
    dest = exp / "campaigns" / "old000000001"
    assert kept.path == dest and not kept.current
    assert sorted(p.name for p in exp.iterdir()) == [".bmx.lock", "campaigns", "compare"]
    assert {"plan.csv", "runs", "runs.csv", "report.md", "logs", "campaign.json"} <= {p.name for p in dest.iterdir()}
    assert [c.id for c in list_campaigns(exp)] == ["old000000001"]


def test_a_move_cut_short_is_finished_on_the_next_start(tmp_path, monkeypatch):
    # A crash cannot be staged for real here: os.rename fails after two entries
    # instead, leaving exactly the state a killed bmx would leave.
    exp = _campaign(tmp_path / "x", "old000000001")
    real, calls = os.rename, []

    def crash(src, dst):
        calls.append(src)
        if len(calls) > 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(cmod.os, "rename", crash)
    with pytest.raises(KeyboardInterrupt):
        archive_current(exp)
    monkeypatch.setattr(cmod.os, "rename", real)
    assert (exp / ARCHIVE_MARKER).is_file() and (exp / "campaign.json").is_file()
    # campaign.json moves last, so the half-moved campaign is not yet listed twice.
    assert [c.id for c in list_campaigns(exp)] == ["old000000001"]
    what, kept = start_campaign(exp, _spec(), None)
    assert not (exp / ARCHIVE_MARKER).exists()
    dest = exp / "campaigns" / "old000000001"
    assert {"plan.csv", "runs", "runs.csv", "report.md", "logs", "campaign.json"} <= {p.name for p in dest.iterdir()}
    # The next start found no current campaign: a new one began.
    assert what == "new" and kept is None and read_meta(exp)["id"] != "old000000001"
    assert finish_archive(exp) is None


def test_a_complete_campaign_is_kept_when_a_label_is_given_or_the_measurement_changed(tmp_path):
    exp = _campaign(tmp_path / "x", "old000000001")
    assert start_campaign(exp, _spec("d1"), None) == ("continue", None)       # unchanged: a no-op
    # More cells (a new level): they run into the same campaign, as before campaigns were kept.
    assert start_campaign(exp, _spec("d2", levels=(1, 2)), None) == ("continue", None)
    what, kept = start_campaign(exp, _spec("d2", argv=("false",)), None)      # an edited workload
    assert what == "new" and kept.id == "old000000001"
    meta = read_meta(exp)
    assert meta["spec_digest"] == "d2" and "label" not in meta and not (exp / "plan.csv").exists()
    exp2 = _campaign(tmp_path / "y", "old000000002", label="before")
    what, kept = start_campaign(exp2, _spec("d1"), "after")
    assert what == "new" and kept.label == "before" and read_meta(exp2)["label"] == "after"
    assert [c.name for c in list_campaigns(exp2)] == ["before", "after"]


def test_an_unfinished_campaign_continues_and_refuses_another_label(tmp_path):
    exp = _campaign(tmp_path / "x", "cur000000001", runs_ok=1, pending=1, label="first")
    assert start_campaign(exp, _spec("d2"), None) == ("continue", None)
    assert start_campaign(exp, _spec("d1"), "first") == ("continue", None)
    with pytest.raises(BenchmatrixError, match="has runs pending; finish it with 'bmx run"):
        start_campaign(exp, _spec("d1"), "second")
    fresh = tmp_path / "y"
    _make(fresh, id="cur000000002")          # made by a plan, nothing ran yet
    assert start_campaign(fresh, _spec(), "named") == ("relabel", None)
    assert read_meta(fresh)["label"] == "named"


def test_a_label_of_an_earlier_campaign_is_refused(tmp_path):
    exp = _campaign(tmp_path / "x", "cur000000001")
    _make(exp / "campaigns" / "a", id="old000000001", label="before")
    with pytest.raises(BenchmatrixError, match="names the earlier campaign old000000001"):
        start_campaign(exp, _spec(), "before")


def test_ended_at_is_the_end_of_the_last_run_once_nothing_is_pending(tmp_path):
    exp = _campaign(tmp_path / "x", "cur000000001", runs_ok=1, pending=1)
    assert "ended_at" not in mark_progress(exp)
    write_record(exp, {"run_id": "h1-c1-r2", "attempt": 1, "status": "failed", "cell_id": "c1", "host": "h1",
                       "started_at": "2026-01-01T00:05:00+00:00", "ended_at": "2026-01-01T00:05:09+00:00"})
    meta = mark_progress(exp)
    assert meta["ended_at"] == "2026-01-01T00:05:09+00:00" and meta["hosts"] == ["h1"]
    row = campaign_rows(exp)[0]
    assert row["runs"] == {"planned": 2, "ok": 1, "failed": 1, "pending": 0} and row["current"]


def test_counts_from_the_tables_agree_with_the_records(tmp_path):
    import pandas as pd

    exp = _campaign(tmp_path / "x", "cur000000001", runs_ok=3, pending=2)
    write_record(exp, {"run_id": "h1-c1-r4", "attempt": 1, "status": "timeout", "cell_id": "c1", "host": "h1"})
    rows = [{"run_id": f"h1-c1-r{i}", "attempt": 1, "status": "ok"} for i in (1, 2, 3)]
    pd.DataFrame(rows + [{"run_id": "h1-c1-r4", "attempt": 1, "status": "timeout"}]).to_csv(exp / "runs.csv",
                                                                                            index=False)
    expected = {"planned": 5, "ok": 3, "failed": 1, "pending": 1}
    assert cmod.run_counts(exp) == expected == cmod.run_counts(exp, from_records=False)


def test_a_knobs_cost_estimate_is_not_part_of_the_measurement():
    from benchmatrix.campaigns.store import measurement_of

    base = {"knobs": {"ra": {"role": "knob_read_ahead", "cost": "none", "vars": {"device": "/dev/sda"}}}}
    cheaper = {"knobs": {"ra": {"role": "knob_read_ahead", "cost": {"class": "restart", "seconds": 5},
                                "vars": {"device": "/dev/sda"}}}}
    other_device = {"knobs": {"ra": {"role": "knob_read_ahead", "cost": "none", "vars": {"device": "/dev/sdb"}}}}
    assert measurement_of(base) == measurement_of(cheaper)
    assert measurement_of(base) != measurement_of(other_device)


def _progress_from_tables(exp):
    """mark_progress_from_tables over the tables collect has: plan.csv, runs.csv as read back."""
    import io

    import pandas as pd

    from benchmatrix.layout import RUN_COLUMNS
    from benchmatrix.plan.design import read_plan
    from benchmatrix.results.records import load_records, runs_rows

    plan = pd.read_csv(exp / "plan.csv")
    rows, _ = runs_rows(load_records(exp, read_plan(exp / "plan.csv")[0]), [])
    runs = pd.read_csv(io.StringIO(pd.DataFrame(rows, columns=RUN_COLUMNS).to_csv(index=False)))
    return mark_progress_from_tables(exp, plan, runs)


def test_progress_from_tables_is_progress_from_records(tmp_path):
    exp = _campaign(tmp_path / "x", "cur000000001", runs_ok=1, pending=1)
    assert "ended_at" not in _progress_from_tables(exp) and _progress_from_tables(exp) == mark_progress(exp)
    write_record(exp, {"run_id": "h1-c1-r2", "attempt": 1, "status": "failed", "cell_id": "c1", "host": "h1",
                       "started_at": "2026-01-01T00:05:00+00:00", "ended_at": None})
    meta = _progress_from_tables(exp)
    assert meta["ended_at"] == "2026-01-01T00:05:00+00:00" and meta["hosts"] == ["h1"]
    assert meta == mark_progress(exp)


# ---------------------------------------------------------------- end to end: bmx run keeps campaigns

from pathlib import Path  # noqa: E402

from benchmatrix import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]

SPEC = """\
name: keep_cmp
description: campaigns test
inventory: config/inventory/test.yml
factors:
  size: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "import random; print('v=%.4f' % ({base} * {{{{ size }}}} + random.gauss(0, 1)))"]
  metrics:
    v: {{regex: 'v=(?P<value>[0-9.]+)', unit: ms, better: lower}}
  timeout: 60
before_run: [sync]
replicates: 3
warmup: 0
order: {{strategy: random, seed: 5}}
"""


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """One experiment run for real as two campaigns, ``before`` and ``edited`` (the
    workload's command changed), with a no-op ``bmx run`` between them. How a label
    alone keeps a campaign of an unchanged spec is run for real by
    tests/e2e/test_across_time_e2e.py (old1, new1, a, b); what reads campaigns uses synthetic ones
    (below). Ansible only carries the runs here: the fake Ansible port stands in for it
    (tests/fake_ansible.py)."""
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("campaigns")))
    spec = project.write_spec("keep_cmp", SPEC.format(base=100))
    out = {}
    for label in ("before", None):
        if label is None:   # unchanged and complete: a no-op, no new campaign
            res = project.bmx("run", str(spec), "--cores", "1")
        else:
            res = project.bmx("run", str(spec), "--cores", "1", "--campaign", label)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        out[label] = res
    project.write_spec("keep_cmp", SPEC.format(base=101))
    res = project.bmx("run", str(spec), "--cores", "1", "--campaign", "edited")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out["edited"] = res
    return project, spec, out


@pytest.mark.slow
def test_running_again_with_a_label_keeps_every_campaign_apart(kept):
    project, spec, out = kept
    exp = project.exp("keep_cmp")
    # (Not just "kept in": the findings' warnings may say runs are "kept in the statistics".)
    kept = re.compile(r"^bmx: campaign \S+ kept in ", re.M)
    assert not kept.search(out[None].stdout) and kept.search(out["edited"].stdout)
    found = list_campaigns(exp)
    assert [c.name for c in found] == ["before", "edited"] and found[-1].path == exp
    # Each campaign ran in a work directory of its own on the host.
    assert {p.name for p in project.hostwork.iterdir()} >= {f"keep_cmp-{c.id}" for c in found}
    for c in found:
        meta = c.meta
        assert meta["spec_digest"] and meta["hosts"] == ["localhost"] and meta["ended_at"] >= meta["created_at"]
        records = [json.loads(p.read_text()) for p in c.path.glob("runs/*/*/record.json")]
        # Nothing mixed: each campaign holds its own six runs, all run after it was made.
        assert len(records) == 6 and all(r["started_at"] >= meta["created_at"] for r in records)
        assert len(pd.read_csv(c.path / "runs.csv")) == 6 and (c.path / "report.html").is_file()
    assert found[0].meta["spec_digest"] != found[1].meta["spec_digest"]
    assert (found[0].path / "campaign.json").is_file() and not (exp / ".bmx_archiving.json").exists()
    res = project.bmx("campaigns", str(spec), "--json")
    rows = json.loads(res.stdout)
    assert res.returncode == 0 and [r["label"] for r in rows] == ["before", "edited"]
    assert [r["current"] for r in rows] == [False, True]
    assert all(r["runs"] == {"planned": 6, "ok": 6, "failed": 0, "pending": 0} for r in rows)
    text = project.bmx("campaigns", str(spec)).stdout.splitlines()
    assert text[0].split()[:3] == ["id", "label", "started_at"] and text[-1].startswith("*")


# ---------------------------------------------------------------- synthetic campaigns: compare, export

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """The experiment above as three synthetic campaigns (tests/campaign_factory.py):
    ``before``, ``after`` (the same spec; its before_run ``sync`` took other seconds in
    every run) and ``edited`` (the workload's command changed)."""
    from campaign_factory import Campaign, make_experiment

    return make_experiment(
        tmp_path_factory.mktemp("synthetic") / "project", SPEC.format(base=100), name="keep_cmp", seed=11,
        means=lambda factors, metric: 100.0 * int(factors["size"]),
        campaigns=[Campaign(label="before", before_run_s=0.004), Campaign(label="after", before_run_s=0.3),
                   Campaign(label="edited", spec=SPEC.format(base=101))])


@pytest.fixture
def bmx(synthetic, monkeypatch, capsys):
    """``bmx ARGS`` in-process on the synthetic project: (exit status, stdout, stderr)."""
    monkeypatch.setenv("BMX_PROJECT_DIR", str(synthetic.root))
    monkeypatch.chdir(synthetic.root)

    def run(*args: str) -> tuple[int, str, str]:
        rc = cli.main([str(a) for a in args])
        stdout, stderr = capsys.readouterr()
        return rc, stdout, stderr
    return run


def test_compare_of_two_runs_of_the_same_workload_gives_verdicts(synthetic, bmx):
    rc, stdout, stderr = bmx("compare", "before", "after", "--spec", synthetic.spec_path)
    # Not refused for the seconds each run's before_run sync took (issue 22, item 5).
    assert rc == 0, stdout + stderr
    assert "not comparable" not in stdout and "{" not in stdout, stdout
    out_dir = synthetic.exp / "compare" / "before_vs_after"
    table = pd.read_csv(out_dir / "compare.csv")
    assert len(table) == 2 and set(table["size"]) == {1, 2} and set(table["metric"]) == {"v"}
    # The same means, 2 % noise: nothing better or worse.
    assert set(table["verdict"]) <= {"equivalent", "inconclusive"}
    assert set(table["basis"]) == {"prior"}       # "edited" measured something else: no history, the prior
    md = (out_dir / "compare.md").read_text()
    assert "| v (ms) | size=1 |" in md and (out_dir / "compare.html").is_file()


def test_compare_refuses_an_edited_workload_with_a_table_of_what_differs(synthetic, bmx):
    exp = synthetic.exp
    after = find_campaign(exp, "after")
    # Campaigns named by directory; no --spec needed.
    rc, stdout, stderr = bmx("compare", after.path, exp)
    assert rc == 3, stdout + stderr
    # One short line per changed field, not the records' workloads as JSON.
    lines = stdout.splitlines()
    assert lines[1] == "bmx: not comparable: the measurement differs (3 difference(s)):", stdout
    code = "import random; print('v=%.4f' % ({} + random.gauss(0, 1)))"
    assert lines[2] == f"  spec: workload.vars.argv.2: {code.format('100 * {{ size }}')} → " \
                       f"{code.format('101 * {{ size }}')}", lines[2]
    for line, size in zip(sorted(lines[3:5], key=lambda t: "* 2" in t), (1, 2)):
        assert line.startswith("  cell ") and line.endswith(
            f" on localhost: workload.argv.2: {code.format(f'100 * {size}')} → {code.format(f'101 * {size}')}"), line
    out_dir = exp / "compare" / "after_vs_edited"
    prov = pd.read_csv(out_dir / "provenance.csv")
    assert set(prov.loc[prov["kind"] == "measurement", "what"]) == {"workload.vars.argv.2", "workload.argv.2"}
    assert "Not comparable" in (out_dir / "compare.md").read_text()


def test_two_campaigns_of_readahead_scan_are_comparable(tmp_path, monkeypatch, capsys):
    """Two campaigns of the shipped config/experiments/readahead_scan.yaml (drop_caches
    before every run, a live knob) are compared, not refused.

    Running it for real needs a loop-device file system and 2 x 12 scans of 256 MiB:
    its campaigns are synthetic (tests/campaign_factory.py), the shipped spec's plan,
    fio's argv from its vars, knob states and fio's metrics, the second campaign's
    drop_caches slower (a busier page cache).
    """
    from campaign_factory import Campaign, make_experiment

    ra_spec = ROOT / "config" / "experiments" / "readahead_scan.yaml"
    bandwidth = {0: 30000.0, 4096: 90000.0}

    def means(factors, metric):
        bw = bandwidth[int(factors["read_ahead_kb"])]
        return {"read_bw_kib": bw, "read_runtime_ms": 262144 / bw * 1000, "read_clat_p99_us": 2e7 / bw}[metric]

    made = make_experiment(tmp_path / "project", ra_spec.read_text(), name="readahead_scan", seed=2008,
                           means=means, metrics={"read_bw_kib": "KiB/s", "read_runtime_ms": "ms",
                                                 "read_clat_p99_us": "us"},
                           campaigns=[Campaign(label="first", before_run_s=0.004),
                                      Campaign(label="second", before_run_s=0.3)])
    rec = json.loads(next(made.exp.glob("runs/*/1/record.json")).read_text())
    assert rec["workload"]["argv"][0] == "fio" and rec["workload"]["before_run"][0]["action"] == "drop_caches"
    assert rec["knobs"]["read_ahead_kb"]["role"] == "knob_read_ahead"
    monkeypatch.setenv("BMX_PROJECT_DIR", str(made.root))
    monkeypatch.chdir(made.root)
    rc = cli.main(["compare", str(made.campaign_dir(0)), str(made.exp), "--out", str(tmp_path / "out")])
    stdout, stderr = capsys.readouterr()
    assert rc in (0, 1), stdout + stderr
    assert "not comparable" not in stdout and "{" not in stdout, stdout
    table = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert set(table["metric"]) == {"read_runtime_ms", "read_bw_kib", "read_clat_p99_us"} and len(table) == 6
    assert "Not comparable" not in (tmp_path / "out" / "compare.md").read_text()


def test_export_of_a_kept_campaign_by_label(synthetic, bmx):
    """bmx export --campaign (issue 24): the kept campaign's runs, with its own id."""
    spec = synthetic.spec_path
    before = find_campaign(synthetic.exp, "before")
    rc, stdout, stderr = bmx("export", spec, "--campaign", "before", "--format", "csv", "--out", "-")
    assert rc == 0, stderr
    import io

    table = pd.read_csv(io.StringIO(stdout))
    assert set(table["campaign"]) == {before.id} and len(table) == 6
    assert sorted(table["run_id"]) == sorted(pd.read_csv(before.path / "runs.csv")["run_id"])
    # Without --out the file goes into that campaign's directory, not the current one's.
    rc, stdout, stderr = bmx("export", spec, "--campaign", before.id[:6], "--format", "bmf")
    assert rc == 0 and f"export: {before.path / 'bmf.json'}" in stdout, stdout + stderr
    rc, stdout, stderr = bmx("export", spec, "--campaign", "nope", "--format", "csv")
    err = stderr.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "no campaign 'nope'; campaigns: " in err[0], stderr
