#!/usr/bin/env python3
"""Issue 15's targets, every row measured in one run, side by side with the peers.

Rows (the issue's "Targets" table), each from the other bench/ scripts' functions:

  a  added per run on localhost: the slope between campaigns of 30 and 300 no-op runs
     (/bin/echo) with default settings, beside the bare loop and ReBench in the same
     run, interleaved (overhead.measure_slope);
  b  added per run over SSH to a namespace host (tests/netns.py): the same slope, less
     the bare loop's (overhead.measure_ssh);
  c  fixed cost of the quickstart as shipped: wall time less the runs' own time
     (overhead.measure_quickstart);
  d  a verified no-op check of a knob and
  e  a real change beyond the change done directly (reconfigure.measure_case:
     read-ahead of a loop device, PostgreSQL work_mem by reload and max_connections by
     restart; root);
  f  collect from synthetic run records (report.synthesize, the collect job's own
     command): wall time and peak memory, measured. 200k records by default; --full
     adds 1M (about 8 GiB of record files; synthesis alone takes minutes here);
  g  16 namespace SSH hosts in parallel (`bmx run --hosts-parallel 16`), 100 no-op
     runs each: the added cost per run of a host (wall less the busiest host's runs'
     own time, over its runs) against the same campaign on one host, and the
     controller's peak memory (every process of the controller's tree at once);
  h  the workload metric's coefficient of variation under bmx against bare, ReBench
     and ReFrame (overhead.measure_rounds: a CPU loop, 3 rounds; fio, 1 round);
  i  a cheap live knob in random order (issue 23): seconds per extra reconfiguration
     over the same runs in sequential order, live knobs (the default) and, as the
     "before" figure, batch_live_knobs: false (interleave.campaign, 3 repeats);
  j  the plan's estimate of issue 23's experiment (fio read-ahead 0/1024 on a loop
     device x bs 4k/128k, 3 replicates, 5 s runs; root): campaign 1, then `bmx plan
     --json`'s campaign_s, then campaign 2's measured wall time.

bmx runs exactly as a user runs it: no timing callback (bench/overhead.py gives the
per-phase breakdown). A row that fails is reported as an error and the others still
run; the exit status is then 1. The load average is printed with every section: the
machine is shared.

    bench/targets.py           # every row (about 16 minutes on 2 busy cores)
    bench/targets.py --full    # and collect from 1M records
    bench/targets.py --quick   # smoke run (< 90 s on an idle machine): rows a, d-g, i, j, tiny sizes, no peers
    bench/targets.py --only a,g

Writes bench/results/targets.json (or targets_quick.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BenchProject, fmt, kinds_table, peer_bin, table, temp_dir, timing_env, write_result  # noqa: E402
from overhead import (  # noqa: E402
    Bench,
    make_workloads,
    measure_quickstart,
    measure_rounds,
    measure_slope,
    measure_ssh,
    noop_workload,
    ssh_bmx,
    ssh_hosts,
)

ROWS = {
    "a": "added per run, localhost, slope 30 -> 300 no-op runs, default settings",
    "b": "added per run over SSH (namespace host)",
    "c": "fixed cost of the quickstart (wall - the runs' own time)",
    "d": "verified no-op check of a knob",
    "e": "real knob change",
    "f": "collect from 1M run records",
    "g": "16 hosts in parallel over SSH, 100 short runs each",
    "h": "workload metric CV under bmx",
    "i": "cheap live knob, random order: s per extra reconfiguration vs sequential",
    "j": "plan estimate of issue 23's experiment vs campaign 2's wall time",
}
# The figures before the change, for the table.
BEFORE = {"a": "73-87 ms", "b": "91 ms", "c": "12-16 s", "d": "1.0-1.9 s", "e": "change + 2.0-2.7 s",
          "f": "~180 s, ~15 GiB (extrapolated)", "g": "not measured", "h": "0.84-0.93x bare",
          "i": "3.5 s (a batch per setting)", "j": "35 % under"}
TARGET = {"a": "<= ReBench's, same run", "b": "<= 5 ms", "c": "< 5 s", "d": "<= 0.2 s",
          "e": "change + <= 0.5 s", "f": "< 60 s, < 2 GiB", "g": "<= 1.5x 1-host; peak < 2 GiB",
          "h": "<= 1.1x bare", "i": "<= 0.3 s", "j": "within 25 %"}


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ---------------------------------------------------------------- sections

def section_local_slope(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    # Default settings: no --batch-max-runs; bmx_one_batch would only repeat what
    # overhead.py shows. A smoke run's slope is noise: no unmeasured campaign before it.
    return measure_slope(bench, args, rng, one_batch=False, warm=not args.quick)


def section_ssh_slope(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    net = ctx.get("net")
    if net is None:
        return {"measured": False, "why": ctx["net_why"]}
    return measure_ssh(bench, args, net)


def section_quickstart(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    return measure_quickstart(bench)


def section_knobs(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    """Rows d and e: reconfigure.py's cases through tests/knobkit.py's playbook."""
    if os.geteuid() != 0:
        return {"measured": False, "why": "loop devices, read_ahead_kb and a private PostgreSQL need root"}
    import reconfigure
    from knobkit import KnobRunner

    timing = bench.tmp / "knob-timing.jsonl"
    saved = dict(os.environ)
    # The task stamps show where a knob's time goes (ansible-runner hands this
    # process's environment to ansible-playbook); restored afterwards.
    os.environ.update(timing_env(timing))
    try:
        runner = KnobRunner(bench.tmp / "knobs")
        if not args.quick:  # a smoke run's figures are noise anyway
            runner.run([])  # imports and caches warmed before anything is timed
        cases, skipped = reconfigure.measure_cases(runner, bench.tmp, args.knob_reps, rng, timing,
                                                   postgresql=not args.quick)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"measured": True, "reps": args.knob_reps, "cases": cases, "skipped": skipped}


def section_collect(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    """Row f: synthetic record files, then the collect job's own command in a fresh process."""
    import report

    # The record files on a tmpfs when it has room: deleting 200k runs' files from the
    # disk took about 15 minutes here, one rmtree on a tmpfs takes seconds. Collect reads
    # the batches' rows files, not the records, so where they lie changes little.
    need = 3 * 8 * 2**10 * max(args.collect_sizes)  # about 8 KiB of files per record, thrice
    shm = Path("/dev/shm")
    # Room in bytes and in inodes (a tmpfs has a fixed number: about 5 files and
    # directories per record; 1M records did not fit /dev/shm's 3M inodes here).
    room = (shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > need
            and os.statvfs(shm).f_favail > 6 * max(args.collect_sizes))
    base = Path(tempfile.mkdtemp(prefix="bmx-bench-collect-", dir=shm)) if room else bench.tmp
    project = BenchProject(base / "collect-project")
    rows = []
    try:
        for n in args.collect_sizes:
            name = f"col_{n}"
            spec, exp, runs, synth_s = report.synthesize(project, name, n, True)
            print(f"collect: {runs} records synthesized in {synth_s:.0f} s (load {load()})", flush=True)
            res = report.step(project, report.collect_argv(str(spec.relative_to(project.root)), name), "collect",
                              bench.tmp / f"collect-{n}.log", tree_every=1.0)
            rows.append({"runs": runs, "synthesis_s": synth_s, "collect_s": res["wall_s"],
                         "peak_rss_mib": res["peak_rss_mib"], "peak_tree_rss_mib": res["peak_tree_rss_mib"],
                         "loadavg_after": os.getloadavg()})
            print(f"collect: {runs} records: {res['wall_s']:.1f} s, peak {res['peak_rss_mib']:.0f} MiB "
                  f"(tree {res['peak_tree_rss_mib']:.0f} MiB)", flush=True)
            shutil.rmtree(exp, ignore_errors=True)  # free the disk before the next size
    finally:
        project.cleanup()
        if base != bench.tmp:
            shutil.rmtree(base, ignore_errors=True)
    return {"measured": True, "rows": rows, "records_on": str(base)}


