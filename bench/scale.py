#!/usr/bin/env python3
"""Scaling with campaign size: planning, Snakemake's DAG, and real scheduling overhead.

1. Planning 1k, 10k and 100k runs of a synthetic spec (1000 cells x replicates),
   random and restricted (a restart-class knob): ``make_plan`` alone, the plan job
   (scripts/plan.py: spec, plan, plan.csv) and ``bmx plan`` (which also plans the
   alternative strategies to print their costs). Each in a fresh process; time and
   peak memory (wait4: the process and its children).
2. Snakemake's DAG construction: a dry run of the whole workflow once plan.csv
   exists, for 1k and 10k runs with the default batches (batch_max_runs 50) and with
   one job per run (batch_max_runs 1), to show what batches save.
3. The real campaign with a no-op workload (/bin/echo): 1k runs (batch_max_runs 50,
   20 batch jobs) and 10k runs (batch_max_runs 500 by default, 20 batch jobs;
   --full also runs 10k with the default 50, 200 batch jobs, about 15 minutes).
   Snakemake's own overhead = its start plus the gaps between jobs plus its exit;
   bmx's overhead = everything but the runs' own duration.

    bench/scale.py           # the published figures (about 6 minutes)
    bench/scale.py --quick   # smoke run: 1k runs, no real campaign

Writes bench/results/scale.json (or scale_quick.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    PY,
    BenchProject,
    bmx_phases,
    python_measured,
    read_timing,
    run_measured,
    table,
    temp_dir,
    write_result,
)


def spec_text(name: str, runs: int, design: str = "random", batch_note: str = "") -> str:
    """1000 cells (10 x 10 x 10) x runs/1000 replicates of a no-op command.

    ``restricted``: factor a is a restart-class knob (a whole plot), so the plan has
    visits; its knob role is never executed here (planning and dry runs only).
    """
    reps = max(runs // 1000, 1)
    knobs = ""
    order = "order: {strategy: random, seed: 3}\n"
    if design == "restricted":
        knobs = ("knobs:\n  a: {role: knob_sysctl, cost: restart, vars: {knob_sysctl_key: vm.swappiness}}\n")
        order = f"order: {{strategy: restricted, seed: 3, visits: {min(reps, 5)}}}\n"
    return (f"name: {name}\nhosts: localhost\ninventory: config/inventory/bench.yml\n"
            "factors:\n  a: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n  b: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
            "  c: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + knobs +
            "workload:\n  role: workload_command\n  vars:\n"
            "    argv: [/bin/echo, \"noop {{ a }} {{ b }} {{ c }}\"]\n  timeout: 60\n"
            f"replicates: {reps}\nwarmup: 0\n" + order)


def small_spec_text(name: str, runs: int) -> str:
    """One cell, ``runs`` replicates of a no-op command (for the real campaigns)."""
    return (f"name: {name}\nhosts: localhost\ninventory: config/inventory/bench.yml\nfactors:\n  k: [a, b]\n"
            "workload:\n  role: workload_command\n  vars:\n    argv: [/bin/echo, \"noop {{ k }}\"]\n"
            f"  timeout: 60\nreplicates: {runs // 2}\nwarmup: 0\norder: {{strategy: random, seed: 3}}\n")


MAKE_PLAN = """
import json, time
t0 = time.perf_counter()
from benchmatrix.spec.load import load_spec
from benchmatrix.plan.design import make_plan
t1 = time.perf_counter()
spec = load_spec({spec!r})
t2 = time.perf_counter()
runs = make_plan(spec, ["localhost"], {batch})
t3 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_spec_s": t2 - t1, "make_plan_s": t3 - t2, "runs": len(runs),
                  "batches": len({{r.batch for r in runs}}), "visits": max(r.visit for r in runs)}}))
