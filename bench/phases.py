#!/usr/bin/env python3
"""Where one more run's time goes in `bmx run` on localhost: the per-phase breakdown of
campaigns of two sizes (``bmx_phases``: job logs' birth times, Ansible task stamps, the
records' times), and each phase's slope between them in ms a run.

    TMPDIR=/dev/shm bench/phases.py --repeats 3 --sizes 30,1000

Prints the table (medians over the repeats); writes bench/results/phases.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import temp_dir, write_result  # noqa: E402
from overhead import Bench, noop_workload  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="30,1000")
    args = ap.parse_args()
    small, large = (int(s) for s in args.sizes.split(","))
    with temp_dir("bmx-bench-phases-") as tmp:
        bench = Bench(tmp, args)
        wl = noop_workload()
        bench.bmx(wl, 1, "warm")  # the host's first batch (facts, install) left out
        got: dict[int, list[dict[str, float]]] = {small: [], large: []}
        for _ in range(args.repeats):
            for n in (small, large):
                res = bench.bmx(wl, n, f"s{n}")
                got[n].append(res["phases"])
        bench.project.cleanup()
    rows = []
    for key in got[small][0]:
        a = statistics.median(p.get(key, 0.0) for p in got[small])
        b = statistics.median(p.get(key, 0.0) for p in got[large])
        rows.append({"phase": key, "small_s": a, "large_s": b, "ms_per_run": (b - a) / (large - small) * 1000})
        print(f"{key[:60]:60} {a:7.3f} {b:7.3f}  {rows[-1]['ms_per_run']:+.3f} ms a run")
    write_result("phases", {"sizes": [small, large], "repeats": args.repeats, "rows": rows, "raw": {
        str(k): v for k, v in got.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
