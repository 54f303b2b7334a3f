#!/usr/bin/env python3
"""What a reconfiguration of a cheap live knob costs in random order (issue 23).

Three campaigns of the same 40 no-op runs (`/bin/true`), a `cost: none` sysctl knob
(2 levels, on a scratch sysctl tree: knob_sysctl_proc_root) × 2 levels of a cheap
factor, 10 replicates, no warm-up, measured side by side in one run (in a shuffled
order, `--repeats` times):

  sequential         order: sequential: one visit of each knob setting (the baseline)
  random             order: random, live knobs (the default since issue 23): one
                     batch, the batch runner sets the knob between runs
  random, not live   order: random with batch_live_knobs: false: a batch, one Ansible
                     call, per knob setting visited (the "before" figure)

The cost of an extra reconfiguration is (wall − sequential's wall) / (its knob changes −
sequential's), medians over the repeats. Target: ≤ 0.3 s (random, per batch: 3.5 s).
bench/targets.py's row i runs the same campaigns (:func:`campaign`, :func:`summarize`).

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
replicates: {replicates}
warmup: 0
order: {{strategy: {strategy}, seed: 3{live}}}
"""

VARIANTS = {"sequential": ("sequential", ""), "random": ("random", ""),
            "random, not live": ("random", ", batch_live_knobs: false")}


def knob_changes(exp: Path) -> int:
    """Changes of the knob's setting along the campaign's runs (the first from the baseline counts)."""
    recs = sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])
    levels = [r["factors"]["swap"] for r in recs]
    return sum(1 for i, v in enumerate(levels) if i == 0 or v != levels[i - 1])


def campaign(project: BenchProject, proc: Path, variant: str, rep: int, replicates: int = 10) -> dict[str, Any]:
    """One campaign of ``2 x 2 x replicates`` runs in the variant's order: its wall time, batches, knob changes."""
    strategy, live = VARIANTS[variant]
    name = f"il_{variant.replace(' ', '_').replace(',', '')}_{rep}"
    (proc / "vm" / "swappiness").write_text("30\n")
    spec = project.write_spec(name, SPEC.format(name=name, proc=proc, strategy=strategy, live=live,
                                                replicates=replicates))
    res, wall = project.bmx("run", str(spec), "--cores", "1")
    if res.returncode != 0:
        raise SystemExit(f"{variant}: bmx run failed: {res.stdout[-2000:]}{res.stderr[-2000:]}")
    exp = project.exp(name)
    batches = len(list((exp / "batches").glob("*.done")))
    recs = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
    assert len(recs) == 4 * replicates and all(r["status"] == "ok" for r in recs), [r["reason"] for r in recs]
    assert all(r["knobs"]["swap"]["actual"] == str(r["factors"]["swap"]) for r in recs)
    return {"variant": variant, "wall_s": wall, "batches": batches, "knob_changes": knob_changes(exp)}


def summarize(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per variant: median wall time, batches and knob changes over the repeats, and the
    seconds per extra reconfiguration against sequential order (None: no extra change)."""
    med = {v: {k: median(r[k] for r in results if r["variant"] == v) for k in ("wall_s", "batches", "knob_changes")}
           for v in VARIANTS if any(r["variant"] == v for r in results)}
    base = med["sequential"]
    for m in med.values():
        extra = m["knob_changes"] - base["knob_changes"]
        m["per_extra_reconfiguration_s"] = (m["wall_s"] - base["wall_s"]) / extra if extra else None
    return med


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
    med = summarize(results)
    rows = [[v, m["wall_s"], m["batches"], m["knob_changes"],
             "-" if m["per_extra_reconfiguration_s"] is None else m["per_extra_reconfiguration_s"]]
            for v, m in med.items()]
    print(table(["variant", "wall s", "batches", "knob changes", "s per extra reconfiguration"], rows))
    path = write_result("interleave", {"repeats": args.repeats, "runs": 40, "medians": med, "results": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
