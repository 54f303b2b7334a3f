"""The one run-state rule (benchmatrix.results.status.decide), and that `bmx status`, the
report and its warnings all count by it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmatrix.analyze.stats import summarize
from benchmatrix.layout import FAILED_STATES, STATES, State, Status
from benchmatrix.plan.design import read_plan
from benchmatrix.report.render import report_context
from benchmatrix.results.records import write_record
from benchmatrix.results.status import campaign_status, decide, exit_code, run_states
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]

# run_id -> (planned attempts, recorded (attempt, status) pairs, state, outcome)
CASES = {
    "ok1": ([1], [(1, "ok")], "ok", "ok"),
    "fail1": ([1], [(1, "failed")], "failed", "failed"),
    "timeout1": ([1], [(1, "timeout")], "failed", "timeout"),
    "unreach1": ([1], [(1, "invalid"), (2, "unreachable")], "failed", "unreachable"),
    "never": ([1], [], "pending", "pending"),
    "cut": ([1], [(1, "interrupted")], "pending", "pending"),
    "cut_then_failed": ([1], [(1, "interrupted"), (2, "failed")], "failed", "failed"),
    "requested": ([1, 2], [(1, "failed")], "pending", "pending"),     # a re-run round not yet run
    "recovered": ([1, 2], [(1, "timeout"), (2, "ok")], "ok", "ok"),
    "remeasure": ([1, 2], [(1, "ok")], "ok", "ok"),  # --where re-run of an ok run: its result stands
    "ok_then_failed": ([1, 2], [(1, "ok"), (2, "failed")], "ok", "ok"),
    "odd": ([1], [(1, "exploded")], "failed", "failed"),           # an unknown status counts as failed
    "case": ([1], [(1, " OK ")], "ok", "ok"),
}


def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    plan = pd.DataFrame([{"run_id": rid, "attempt": a} for rid, (planned, *_) in CASES.items() for a in planned])
    runs = pd.DataFrame([{"run_id": rid, "attempt": a, "status": s}
                         for rid, (_, recs, *_) in CASES.items() for a, s in reversed(recs)])
    return plan, runs


def test_the_enums_name_every_status_and_state():
    assert [s.value for s in Status] == ["ok", "failed", "timeout", "unreachable", "invalid", "interrupted"]
    assert STATES == ("ok", "failed", "pending") and [s.value for s in State] == list(STATES)
    assert FAILED_STATES == ("failed", "timeout", "unreachable", "invalid")


def test_decide_on_a_small_plan_and_runs_frame():
    plan, runs = frames()
    # A run recorded but absent from the plan (an older plan's run) is judged too, last.
    runs = pd.concat([runs, pd.DataFrame([{"run_id": "extra", "attempt": "1", "status": "ok"}])])
    got = decide(plan, runs)
    assert got["run_id"].tolist() == [*CASES, "extra"]
    assert list(got.index) == list(range(len(CASES) + 1))
    want = {rid: (state, outcome) for rid, (_, _, state, outcome) in CASES.items()} | {"extra": ("ok", "ok")}
    assert dict(zip(got["run_id"], zip(got["state"], got["outcome"]))) == want
    assert got.set_index("run_id").at["never", "latest"] is None
    assert got.set_index("run_id").at["cut_then_failed", "latest"] == "failed"


def test_decide_without_a_plan_and_on_empty_frames():
    _, runs = frames()
    got = decide(None, runs).set_index("run_id")
    assert got.at["requested", "state"] == "failed"   # without the plan no re-run is known to wait
    assert got.at["cut", "state"] == "pending"
    empty = decide(pd.DataFrame(columns=["run_id", "attempt"]), pd.DataFrame(columns=["run_id", "attempt", "status"]))
    assert empty.empty and list(empty.columns) == ["run_id", "state", "outcome", "latest"]


def test_exit_code_names_failed_before_pending():
    totals = {"planned": 3, "ok": 1, "pending": 0, **{s: 0 for s in FAILED_STATES}}
    assert exit_code({"totals": totals}) == 0
    assert exit_code({"totals": totals | {"pending": 1}}) == 3
    assert exit_code({"totals": totals | {"pending": 1, "invalid": 1}}) == 1


# ----------------------------------------------------------------- status and report agree

@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")


def campaign(spec, tmp_path: Path) -> tuple[Path, pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """An experiment directory with plan.csv and the records of a partial campaign:
    one run of each CASES kind, every other planned run ok; and run_id -> its kind."""
    from unit.report.test_report import make_plan, make_runs

    plan = make_plan(spec)
    measured = plan[plan["warmup"] == "false"]
    kinds = dict(zip(measured["run_id"].iloc[:len(CASES)], CASES))
    extra = []
    for rid, kind in kinds.items():
        if 2 in CASES[kind][0]:
            extra.append(plan.loc[plan["run_id"] == rid].assign(attempt=2, seq=len(plan) + len(extra) + 1))
    plan = pd.concat([plan, *extra], ignore_index=True)
    (tmp_path / "plan.csv").write_text(plan.to_csv(index=False))
    first = make_runs(plan[plan["attempt"] == 1])
    rows = []
    for _, row in first.iterrows():
        recs = CASES[kinds[row["run_id"]]][1] if row["run_id"] in kinds else [(1, "ok")]
        for attempt, status in recs:
            rows.append(row.to_dict() | {"attempt": attempt, "status": status.strip(),
                                         "reason": "" if status.strip() == "ok" else f"{status} here"})
    runs = pd.DataFrame(rows)
    planned, factor_names = read_plan(tmp_path / "plan.csv")
    by_id = {p.run_id: p for p in planned}
    for r in rows:
        p = by_id[r["run_id"]]
        write_record(tmp_path, {"run_id": p.run_id, "attempt": int(r["attempt"]), "cell_id": p.cell_id,
                                "host": p.host, "status": r["status"], "reason": r["reason"],
                                "started_at": r["started_at"], "ended_at": r["ended_at"],
                                "duration_s": r["duration_s"], "factors": p.factors})
    for col in ("read_iops", "read_bw_kib", "read_clat_mean_us", "read_clat_p99_us"):
        runs.loc[runs["status"] != "ok", col] = np.nan
    return tmp_path, plan, runs, kinds


def test_bmx_status_and_the_report_count_the_same_states(spec, tmp_path):
    exp, plan, runs, kinds = campaign(spec, tmp_path)
    status = campaign_status(exp, spec.factor_names)
    t = status["totals"]
    want_failed = sum(1 for _, _, state, _ in CASES.values() if state == "failed")
    want_pending = sum(1 for _, _, state, _ in CASES.values() if state == "pending")
    assert (sum(t[s] for s in FAILED_STATES), t["pending"]) == (want_failed, want_pending)
    assert t["timeout"] == 1 and t["unreachable"] == 1 and t["failed"] == want_failed - 2
    assert exit_code(status) == 1
    by_id = {s.run.run_id: s.state for s in run_states(exp)}
    assert by_id == dict(zip(decide(plan, runs)["run_id"], decide(plan, runs)["outcome"]))

    summary = summarize(runs, spec.factor_names, {"read_iops": "IO/s"})
    ctx = report_context(spec, plan, runs, summary, {}, with_plots=False)
    progress = ctx["progress"]
    assert (progress["failed"], progress["pending"]) == (want_failed, want_pending)
    assert progress["rows"][-1]["ok"] == t["ok"] and progress["total"] == t["planned"]
    # The warning at the top counts the same failed runs.
    (failed,) = [w for w in ctx["warnings"] if w["check"] == "failed"]
    assert failed["title"].startswith(f"{want_failed} run(s) failed"), failed
    # The failed-attempts table says where each run stands now.
    now = {r["run_id"]: r["state"] for r in ctx["failed"]["rows"]}
    assert now and all(now[rid] == CASES[kinds[rid]][2] for rid in now)
    assert "pending" in now.values() and "ok" in now.values() and "failed" in now.values()


def test_only_pending_runs_make_status_exit_3(spec, tmp_path):
    from unit.report.test_report import make_plan, make_runs

    plan = make_plan(spec)
    (tmp_path / "plan.csv").write_text(plan.to_csv(index=False))
    runs = make_runs(plan)
    for i, (_, row) in enumerate(runs.iterrows()):
        if i == 5:
            break  # the campaign stopped here: the rest is pending
        write_record(tmp_path, {**{k: row[k] for k in ("run_id", "cell_id", "host", "started_at", "ended_at")},
                                "attempt": 1, "status": "interrupted" if i == 4 else "ok",
                                "factors": {f: row[f] for f in spec.factor_names}})
    status = campaign_status(tmp_path, spec.factor_names)
    assert status["totals"]["ok"] == 4 and status["totals"]["pending"] == len(plan) - 4
    assert exit_code(status) == 3


def test_publish_counts_the_states_bmx_status_counts(spec, tmp_path):
    """An ok run followed by a failed re-run is ok on the site as in `bmx status` (one rule, decide)."""
    from benchmatrix.campaigns.publish import campaign_page
    from benchmatrix.campaigns.store import read_campaign

    exp, plan, runs, kinds = campaign(spec, tmp_path)
    assert "ok_then_failed" in kinds.values()
    runs.to_csv(exp / "runs.csv", index=False)
    (exp / "campaign.json").write_text('{"id": "c0000000001"}')
    t = campaign_status(exp, spec.factor_names)["totals"]
    page = campaign_page(read_campaign(exp, current=True), "c0000000001")
    assert (page.runs_ok, page.runs_failed) == (t["ok"], sum(t[s] for s in FAILED_STATES))
