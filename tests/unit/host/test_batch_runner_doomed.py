"""The batch runner ends its slice early when its first runs all fail alike (issue 38,
item 4): the controller then sees their records at once and stops a doomed campaign,
instead of a batch of 30 runs of a missing program running all 30. A real runner
process, real (missing and failing) programs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmatrix.host import batch_runner

RUNNER = Path(batch_runner.__file__)


def run(run_id: str, seq: int, argv: list[str], cell: str) -> dict:
    return {"run_id": run_id, "attempt": 1, "seq": seq, "timeout": 30, "before_run": [], "argv": argv,
            "cell_id": cell}


def batch(tmp_path: Path, runs: list[dict], name: str = "b1", keep_going: bool | None = None) -> dict:
    workdir = tmp_path / "work"
    manifest = tmp_path / "manifest.json"
    extra = {} if keep_going is None else {"keep_going": keep_going}
    manifest.write_text(json.dumps({"experiment": "t", "batch": name, "workdir": str(workdir),
                                    "archive": str(workdir / f"{name}.tar.gz"), "containment": "process_tree",
                                    "runs": runs, **extra}))
    proc = subprocess.run([sys.executable, str(RUNNER), str(manifest)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_thirty_runs_of_a_missing_program_end_the_slice_after_five(tmp_path):
    missing = str(tmp_path / "no-such-tool")
    runs = [run(f"r{i}", i, [missing, f"--n={i}"], "abc"[i % 3]) for i in range(30)]
    summary = batch(tmp_path, runs)
    assert summary["executed"] == [f"r{i}" for i in range(5)], summary
    assert summary["deferred"] == [f"r{i}" for i in range(5, 30)], summary
    # With --keep-going-on-failures the controller starts the next slice of the same
    # batch, which runs to its end.
    summary = batch(tmp_path, runs[5:10], keep_going=True)
    assert len(summary["executed"]) == 5 and not summary.get("deferred"), summary


def test_a_resumed_doomed_batch_ends_early_again(tmp_path):
    # bmx run stopped the doomed campaign; run again unfixed (no --keep-going-on-failures),
    # the batch's other runs fail alike: five of them, not all 25 (issue 38, trial point 21).
    missing = str(tmp_path / "no-such-tool")
    runs = [run(f"r{i}", i, [missing, f"--n={i}"], "abc"[i % 3]) for i in range(30)]
    assert len(batch(tmp_path, runs)["executed"]) == 5
    summary = batch(tmp_path, runs[5:], keep_going=False)
    assert summary["executed"] == [f"r{i}" for i in range(5, 10)], summary
    assert summary.get("doomed") is True, summary


def test_an_ok_run_or_a_second_way_of_failing_goes_on(tmp_path):
    missing = str(tmp_path / "no-such-tool")
    ok = [sys.executable, "-c", "pass"]
    runs = [run("ok", 0, ok, "a")] + [run(f"r{i}", i + 1, [missing], "ab"[i % 2]) for i in range(8)]
    assert len(batch(tmp_path, runs, "b1")["executed"]) == 9
    exits = [sys.executable, "-c", "raise SystemExit(3)"]
    runs = [run(f"s{i}", i, [missing] if i != 2 else exits, "ab"[i % 2]) for i in range(8)]
    assert len(batch(tmp_path, runs, "b2")["executed"]) == 8


def test_five_failures_in_one_cell_are_not_a_doomed_campaign(tmp_path):
    missing = str(tmp_path / "no-such-tool")
    runs = [run(f"r{i}", i, [missing], "a") for i in range(8)]
    assert len(batch(tmp_path, runs)["executed"]) == 8
