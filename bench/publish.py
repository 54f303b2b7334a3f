"""What ``bmx publish`` costs: campaigns x cells x metrics of synthetic summaries.

Each experiment gets K campaigns (``results/NAME/campaigns/ID/`` and the current one
in ``results/NAME``), each with only ``campaign.json`` and a ``summary.csv`` of C
cells and M metrics whose campaign means vary by 1 % (one cell steps by 20 % halfway).
``bmx publish --to SITE --results RESULTS`` runs as a user would run it; the table
gives its wall time, peak memory, the site's size and the steps it found (about
5 % of the flat series by design, plus the planted one).

    .venv/bin/python bench/publish.py            # 100 x 1000 x 1, 100 x 1000 x 4, 20 x 100 x 2
    .venv/bin/python bench/publish.py --quick    # 5 x 50 x 1 (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, run_measured, table, temp_dir, write_result  # noqa: E402


def synthesize(results: Path, campaigns: int, cells: int, metrics: int, seed: int = 1) -> None:
    """results/pub_KxCxM/: K campaigns of C cells and M metrics (summary.csv only)."""
    rng = np.random.default_rng(seed)
    exp = results / f"pub_{campaigns}x{cells}x{metrics}"
    ids = np.array([f"cell{i:05d}" for i in range(cells)])
    names = [f"metric_{j}" for j in range(metrics)]
    level = rng.uniform(100, 10_000, (metrics, cells))
    for k in range(campaigns):
        where = exp if k == campaigns - 1 else exp / "campaigns" / f"k{k:04d}"
        where.mkdir(parents=True, exist_ok=True)
        created = pd.Timestamp("2026-01-01T00:00:00Z") + pd.Timedelta(hours=k)
        (where / "campaign.json").write_text(json.dumps({"id": f"k{k:04d}", "created_at": created.isoformat()}))
        mean = level * rng.normal(1, 0.01, level.shape)
        if k >= campaigns // 2:
            mean[:, 0] *= 1.2
        frame = pd.DataFrame({"cell_id": np.tile(ids, metrics), "size": np.tile(np.arange(cells), metrics),
                              "metric": np.repeat(names, cells), "unit": "1/s", "n": 5, "mean": mean.ravel()})
        frame.assign(ci_low=frame["mean"] * 0.99, ci_high=frame["mean"] * 1.01).to_csv(where / "summary.csv",
                                                                                     index=False)


def site_mib(site: Path) -> float:
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 campaigns of 50 cells")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    sizes = [(5, 50, 1)] if args.quick else [(20, 100, 2), (100, 1000, 1), (100, 1000, 4)]
    rows: list[dict[str, Any]] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with temp_dir("bmx-bench-publish-", keep=args.keep) as tmp:
        for k, c, m in sizes:
            results = tmp / f"results_{k}x{c}x{m}"
            synthesize(results, k, c, m)
            site = tmp / f"site_{k}x{c}x{m}"
            run = run_measured([PY, "-m", "benchmatrix.cli", "publish", "--to", str(site), "--results", str(results)],
                               cwd=ROOT, env=env, output=tmp / f"publish_{k}x{c}x{m}.log")
            if run["rc"] != 0:
                print((tmp / f"publish_{k}x{c}x{m}.log").read_text()[-2000:], file=sys.stderr)
                return 1
            steps = pd.read_csv(next(site.glob("*/steps.csv")))
            rows.append({"campaigns": k, "cells": c, "metrics": m, "wall_s": run["wall_s"],
                         "peak_rss_mib": run["peak_rss_mib"], "site_mib": site_mib(site),
                         "steps": int(steps["detected"].sum()), "series": len(steps)})
            print(f"{k} campaigns x {c} cells x {m} metric(s): {run['wall_s']:.1f} s", flush=True)
    print(table(["campaigns", "cells", "metrics", "publish s", "peak MiB", "site MiB", "steps", "series"],
                [[r["campaigns"], r["cells"], r["metrics"], r["wall_s"], r["peak_rss_mib"], r["site_mib"],
                  r["steps"], r["series"]] for r in rows]))
    path = write_result("publish_quick" if args.quick else "publish", {"rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
