"""`bmx run` prints a progress line while a long batch runs (issue 15): one batch may
hold up to batch_max_runs runs of unknown duration, and Snakemake prints a line only
when a job ends."""

from __future__ import annotations

import json

from benchmatrix.execute.supervise import progress_tick


def test_progress_line_counts_records_and_runs_finished_on_the_hosts(tmp_path):
    exp = tmp_path
    assert progress_tick(exp, 5, None) == (None, (0, 0))  # nothing yet: no line
    (exp / "batches").mkdir()
    (exp / "batches" / "b1.progress.json").write_text(json.dumps(
        {"batch": "b1", "finished": [{"run_id": "r1", "attempt": 1}, {"run_id": "r2", "attempt": 1}]}))
    line, last = progress_tick(exp, 65, (0, 0))
    assert line == "bmx: 0 run records, 2 more finished on the hosts, elapsed 0:01:05"
    # The first slice's records are written: r1 no longer counts as only on the host.
    (exp / "runs" / "r1" / "1").mkdir(parents=True)
    (exp / "runs" / "r1" / "1" / "record.json").write_text("{}")
    line, last = progress_tick(exp, 95, last)
    assert line == "bmx: 1 run records, 1 more finished on the hosts, elapsed 0:01:35"
    assert progress_tick(exp, 125, last) == (None, last)  # unchanged: no line
