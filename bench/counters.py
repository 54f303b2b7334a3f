#!/usr/bin/env python3
"""What collecting the counters costs a run: the batch runner's sampler, source by source.

Issue 37's target: collecting every new counter source (``memory``, ``pressure``,
``process``; ``perf`` where the host has it) costs at most 1 % of a 1-second run's
time. Each variant is one run of ``sleep RUN_S`` done as the batch runner does it (the
runner's own ``_Sampler``: a sample before the start, one per second, one after the
end, counters.json written), in this process, side by side, interleaved and shuffled
by round, medians of the rounds:

  none          no ``collect``: the workload's start and wait alone (the floor);
  cpu,disk      the sources before issue 37;
  + new /proc   cpu, disk, memory, pressure and process;
  + perf        the same and perf (``perf stat`` wraps the command where the host has perf).

The sampler's cost of a variant is its CPU seconds (this process's, all threads: the
sampler thread, the spawn, the document written) minus ``none``'s; the command's side
(perf stat's own CPU, a child) is reported beside it. The share is the cost over
RUN_S: the new sources' share is ``+ new /proc`` minus ``cpu,disk``.

    bench/counters.py               # 10 rounds of 1-second runs (about 45 s)
    bench/counters.py --quick       # smoke run: 2 rounds of 0.2-second runs

Writes bench/results/counters.json (or counters_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, table, temp_dir, write_result  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmatrix.host import batch_runner  # noqa: E402

VARIANTS = {
    "none": [],
    "cpu,disk": ["cpu", "disk"],
    "+ new /proc": ["cpu", "disk", "memory", "pressure", "process"],
    "+ perf": ["cpu", "disk", "memory", "pressure", "process", "perf"],
}


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def one_run(kinds: list[str], run_s: float, out: Path) -> dict[str, Any]:
    """One ``sleep run_s`` with the sampler of ``kinds``, as ``execute`` drives it;
    this process's CPU seconds and its children's, and the wall seconds."""
    self0, kids0, t0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.monotonic()
    sampler = batch_runner._Sampler(kinds, 1.0) if kinds else None
    argv = ["sleep", str(run_s)]
    if sampler is not None:
        sampler.start()
        argv = sampler.wrap(argv, dict(os.environ))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    if sampler is not None:
        sampler.watch(proc.pid, None)
    proc.wait()
    if sampler is not None:
        sampler.before_end()
        sampler.halt()
        (out / "counters.json").write_text(json.dumps(sampler.document()))
    return {"self_cpu_s": _cpu(resource.RUSAGE_SELF) - self0,
            "child_cpu_s": _cpu(resource.RUSAGE_CHILDREN) - kids0, "wall_s": time.monotonic() - t0,
            "samples": len(sampler.samples) if sampler else 0, "notes": sampler.notes if sampler else []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--run-s", type=float, default=1.0, help="the runs' length (seconds)")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 0.2-second runs")
    args = ap.parse_args()
    rounds, run_s = (2, 0.2) if args.quick else (args.rounds, args.run_s)
    rng = random.Random(37)
    raw: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with temp_dir("bmx-bench-counters-") as tmp:
        for _ in range(rounds):
            order = list(VARIANTS)
            rng.shuffle(order)
            for variant in order:
                raw[variant].append(one_run(VARIANTS[variant], run_s, tmp))
    base_self = median(r["self_cpu_s"] for r in raw["none"])
    base_kids = median(r["child_cpu_s"] for r in raw["none"])
    rows, summary = [], {}
    for variant in VARIANTS:
        cost = median(r["self_cpu_s"] for r in raw[variant]) - base_self
        command = median(r["child_cpu_s"] for r in raw[variant]) - base_kids
        summary[variant] = {"sampler_cpu_ms": 1000 * cost, "command_side_cpu_ms": 1000 * command,
                            "share_pct": 100 * cost / run_s, "wall_s": median(r["wall_s"] for r in raw[variant]),
                            "samples": median(r["samples"] for r in raw[variant]),
                            "notes": sorted({n for r in raw[variant] for n in r["notes"]})}
        rows.append([variant, 1000 * cost, 1000 * command, 100 * cost / run_s, summary[variant]["wall_s"],
                     summary[variant]["samples"]])
    new_ms = summary["+ new /proc"]["sampler_cpu_ms"] - summary["cpu,disk"]["sampler_cpu_ms"]
    print(f"{rounds} rounds of {run_s:g}-second runs, medians (CPU beyond the run without collect):")
    print(table(["variant", "sampler CPU ms", "command side ms", "% of run", "wall s", "samples"], rows))
    print(f"new /proc sources (memory, pressure, process) beyond cpu,disk: {new_ms:.2f} ms a run, "
          f"{new_ms / 10 / run_s:.3f} % of the run (target: at most 1 %)")
    for note in summary["+ perf"]["notes"]:
        print(f"note: {note}")
    path = write_result("counters_quick" if args.quick else "counters",
                        {"rounds": rounds, "run_s": run_s, "summary": summary, "new_sources_ms": new_ms,
                         "raw": raw})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
