#!/usr/bin/env python3
"""Orchestration overhead: the same runs bare, through `bmx run`, ReBench and ReFrame.

Workloads (identical argv for every variant):
  cpu  a fixed CPU-bound Python loop that prints its own runtime (the metric);
  fio  fio time_based for 1 s, 4k random direct reads of a scratch file (read IOPS).
Variants: a bare bash loop; `bmx run` on localhost (no knobs); ReBench; ReFrame
(serial). Each round runs every variant once, in a shuffled order, so drift hits
all alike. Then the marginal cost of one more run (slope between campaigns of 30
and 300 no-op runs) and the intercept (fixed cost), locally and over SSH to a host
in a network namespace, and the fixed cost of the quickstart campaign itself.

    bench/overhead.py            # the published figures (about 8 minutes)
    bench/overhead.py --quick    # smoke run: cpu only, 3 runs, bare and bmx

Writes bench/results/overhead.json (or overhead_quick.json).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ROOT,
    BenchProject,
    bmx_phases,
    cv,
    fmt,
    median,
    peer_bin,
    read_timing,
    slope,
    table,
    temp_dir,
    ts,
    write_result,
)

LOOP_PY = """\
import sys, time
n = int(sys.argv[1])
t = time.perf_counter()
s = 0
for i in range(n):
    s += i
print("loop: iterations=1 runtime: %dus" % ((time.perf_counter() - t) * 1e6))
"""
NOOP_LINE = "noop: iterations=1 runtime: 1us"

REBENCH_FIO_ADAPTER = """\
import json
from rebench.interop.adapter import GaugeAdapter, OutputNotParseable
from rebench.model.data_point import DataPoint
from rebench.model.measurement import Measurement


class FioIops(GaugeAdapter):
    \"\"\"fio --output-format=json: the first job's read IOPS as the 'total' value.\"\"\"

    def parse_data(self, data, run_id, invocation):
        try:
            doc = json.loads(data[data.index("{"):data.rindex("}") + 1])
            iops = float(doc["jobs"][0]["read"]["iops"])
        except (ValueError, KeyError, IndexError):
            raise OutputNotParseable(data)
        point = DataPoint(run_id)
        point.add_measurement(Measurement(invocation, 1, iops, "IO/s", run_id, "total"))
        return [point]
"""

REFRAME_TEST = """\
import json
import os

import reframe as rfm
import reframe.utility.sanity as sn

_CFG = json.loads(os.environ["BMX_BENCH_RFM"])


