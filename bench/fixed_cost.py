#!/usr/bin/env python3
"""Issue 34's targets in one run, with ReBench's fixed cost beside the quickstart's.

Rows (targets.py's letters; a, g and i are targets.py's own sections, run here so that
every row of issue 34 is measured in the same run):

  a  added per run on localhost, the slope between 30 and 300 no-op runs (--slope-sizes:
     30,3000 or 30,10000 resolve it better; up to batch_max_runs, 10000, a campaign is
     one batch), beside the bare loop and ReBench (targets.section_local_slope); met at
     or below ReBench's;
  c  the quickstart as shipped on a known host (an unmeasured one-run fio campaign first
     makes localhost known to the project): wall less its runs' own time, beside a
     ReBench campaign of the same shape (the same fio argvs, as many runs each, in one
     ReBench run): ReBench's wall less its runs' own time (each run stamped by a bash
     wrapper around the argv). Met when bmx's is at most 2.5x ReBench's;
  g  16 namespace SSH hosts, 100 no-op runs each, against h1 alone
     (targets.section_many_hosts): added cost per run at most 2.5x one host's, the
     controller's peak memory under 2 GiB;
  i  a cheap live knob in random order (targets.section_interleave): at most 0.3 s per
     extra reconfiguration.

The machine is shared: rows c and g also give CPU seconds (wait4's rusage of the whole
tree of bmx, and of ReBench), and every row the load average at its start and end.

    bench/fixed_cost.py                # rows a, c, g, i (root: namespaces)
    bench/fixed_cost.py --only c,g     # some rows
    bench/fixed_cost.py --c-rounds 3   # row c three times, bmx and ReBench in shuffled order
    bench/fixed_cost.py --only g --known-hosts   # row g on hosts the project already knows

Writes bench/results/fixed_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import targets  # noqa: E402
from _common import ROOT, median, peer_bin, run_measured, table, temp_dir, write_result  # noqa: E402
from overhead import Bench, noop_workload, ssh_bmx, ssh_hosts  # noqa: E402

#: Issue 34's targets (its "Targets" list), by targets.py's row letters.
TARGET = {"a": "<= ReBench's, same run", "c": "<= 2.5x ReBench's fixed cost",
          "g": "<= 2.5x 1 host; peak < 2 GiB", "i": "<= 0.3 s"}
MEASURE = {"a": "added per run, localhost, slope between two sizes of no-op campaigns (--slope-sizes)",
           "c": "fixed cost of the quickstart on a known host (wall - the runs' own time)",
           "g": "16 namespace SSH hosts in parallel, 100 no-op runs each: added per run",
           "i": "cheap live knob, random order: s per extra reconfiguration vs sequential"}

#: One run of a ReBench campaign: the argv, its start and end on the host clock and then
#: the shell's children's CPU (bash `times`, second line) appended to the stamp file.
STAMP_SH = """\
#!/bin/bash
s=$EPOCHREALTIME
"$@"
rc=$?
e=$EPOCHREALTIME
echo "$s $e" >> {stamps}
times >> {stamps}
exit $rc
"""

#: Makes localhost known to the project for the fio role (facts, fio's version, the
#: role's published variables) before the quickstart is timed.
WARM_SPEC = """\
name: qs_warm
hosts: localhost
inventory: config/inventory/bench.yml
factors:
  series: [warm]
workload:
  role: workload_fio
  vars: {rw: randread, bs: 4k, iodepth: 1, ioengine: libaio, direct: 1, size: 64m, runtime: 1, time_based: 1}
  timeout: 60
replicates: 1
warmup: 0
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu(text: str) -> float:
    """Seconds of one `times` field such as ``0m1.250s``."""
    m = re.fullmatch(r"(\d+)m([\d.]+)s", text)
    if not m:
        raise ValueError(f"not a `times` field: {text!r}")
    return 60 * int(m.group(1)) + float(m.group(2))


