#!/usr/bin/env python3
"""What a reconfiguration of a cheap live knob costs in random order (issue 23).

Three campaigns of the same 40 no-op runs (`/bin/true`), a `cost: none` sysctl knob
(2 levels, on a scratch sysctl tree: knob_sysctl_proc_root) × 2 levels of a cheap
factor, 10 replicates, no warm-up, measured side by side in one run (in a shuffled
order, `--repeats` times):

  sequential   order: sequential: one visit of each knob setting (the baseline)
  random       order: random: a batch, one Ansible call, per knob setting visited
  random live  order: random with batch_live_knobs: one batch, the batch runner sets
               the knob between runs

The cost of an extra reconfiguration is (wall − sequential's wall) / (its knob changes −
sequential's), medians over the repeats. Target: ≤ 0.3 s (random, per batch: 3.5 s).

    bench/interleave.py               # 3 repeats (about 4 minutes)
    bench/interleave.py --repeats 1   # smoke run

Writes bench/results/interleave.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BenchProject, median, table, temp_dir, write_result  # noqa: E402

SPEC = """\
name: {name}
inventory: config/inventory/bench.yml
factors:
  swap: [10, 60]
  mode: [a, b]
knobs:
  swap: {{role: knob_sysctl, cost: none, vars: {{knob_sysctl_key: vm.swappiness, knob_sysctl_proc_root: "{proc}"}}}}
workload:
  role: workload_command
  vars: {{argv: [/bin/true, "{{{{ mode }}}}"]}}
  timeout: 30
replicates: 10
warmup: 0
order: {{strategy: {strategy}, seed: 3{live}}}
"""

VARIANTS = {"sequential": ("sequential", ""), "random": ("random", ""),
            "random live": ("random", ", batch_live_knobs: true")}


def knob_changes(exp: Path) -> int:
    """Changes of the knob's setting along the campaign's runs (the first from the baseline counts)."""
    recs = sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])
    levels = [r["factors"]["swap"] for r in recs]
    return sum(1 for i, v in enumerate(levels) if i == 0 or v != levels[i - 1])


def campaign(project: BenchProject, proc: Path, variant: str, rep: int) -> dict[str, Any]:
    strategy, live = VARIANTS[variant]
    name = f"il_{variant.replace(' ', '_')}_{rep}"
    (proc / "vm" / "swappiness").write_text("30\n")
    spec = project.write_spec(name, SPEC.format(name=name, proc=proc, strategy=strategy, live=live))
    res, wall = project.bmx("run", str(spec), "--cores", "1")
    if res.returncode != 0:
        raise SystemExit(f"{variant}: bmx run failed: {res.stdout[-2000:]}{res.stderr[-2000:]}")
    exp = project.exp(name)
    batches = len(list((exp / "batches").glob("*.done")))
    recs = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
    assert len(recs) == 40 and all(r["status"] == "ok" for r in recs), [r["reason"] for r in recs]
    assert all(r["knobs"]["swap"]["actual"] == str(r["factors"]["swap"]) for r in recs)
    return {"variant": variant, "wall_s": wall, "batches": batches, "knob_changes": knob_changes(exp)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary project")
    args = ap.parse_args()
    rng = random.Random(23)
    results: list[dict[str, Any]] = []
    with temp_dir("bmx-interleave-", keep=args.keep) as tmp:
        project = BenchProject(tmp / "project")
        proc = tmp / "proc"
        (proc / "vm").mkdir(parents=True)
        for rep in range(args.repeats):
            order = list(VARIANTS)
            rng.shuffle(order)
            for variant in order:
                results.append(campaign(project, proc, variant, rep) | {"repeat": rep})
                print(json.dumps(results[-1]), file=sys.stderr)
    med = {v: {k: median(r[k] for r in results if r["variant"] == v) for k in ("wall_s", "batches", "knob_changes")}
           for v in VARIANTS}
    base = med["sequential"]
    rows = []
    for v, m in med.items():
        extra = m["knob_changes"] - base["knob_changes"]
        per = (m["wall_s"] - base["wall_s"]) / extra if extra else None
        m["per_extra_reconfiguration_s"] = per
        rows.append([v, m["wall_s"], m["batches"], m["knob_changes"], "-" if per is None else per])
    print(table(["variant", "wall s", "batches", "knob changes", "s per extra reconfiguration"], rows))
    path = write_result("interleave", {"repeats": args.repeats, "runs": 40, "medians": med, "results": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