def section_many_hosts(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    """Row g: the same no-op campaign on one host and on every namespace host at once."""
    net = ctx.get("net")
    if net is None:
        return {"measured": False, "why": ctx["net_why"]}
    wl = noop_workload()
    n, k = args.host_runs, len(net.hosts)
    out: dict[str, Any] = {"measured": True, "hosts": k, "runs_per_host": n}
    for label, hosts, nh in (("one", "h1", 1), ("many", "all", k)):
        res = ssh_bmx(bench, net, wl, n, f"hosts{nh}", hosts=hosts, n_hosts=nh, tree_every=0.5,
                      extra_args=["--hosts-parallel", str(nh)])
        busiest = max(res["own_s_by_host"].values())
        out[label] = {"hosts": nh, "wall_s": res["wall_s"], "batches": res["batches"],
                      "own_s_by_host": res["own_s_by_host"], "added_per_run_s": (res["wall_s"] - busiest) / n,
                      "wall_per_run_all_hosts_s": res["wall_s"] / (n * nh),
                      "peak_rss_mib": res["peak_rss_mib"], "peak_tree_rss_mib": res["peak_tree_rss_mib"],
                      "peak_tree_pss_mib": res["peak_tree_pss_mib"], "controller_cpu_s": res["user_s"] + res["sys_s"],
                      "processes": res["tree_kinds"], "at_peak": res["tree_at_peak"]}
        print(f"hosts: {nh:2} x {n} runs: {res['wall_s']:.1f} s, added {ms(out[label]['added_per_run_s'])}/run, "
              f"controller peak {res['peak_tree_rss_mib']:.0f} MiB (PSS {res['peak_tree_pss_mib']:.0f} MiB), "
              f"CPU {out[label]['controller_cpu_s']:.1f} s (load {load()})\n{kinds_table(res['tree_kinds'])}\n"
              f"at the peak: {res['tree_at_peak']}", flush=True)
    out["ratio_to_one_host"] = out["many"]["added_per_run_s"] / out["one"]["added_per_run_s"]
    return out


def section_cv(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    data: dict[str, Any] = {"n": args.n}
    variants = ["bare", "bmx"] + ([] if args.no_peers else ["rebench", "reframe"])
    workloads = make_workloads(bench, args, data)
    data["workloads"] = measure_rounds(bench, workloads, variants, args.n, rng, data)
    return data


def section_interleave(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    """Row i: interleave.py's campaigns (a sysctl knob on a scratch tree), every variant
    in a shuffled order per repeat."""
    import interleave

    project = BenchProject(bench.tmp / "interleave-project")
    proc = bench.tmp / "interleave-proc"
    (proc / "vm").mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    try:
        for rep in range(args.interleave_repeats):
            order = list(interleave.VARIANTS)
            rng.shuffle(order)
            for variant in order:
                results.append(interleave.campaign(project, proc, variant, rep, args.interleave_replicates)
                               | {"repeat": rep})
                print(f"interleave: {json.dumps(results[-1])} (load {load()})", flush=True)
    finally:
        project.cleanup()
    return {"measured": True, "repeats": args.interleave_repeats, "runs": 4 * args.interleave_replicates,
            "medians": interleave.summarize(results), "results": results}


#: Issue 23's experiment: read-ahead of a loop device x block size, fio on the device's filesystem.
ESTIMATE_SPEC = """\
name: ra_bs
inventory: config/inventory/bench.yml
factors:
  read_ahead_kb: [0, 1024]
  bs: [4k, 128k]
knobs:
  read_ahead_kb: {{role: knob_read_ahead, cost: none, vars: {{knob_read_ahead_device: "{dev}"}}}}
workload:
  role: workload_fio
  vars: {{filename: "{mnt}/fio.dat", rw: read, bs: "{{{{ bs }}}}", ioengine: psync, size: 32m,
          runtime: {runtime}, time_based: 1}}
  timeout: 120
replicates: {replicates}
order: {{strategy: random, seed: 23}}
"""


def section_estimate(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict:
    """Row j: campaign 1, `bmx plan --json`, campaign 2 (a new --campaign), each as a user runs it."""
    if os.geteuid() != 0:
        return {"measured": False, "why": "the loop device and its read_ahead_kb need root"}
    import reconfigure  # noqa: F401  (puts tests/ on the path, for knobkit)
    from knobkit import LoopDevice

    loop = LoopDevice(bench.tmp / "estimate-loop", size_mb=128, mkfs=True)
    project = BenchProject(bench.tmp / "estimate-project")
    try:
        spec = str(project.write_spec("ra_bs", ESTIMATE_SPEC.format(
            dev=loop.name, mnt=loop.mountpoint, runtime=args.estimate_runtime, replicates=args.estimate_replicates)))
        first, wall1 = project.bmx("run", spec)
        if first.returncode != 0:
            raise RuntimeError(f"campaign 1: bmx run failed: {first.stdout[-2000:]}{first.stderr[-2000:]}")
        planned, _ = project.bmx("plan", spec, "--json")
        if planned.returncode != 0:
            raise RuntimeError(f"bmx plan failed: {planned.stderr[-2000:]}")
        est = json.loads(planned.stdout)
        second, wall2 = project.bmx("run", spec, "--campaign", "second")
        if second.returncode != 0:
            raise RuntimeError(f"campaign 2: bmx run failed: {second.stdout[-2000:]}{second.stderr[-2000:]}")
        runs = len(list(project.exp("ra_bs").glob("runs/*/*/record.json")))
    finally:
        project.cleanup()
        loop.close()
    this = est["this_plan"]
    without = this["campaign_s"] - this["campaign_overhead_s"]
    out = {"measured": True, "runs": runs, "planned_runs": this["runs"], "batches": this["batches"],
           "wall_first_s": wall1, "wall_s": wall2, "estimate_s": this["campaign_s"],
           "estimate_without_campaign_overhead_s": without, "per_run_s": est["per_run_s"],
           "batch_overhead_s": est["batch_overhead_s"], "campaign_overhead_s": est["campaign_overhead_s"],
           "campaign_overhead_source": est["campaign_overhead_source"],
           "error_pct": 100.0 * (this["campaign_s"] - wall2) / wall2,
           "error_without_campaign_overhead_pct": 100.0 * (without - wall2) / wall2}
    print(f"estimate: {this['runs']} runs, {this['batches']} batch(es): estimated {this['campaign_s']:.1f} s "
          f"(without the campaign's start and end {without:.1f} s), campaign 2 took {wall2:.1f} s: "
          f"{out['error_pct']:+.0f} % (load {load()})", flush=True)
    return out


SECTIONS: list[tuple[str, str, Callable[..., dict]]] = [
    ("a", "local_slope", section_local_slope),
    ("b", "ssh_slope", section_ssh_slope),
    ("g", "many_hosts", section_many_hosts),
    ("c", "quickstart", section_quickstart),
    ("de", "knobs", section_knobs),
    ("f", "collect", section_collect),
    ("h", "cv", section_cv),
    ("i", "interleave", section_interleave),
    ("j", "estimate", section_estimate),
]


# ---------------------------------------------------------------- the table

def run_section(fn: Callable[..., dict], bench: Bench, args: argparse.Namespace, rng: random.Random,
                ctx: dict) -> dict:
    """One section's figures and its seconds (``section_s``); a section that fails gives
    ``{"error": ...}`` and its traceback on stderr, so that one row's failure loses no other."""
    t0 = time.perf_counter()
    try:
        out = fn(bench, args, rng, ctx)
    except Exception as exc:
        traceback.print_exc()
        out = {"error": f"{type(exc).__name__}: {exc}"}
    out["section_s"] = time.perf_counter() - t0
    return out


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def evaluate(data: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per target: baseline figures, benchmatrix's, the target, met or not."""
    s = data["sections"]
    rows: list[dict[str, Any]] = []

    def row(key: str, base: str, bmx: str, met: bool | None, note: str = "") -> None:
        rows.append({"row": key, "measure": ROWS[key], "before (issue)": BEFORE[key], "baseline": base,
                     "benchmatrix": bmx, "target": TARGET[key], "met": met, "note": note})

    def failed(key: str, sec: str) -> bool:
        x = s.get(sec)
        if x is None:
            row(key, "-", "not run", None, "left out (--only/--quick)")
            return True
        if "error" in x:
            row(key, "-", "error", None, x["error"].strip().splitlines()[-1][:120])
            return True
        if x.get("measured") is False:
            row(key, "-", "not measured", None, x["why"])
            return True
        return False

    bare_slope = None
    if not failed("a", "local_slope"):
        v = s["local_slope"]["variants"]
        bare_slope = v["bare"]["marginal_per_run_s"]
        b = v["bmx"]["marginal_per_run_s"]
        base = f"bare {ms(bare_slope)}"
        peer = v.get("rebench", {}).get("marginal_per_run_s")
        if peer is not None:
            base += f"; ReBench {ms(peer)} (+{ms(peer - bare_slope)})"
        if "reframe" in v:
            base += f"; ReFrame {ms(v['reframe']['marginal_per_run_s'])}"
        row("a", base, f"{ms(b)} (+{ms(b - bare_slope)}); batches {s['local_slope']['bmx_batches']}",
            None if peer is None else b <= peer)
    if not failed("b", "ssh_slope"):
        m = s["ssh_slope"]["marginal_per_run_s"]
        added = m - bare_slope if bare_slope is not None else None
        row("b", f"bare (local) {ms(bare_slope)}", f"{ms(m)} marginal, +{ms(added)} added; "
            f"batches {s['ssh_slope']['bmx_batches']}", None if added is None else added <= 0.005)
    if not failed("c", "quickstart"):
        q = s["quickstart"]
        row("c", f"runs' own time {q['workload_s']:.1f} s", f"{q['fixed_beyond_own_time_s']:.1f} s "
            f"(outside the runs' span {q['fixed_s']:.1f} s; wall {q['wall_s']:.1f} s)",
            q["fixed_beyond_own_time_s"] < 5)
    if not failed("d", "knobs") and not failed("e", "knobs") and s["knobs"]["cases"]:
        cases = s["knobs"]["cases"]
        noop = {k: c["no-op_added_s"] for k, c in cases.items()}
        beyond = {k: c["change_beyond_direct_s"] for k, c in cases.items()}
        direct = "; ".join(f"{k.split(' ')[0]} {c['direct_change_s']:.3f} s" for k, c in cases.items())
        skipped = "; ".join(f"{k}: {v}" for k, v in s["knobs"]["skipped"].items())
        row("d", "empty playbook " + ", ".join(f"{c['empty_playbook_s']:.2f}" for c in cases.values()) + " s",
            "; ".join(f"{k.split(' ')[0]} {v:.2f} s" for k, v in noop.items()), max(noop.values()) <= 0.2, skipped)
        row("e", f"direct change: {direct}",
            "change + " + "; ".join(f"{k.split(' ')[0]} {v:.2f} s" for k, v in beyond.items()),
            max(beyond.values()) <= 0.5, skipped)
    if not failed("f", "collect"):
        rs = s["collect"]["rows"]
        fig = "; ".join(f"{r['runs']}: {r['collect_s']:.1f} s, {r['peak_rss_mib']:.0f} MiB" for r in rs)
        big = [r for r in rs if r["runs"] >= 1_000_000]
        if big:
            ok = big[-1]["collect_s"] < 60 and big[-1]["peak_rss_mib"] < 2048
            row("f", "-", fig, ok)
        else:
            row("f", "-", fig, None, "1M not measured: bench/targets.py --full")
    if not failed("g", "many_hosts"):
        g = s["many_hosts"]
        row("g", f"1 host: +{ms(g['one']['added_per_run_s'])}/run",
            f"{g['hosts']} hosts: +{ms(g['many']['added_per_run_s'])}/run ({g['ratio_to_one_host']:.2f}x), "
            f"controller peak {g['many']['peak_tree_rss_mib']:.0f} MiB",
            g["ratio_to_one_host"] <= 1.5 and g["many"]["peak_tree_rss_mib"] < 2048,
            "" if g["hosts"] == 16 else f"{g['hosts']} hosts, {g['runs_per_host']} runs each")
    if not failed("h", "cv"):
        ws = s["cv"]["workloads"]
        base, fig, oks = [], [], []
        for w, x in ws.items():
            summ = x["summary"]
            peers = ", ".join(f"{v} {summ[v]['cv_ratio_to_bare']:.2f}x" for v in ("rebench", "reframe") if v in summ
                              and summ[v].get("cv_ratio_to_bare") is not None)
            base.append(f"{w}: bare CV {fmt(summ['bare']['metric_cv'])}" + (f", {peers}" if peers else ""))
            r = summ["bmx"].get("cv_ratio_to_bare")
            fig.append(f"{w}: CV {fmt(summ['bmx']['metric_cv'])}, {'-' if r is None else f'{r:.2f}x'}")
            oks.append(None if r is None else r <= 1.1)
        row("h", "; ".join(base), "; ".join(fig), None if None in oks else all(oks))
    if not failed("i", "interleave"):
        row("i", *interleave_row(s["interleave"]))
    if not failed("j", "estimate"):
        row("j", *estimate_row(s["estimate"]))
    order = list(ROWS)
    rows.sort(key=lambda r: order.index(r["row"]))
    return rows


def interleave_row(x: dict[str, Any]) -> tuple[str, str, bool | None, str]:
    """Row i's (baseline, benchmatrix, met, note) from section_interleave's figures."""
    med = x["medians"]
    per = med.get("random", {}).get("per_extra_reconfiguration_s")
    before = med.get("random, not live", {}).get("per_extra_reconfiguration_s")

    def sec(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f} s"

    base = (f"sequential {med['sequential']['wall_s']:.1f} s wall; batch_live_knobs false "
            f"{sec(before)} per extra reconfiguration")
    fig = (f"{sec(per)} per extra reconfiguration ({med['random']['knob_changes']:g} vs "
           f"{med['sequential']['knob_changes']:g} knob changes)")
    return base, fig, None if per is None else per <= 0.3, f"{x['runs']} runs, {x['repeats']} repeat(s)"


def estimate_row(e: dict[str, Any]) -> tuple[str, str, bool | None, str]:
    """Row j's (baseline, benchmatrix, met, note) from section_estimate's figures."""
    base = (f"without the campaign's start and end {e['estimate_without_campaign_overhead_s']:.0f} s "
            f"({e['error_without_campaign_overhead_pct']:+.0f} %)")
    fig = f"estimate {e['estimate_s']:.0f} s vs {e['wall_s']:.0f} s measured ({e['error_pct']:+.0f} %)"
    note = (f"{e['runs']} runs, {e['batches']} batch(es); campaign start and end {e['campaign_overhead_s']:.0f} s "
            f"from {e['campaign_overhead_source']}")
    return base, fig, abs(e["error_pct"]) <= 25, note


# ---------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run (< 90 s idle): tiny sizes, no peers, no b, c, h")
    ap.add_argument("--full", action="store_true", help="also collect from 1M records (minutes, ~8 GiB of files)")
    ap.add_argument("--only", default="", help="rows to measure, e.g. a,g (default: all)")
    ap.add_argument("--slope-sizes", default="30,300")
    ap.add_argument("--slope-repeats", type=int, default=2)
    ap.add_argument("--slope-reframe", action="store_true", help="also ReFrame's slope (row a)")
    ap.add_argument("--hosts", type=int, default=16, help="namespace hosts of row g")
    ap.add_argument("--host-runs", type=int, default=100, help="no-op runs per host of row g")
    ap.add_argument("--knob-reps", type=int, default=3)
    ap.add_argument("--collect-sizes", default="", help="records for row f (default 200000; --full adds 1000000)")
    ap.add_argument("--n", type=int, default=30, help="runs per campaign of row h")
    ap.add_argument("--cpu-rounds", type=int, default=3)
    ap.add_argument("--fio-rounds", type=int, default=1)
    ap.add_argument("--loop", type=int, default=1_000_000, help="iterations of row h's CPU loop")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-fio", action="store_true")
    ap.add_argument("--interleave-repeats", type=int, default=3, help="repeats of row i's three campaigns")
    ap.add_argument("--interleave-replicates", type=int, default=10, help="replicates per cell of row i (4 cells)")
    ap.add_argument("--estimate-replicates", type=int, default=3, help="replicates per cell of row j (4 cells)")
    ap.add_argument("--estimate-runtime", type=int, default=5, help="fio seconds per run of row j")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    only = set(args.only.replace(",", "")) if args.only else set(ROWS)
    if args.quick:
        args.slope_sizes, args.slope_repeats, args.hosts, args.host_runs = "2,4", 1, 2, 3
        args.knob_reps, args.n, args.cpu_rounds, args.loop = 1, 3, 1, 200_000
        args.no_peers = args.no_fio = True
        args.interleave_repeats, args.interleave_replicates = 1, 2
        args.estimate_replicates, args.estimate_runtime = 1, 1
        # b and c time what a and g already exercise (measure_ssh, one bigger bmx run);
        # h's rounds are overhead.py --quick's (tests/e2e/test_bench_smoke.py).
        only -= {"b", "c", "h"}
    if not shutil.which("fio"):
        args.no_fio = True
    sizes = args.collect_sizes or ("200" if args.quick else "200000" + (",1000000" if args.full else ""))
    args.collect_sizes = [int(x) for x in sizes.split(",") if x]
    rng = random.Random(args.seed)
    if not args.no_peers and only & {"a", "h"}:
        peer_bin("rebench")  # installed before anything is timed
    load0 = load()
    print(f"bench/targets.py: rows {''.join(sorted(only))}; load average {load0} on {os.cpu_count()} CPUs",
          flush=True)
    result_name = "targets_quick" if args.quick else "targets"
    data: dict[str, Any] = {"args": vars(args), "sections": {}, "section_load": {}}
    t_all = time.perf_counter()
    with temp_dir("bmx-bench-targets-", keep=args.keep) as tmp:
        bench = Bench(tmp, args)
        bench.phases = False
        ctx: dict[str, Any] = {"net": None, "net_why": ""}
        try:
            if only & {"b", "g"}:
                net, why = ssh_hosts(tmp, max(args.hosts, 1))
                ctx["net_why"] = why
                if net is not None:
                    ctx["net"] = net.__enter__()
            for keys, name, fn in SECTIONS:
                if not set(keys) & only:
                    continue
                print(f"\n-- {name} (rows {keys}); load average {load()}", flush=True)
                data["section_load"][name] = os.getloadavg()
                data["sections"][name] = run_section(fn, bench, args, rng, ctx)
                # Kept as it goes: a long run stopped halfway keeps what it measured.
                write_result(result_name, {**data, "partial": True})
        finally:
            if ctx["net"] is not None:
                ctx["net"].teardown()
    data["total_s"] = time.perf_counter() - t_all
    data["targets"] = evaluate(data, args)
    path = write_result(result_name, data)
    print(f"\n== issue 15 targets; load average (1, 5, 15 min) at start {load0}, at the end {load()}; "
          f"{data['total_s'] / 60:.1f} min")
    print(table(["", "measure", "baseline (same run)", "benchmatrix", "target", "met?"],
                [[r["row"], r["measure"], r["baseline"], r["benchmatrix"], r["target"], verdict(r["met"])]
                 for r in data["targets"]]))
    for r in data["targets"]:
        if r["note"]:
            print(f"  {r['row']}: {r['note']}")
    print(f"\nwrote {path}")
    return 1 if any("error" in x for x in data["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