def bmx_quickstart(bench: Bench, tag: str) -> dict[str, Any]:
    """The quickstart spec as shipped, under a fresh name, on the bench project's localhost."""
    src = (ROOT / "config" / "experiments" / "quickstart.yaml").read_text()
    name = f"quickstart_{tag}"
    text = re.sub(r"(?m)^inventory:.*$", "inventory: config/inventory/bench.yml", src)
    text = re.sub(r"(?m)^name:.*$", f"name: {name}", text)
    spec = bench.project.write_spec(name, text)
    res, wall = bench.project.bmx("run", str(spec), tree_every=1.0)
    if res.returncode != 0:
        raise RuntimeError(f"quickstart {name} failed:\n{res.stdout[-3000:]}")
    recs = sorted((json.loads(p.read_text()) for p in bench.project.exp(name).glob("runs/*/*/record.json")),
                  key=lambda r: r["seq"])
    own = sum(r["duration_s"] for r in recs)
    cpu = res.memory["user_s"] + res.memory["sys_s"]
    return {"runs": len(recs), "wall_s": wall, "own_s": own, "fixed_s": wall - own, "cpu_s": cpu,
            "peak_tree_rss_mib": res.memory["peak_tree_rss_mib"], "argvs": [r["workload"]["argv"] for r in recs]}


def rebench_same_shape(bench: Bench, argvs: list[list[str]], tag: str) -> dict[str, Any]:
    """ReBench running the same argvs as often as bmx did (one benchmark per distinct argv,
    in one ReBench run); its wall and CPU, its runs' own time and CPU from the wrapper."""
    d = bench.fresh(f"rebench-qs-{tag}")
    stamps = d / "stamps"
    wrapper = d / "stamp.sh"
    wrapper.write_text(STAMP_SH.format(stamps=shlex.quote(str(stamps))))
    wrapper.chmod(0o755)
    counts: dict[tuple[str, ...], int] = {}
    # ReBench runs each command through a shell of its own environment: the tool by its path.
    argvs = [[shutil.which(a[0]) or a[0], *a[1:]] for a in argvs]
    for argv in argvs:
        counts[tuple(argv)] = counts.get(tuple(argv), 0) + 1
    benchmarks = [{f"cell{i}": {"command": shlex.join(a), "invocations": k}}
                  for i, (a, k) in enumerate(counts.items())]
    conf = {
        "default_experiment": "qs", "default_data_file": str(d / "rebench.data"),
        "runs": {"iterations": 1},
        "benchmark_suites": {"s": {"gauge_adapter": {"FioIops": str(bench.tmp / "fio_adapter.py")},
                                   "command": "%(benchmark)s", "benchmarks": benchmarks}},
        "executors": {"x": {"path": str(d), "executable": wrapper.name}},
        "experiments": {"qs": {"suites": ["s"], "executions": ["x"]}},
    }
    (d / "rebench.conf").write_text(json.dumps(conf))  # YAML is a superset of JSON
    m = run_measured([peer_bin("rebench"), "-D", "-c", str(d / "rebench.conf")], cwd=d, output=d / "rebench.out")
    lines = stamps.read_text().splitlines() if stamps.is_file() else []
    runs = [lines[i:i + 3] for i in range(0, len(lines), 3)]
    own = sum(float(r[0].split()[1]) - float(r[0].split()[0]) for r in runs)
    runs_cpu = sum(_cpu(f) for r in runs for f in r[2].split())
    if m["rc"] != 0 or len(runs) != len(argvs):
        raise RuntimeError(f"rebench: exit {m['rc']}, {len(runs)} of {len(argvs)} runs:\n"
                           f"{(d / 'rebench.out').read_text(errors='replace')[-3000:]}")
    cpu = m["user_s"] + m["sys_s"]
    return {"runs": len(runs), "benchmarks": len(counts), "wall_s": m["wall_s"], "own_s": own,
            "fixed_s": m["wall_s"] - own, "cpu_s": cpu, "runs_cpu_s": runs_cpu, "fixed_cpu_s": cpu - runs_cpu}