"""


def measure_planning(project: BenchProject, sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for design in ("random", "restricted"):
        for n in sizes:
            name = f"plan_{design}_{n}"
            spec = project.write_spec(name, spec_text(name, n, design))
            mp = python_measured(MAKE_PLAN.format(spec=str(spec), batch=50), cwd=project.root)
            out = project.exp(name) / "plan.csv"
            job = run_measured([PY, "scripts/plan.py", "--spec", str(spec), "--out", str(out),
                                "--batch-max-runs", "50"], cwd=project.root, env=project.env())
            if job["rc"] != 0:
                raise RuntimeError(f"plan job for {name} failed")
            cli = run_measured([PY, "-m", "benchmatrix.cli", "plan", str(spec)], cwd=project.root, env=project.env())
            if cli["rc"] != 0:
                raise RuntimeError(f"bmx plan {name} failed")
            row = {"design": design, "runs": mp["runs"], "batches": mp["batches"], "visits": mp["visits"],
                   "make_plan_s": mp["make_plan_s"], "load_spec_s": mp["load_spec_s"],
                   "make_plan_process_peak_rss_mib": mp["peak_rss_mib"],
                   "plan_job_s": job["wall_s"], "plan_job_peak_rss_mib": job["peak_rss_mib"],
                   "plan_csv_mib": out.stat().st_size / 2**20,
                   "bmx_plan_s": cli["wall_s"], "bmx_plan_peak_rss_mib": cli["peak_rss_mib"]}
            rows.append(row)
            print(f"plan {design:10} {n:7} runs: make_plan {row['make_plan_s']:.2f} s, plan job {job['wall_s']:.2f} s "
                  f"({job['peak_rss_mib']:.0f} MiB), bmx plan {cli['wall_s']:.2f} s ({cli['peak_rss_mib']:.0f} MiB)",
                  flush=True)
    return rows


def snakemake_argv(project: BenchProject, name: str, spec: Path, batch: int, *extra: str) -> list[str]:
    return [PY, "-m", "snakemake", f"results/{name}/report.html", "--snakefile", str(project.root / "Snakefile"),
            "--directory", str(project.root), "--cores", "2", "--nolock", "--resources", "host_slots=1",
            *extra, "--config", f"spec={spec.relative_to(project.root)}", f"batch_max_runs={batch}"]


def measure_dry_runs(project: BenchProject, sizes: list[int], batch_sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for batch in batch_sizes:
        for n in sizes:
            name = f"dag_{n}_b{batch}"
            spec = project.write_spec(name, small_spec_text(name, n))
            argv = snakemake_argv(project, name, spec, batch)
            argv[3] = f"results/{name}/plan.csv"  # first the plan job alone, for real
            res = run_measured(argv, cwd=project.root, env=project.env())
            if res["rc"] != 0:
                raise RuntimeError(f"plan job of {name} failed")
            log = project.root / f"dry-{name}.log"
            dry = run_measured(snakemake_argv(project, name, spec, batch, "--dry-run", "--quiet", "rules"),
                               cwd=project.root, env=project.env(), output=log)
            if dry["rc"] != 0:
                raise RuntimeError(f"dry run of {name} failed:\n{log.read_text()[-2000:]}")
            jobs = sum(1 for _ in open(project.exp(name) / "plan.csv")) - 1
            batches = len({ln.split(",")[8] for ln in list(open(project.exp(name) / "plan.csv"))[1:]})
            rows.append({"runs": jobs, "batch_max_runs": batch, "batch_jobs": batches,
                         "dry_run_s": dry["wall_s"], "dry_run_peak_rss_mib": dry["peak_rss_mib"]})
            print(f"dry run {n:6} runs, batch_max_runs {batch:4}: {batches:6} batch jobs, {dry['wall_s']:.2f} s, "
                  f"{dry['peak_rss_mib']:.0f} MiB", flush=True)
    return rows


def measure_campaign(project: BenchProject, tmp: Path, n: int, batch: int) -> dict[str, Any]:
    name = f"real_{n}_b{batch}"
    spec = project.write_spec(name, small_spec_text(name, n))
    timing = tmp / f"timing-{name}.jsonl"
    t_start = time.time()
    res = run_measured([PY, "-m", "benchmatrix.cli", "run", str(spec), "--batch-max-runs", str(batch)],
                       cwd=project.root, env=project.env(timing), output=tmp / f"{name}.out", timeout=7200)
    t_end = time.time()
    if res["rc"] != 0:
        raise RuntimeError(f"bmx run {name} failed:\n{(tmp / f'{name}.out').read_text()[-3000:]}")
    exp = project.exp(name)
    recs = sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])
    ok = sum(1 for r in recs if r["status"] == "ok")
    ph = bmx_phases(exp, recs, read_timing(timing), t_start, t_end)
    work = ph["workload (runs' own duration)"]
    snakemake_own = (ph["Snakemake start (workflow, DAG)"] + ph["Snakemake scheduling (gaps between jobs)"]
                     + ph["Snakemake exit, bmx status and exit"])
    batches = len({r["batch"] for r in recs})
    row = {"runs": len(recs), "ok": ok, "batch_max_runs": batch, "batch_jobs": batches, "wall_s": res["wall_s"],
           "peak_rss_mib": res["peak_rss_mib"], "workload_s": work,
           "snakemake_overhead_s": snakemake_own, "snakemake_overhead_per_run_ms": snakemake_own / n * 1000,
           "bmx_overhead_per_run_ms": (res["wall_s"] - work) / n * 1000,
           "per_batch_s": (ph["total (bmx run wall)"] - work) / max(batches, 1), "phases": ph}
    print(f"campaign {n:6} runs, {batches:4} batch jobs: {res['wall_s']:.1f} s, Snakemake {snakemake_own:.1f} s "
          f"({row['snakemake_overhead_per_run_ms']:.2f} ms/run), "
          f"all overhead {row['bmx_overhead_per_run_ms']:.1f} ms/run, "
          f"peak {res['peak_rss_mib']:.0f} MiB", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1k runs, no real campaign")
    ap.add_argument("--full", action="store_true", help="also a real 10k-run campaign with batch_max_runs 50")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    # A smoke run checks that each step runs, once: one size (each is a few fresh processes).
    plan_sizes = [1000] if args.quick else [1000, 10_000, 100_000]
    dag_sizes = [1000] if args.quick else [1000, 10_000]
    data: dict[str, Any] = {}
    with temp_dir("bmx-bench-scale-", keep=args.keep) as tmp:
        project = BenchProject(tmp / "project")
        data["planning"] = measure_planning(project, plan_sizes)
        data["dry_run"] = measure_dry_runs(project, dag_sizes, [50] if args.quick else [50, 1])
        if not args.quick:
            campaigns = [(1000, 50), (10_000, 500)] + ([(10_000, 50)] if args.full else [])
            data["campaigns"] = [measure_campaign(project, tmp, n, b) for n, b in campaigns]
    path = write_result("scale_quick" if args.quick else "scale", data)
    print("\n== planning (fresh process each; peak RSS via wait4)")
    print(table(["design", "runs", "batches", "make_plan s", "plan job s", "plan job MiB", "bmx plan s",
                 "bmx plan MiB"],
                [[r["design"], r["runs"], r["batches"], r["make_plan_s"], r["plan_job_s"],
                  r["plan_job_peak_rss_mib"], r["bmx_plan_s"], r["bmx_plan_peak_rss_mib"]] for r in data["planning"]]))
    print("\n== Snakemake dry run of the whole workflow (plan.csv present)")
    print(table(["runs", "batch_max_runs", "batch jobs", "dry run s", "peak MiB"],
                [[r["runs"], r["batch_max_runs"], r["batch_jobs"], r["dry_run_s"], r["dry_run_peak_rss_mib"]]
                 for r in data["dry_run"]]))
    if data.get("campaigns"):
        print("\n== real campaigns, no-op workload (/bin/echo)")
        print(table(["runs", "batch_max_runs", "batch jobs", "wall s", "workload s", "Snakemake s",
                     "Snakemake ms/run", "all overhead ms/run", "s per batch", "peak MiB"],
                    [[r["runs"], r["batch_max_runs"], r["batch_jobs"], r["wall_s"], r["workload_s"],
                      r["snakemake_overhead_s"], r["snakemake_overhead_per_run_ms"], r["bmx_overhead_per_run_ms"],
                      r["per_batch_s"], r["peak_rss_mib"]] for r in data["campaigns"]]))
        print("\n-- phases of the real campaigns (seconds, summed over batches)")
        keys = list(data["campaigns"][0]["phases"])
        print(table(["phase"] + [f"{r['runs']} runs / {r['batch_jobs']} jobs" for r in data["campaigns"]],
                    [[k] + [r["phases"].get(k) for r in data["campaigns"]] for k in keys]))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