@rfm.simple_test
class BenchRun(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    executable = _CFG["argv"][0]
    executable_opts = _CFG["argv"][1:]
    rep = parameter(range(_CFG["n"]))

    @sanity_function
    def ran(self):
        return sn.assert_found(_CFG["sanity"], self.stdout)

    @performance_function(_CFG["unit"])
    def metric(self):
        return sn.extractsingle(_CFG["regex"], self.stdout, 1, float)
"""

BARE_LOOP = """\
#!/bin/bash
# bare loop: N runs of the command, each run's output in its own file, host-clock stamps
n=$1; out=$2; shift 2
for ((i = 1; i <= n; i++)); do
  s=$EPOCHREALTIME
  "$@" > "$out/$i.out" 2>&1
  e=$EPOCHREALTIME
  echo "$s $e" >> "$out/times"
done
"""


# ---------------------------------------------------------------- workloads

class Workload:
    """One workload: its argv, how to read its metric, and its bmx spec."""

    def __init__(self, name: str, argv: list[str], metric: str, unit: str, regex: str,
                 spec_workload: str, rebench_adapter: Any, sanity: str):
        self.name, self.argv, self.metric, self.unit, self.regex = name, argv, metric, unit, regex
        self.spec_workload = spec_workload
        self.rebench_adapter = rebench_adapter
        self.sanity = sanity

    def value(self, text: str) -> float | None:
        if self.name == "fio":
            try:
                return float(json.loads(text[text.index("{"):text.rindex("}") + 1])["jobs"][0]["read"]["iops"])
            except (ValueError, KeyError, IndexError):
                return None
        m = re.search(self.regex, text)
        return float(m.group(1)) if m else None


def command_workload(name: str, argv: list[str], regex: str, metric: str, unit: str) -> Workload:
    items = ", ".join(json.dumps(a) for a in argv)
    spec = textwrap.dedent(f"""\
        workload:
          role: workload_command
          vars:
            argv: [{items}]
          metrics:
            {metric}: {{regex: '{regex.replace("(", "(?P<value>", 1)}', unit: {unit}, better: lower}}
          timeout: 120
        """)
    return Workload(name, argv, metric, unit, regex, spec, "RebenchLog", r"iterations=1")


FIO_SPEC = """\
workload:
  role: workload_fio
  vars: {rw: randread, bs: 4k, iodepth: 1, ioengine: libaio, direct: 1, size: 16m, runtime: 1, time_based: 1}
  timeout: 120
"""


def spec_text(name: str, wl: Workload, n: int, inventory: str = "config/inventory/bench.yml",
              hosts: str = "localhost") -> str:
    return (f"name: {name}\nhosts: {hosts}\ninventory: {inventory}\nfactors:\n  series: [bench]\n"
            f"{wl.spec_workload}replicates: {n}\nwarmup: 0\norder: {{strategy: random, seed: 1}}\n"
            f"report:\n  metrics: [{wl.metric}]\n")


# ---------------------------------------------------------------- variants

class Bench:
    def __init__(self, tmp: Path, args: argparse.Namespace):
        self.tmp = tmp
        self.args = args
        self.project = BenchProject(tmp / "project")
        self.count = 0
        # The per-phase breakdown needs the Ansible timing callback and the task names
        # of run_batch.yml; targets.py turns it off to time bmx exactly as a user runs it.
        self.phases = True
        (tmp / "bare.sh").write_text(BARE_LOOP)
        (tmp / "loop.py").write_text(LOOP_PY)
        (tmp / "rfm_test.py").write_text(REFRAME_TEST)
        (tmp / "fio_adapter.py").write_text(REBENCH_FIO_ADAPTER)

    def fresh(self, tag: str) -> Path:
        self.count += 1
        d = self.tmp / "work" / f"{self.count:03d}-{tag}"
        d.mkdir(parents=True)
        return d

    # -- bare
    def bare(self, wl: Workload, n: int) -> dict[str, Any]:
        d = self.fresh(f"bare-{wl.name}")
        t0 = time.perf_counter()
        subprocess.run(["bash", str(self.tmp / "bare.sh"), str(n), str(d), *wl.argv], check=True)
        wall = time.perf_counter() - t0
        stamps = [tuple(map(float, ln.split())) for ln in (d / "times").read_text().splitlines()]
        values = [wl.value((d / f"{i}.out").read_text(errors="replace")) for i in range(1, n + 1)]
        return {"wall_s": wall, "run_s": [e - s for s, e in stamps], "values": values}

    # -- bmx
    def bmx(self, wl: Workload, n: int, tag: str, prefix: list[str] = (), inventory: str = "config/inventory/bench.yml",
            hosts: str = "localhost", extra_env: dict[str, str] | None = None,
            batch_max_runs: int | None = None, extra_args: Sequence[str] = (),
            tree_every: float = 0, n_hosts: int = 1) -> dict[str, Any]:
        """One `bmx run` of ``n`` runs of ``wl`` on each of ``n_hosts`` hosts; wall time,
        the runs' own times and metric values, batches, per-phase breakdown (when
        ``self.phases``) and, with ``tree_every``, the controller's peak memory."""
        self.count += 1
        name = f"ovh_{wl.name}_{tag}_{self.count:03d}"
        spec = self.project.write_spec(name, spec_text(name, wl, n, inventory, hosts))
        timing = self.tmp / f"timing-{name}.jsonl" if self.phases else None
        t_start = time.time()
        extra = ["--batch-max-runs", str(batch_max_runs)] if batch_max_runs else []
        res, wall = self.project.bmx("run", str(spec), *extra, *extra_args, timing_file=timing, prefix=prefix,
                                     extra_env=extra_env, tree_every=tree_every)
        t_end = time.time()
        exp = self.project.exp(name)
        if res.returncode != 0:
            raise RuntimeError(f"bmx run {name} failed (exit {res.returncode}):\n{res.stdout[-2000:]}\n"
                               f"{res.stderr[-2000:]}")
        recs = [json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")]
        recs.sort(key=lambda r: r["seq"])
        bad = [r["run_id"] for r in recs if r["status"] != "ok"]
        n *= n_hosts  # every host runs the whole plan
        if bad or len(recs) != n:
            raise RuntimeError(f"bmx run {name}: {len(recs)} records of {n}, not ok: {bad[:5]}")
        values = [(r["metrics"].get(wl.metric) or {}).get("value") for r in recs]
        out = {"wall_s": wall, "run_s": [r["duration_s"] for r in recs], "values": values,
               "batches": len({r["batch"] for r in recs}), "hosts": sorted({r["host"] for r in recs}),
               "own_s_by_host": {h: sum(r["duration_s"] for r in recs if r["host"] == h)
                                 for h in sorted({r["host"] for r in recs})}, **getattr(res, "memory", {})}
        if timing is not None:
            out["phases"] = bmx_phases(exp, recs, read_timing(timing), t_start, t_end)
        return out

    # -- ReBench
    def rebench(self, wl: Workload, n: int) -> dict[str, Any]:
        d = self.fresh(f"rebench-{wl.name}")
        adapter = wl.rebench_adapter
        if adapter == "fio":
            adapter = {"FioIops": str(self.tmp / "fio_adapter.py")}
        conf = {
            "default_experiment": "bench", "default_data_file": str(d / "rebench.data"),
            "runs": {"invocations": n, "iterations": 1},
            "benchmark_suites": {"s": {"gauge_adapter": adapter, "command": " ".join(wl.argv[1:]),
                                       "benchmarks": [wl.name]}},
            "executors": {"x": {"path": str(Path(wl.argv[0]).parent), "executable": Path(wl.argv[0]).name}},
            "experiments": {"bench": {"suites": ["s"], "executions": ["x"]}},
        }
        (d / "rebench.conf").write_text(json.dumps(conf))  # YAML is a superset of JSON
        t0 = time.perf_counter()
        res = subprocess.run([peer_bin("rebench"), "-D", "-c", str(d / "rebench.conf")], cwd=d,
                             capture_output=True, text=True)
        wall = time.perf_counter() - t0
        values = []
        if (d / "rebench.data").is_file():
            for ln in (d / "rebench.data").read_text().splitlines():
                if ln and not ln.startswith(("#", "invocation")):
                    parts = ln.split("\t")
                    if len(parts) > 4 and parts[4] == "total":
                        values.append(float(parts[2]) * (1000 if parts[3] == "ms" and wl.unit == "us" else 1))
        if res.returncode != 0 or len(values) != n:
            raise RuntimeError(f"rebench: exit {res.returncode}, {len(values)} of {n} values:\n{res.stdout[-2000:]}")
        return {"wall_s": wall, "run_s": None, "values": values}

    # -- ReFrame
    def reframe(self, wl: Workload, n: int) -> dict[str, Any]:
        d = self.fresh(f"reframe-{wl.name}")
        regex = r'"iops" : ([0-9.]+)' if wl.name == "fio" else wl.regex
        env = {**__import__("os").environ, "TMPDIR": str(d),
               "BMX_BENCH_RFM": json.dumps({"argv": wl.argv, "n": n, "sanity": wl.sanity, "regex": regex,
                                            "unit": wl.unit})}
        t0 = time.perf_counter()
        res = subprocess.run([peer_bin("reframe"), "-c", str(self.tmp / "rfm_test.py"), "-r",
                              "--exec-policy=serial", "--prefix", str(d / "rfm")],
                             cwd=d, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        values = [float(m.group(1)) for m in re.finditer(r"^P: metric: ([0-9.eE+-]+)", res.stdout, re.M)]
        if res.returncode != 0 or len(values) != n:
            raise RuntimeError(f"reframe: exit {res.returncode}, {len(values)} of {n} values:\n{res.stdout[-3000:]}")
        return {"wall_s": wall, "run_s": None, "values": values}


# ---------------------------------------------------------------- SSH hosts

def ssh_hosts(tmp: Path, n: int = 1):
    """``n`` namespace hosts reached over SSH (tests/netns.py), or the reason why not.

    One set per process: tests/netns.py names the namespaces after the process id.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from netns import NamespaceHosts, available
    except ImportError as exc:
        return None, f"tests/netns.py not importable: {exc}"
    why = available()
    if why:
        return None, why
    return NamespaceHosts(tmp / "net", n), ""


def ssh_inventory(bench: Bench, net: Any) -> str:
    """config/inventory/ssh.yml for every host of ``net``; returns its path relative to the
    project. The hosts share this machine's file system: each gets its own work directory."""
    per_host = {h: {"batch_runner_root": str(bench.tmp / "sshhost" / h / "work"),
                    "workload_fio_directory": str(bench.tmp / "sshhost" / h / "scratch")} for h in net.hosts}
    (bench.project.root / "config" / "inventory" / "ssh.yml").write_text(net.inventory(per_host))
    return "config/inventory/ssh.yml"


def ssh_bmx(bench: Bench, net: Any, wl: Workload, n: int, tag: str, hosts: str = "h1", **kw: Any) -> dict[str, Any]:
    """``bench.bmx`` with the controller inside the controller namespace, reaching ``hosts`` over SSH
    (``n`` runs each); ``kw`` go to ``bench.bmx``."""
    # A private ControlPath directory: SSH master sockets are files, shared across
    # network namespaces, and tests may use the same addresses at the same time.
    return bench.bmx(wl, n, tag, prefix=net.ctl_cmd([]), inventory=ssh_inventory(bench, net), hosts=hosts,
                     extra_env={"ANSIBLE_SSH_CONTROL_PATH_DIR": str(bench.tmp / "cp")}, **kw)


# ---------------------------------------------------------------- main

def summarize_variant(results: list[dict[str, Any]], n: int) -> dict[str, Any]:
    per_run = [r["wall_s"] / n for r in results]
    vals = [v for r in results for v in r["values"] if v is not None]
    cvs = [cv(r["values"]) for r in results]
    runs = [x for r in results if r.get("run_s") for x in r["run_s"]]
    return {"rounds": len(results), "wall_s": [r["wall_s"] for r in results],
            "median_wall_per_run_s": median(per_run), "median_run_s": median(runs) if runs else None,
            "metric_median": median(vals), "metric_cv_per_round": cvs, "metric_cv": median(cvs),
            "metric_cv_pooled": cv(vals)}


def median_phases(results: list[dict[str, Any]]) -> dict[str, float]:
    keys = list(results[0]["phases"])
    return {k: median([r["phases"].get(k, 0.0) for r in results]) for k in keys}


def make_workloads(bench: Bench, args: argparse.Namespace, data: dict[str, Any]
                   ) -> dict[str, tuple[Workload, int]]:
    """The cpu loop (``args.loop`` iterations) and, unless ``args.no_fio``, fio: each with
    its number of rounds (``args.cpu_rounds``, ``args.fio_rounds``). The argvs go into ``data``."""
    loop = command_workload("cpu", ["/usr/bin/python3", str(bench.tmp / "loop.py"), str(args.loop)],
                            r"runtime: ([0-9]+)us", "loop_us", "us")
    loop.rebench_adapter = "RebenchLog"
    workloads = {"cpu": (loop, args.cpu_rounds)}
    if not args.no_fio:
        # One bmx run lays out the scratch file and gives the exact argv bmx runs.
        fio = Workload("fio", [], "read_iops", "IO/s", "", FIO_SPEC, "fio", r'"iops"')
        prime = bench.bmx(fio, 1, "prime")
        rec = json.loads(next(bench.project.exp(f"ovh_fio_prime_{bench.count:03d}").glob(
            "runs/*/*/record.json")).read_text())
        fio.argv = rec["workload"]["argv"]
        fio.argv[0] = shutil.which(fio.argv[0]) or fio.argv[0]  # the peers need a path
        data["fio_argv"] = fio.argv
        data["fio_prime_wall_s"] = prime["wall_s"]
        workloads["fio"] = (fio, args.fio_rounds)
    data["cpu_argv"] = loop.argv
    return workloads


def measure_rounds(bench: Bench, workloads: dict[str, tuple[Workload, int]], variants: list[str], n: int,
                   rng: random.Random, data: dict[str, Any]) -> dict[str, Any]:
    """Rounds of ``n`` runs per variant, each round in a shuffled order; per workload the
    summary (wall per run, added, ratio, metric CV and its ratio to bare) and the raw figures."""
    results: dict[str, dict[str, list[dict[str, Any]]]] = {w: {v: [] for v in variants} for w in workloads}
    order = []
    for rnd in range(1, max(r for _, r in workloads.values()) + 1):
        for wname, (_wl, rounds) in workloads.items():
            if rnd <= rounds:
                vs = list(variants)
                rng.shuffle(vs)
                order += [(rnd, wname, v) for v in vs]
    data["order"] = [f"r{r}:{w}:{v}" for r, w, v in order]
    for rnd, wname, v in order:
        wl = workloads[wname][0]
        t0 = time.perf_counter()
        if v == "bare":
            res = bench.bare(wl, n)
        elif v == "bmx":
            res = bench.bmx(wl, n, f"r{rnd}")
        elif v == "rebench":
            res = bench.rebench(wl, n)
        else:
            res = bench.reframe(wl, n)
        results[wname][v].append(res)
        print(f"round {rnd} {wname:4} {v:8} {res['wall_s']:7.2f} s  ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    out: dict[str, Any] = {}
    for wname, per in results.items():
        summ = {v: summarize_variant(per[v], n) for v in variants}
        base = summ["bare"]["median_wall_per_run_s"]
        for v in variants:
            s = summ[v]
            s["added_per_run_s"] = s["median_wall_per_run_s"] - base
            s["ratio_to_bare"] = s["median_wall_per_run_s"] / base
            if summ["bare"]["metric_cv"]:
                s["cv_ratio_to_bare"] = (s["metric_cv"] or 0) / summ["bare"]["metric_cv"]
        out[wname] = {"summary": summ, "raw": {v: [{k: r[k] for k in ("wall_s", "run_s", "values")} for r in per[v]]
                                               for v in variants}}
        if all("phases" in r for r in per["bmx"]):
            out[wname]["bmx_phases_median"] = median_phases(per["bmx"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: cpu only, 3 runs, bare and bmx, no slope")
    ap.add_argument("--n", type=int, default=30, help="runs per campaign (default 30)")
    ap.add_argument("--cpu-rounds", type=int, default=3)
    ap.add_argument("--fio-rounds", type=int, default=1)
    ap.add_argument("--loop", type=int, default=1_000_000, help="iterations of the CPU loop")
    ap.add_argument("--slope-sizes", default="30,300")
    ap.add_argument("--slope-repeats", type=int, default=1)
    ap.add_argument("--slope-reframe", action="store_true", help="also ReFrame's slope (300 ReFrame tests)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-fio", action="store_true")
    ap.add_argument("--no-slope", action="store_true")
    ap.add_argument("--no-ssh", action="store_true")
    ap.add_argument("--no-quickstart", action="store_true")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if args.quick:
        args.n, args.cpu_rounds, args.loop = 3, 1, 200_000
        args.no_peers = args.no_fio = args.no_slope = args.no_ssh = args.no_quickstart = True
    if not shutil.which("fio"):
        args.no_fio = True
    rng = random.Random(args.seed)
    name = "overhead_quick" if args.quick else "overhead"
    variants = ["bare", "bmx"] + ([] if args.no_peers else ["rebench", "reframe"])
    if not args.no_peers:
        peer_bin("rebench")  # install before timing anything
    data: dict[str, Any] = {"n": args.n, "variants": variants, "rounds": {}, "workloads": {}}
    with temp_dir("bmx-bench-overhead-", keep=args.keep) as tmp:
        bench = Bench(tmp, args)
        workloads = make_workloads(bench, args, data)
        data["workloads"] = measure_rounds(bench, workloads, variants, args.n, rng, data)
        if not args.no_slope:
            data["slope"] = measure_slope(bench, args, rng)
        if not args.no_ssh:
            data["ssh"] = measure_ssh(bench, args)
        if not args.no_quickstart:
            data["quickstart"] = measure_quickstart(bench)
    path = write_result(name, data)
    report(data)
    print(f"\nwrote {path}")
    return 0


def noop_workload() -> Workload:
    return command_workload("noop", ["/bin/echo", NOOP_LINE], r"runtime: ([0-9]+)us", "noop_us", "us")


def measure_slope(bench: Bench, args: argparse.Namespace, rng: random.Random,
                  one_batch: bool = True, warm: bool = True) -> dict[str, Any]:
    """Marginal cost of one more run: campaigns of two sizes, interleaved; slope and intercept.

    ``one_batch``: also bmx with every campaign in one batch (``--batch-max-runs 10000``).
    ``warm``: an unmeasured campaign first (off only for a smoke run, whose slope is noise).
    """
    sizes = [int(s) for s in args.slope_sizes.split(",")]
    wl = noop_workload()
    # bmx: the default configuration (runs of unknown duration fill a batch up to
    # batch_max_runs, 10000 since issue 34 and 1000 before, so a campaign of up to that
    # many is one batch; 6 batches of 50 for 300 runs before issue 15); bmx_one_batch:
    # --batch-max-runs 10000 given explicitly.
    variants = ["bare", "bmx"] + (["bmx_one_batch"] if one_batch else []) + (
        [] if args.no_peers else ["rebench"] + (["reframe"] if args.slope_reframe else []))
    points: dict[str, list[tuple[int, float]]] = {v: [] for v in variants}
    phases: dict[int, list[dict[str, float]]] = {s: [] for s in sizes}
    batches: dict[int, int] = {}
    # Unmeasured: the project's first campaign on a host gathers its facts (later ones
    # read them from the host cache); whichever size came first paid it and skewed the slope.
    if warm:
        bench.bmx(wl, 1, "swarm")
    for _rep in range(args.slope_repeats):
        todo = [(v, n) for v in variants for n in sizes]
        rng.shuffle(todo)
        for v, n in todo:
            if v == "bmx":
                res = bench.bmx(wl, n, f"s{n}")
            elif v == "bmx_one_batch":
                res = bench.bmx(wl, n, f"s1b{n}", batch_max_runs=10000)
            else:
                res = getattr(bench, v)(wl, n)
            points[v].append((n, res["wall_s"]))
            if v == "bmx":
                if "phases" in res:
                    phases[n].append(res["phases"])
                batches[n] = res["batches"]
            print(f"slope {v:8} {n:4} runs {res['wall_s']:7.2f} s", flush=True)
    out: dict[str, Any] = {"sizes": sizes, "repeats": args.slope_repeats, "variants": {}, "bmx_batches": batches}
    for v, pts in points.items():
        b, a = slope([p[0] for p in pts], [p[1] for p in pts])
        out["variants"][v] = {"points": pts, "marginal_per_run_s": b, "intercept_s": a}
    base = out["variants"]["bare"]["marginal_per_run_s"]
    for v in variants:
        out["variants"][v]["added_marginal_per_run_s"] = out["variants"][v]["marginal_per_run_s"] - base
    out["bmx_phases"] = {n: {k: median([p[k] for p in ps]) for k in ps[0]} for n, ps in phases.items() if ps}
    return out


def measure_ssh(bench: Bench, args: argparse.Namespace, net: Any = None) -> dict[str, Any]:
    """The same slope, with the host (h1) reached over SSH from a controller namespace.

    ``net``: namespace hosts already built (tests/netns.py), else one is built here.
    """
    own = net is None
    if own:
        net, why = ssh_hosts(bench.tmp)
        if net is None:
            print(f"ssh: not measured: {why}", flush=True)
            return {"measured": False, "why": why}
        net.__enter__()
    sizes = [int(s) for s in args.slope_sizes.split(",")]
    wl = noop_workload()
    try:
        pts, phases, batches = [], {}, {}
        # Unmeasured: the first campaign on a fresh namespace host gathers its facts and
        # opens the SSH master; measured first, the smaller size paid it (a negative slope).
        ssh_bmx(bench, net, wl, 1, "sshwarm")
        for n in sizes:
            res = ssh_bmx(bench, net, wl, n, f"ssh{n}")
            pts.append((n, res["wall_s"]))
            if "phases" in res:
                phases[n] = res["phases"]
            batches[n] = res["batches"]
            print(f"ssh   bmx      {n:4} runs {res['wall_s']:7.2f} s", flush=True)
    finally:
        if own:
            net.teardown()
    b, a = slope([p[0] for p in pts], [p[1] for p in pts])
    return {"measured": True, "points": pts, "marginal_per_run_s": b, "intercept_s": a, "bmx_phases": phases,
            "bmx_batches": batches}


def measure_quickstart(bench: Bench) -> dict[str, Any]:
    """The quickstart spec as shipped (inventory pointed into the temporary project):
    its fixed cost is the wall time outside the span of its runs."""
    src = (ROOT / "config" / "experiments" / "quickstart.yaml").read_text()
    text = re.sub(r"(?m)^inventory:.*$", "inventory: config/inventory/bench.yml", src)
    spec = bench.project.write_spec("quickstart", text)
    timing = bench.tmp / "timing-quickstart.jsonl" if bench.phases else None
    t_start = time.time()
    res, wall = bench.project.bmx("run", str(spec), timing_file=timing)
    t_end = time.time()
    if res.returncode != 0:
        raise RuntimeError(f"quickstart failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    exp = bench.project.exp("quickstart")
    recs = sorted((json.loads(p.read_text()) for p in exp.glob("runs/*/*/record.json")), key=lambda r: r["seq"])
    first = min(ts(r["started_at"]) for r in recs)
    last = max(ts(r["ended_at"]) for r in recs)
    work = sum(r["duration_s"] for r in recs)
    phases = bmx_phases(exp, recs, read_timing(timing), t_start, t_end) if timing else None
    print(f"quickstart {len(recs)} runs {wall:.2f} s; outside the runs' span {wall - (last - first):.2f} s", flush=True)
    return {"runs": len(recs), "wall_s": wall, "runs_span_s": last - first, "workload_s": work,
            "fixed_s": wall - (last - first), "fixed_beyond_own_time_s": wall - work, "phases": phases}


# ---------------------------------------------------------------- report

def report(data: dict[str, Any]) -> None:
    for wname, w in data["workloads"].items():
        s = w["summary"]
        print(f"\n== {wname}: {data['n']} runs per campaign, {s['bare']['rounds']} round(s); "
              "per run = campaign wall / runs")
        rows = []
        for v, x in s.items():
            rows.append([v, x["median_wall_per_run_s"], x["added_per_run_s"], f"{x['ratio_to_bare']:.2f}x",
                         x["median_run_s"], x["metric_median"], x["metric_cv"],
                         f"{x['cv_ratio_to_bare']:.2f}x" if x.get("cv_ratio_to_bare") is not None else "-"])
        print(table(["variant", "wall/run s", "added s", "ratio", "run s (own)", "metric median", "metric CV",
                     "CV vs bare"], rows))
        if w.get("bmx_phases_median"):
            print(f"\n-- bmx phases, median of rounds ({wname}, seconds per campaign)")
            print(table(["phase", "seconds"], [[k, v] for k, v in w["bmx_phases_median"].items()]))
    if "slope" in data:
        sl = data["slope"]
        print(f"\n== marginal cost per run: slope between campaigns of {sl['sizes']} no-op runs "
              f"(bmx batches: {sl['bmx_batches']})")
        print(table(["variant", "marginal s/run", "added vs bare s/run", "intercept s"],
                    [[v, x["marginal_per_run_s"], x["added_marginal_per_run_s"], x["intercept_s"]]
                     for v, x in sl["variants"].items()]))
        if sl.get("bmx_phases"):
            sizes = sorted(sl["bmx_phases"])
            keys = list(sl["bmx_phases"][sizes[0]])
            print("\n-- bmx phases by campaign size (seconds)")
            print(table(["phase"] + [f"{n} runs" for n in sizes],
                        [[k] + [sl["bmx_phases"][n].get(k) for n in sizes] for k in keys]))
    if "ssh" in data:
        s = data["ssh"]
        if s["measured"]:
            print(f"\n== over SSH (namespace host): marginal {fmt(s['marginal_per_run_s'])} s/run, "
                  f"intercept {fmt(s['intercept_s'])} s; points {s['points']}")
        else:
            print(f"\n== over SSH: not measured: {s['why']}")
    if "quickstart" in data:
        q = data["quickstart"]
        print(f"\n== quickstart: {q['runs']} runs, wall {q['wall_s']:.2f} s, runs' span {q['runs_span_s']:.2f} s, "
              f"fixed (outside the runs) {q['fixed_s']:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
