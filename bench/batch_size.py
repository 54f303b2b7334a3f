#!/usr/bin/env python3
"""One campaign of many no-op runs on localhost in batches of ``--small`` runs and in
batches of ``--large`` (``bmx run --batch-max-runs``): what a batch's fixed cost adds a run
when short runs fill many batches.

    TMPDIR=/dev/shm bench/batch_size.py --runs 10000 --small 1000 --large 10000

Prints the walls and the controller tree's peak memory; writes bench/results/batch_size.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import temp_dir, write_result  # noqa: E402
from overhead import Bench, noop_workload  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=10000)
    args = ap.parse_args()
    rows = []
    with temp_dir("bmx-bench-batch-size-") as tmp:
        bench = Bench(tmp, args)
        bench.phases = False
        wl = noop_workload()
        bench.bmx(wl, 1, "warm")
        for size in (args.small, args.large):
            res = bench.bmx(wl, args.runs, f"b{size}", batch_max_runs=size, tree_every=0.5)
            rows.append({"batch_max_runs": size, "batches": res["batches"], "wall_s": res["wall_s"],
                         "peak_tree_rss_mib": res["peak_tree_rss_mib"]})
            print(f"{args.runs} runs in batches of at most {size}: {res['batches']} batches, "
                  f"{res['wall_s']:.1f} s, peak {res['peak_tree_rss_mib']:.0f} MiB", flush=True)
        bench.project.cleanup()
    write_result("batch_size", {"runs": args.runs, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
