"""Adaptive replication against the fixed design: runs spent, decisions, false alarms.

Issue 27's target, measured with the package's own functions: a synthetic campaign of
16 comparisons (``v=new`` against ``v=old`` within 16 sizes), 4 with a 10 % effect and
12 without, lognormal runs with CV 5 %. The fixed design has the replicates
``bmx plan --detect 10% --cv 0.05`` asks for; the adaptive one starts at ``--min`` and
stops each comparison as ``bmx run`` does (``judge_round`` after every look, verdicts
at alpha / looks). Both see the same draws.

    .venv/bin/python bench/adaptive.py [--sims 200] [--max 16] [--quick]

Prints one table (fixed beside adaptive) and writes bench/results/adaptive.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmatrix.analyze.adaptive import Settings, judge_round  # noqa: E402
from benchmatrix.analyze.comparisons import compare  # noqa: E402
from benchmatrix.analyze.power import log_sd_from_cv, runs_needed_log  # noqa: E402
from benchmatrix.analyze.verdict import CHANGED  # noqa: E402
from benchmatrix.spec.load import Spec  # noqa: E402
from benchmatrix.spec.matrix import Cell  # noqa: E402

LATENCY = {"lat": {"unit": "ms", "better": "lower"}}
UNITS = {"lat": "ms"}


def synthetic_spec(comparisons: int) -> Spec:
    factors = {"v": ["old", "new"], "size": list(range(comparisons))}
    cells = [Cell(f"c{i}", dict(zip(factors, combo)))
             for i, combo in enumerate(pd.MultiIndex.from_product(list(factors.values())).tolist())]
    data = {"factors": factors, "order": {"strategy": "random", "seed": 1},
            "report": {"compare": {"factor": "v", "baseline": "old", "by": ["size"]}},
            "workload": {"metrics": LATENCY}, "warmup": 0, "replicates": 3}
    return Spec("bench-adaptive.yaml", data, "0", cells, {})


def runs_frame(spec: Spec, pool: dict[str, np.ndarray], n: dict[str, int]) -> pd.DataFrame:
    cells = {c.cell_id: c for c in spec.cells}
    rows = [{"run_id": f"{cid}-r{r}", "cell_id": cid, "host": "h1", "status": "ok", "warmup": False,
             "control": False, "attempt": 1, **cells[cid].factors, "lat": pool[cid][r]}
            for cid in pool for r in range(n[cid])]
    frame = pd.DataFrame(rows)
    frame["seq"] = range(len(frame))
    return frame


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--min", type=int, default=3)
    ap.add_argument("--max", type=int, default=16)
    ap.add_argument("--cv", type=float, default=0.05)
    ap.add_argument("--quick", action="store_true", help="a smoke run (5 experiments)")
    args = ap.parse_args()
    sims = 5 if args.quick else args.sims
    spec = synthetic_spec(16)
    sigma = log_sd_from_cv(args.cv)
    fixed_n = runs_needed_log(0.10, sigma, 0.05, 0.8, 16)
    settings = Settings(args.min, args.max, 0.10)
    rng = np.random.default_rng(27)
    effect = {i: 1.1 for i in range(4)}
    out = {"fixed": {"runs": 0, "found": 0.0, "false_families": 0, "null_verdicts": {}},
           "adaptive": {"runs": 0, "found": 0.0, "false_families": 0, "null_verdicts": {}, "reasons": {}}}
    agree = 0.0
    t0 = time.monotonic()
    for _ in range(sims):
        pool = {c.cell_id: 100 * np.exp(rng.normal(-sigma * sigma / 2, sigma, max(args.max, fixed_n)))
                * (effect.get(c.factors["size"], 1.0) if c.factors["v"] == "new" else 1.0) for c in spec.cells}
        n = {cid: settings.min for cid in pool}
        while True:
            judged = judge_round(spec, runs_frame(spec, pool, n), settings, UNITS)
            if not judged.extend:
                break
            for (_, cid), total in judged.extend.items():
                n[cid] = max(n[cid], total)
        for reason, count in judged.comparisons["reason"].value_counts().items():
            out["adaptive"]["reasons"][reason] = out["adaptive"]["reasons"].get(reason, 0) + int(count)
        verdicts = {}
        for name, counts, level in (("adaptive", n, settings.level(0.05)),
                                    ("fixed", {cid: fixed_n for cid in pool}, 0.05)):
            table = compare(spec, runs_frame(spec, pool, counts), ["lat"], UNITS, level).table
            v = table["verdict"].to_numpy()
            verdicts[name] = v
            o = out[name]
            o["runs"] += sum(counts.values())
            o["found"] += float((v[:4] == "worse").mean())
            o["false_families"] += int(np.isin(v[4:], list(CHANGED)).any())
            for x in v[4:]:
                o["null_verdicts"][str(x)] = o["null_verdicts"].get(str(x), 0) + 1
        changed = {k: np.isin(v, list(CHANGED)) for k, v in verdicts.items()}
        agree += float((changed["adaptive"] == changed["fixed"]).mean())
    elapsed = time.monotonic() - t0
    fixed_runs = out["fixed"]["runs"] / sims
    schedule = " -> ".join(map(str, settings.schedule))
    rows = [("replicates a cell", f"{fixed_n}", f"{settings.min}..{settings.max} ({schedule})"),
            ("level of the verdicts", "0.05", f"0.05 / {settings.looks} = {settings.level(0.05):.4g}"),
            ("measured runs per experiment", f"{fixed_runs:.0f}",
             f"{out['adaptive']['runs'] / sims:.0f} ({out['adaptive']['runs'] / sims / fixed_runs:.0%} of fixed)"),
            ("real 10 % effects found worse", f"{out['fixed']['found'] / sims:.1%}",
             f"{out['adaptive']['found'] / sims:.1%}"),
            ("experiments with a false better/worse", f"{out['fixed']['false_families'] / sims:.1%}",
             f"{out['adaptive']['false_families'] / sims:.1%}"),
            ("comparisons with the same change/no-change decision", "", f"{agree / sims:.1%}"),
            ("why the adaptive comparisons stopped", "", ", ".join(f"{v} {k}" for k, v in
                                                                 sorted(out["adaptive"]["reasons"].items())))]
    width = max(len(r[0]) for r in rows) + 2
    print(f"16 comparisons (4 with a 10 % effect, 12 without), lognormal CV {args.cv:.0%}, {sims} experiments, "
          f"{elapsed:.0f} s")
    print(f"{'':{width}}{'fixed (bmx plan --detect 10%)':<32}adaptive (until decided)")
    for name, fixed, adaptive in rows:
        print(f"{name:{width}}{fixed:<32}{adaptive}")
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "adaptive.json").write_text(json.dumps({"sims": sims, "fixed_n": fixed_n,
                                                       "settings": settings.as_dict(), "out": out,
                                                       "agree": agree / sims, "argv": sys.argv}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
