"""`bmx status` counts runs a running batch reported finished on its host (issue 15)."""

from __future__ import annotations

import base64
import json

from benchmatrix.execute.lease import save_progress
from benchmatrix.files import atomic_write
from benchmatrix.plan.design import PlannedRun, plan_csv_text
from benchmatrix.results.records import write_records
from benchmatrix.results.status import campaign_status


def test_pending_runs_finished_on_the_host_are_counted_until_their_records_exist(tmp_path):
    plan = [PlannedRun(i, "h1", f"r{i}", "c1", i, False, False, 1, "b1", 1, {"size": "1"}) for i in (1, 2, 3)]
    atomic_write(tmp_path / "plan.csv", plan_csv_text(plan, ["size"]))
    lines = "".join(json.dumps({"run_id": f"r{i}", "attempt": 1, "outcome": "exited"}) + "\n" for i in (1, 2))
    # The host's file as the lease renewal's slurp returns it; a half-written last line is skipped.
    save_progress(tmp_path, "b1", "h1", {"content": base64.b64encode((lines + '{"run_id": "r3"').encode()).decode()})
    totals = campaign_status(tmp_path, ["size"])["totals"]
    assert (totals["pending"], totals["finished_on_host"]) == (3, 2)
    # Once r1's record is in, it is ok, no longer "on the host".
    write_records(tmp_path, [{"run_id": "r1", "attempt": 1, "status": "ok", "cell_id": "c1", "host": "h1"}])
    totals = campaign_status(tmp_path, ["size"])["totals"]
    assert (totals["ok"], totals["pending"], totals["finished_on_host"]) == (1, 2, 1)
    save_progress(tmp_path, "b1", "h1", None)  # nothing read: the earlier file stays
    assert (tmp_path / "batches" / "b1.progress.json").is_file()
