#!/usr/bin/env python3
"""Collect and report at scale: 10k, 100k and 1M synthetic run records.

A synthetic experiment (1000 cells = 10 x 10 x 10 levels, one warm-up per cell, a
control cell every 50 runs, four metrics with units and a cell effect, 3 % noise; under
2000 runs factor c has fewer levels, 100 cells a level, so that small sizes stay small)
is planned by benchmatrix itself (plan.csv from make_plan). Then, per size:

- 10k and 100k: one record.json per run, shaped like the real ones (ids, factors,
  timestamps, phases, host facts, metrics, details), written without fsync. Measured:
  collect's tables (scripts/collect.py --no-render: every record -> runs.csv, summary.csv,
  comparisons.csv, record_notes.csv, ...), then the rendering (scripts/report.py: the
  tables -> report.html, report.md, plots), then
  `bmx report` (both in one process, what a user types).
- 1M: no record files (a million files is a file-system benchmark of its own).
  runs.csv is synthesized in collect's layout (checked against the 10k runs.csv
  collect wrote) and the other tables with benchmatrix.analyze.tables.derive_tables,
  collect's own function. Measured: the report job only. The collect figure at 1M is an
  extrapolation from 10k and 100k, labelled as such.

Every step runs in a fresh process: wall time and peak RSS (wait4: the process and
the children it waited for).

    bench/report.py          # the published figures (about 4 minutes)
    bench/report.py --quick  # smoke run: 200 records, report from 200 and 400

Writes bench/results/report.json (or report_quick.json).

`--fixed`: the collect job's fixed cost (issue 15 row c) on two small synthetic
campaigns, "tiny" (30 runs of one cell, one metric, no comparison: a no-op campaign)
and "quickstart" (the quickstart's shape: 8 cells x (3 runs + 1 warm-up), four fio-like
metrics, a comparison, six plots). The job's whole command (tables and rendering, as
rule collect runs it) is timed in fresh processes, then once more under
`python -X importtime`: the seconds spent importing (its top-level imports summed;
importtime's own bookkeeping adds a little), their share of that run, and which of
the heavy modules (scipy.stats, matplotlib, pandas, pyarrow) the job imported.
Writes bench/results/report_fixed.json (or report_fixed_quick.json: one timed run of
each job, no unmeasured one before it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, BenchProject, median, run_measured, table, temp_dir, write_result  # noqa: E402

METRICS = {"read_iops": ("IO/s", "higher", 18000.0), "read_bw_kib": ("KiB/s", "higher", 72000.0),
           "read_clat_mean_us": ("µs", "lower", 52.0), "read_clat_p99_us": ("µs", "lower", 76.0)}


def spec_text(name: str, runs: int) -> str:
    # 10 x 10 x 10 cells from 2000 runs up (the published sizes); below, fewer levels of
    # c: a design of at least one replicate and a warm-up a cell would be 2000 runs.
    levels_c = 10 if runs >= 2000 else max(runs // 200, 1)
    reps = max(round(runs / (100 * levels_c) / 1.02) - 1, 1)  # warm-ups and controls bring it to about `runs`
    metrics = "\n".join(f"    {m}: {{regex: '{m}=(?P<value>[0-9.]+)', unit: {u}, better: {b}}}"
                        for m, (u, b, _) in METRICS.items())
    return (f"name: {name}\nhosts: localhost\ninventory: config/inventory/bench.yml\n"
            "factors:\n  a: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n  b: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
            f"  c: {list(range(levels_c))}\n"
            "workload:\n  role: workload_command\n  vars:\n    argv: [/bin/echo, \"{{ a }} {{ b }} {{ c }}\"]\n"
            f"  metrics:\n{metrics}\n  timeout: 60\n"
            f"replicates: {reps}\nwarmup: 1\n"
            "order: {strategy: random, seed: 5, control: {a: 0, b: 0, c: 0}, control_every: 50}\n"
            "report:\n  metrics: [read_iops, read_clat_p99_us]\n  compare: {factor: a, baseline: 0, by: [b]}\n")


SYNTH = r'''
import json, os, sys, time
import numpy as np
import pandas as pd
from pathlib import Path
from benchmatrix.spec.load import load_spec
from benchmatrix.plan.design import make_plan, plan_csv_text
from benchmatrix.layout import RUN_COLUMNS
from benchmatrix.results.records import iso

spec_path, exp, with_records = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
METRICS = json.loads(sys.argv[4])
spec = load_spec(spec_path)
runs = make_plan(spec, ["localhost"], 50)
exp.mkdir(parents=True, exist_ok=True)
(exp / "plan.csv").write_text(plan_csv_text(runs, spec.factor_names))
(exp / "campaign.json").write_text(json.dumps({"id": "bench00000000", "created_at": iso(time.time())}))
n = len(runs)
rng = np.random.default_rng(11)
a = np.array([int(r.factors["a"]) for r in runs]); b = np.array([int(r.factors["b"]) for r in runs])
c = np.array([int(r.factors["c"]) for r in runs])
effect = 1 + 0.02 * a - 0.01 * b + 0.005 * c
drift = 1 + 0.01 * np.arange(n) / n
values = {}
for m, (unit, better, base) in METRICS.items():
    e = effect if better == "higher" else 1 / effect
    values[m] = base * e * drift * rng.normal(1, 0.03, n)
t0 = 1.8e9
dur = rng.normal(1.3, 0.02, n)
start = t0 + np.cumsum(dur + 0.004) - dur
end = start + dur
facts = {"hostname": "bench", "fqdn": "bench", "cpu_model": "AMD EPYC", "cpu_count": "2", "sockets": "1",
         "cores": "2", "threads_per_core": "1", "memory_mb": "24000", "kernel": "6.1.0", "distribution": "Debian 12",
         "architecture": "x86_64", "python": "3.11.2", "tool_version": "fio-3.33", "online_cpus": "0-1",
         "smt": "notsupported", "workload_path": "/var/tmp/benchmatrix/scratch", "filesystem": "ext4",
         "filesystem_source": "/dev/vda", "mount_point": "/", "block_device": "vda", "read_ahead_kb": "128",
         "io_scheduler": "none", "inventory_name": "localhost", "gathered_at": iso(t0)}
if with_records:
    from benchmatrix.results.batch_rows import write_batch_rows
    from benchmatrix.files import atomic_write
    by_batch = {}
    for i, r in enumerate(runs):
        d = exp / "runs" / r.run_id / str(r.attempt)
        d.mkdir(parents=True, exist_ok=True)
        rec = {"schema_version": 1, "benchmatrix_version": "bench", "experiment": spec.name,
               "spec_digest": spec.digest, "run_id": r.run_id, "attempt": r.attempt, "seq": r.seq,
               "host": r.host, "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup,
               "control": r.control, "visit": r.visit, "batch": r.batch, "factors": r.factors,
               "status": "ok", "reason": "", "exit_code": 0, "started_at": iso(start[i]), "ended_at": iso(end[i]),
               "duration_s": round(float(dur[i]), 6),
               "phases": {"before_run_s": 0, "workload_s": round(float(dur[i]), 6), "parse_s": 0.0003,
                          "batch_overhead_share_s": 0.1},
               "workload": {"role": "workload_command", "argv": ["/bin/echo", "x"], "before_run": [],
                            "affinity": None, "affinity_applied": None},
               "knobs": {}, "host_facts": facts,
               "metrics": {m: {"value": float(values[m][i]), "unit": METRICS[m][0]} for m in METRICS},
               "details": {"jobs": {}}, "raw": {"stdout": f"runs/{r.run_id}/1/stdout",
                                                "stderr": f"runs/{r.run_id}/1/stderr"},
               "log": f"logs/ansible/{r.batch}.log", "batch_started_at": iso(start[i] - 1)}
        (d / "record.json").write_text(json.dumps(rec, indent=1) + "\n")
        (d / "stdout").write_text(" ".join(f"{m}={values[m][i]:.3f}" for m in METRICS) + "\n")
        (d / "stderr").write_text("")
        by_batch.setdefault(r.batch, []).append(rec)
    # What each batch job writes beside its marker (collect reads these, not the records):
    # the batch's runs.csv rows and record notes, then the marker with units and facts.
    for batch, recs in by_batch.items():
        summary = {"batch": batch, "runs": len(recs), **write_batch_rows(exp, batch, recs, spec.factor_names)}
        atomic_write(exp / "batches" / f"{batch}.done", json.dumps(summary) + "\n")
else:
    cols = {"seq": [r.seq for r in runs], "host": "localhost", "run_id": [r.run_id for r in runs],
            "cell_id": [r.cell_id for r in runs], "replicate": [r.replicate for r in runs],
            "warmup": [r.warmup for r in runs], "control": [r.control for r in runs],
            "visit": [r.visit for r in runs], "batch": [r.batch for r in runs], "attempt": 1,
            "status": "ok", "reason": "", "started_at": [iso(x) for x in start], "ended_at": [iso(x) for x in end],
            "duration_s": np.round(dur, 6)}
    for f in spec.factor_names:
        cols[f] = [r.factors[f] for r in runs]
    for m in sorted(METRICS):
        cols[m] = values[m]
    frame = pd.DataFrame(cols)
    # Columns the synthetic runs have no value for (the host's env_* settings) stay empty.
    frame = frame.reindex(columns=RUN_COLUMNS + spec.factor_names + sorted(METRICS))
    frame.to_csv(exp / "runs.csv", index=False)
    # Every other table as collect derives them (the report renders from them alone).
    from benchmatrix.analyze.tables import derive_tables
    from benchmatrix.results.tables import write_tables
    write_tables(exp, derive_tables(spec, pd.read_csv(exp / "plan.csv"), pd.read_csv(exp / "runs.csv"),
                                    {m: u for m, (u, _, _) in METRICS.items()}, records=[]))
print(json.dumps({"runs": n}))
'''


def synthesize(project: BenchProject, name: str, runs: int, records: bool, text: str | None = None,
               metrics: dict[str, tuple[str, str, float]] | None = None) -> tuple[Path, Path, int, float]:
    """A synthetic campaign results/NAME (``text``: its spec, default :func:`spec_text`;
    factors a, b and c; ``metrics``: name -> (unit, better, typical value))."""
    spec = project.write_spec(name, text or spec_text(name, runs))
    exp = project.exp(name)
    out = project.root / f"synth-{name}.out"
    t0 = time.perf_counter()
    res = run_measured([PY, "-c", SYNTH, str(spec), str(exp), "1" if records else "0",
                        json.dumps(metrics or METRICS)], cwd=project.root, env=project.env(), output=out)
    if res["rc"] != 0:
        raise RuntimeError(f"synthesis of {name} failed:\n{out.read_text()[-3000:]}")
    n = json.loads(out.read_text().strip().splitlines()[-1])["runs"]
    return spec, exp, n, time.perf_counter() - t0


def collect_argv(spec_rel: str, name: str) -> list[str]:
    """The collect job's command line for results/NAME: the tables alone (--no-render), so
    that collect and the report are measured apart."""
    return ["scripts/collect.py", "--spec", spec_rel, "--plan", f"results/{name}/plan.csv", "--no-render"]


def step(project: BenchProject, argv: list[str], what: str, log: Path, tree_every: float = 0) -> dict[str, Any]:
    """One job's command in a fresh process: wall time and peak memory (run_measured)."""
    res = run_measured([PY, *argv], cwd=project.root, env=project.env(), output=log, timeout=3600,
                       tree_every=tree_every)
    if res["rc"] != 0:
        raise RuntimeError(f"{what} failed (exit {res['rc']}):\n{log.read_text()[-3000:]}")
    return res


