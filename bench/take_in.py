#!/usr/bin/env python3
"""A batch's results from the runner to the controller's run directories, two ways, on the
same runner work directory (``--runs`` runs of /bin/echo left by the real runner):

  archive  the runner packs its archive (``batch_runner._archive``) and the batch job
           unpacks it into the runs' directories (``execute.batch._unpack_runs``): a host
           reached over SSH, and a local one before issue 34's direct take-in;
  direct   the batch job copies the finished runs' files from the work directory
           (``execute.batch._copy_runs``): a host reached with the local connection.

    TMPDIR=/dev/shm bench/take_in.py --runs 1000 --rounds 5

Prints the medians in ms; writes bench/results/take_in.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, temp_dir, write_result  # noqa: E402

from benchmatrix.execute.batch import _copy_runs, _unpack_runs  # noqa: E402
from benchmatrix.host import batch_runner  # noqa: E402
from benchmatrix.plan.design import PlannedRun  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
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
        times: dict[str, list[float]] = {"pack": [], "unpack": [], "archive": [], "direct": []}
        for _ in range(args.rounds):
            exp = Path(tempfile.mkdtemp(dir=tmp))
            t0 = time.perf_counter()
            done = batch_runner.finished_runs(str(work), manifest["runs"])
            archive = batch_runner._archive(manifest, str(work), done)
            t1 = time.perf_counter()
            _unpack_runs(Path(archive), exp / "a", todo, {"partial": []})
            t2 = time.perf_counter()
            _copy_runs(str(work), exp / "d", todo, {"partial": []})
            t3 = time.perf_counter()
            times["pack"].append(t1 - t0)
            times["unpack"].append(t2 - t1)
            times["archive"].append(t2 - t0)
            times["direct"].append(t3 - t2)
            shutil.rmtree(exp)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"{args.runs} runs, {args.rounds} rounds (medians): archive {med['archive']:.0f} ms "
          f"(pack {med['pack']:.0f}, unpack {med['unpack']:.0f}), direct {med['direct']:.0f} ms; "
          f"{(med['archive'] - med['direct']) / args.runs:.3f} ms a run less")
    write_result("take_in", {"runs": args.runs, "rounds": args.rounds, "median_ms": med, "raw_s": times})
    return 0


if __name__ == "__main__":
    sys.exit(main())
