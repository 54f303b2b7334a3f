#!/usr/bin/env python3
"""A batch's results from the runner to the controller's run directories, three ways, on
the same runner work directory (``--runs`` runs of /bin/echo left by the real runner), in a
shuffled order each round:

  archive  the runner packs its archive (``batch_runner._archive``) and the batch job
           unpacks it into the runs' directories (``execute.batch._unpack_runs``): a host
           reached over SSH, and a local one before issue 34's direct take-in;
  copied   the batch job copies the finished runs' files from the work directory
           (``execute.batch._copy_runs`` with every file copied): a host reached with the
           local connection, before the links;
  linked   the same, the files hard-linked where they can be (``_copy_runs`` as it is).

Then what the file operations a run's take-in makes cost in that directory (µs each,
loops of ``--ops`` on fresh names): create an empty file, mkdir, hard link, rename.

    TMPDIR=/var/tmp bench/take_in.py --runs 1000 --rounds 7
    TMPDIR=/dev/shm bench/take_in.py --runs 1000 --rounds 7

Prints the medians in ms a run; writes bench/results/take_in.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, temp_dir, write_result  # noqa: E402

from benchmatrix.execute import batch  # noqa: E402
from benchmatrix.host import batch_runner  # noqa: E402
from benchmatrix.plan.design import PlannedRun  # noqa: E402


def _file_ops(top: Path, n: int) -> dict[str, float]:
    """µs a call of each file operation, ``n`` calls on fresh names in ``top``."""
    src = top / "src"
    src.mkdir()
    for i in range(n):
        (src / str(i)).touch()

    def create(d: str, i: int) -> None:
        os.close(os.open(f"{d}/{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

    ops: dict[str, Callable[[str, int], None]] = {
        "create": create,
        "mkdir": lambda d, i: os.mkdir(f"{d}/{i}"),
        "link": lambda d, i: os.link(f"{src}/{i}", f"{d}/{i}"),
        "rename": lambda d, i: os.rename(f"{src}/{i}", f"{d}/{i}"),  # last: it empties src
    }
    out = {}
    for name, op in ops.items():
        d = top / name
        d.mkdir()
        os.sync()
        t0 = time.perf_counter()
        for i in range(n):
            op(str(d), i)
        out[name] = (time.perf_counter() - t0) / n * 1e6
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=3000, help="calls of each file operation timed")
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with temp_dir("bmx-bench-take-in-") as tmp:
        work = tmp / "work"
        manifest = {"batch": "b1", "workdir": str(work), "archive": str(work / "batches" / "b1.tar.gz"),
                    "runs": [{"run_id": f"r{i:05d}", "attempt": 1, "seq": i, "timeout": 60,
                              "argv": ["/bin/echo", "runtime: 5us"]} for i in range(args.runs)]}
        res = subprocess.run([sys.executable, str(ROOT / "benchmatrix" / "host" / "batch_runner.py"), "-"],
                             input=json.dumps(manifest), capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"the runner failed: {res.stderr[-2000:]}")
        todo = [PlannedRun(seq=i, host="localhost", run_id=r["run_id"], cell_id="c", replicate=1, warmup=False,
                           control=False, visit=1, batch="b1", attempt=1) for i, r in enumerate(manifest["runs"])]
        linked = batch._take_file
        times: dict[str, list[float]] = {"archive": [], "copied": [], "linked": []}
        for _ in range(args.rounds):
            exp = Path(tempfile.mkdtemp(dir=tmp))
            order = list(times)
            rng.shuffle(order)
            for way in order:
                os.sync()  # each way starts with nothing of the others' left to write back
                t0 = time.perf_counter()
                if way == "archive":
                    done = batch_runner.finished_runs(str(work), manifest["runs"])
                    archive = batch_runner._archive(manifest, str(work), done)
                    batch._unpack_runs(Path(archive), exp / way, todo, {"partial": []})
                else:
                    batch._take_file = batch._copy_file if way == "copied" else linked
                    try:
                        batch._copy_runs(str(work), exp / way, todo, {"partial": []})
                    finally:
                        batch._take_file = linked
                times[way].append(time.perf_counter() - t0)
            shutil.rmtree(exp)
        ops_dir = Path(tempfile.mkdtemp(dir=tmp))
        ops = _file_ops(ops_dir, args.ops)
    per_run = {k: statistics.median(v) * 1000 / args.runs for k, v in times.items()}
    print(f"{args.runs} runs, {args.rounds} rounds, {tempfile.gettempdir()} (medians, ms a run): "
          + ", ".join(f"{k} {v:.3f}" for k, v in per_run.items()))
    print(f"file operations, {args.ops} each (µs a call): " + ", ".join(f"{k} {v:.1f}" for k, v in ops.items()))
    write_result("take_in", {"runs": args.runs, "rounds": args.rounds, "tmpdir": tempfile.gettempdir(),
                             "median_ms_a_run": per_run, "file_ops_us": ops, "raw_s": times})
    return 0


if __name__ == "__main__":
    sys.exit(main())
