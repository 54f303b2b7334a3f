"""What a batch runner left in its work directory on the host, for tests that look there.

The runner's layout (benchmatrix/host/batch_runner.py, "Host layout"): a run's files are
``runs/RUN_ID.ATTEMPT.NAME`` and its result a line of ``runs/results.jsonl``. Tests read
it through the runner's own readers, so they check what a batch execution would skip.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from benchmatrix.host import batch_runner


def results(runs: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(run id, attempt) -> result of every run with a result line in ``runs/`` (the
    runner's ``runs`` directory), the last line of each."""
    return {(rid, int(att)): result
            for (rid, att), (_line, result) in batch_runner.read_results(str(Path(runs).parent)).items()}


def result(workdir: Path, run_id: str, attempt: int = 1) -> dict[str, Any]:
    """The result of one run in ``workdir`` (the runner's work directory); fails if none."""
    found = batch_runner.read_result(str(workdir), run_id, attempt)
    assert found is not None, f"no result of {run_id}.{attempt} in {workdir}/runs"
    return found


def file(workdir: Path, run_id: str, name: str, attempt: int = 1) -> Path:
    """A run's file ``name`` (stdout, stderr, counters.json, usage.json, inputs) in ``workdir``."""
    return Path(batch_runner.run_file(str(workdir), run_id, attempt, name))


def leave_run(workdir: Path, run_id: str, files: dict[str, bytes], finished: bool = True, **result: Any) -> bytes:
    """Leave a run in ``workdir`` as the runner does (flat: runs/RUN_ID.1.NAME, inputs/ a
    directory of its own; stdout and stderr empty unless given), and when ``finished`` its
    result line, ``result`` added, in the index. Returns the line."""
    files = {"stdout": b"", "stderr": b"", **files}
    for name, data in files.items():
        top, _, rest = name.partition("/")
        path = file(workdir, run_id, top)
        path = path / rest if rest else path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    line = json.dumps({"version": 1, "run_id": run_id, "attempt": 1, **result,
                       "output_bytes": {n: len(files[n]) for n in ("stdout", "stderr")}}).encode()
    if finished:
        with open(Path(workdir) / "runs" / batch_runner.RESULTS_INDEX, "ab") as fh:
            fh.write(line + b"\n")
    return line


def finished(runs: Path, attempt: int | None = None) -> set[str]:
    """Run ids with a result line in ``runs/`` (of ``attempt`` only, when given)."""
    return {rid for rid, att in results(runs) if attempt is None or att == attempt}


def in_flight(runs: Path) -> set[str]:
    """Run ids whose stdout exists in ``runs/`` without a result line: started, not finished
    (a run the runner was executing, or one an interrupt cut short and left behind)."""
    done = {(rid, str(att)) for rid, att in results(runs)}
    started = {tuple(p.name[: -len(".stdout")].rsplit(".", 1)) for p in Path(runs).glob("*.stdout")}
    return {rid for rid, _att in started - done}


def run_dir(workdir: Path, run_id: str, attempt: int = 1) -> Path:
    """The run's directory as the controller gets it: the run archived by the runner's own
    writer, unpacked by its reader into ``WORKDIR-unpacked/runs/RUN_ID/ATTEMPT/``."""
    run = {"run_id": run_id, "attempt": attempt}
    done = batch_runner.finished_runs(str(workdir), [run])
    assert done, f"{run_id}.{attempt} did not finish in {workdir}"
    dest = Path(f"{workdir}-unpacked")
    dest.mkdir(exist_ok=True)
    archive = dest / f"{run_id}.{attempt}.tar.gz"
    batch_runner._archive({"archive": str(archive), "runs": [run]}, str(workdir), done)
    with gzip.open(archive, "rb") as stream:
        for name, regular, chunk in batch_runner.read_archive(stream):
            assert regular, name
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"".join(iter(chunk, b"")))
    return dest / "runs" / run_id / str(attempt)
