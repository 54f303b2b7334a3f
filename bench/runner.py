#!/usr/bin/env python3
"""Issue 34, row a's host side: the batch runner alone, before and after, side by side.

The runner (benchmatrix/host/batch_runner.py) of each tree is started as Ansible starts it
(the manifest on stdin) on batches of ``--sizes`` runs of ``/bin/echo`` in a new work
directory under the temporary directory (``TMPDIR``: tmpfs, ``/dev/shm``, leaves out the
file system's cost of a created file), the trees and sizes in shuffled order each round.
The figure is the slope between the two sizes (medians over the rounds): the wall and
CPU seconds (the runner and the workloads it waited for) one more run costs, everything
a run costs on the host: its containment, its files, its share of the archive.
``--bare`` adds the same runs started by a Python loop (``subprocess.run`` of each, its
output in a file of its own): the floor of a run.

    bench/runner.py --before a4eb32f              # 5 rounds, 30 and 300 runs
    TMPDIR=/dev/shm bench/runner.py --before a4eb32f --rounds 7
    bench/runner.py --runner flat=/tmp/flat/batch_runner.py   # and a prototype beside them

Writes bench/results/runner.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _common import ROOT, median, table, temp_dir, write_result  # noqa: E402
from lean import tree_of  # noqa: E402

#: The bare loop: each run through subprocess.run, its output in a file of its own.
BARE = """import subprocess, sys
out, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open("%s/%d.out" % (out, i), "wb") as fh:
        subprocess.run(["/bin/echo", "runtime: 5us"], stdout=fh, stderr=subprocess.STDOUT)
"""


def one(runner: Path | None, n: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process's children) of ``n`` runs; ``runner`` None: the bare loop."""
    work = Path(tempfile.mkdtemp(prefix="bmx-runner-"))
    try:
        if runner is None:
            cmd, stdin = [sys.executable, "-c", BARE, str(work), str(n)], b""
        else:
            manifest = {"batch": "b1", "workdir": str(work), "archive": str(work / "batches" / "b1.tar.gz"),
                        "runs": [{"run_id": f"r{i:05d}", "attempt": 1, "seq": i, "timeout": 60,
                                  "argv": ["/bin/echo", "runtime: 5us"], "cell_id": f"c{i % 4}"}
                                 for i in range(n)]}
            cmd, stdin = [sys.executable, str(runner), "-"], json.dumps(manifest).encode()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run(cmd, input=stdin, capture_output=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if res.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} failed (exit {res.returncode}): {res.stderr.decode()[-2000:]}")
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return wall, cpu
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="the commit to compare this tree with")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="30,300", help="the two batch sizes the slope is taken between")
    ap.add_argument("--bare", action="store_true", help="also the bare loop")
    ap.add_argument("--runner", action="append", default=[], metavar="NAME=PATH",
                    help="also this batch_runner.py (a prototype), as variant NAME")
    args = ap.parse_args()
    small, large = (int(s) for s in args.sizes.split(","))
    rng = random.Random(1)
    with temp_dir("bmx-bench-runner-") as tmp:
        trees = {"before": tree_of(args.before, tmp / "before") / "benchmatrix/host/batch_runner.py",
                 "after": ROOT / "benchmatrix/host/batch_runner.py"}
        variants: dict[str, Path | None] = {**({"bare": None} if args.bare else {}), **trees,
                                            **{n: Path(p) for n, p in (r.split("=", 1) for r in args.runner)}}
        points: dict[str, dict[int, list[tuple[float, float]]]] = {v: {small: [], large: []} for v in variants}
        for v in variants:  # unmeasured: imports and caches warm
            one(variants[v], small)
        load = os.getloadavg()
        for rnd in range(args.rounds):
            todo = [(v, n) for v in variants for n in (small, large)]
            rng.shuffle(todo)
            for v, n in todo:
                points[v][n].append(one(variants[v], n))
            print(f"round {rnd + 1}: " + ", ".join(
                f"{v} {n}: {points[v][n][-1][0]:.3f} s" for v in variants for n in (small, large)), flush=True)
    out: dict[str, Any] = {"sizes": [small, large], "rounds": args.rounds, "before": args.before,
                           "tmpdir": tempfile.gettempdir(), "load_at_start": load, "variants": {}}
    rows = []
    for v, by_n in points.items():
        per = {k: (median(p[k] for p in by_n[large]) - median(p[k] for p in by_n[small])) / (large - small)
               for k in (0, 1)}
        out["variants"][v] = {"points": by_n, "wall_per_run_s": per[0], "cpu_per_run_s": per[1]}
        rows.append([v, per[0] * 1e3, per[1] * 1e3])
    print(f"\n== the batch runner alone, {small} -> {large} runs of /bin/echo, {args.rounds} rounds, "
          f"in {tempfile.gettempdir()} (medians)")
    print(table(["variant", "wall ms/run", "CPU ms/run"], rows))
    print(f"\nwrote {write_result('runner', out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
