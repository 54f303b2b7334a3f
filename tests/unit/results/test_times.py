"""Times are times: start_ns, the report's Execution timeline and every duration it
shows, against a campaign of known length (42 s, as the quickstart's runs take)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze.stats import execution_order, start_ns, summarize, with_start_ns
from benchmatrix.report.render import render_report, report_context
from benchmatrix.results.records import write_record
from benchmatrix.results.status import campaign_status
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
T0 = pd.Timestamp("2026-03-01T10:00:00Z")


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")


def iso(seconds: float) -> str:
    """As the controller writes them (benchmatrix.results.records.iso): UTC, microseconds."""
    return (T0 + pd.Timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def known_campaign(spec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """32 runs in two batches, each run 1.25 s after the one before it and 1 s long:
    batch 1 from 0 to 19.75 s, batch 2 from 22.25 to 42.0 s after T0."""
    from unit.report.test_report import make_plan, make_runs

    plan = make_plan(spec)
    plan["batch"] = np.where(np.arange(len(plan)) < 16, "b1", "b2")
    runs = make_runs(plan)
    starts = np.arange(len(runs)) * 1.25 + np.where(np.arange(len(runs)) < 16, 0.0, 2.25)
    runs["started_at"] = [iso(s) for s in starts]
    runs["ended_at"] = [iso(s + 1.0) for s in starts]
    runs["duration_s"] = 1.0
    assert starts[-1] + 1.0 == 42.0
    return plan, runs


def test_start_ns_is_nanoseconds_whatever_the_text_resolution():
    frame = pd.DataFrame({"started_at": ["1970-01-01T00:00:01+00:00", "1970-01-01T00:00:01.5+00:00",
                                         "2026-03-01T11:00:42.000001+01:00", None, "not a time"]})
    got = start_ns(frame)
    never = np.iinfo("int64").max
    assert got.tolist() == [10**9, 1_500_000_000, int(T0.value) + 42 * 10**9 + 1000, never, never]
    # Seconds-only text (pandas 3 infers second resolution from it) is nanoseconds too.
    assert start_ns(pd.DataFrame({"ended_at": ["1970-01-01T00:00:02Z"]}), "ended_at").tolist() == [2 * 10**9]
    assert with_start_ns(frame)["_start_ns"].tolist() == got.tolist()


def test_execution_order_sorts_by_time_across_resolutions():
    frame = pd.DataFrame({"seq": [1, 2, 3], "attempt": [1, 1, 1],
                          "started_at": ["2026-03-01T10:00:02Z", "2026-03-01T10:00:01.5+00:00", None]})
    assert execution_order(frame).tolist() == [1, 0, 2]


def test_timeline_and_durations_of_a_campaign_of_known_length(spec, tmp_path):
    plan, runs = known_campaign(spec)
    ctx = report_context(spec, plan, runs, summarize(runs, spec.factor_names, {}), {}, with_plots=False)
    (host,) = ctx["timeline"]["hosts"]
    assert host["first_start"] == "2026-03-01T10:00:00+00:00"
    assert host["last_end"] == "2026-03-01T10:00:42+00:00"
    assert host["elapsed_s"] == pytest.approx(42.0)
    assert (host["attempts"], host["ok"], host["failed"]) == (32, 32, 0)
    batches = {b["batch"]: b for b in ctx["timeline"]["batches"]}
    assert batches["b1"]["first_start"] == "2026-03-01T10:00:00+00:00"
    assert batches["b1"]["elapsed_s"] == pytest.approx(15 * 1.25 + 1.0)
    assert batches["b2"]["first_start"] == "2026-03-01T10:00:22+00:00"   # 22.25 s, shown to the second
    assert batches["b2"]["elapsed_s"] == pytest.approx(42.0 - 22.25)
    # The executed-order table keeps the recorded times and durations as they are.
    head = ctx["executed"]["head"]
    assert [r["started_at"] for r in head[:2]] == [iso(0), iso(1.25)]
    assert all(r["duration_s"] == 1.0 for r in head)

    render_report(spec, plan, runs, summarize(runs, spec.factor_names, {}), {}, tmp_path)
    md = (tmp_path / "report.md").read_text()
    timeline = md.split("## Execution timeline")[1]
    assert "| localhost | 2026-03-01T10:00:00+00:00 | 2026-03-01T10:00:42+00:00 | 42.00 | 32 | 32 | 0 |" \
        in timeline
    assert "1970" not in md


def test_bmx_status_elapsed_of_the_same_campaign(spec, tmp_path):
    plan, runs = known_campaign(spec)
    (tmp_path / "plan.csv").write_text(plan.to_csv(index=False))
    for _, r in runs.iterrows():
        write_record(tmp_path, {**{k: r[k] for k in ("run_id", "cell_id", "host", "started_at", "ended_at")},
                                "attempt": 1, "status": "ok", "duration_s": 1.0,
                                "factors": {f: r[f] for f in spec.factor_names}})
    status = campaign_status(tmp_path, spec.factor_names)
    assert status["elapsed_s"] == pytest.approx(42.0)
    assert status["median_run_s"] == pytest.approx(1.0)