def section_fixed(bench: Bench, args: argparse.Namespace, rng: random.Random, ctx: dict) -> dict[str, Any]:
    """Row c: an unmeasured fio campaign, then rounds of the quickstart and ReBench of the
    same shape in a shuffled order (ReBench needs the argvs of a quickstart run first)."""
    warm, _ = bench.project.bmx("run", str(bench.project.write_spec("qs_warm", WARM_SPEC)))
    if warm.returncode != 0:
        raise RuntimeError(f"the warm-up campaign failed:\n{warm.stdout[-2000:]}{warm.stderr[-2000:]}")
    rounds: list[dict[str, Any]] = []
    argvs: list[list[str]] | None = None
    for rnd in range(args.c_rounds):
        order = ["bmx", "rebench"] if argvs is None else rng.sample(["bmx", "rebench"], 2)
        got: dict[str, Any] = {"order": order}
        for v in order:
            l0 = os.getloadavg()
            if v == "bmx":
                got[v] = bmx_quickstart(bench, f"r{rnd}")
                argvs = got[v].pop("argvs")
            else:
                got[v] = rebench_same_shape(bench, argvs, f"r{rnd}")
            got[v]["load_start"], got[v]["load_end"] = l0, os.getloadavg()
            print(f"fixed: round {rnd} {v:7} {json.dumps(got[v])}", flush=True)
        rounds.append(got)
    out: dict[str, Any] = {"measured": True, "rounds": rounds}
    for v in ("bmx", "rebench"):
        out[v] = {k: median([r[v][k] for r in rounds]) for k in rounds[0][v]
                  if isinstance(rounds[0][v][k], (int, float))}
    # The fio runs' CPU under bmx is counted in bmx's tree too (local connection: the
    # module runs the runner, the runner fio); ReBench's wrapper measured the same argvs'.
    out["bmx"]["fixed_cpu_s_est"] = out["bmx"]["cpu_s"] - out["rebench"]["runs_cpu_s"]
    out["ratio_to_rebench"] = out["bmx"]["fixed_s"] / out["rebench"]["fixed_s"]
    out["cpu_ratio_to_rebench"] = out["bmx"]["fixed_cpu_s_est"] / out["rebench"]["fixed_cpu_s"]
    return out


# g and c first: a run stopped early (results/fixed_cost.json is kept after each row) has
# the rows furthest from their targets.
SECTIONS = [("g", "many_hosts", targets.section_many_hosts), ("c", "fixed", section_fixed),
            ("a", "local_slope", targets.section_local_slope), ("i", "interleave", targets.section_interleave)]


def evaluate(s: dict[str, Any]) -> list[list[str]]:
    rows = []

    def row(key: str, base: str, fig: str, met: bool | None) -> None:
        rows.append([key, MEASURE[key], base, fig, TARGET[key], targets.verdict(met)])

    def bad(key: str, name: str) -> bool:
        x = s.get(name)
        if x is None:
            return True
        if "error" in x or x.get("measured") is False:
            row(key, "-", x.get("error", x.get("why", "")).strip().splitlines()[-1][-120:], None)
            return True
        return False

    ms = targets.ms
    if not bad("a", "local_slope"):
        v = s["local_slope"]["variants"]
        bare, b = v["bare"]["marginal_per_run_s"], v["bmx"]["marginal_per_run_s"]
        peer = v.get("rebench", {}).get("marginal_per_run_s")
        ci = "" if peer is None else "; bmx - ReBench, medians' slope: {:+.3f} ms, 90% CI [{:+.3f}, {:+.3f}]".format(
            *slope_difference(v["bmx"]["points"], v["rebench"]["points"]))
        row("a", f"bare {ms(bare)}" + ("" if peer is None else f"; ReBench {ms(peer)} (+{ms(peer - bare)})"),
            f"{ms(b)} (+{ms(b - bare)}){ci}", None if peer is None else b <= peer)
    if not bad("c", "fixed"):
        f = s["fixed"]
        r, b = f["rebench"], f["bmx"]
        row("c", f"ReBench {r['fixed_s']:.2f} s (wall {r['wall_s']:.1f} s); {r['fixed_cpu_s']:.2f} CPU-s "
            f"beside its runs' {r['runs_cpu_s']:.2f}",
            f"{b['fixed_s']:.2f} s (wall {b['wall_s']:.1f} s), {f['ratio_to_rebench']:.2f}x; "
            f"{b['fixed_cpu_s_est']:.2f} CPU-s ({f['cpu_ratio_to_rebench']:.2f}x)",
            f["ratio_to_rebench"] <= 2.5)
    if not bad("g", "many_hosts"):
        g = s["many_hosts"]
        one, many = g["one"], g["many"]
        row("g", f"1 host: +{ms(one['added_per_run_s'])}/run, {one['controller_cpu_s']:.1f} CPU-s",
            f"{g['hosts']} hosts: +{ms(many['added_per_run_s'])}/run ({g['ratio_to_one_host']:.2f}x), "
            f"{many['controller_cpu_s']:.1f} CPU-s ({many['controller_cpu_s'] / one['controller_cpu_s']:.2f}x), "
            f"peak {many['peak_tree_rss_mib']:.0f} MiB",
            g["ratio_to_one_host"] <= 2.5 and many["peak_tree_rss_mib"] < 2048)
    if not bad("i", "interleave"):
        base, fig, met, _note = targets.interleave_row(s["interleave"])
        row("i", base, fig, met)
    return rows