def mib(path: Path) -> float | None:
    return path.stat().st_size / 2**20 if path.exists() else None


def tree_mib(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total / 2**20


# ---------------------------------------------------------------- fixed cost (row c)

#: name -> (levels of a, b and c, replicates, warm-up runs, metrics, report section)
FIXED_CASES: dict[str, tuple[list[list[int]], int, int, dict[str, tuple[str, str, float]], str]] = {
    "tiny": ([[0], [0], [0]], 30, 0, {"noop_us": ("us", "lower", 1.0)}, "  metrics: [noop_us]\n"),
    "quickstart": ([[1, 8], [0, 1], [0, 1]], 3, 1, METRICS,
                   "  metrics: [read_iops, read_bw_kib, read_clat_mean_us, read_clat_p99_us]\n"
                   "  compare: {factor: a, baseline: 1, by: [b, c]}\n"),
}
#: Modules whose import the fixed cost is about.
HEAVY = ("scipy.stats", "scipy.special", "matplotlib", "pandas", "pyarrow")


def fixed_spec_text(name: str, levels: list[list[int]], reps: int, warmup: int,
                    metrics: dict[str, tuple[str, str, float]], report: str) -> str:
    lines = "\n".join(f"    {m}: {{regex: '{m}=(?P<value>[0-9.]+)', unit: {u}, better: {b}}}"
                      for m, (u, b, _) in metrics.items())
    a, b, c = levels
    return (f"name: {name}\nhosts: localhost\ninventory: config/inventory/bench.yml\n"
            f"factors:\n  a: {a}\n  b: {b}\n  c: {c}\n"
            "workload:\n  role: workload_command\n  vars:\n    argv: [/bin/echo, \"{{ a }}\"]\n"
            f"  metrics:\n{lines}\n  timeout: 60\n"
            f"replicates: {reps}\nwarmup: {warmup}\norder: {{strategy: random, seed: 42}}\nreport:\n{report}")


def import_seconds(importtime_output: str) -> tuple[float, list[str]]:
    """Seconds of the top-level imports in ``python -X importtime`` output, and which
    of :data:`HEAVY` were imported."""
    total, names = 0.0, set()
    for line in importtime_output.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|", 2)
        names.add(name.strip())
        if not name[1:].startswith(" "):  # nested imports are indented
            total += int(cumulative) / 1e6
    # A package imported through its parent's __getattr__ (scipy's lazy submodules) is
    # logged under the parent's name: its own submodules show it was imported.
    return total, [m for m in HEAVY if any(n == m or n.startswith(m + ".") for n in names)]


def fixed_cost(project: BenchProject, tmp: Path, repeats: int, warm: bool = True) -> list[dict[str, Any]]:
    """The collect job (tables and reports) of each :data:`FIXED_CASES` campaign, timed
    ``repeats`` times after an unmeasured run (``warm``: caches warm)."""
    rows = []
    for name, (levels, reps, warmup, metrics, report) in FIXED_CASES.items():
        text = fixed_spec_text(name, levels, reps, warmup, metrics, report)
        spec, exp, runs, _ = synthesize(project, name, 0, True, text=text, metrics=metrics)
        rel = str(spec.relative_to(project.root))
        argv = ["scripts/collect.py", "--spec", rel, "--plan", f"results/{name}/plan.csv"]
        if warm:
            step(project, argv, "collect", tmp / f"fixed-{name}-warm.log")  # unmeasured: caches warm
        walls = [step(project, argv, "collect", tmp / f"fixed-{name}.log")["wall_s"] for _ in range(repeats)]
        log = tmp / f"fixed-{name}-importtime.log"
        traced = step(project, ["-X", "importtime", *argv], "collect -X importtime", log)
        imports, heavy = import_seconds(log.read_text(errors="replace"))
        rows.append({"campaign": name, "runs": runs, "plots": len(list((exp / "plots").glob("*.svg"))),
                     "collect_s_median": median(walls), "collect_s_min": min(walls), "collect_s": walls,
                     "importtime_run_s": traced["wall_s"], "imports_s": imports,
                     "import_share": imports / traced["wall_s"], "heavy_imported": heavy})
        print(f"{name}: {runs} runs, collect job {median(walls):.2f} s (median of {repeats}), "
              f"imports {imports:.2f} s", flush=True)
    return rows


def main_fixed(args: argparse.Namespace) -> int:
    with temp_dir("bmx-bench-report-fixed-", keep=args.keep) as tmp:
        # --quick is a smoke run: the job runs and is timed, its figure is no measurement.
        rows = fixed_cost(BenchProject(tmp / "project"), tmp, 1 if args.quick else args.repeats, warm=not args.quick)
    path = write_result("report_fixed_quick" if args.quick else "report_fixed", {"rows": rows})
    print("\n== the collect job's fixed cost (fresh process each; imports from python -X importtime)")
    print(table(["campaign", "runs", "plots", "collect s (median)", "min s", "imports s", "import share",
                 "heavy modules imported"],
                [[r["campaign"], r["runs"], r["plots"], r["collect_s_median"], r["collect_s_min"], r["imports_s"],
                  f"{r['import_share']:.0%}", ", ".join(r["heavy_imported"]) or "-"] for r in rows]))
    print(f"\nwrote {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 200 records, report from 200 and 400 runs")
    ap.add_argument("--sizes", default="", help="comma-separated sizes with records (default 10000,100000)")
    ap.add_argument("--report-only", default="", help="sizes reported from synthetic CSVs only (default 1000000)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fixed", action="store_true", help="the collect job's fixed cost on two small campaigns")
    ap.add_argument("--repeats", type=int, default=7, help="--fixed: timed runs of each job")
    args = ap.parse_args()
    if args.fixed:
        return main_fixed(args)
    with_records = [int(s) for s in (args.sizes or ("200" if args.quick else "10000,100000")).split(",") if s]
    csv_only = [int(s) for s in (args.report_only or ("400" if args.quick else "1000000")).split(",") if s]
    rows: list[dict[str, Any]] = []
    with temp_dir("bmx-bench-report-", keep=args.keep) as tmp:
        project = BenchProject(tmp / "project")
        layout_checked = False
        for n in with_records:
            name = f"rep_{n}"
            spec, exp, runs, synth_s = synthesize(project, name, n, True)
            rel = str(spec.relative_to(project.root))
            print(f"{runs} runs: records synthesized in {synth_s:.1f} s ({tree_mib(exp / 'runs'):.0f} MiB on disk)",
                  flush=True)
            col = step(project, collect_argv(rel, name), "collect", tmp / f"collect-{n}.log")
            rep = step(project, ["scripts/report.py", "--spec", rel], "report", tmp / f"report-{n}.log")
            both = {"wall_s": None, "peak_rss_mib": None}
            if not args.quick:
                both = step(project, ["-m", "benchmatrix.cli", "report", rel], "bmx report",
                            tmp / f"bmx-report-{n}.log")
            row = {"runs": runs, "records": True, "collect_s": col["wall_s"], "collect_peak_mib": col["peak_rss_mib"],
                   "report_s": rep["wall_s"], "report_peak_mib": rep["peak_rss_mib"],
                   "bmx_report_s": both["wall_s"], "bmx_report_peak_mib": both["peak_rss_mib"],
                   "runs_csv_mib": mib(exp / "runs.csv"), "report_html_mib": mib(exp / "report.html")}
            rows.append(row)
            print(f"{runs} runs: collect {col['wall_s']:.1f} s ({col['peak_rss_mib']:.0f} MiB), report "
                  f"{rep['wall_s']:.1f} s ({rep['peak_rss_mib']:.0f} MiB)", flush=True)
            if not layout_checked:
                import pandas as pd  # the synthetic runs.csv must look like the one collect writes
                real = pd.read_csv(exp / "runs.csv", nrows=5)
                _, exp2, _, _ = synthesize(project, "rep_layout", min(n, 2000), False)
                synth = pd.read_csv(exp2 / "runs.csv", nrows=5)
                if list(real.columns) != list(synth.columns) or list(real.dtypes) != list(synth.dtypes):
                    raise RuntimeError("synthetic runs.csv layout differs from collect's:\n"
                                       f"{real.dtypes}\n{synth.dtypes}")
                layout_checked = True
            import shutil
            shutil.rmtree(exp / "runs", ignore_errors=True)  # free the disk before the next size
        for n in csv_only:
            name = f"rep_{n}"
            spec, exp, runs, synth_s = synthesize(project, name, n, False)
            print(f"{runs} runs: runs.csv and summary.csv synthesized in {synth_s:.1f} s", flush=True)
            rel = str(spec.relative_to(project.root))
            rep = step(project, ["scripts/report.py", "--spec", rel], "report", tmp / f"report-{n}.log")
            row = {"runs": runs, "records": False, "report_s": rep["wall_s"], "report_peak_mib": rep["peak_rss_mib"],
                   "runs_csv_mib": mib(exp / "runs.csv"), "report_html_mib": mib(exp / "report.html")}
            measured = [r for r in rows if r["records"]]
            if len(measured) >= 2:
                x0, x1 = measured[-2], measured[-1]
                k = (x1["collect_s"] - x0["collect_s"]) / (x1["runs"] - x0["runs"])
                row["collect_s_extrapolated"] = x1["collect_s"] + k * (runs - x1["runs"])
            rows.append(row)
            print(f"{runs} runs: report {rep['wall_s']:.1f} s ({rep['peak_rss_mib']:.0f} MiB)", flush=True)
    path = write_result("report_quick" if args.quick else "report", {"rows": rows})
    print("\n== collect and report (fresh process per step; peak RSS via wait4)")
    print(table(["runs", "records", "collect s", "collect MiB", "report s", "report MiB", "bmx report s",
                 "bmx report MiB", "runs.csv MiB", "report.html MiB"],
                [[r["runs"], "yes" if r["records"] else "no (csv)",
                  r.get("collect_s") if r["records"] else
                  (f"~{r['collect_s_extrapolated']:.0f} (extrapolated)" if r.get("collect_s_extrapolated") else "-"),
                  r.get("collect_peak_mib"), r["report_s"], r["report_peak_mib"], r.get("bmx_report_s"),
                  r.get("bmx_report_peak_mib"), r["runs_csv_mib"], r["report_html_mib"]] for r in rows]))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