def slope_difference(a: list, b: list, draws: int = 4000) -> tuple[float, float, float]:
    """Medians' slope of ``a`` less that of ``b`` ((size, seconds) points of two sizes), in
    ms a run, and its 90 % bootstrap interval (each size's repeats resampled): how well one
    run of row a tells the two apart (a 1000-run campaign swings by a second between repeats)."""
    def groups(points: list) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for n, s in points:
            out.setdefault(int(n), []).append(float(s))
        return out

    ga, gb = groups(a), groups(b)
    lo, hi = min(ga), max(ga)

    def slope(g: dict[int, list[float]]) -> float:
        return (median(g[hi]) - median(g[lo])) / (hi - lo) * 1000

    rng = random.Random(1)
    diffs = sorted(slope({n: rng.choices(x, k=len(x)) for n, x in ga.items()})
                   - slope({n: rng.choices(x, k=len(x)) for n, x in gb.items()}) for _ in range(draws))
    return slope(ga) - slope(gb), diffs[int(0.05 * draws)], diffs[int(0.95 * draws) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="a,c,g,i", help="rows to measure (default a,c,g,i)")
    ap.add_argument("--c-rounds", type=int, default=1, help="rounds of row c (bmx and ReBench each)")
    ap.add_argument("--slope-sizes", default="30,300")
    ap.add_argument("--slope-repeats", type=int, default=2)
    ap.add_argument("--hosts", type=int, default=16, help="namespace hosts of row g")
    ap.add_argument("--host-runs", type=int, default=100, help="no-op runs per host of row g")
    ap.add_argument("--known-hosts", action="store_true",
                    help="row g on known hosts: an unmeasured 1-run campaign on every host first")
    ap.add_argument("--interleave-repeats", type=int, default=3)
    ap.add_argument("--interleave-replicates", type=int, default=10)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    # What targets.py's sections read besides.
    args.quick, args.no_peers, args.slope_reframe = False, False, False
    only = set(args.only.replace(",", ""))
    rng = random.Random(args.seed)
    if only & {"a", "c"}:
        peer_bin("rebench")  # installed before anything is timed
    data: dict[str, Any] = {"args": vars(args), "sections": {}, "load": {}}
    load0 = load()
    print(f"bench/fixed_cost.py: rows {''.join(sorted(only))}; load average {load0} on {os.cpu_count()} CPUs",
          flush=True)
    t_all = time.perf_counter()
    with temp_dir("bmx-bench-fixed-", keep=args.keep) as tmp:
        bench = Bench(tmp, args)
        bench.phases = False  # bmx as a user runs it: no timing callback
        ctx: dict[str, Any] = {"net": None, "net_why": ""}
        try:
            if "g" in only:
                net, ctx["net_why"] = ssh_hosts(tmp, args.hosts)
                if net is not None:
                    ctx["net"] = net.__enter__()
                    if args.known_hosts:
                        # Unmeasured: every host's first campaign gathers its facts and
                        # installs the runner; after it the hosts are known (one module call
                        # a batch, one Ansible call a wave).
                        k = len(ctx["net"].hosts)
                        ssh_bmx(bench, ctx["net"], noop_workload(), 1, "gknown", hosts="all", n_hosts=k,
                                extra_args=["--hosts-parallel", str(k)])
            for key, name, fn in SECTIONS:
                if key not in only:
                    continue
                print(f"\n-- row {key} ({name}); load average {load()}", flush=True)
                start = os.getloadavg()
                data["sections"][name] = targets.run_section(fn, bench, args, rng, ctx)
                data["load"][key] = {"start": start, "end": os.getloadavg()}
                print(f"-- row {key}: {data['sections'][name]['section_s']:.0f} s; load average {load()}", flush=True)
                write_result("fixed_cost", {**data, "partial": True})
        finally:
            if ctx["net"] is not None:
                ctx["net"].teardown()
    data["total_s"] = time.perf_counter() - t_all
    rows = evaluate(data["sections"])
    data["targets"] = rows
    path = write_result("fixed_cost", data)
    print(f"\n== issue 34 targets; load average (1, 5, 15 min) at start {load0}, at the end {load()}; "
          f"{data['total_s'] / 60:.1f} min")
    print(table(["", "measure", "baseline (same run)", "benchmatrix", "target", "met?"], rows))
    for key, ld in data["load"].items():
        print(f"  {key}: load (1 min) {ld['start'][0]:.2f} at the start, {ld['end'][0]:.2f} at the end")
    print(f"\nwrote {path}")
    return 1 if any("error" in x for x in data["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
