#!/usr/bin/env python3
"""Issue 34, item 4: rule collect's job (tables, report.html, report.md, plots), before and
after, side by side in one run.

Each variant is a whole tree of the project (``--before REF``: that commit, taken with
``git archive``; after: this working tree). The campaigns are synthetic
(``tests/campaign_factory.py``'s ``make_experiment``: records, batch rows and plan as
``bmx run`` leaves them): ``noop``, lean.py's campaign of 10 no-op runs on one host (one
cell, a metric in µs, one plot); ``compared``, 2 hosts × 6 cells × 5 runs with a warm-up, a
control cell, two metrics and a comparison (four plots). Each job is ``scripts/collect.py``
of its variant in a fresh process (``PYTHONPATH`` naming the variant's package) on its own
copy of the campaign, writing bytecode as a user's jobs do; one unmeasured job per variant
first (compiled files and caches warm), then ``--rounds`` rounds in shuffled variant order.
The figure is the job's CPU seconds (wait4's rusage). One more job per variant under
``python -X importtime`` gives its modules and the import seconds of the heavy packages
(wall, one job); and the two variants' outputs are compared file by file (the report's
generation time and the paths in findings.json masked).

    bench/collect_job.py --before 2e48edd             # 7 rounds
    bench/collect_job.py --before main --rounds 3

Writes bench/results/collect_job.json.
"""

from __future__ import annotations

import argparse
import filecmp
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

from _common import ROOT, median, table, temp_dir, write_result  # noqa: E402

PY = sys.executable

NOOP = """\
name: noop
inventory: config/inventory/test.yml
factors:
  series: [bench]
workload:
  role: workload_command
  vars:
    argv: [/bin/echo, "runtime: 12us"]
  metrics:
    noop_us: {regex: 'runtime: (?P<value>[0-9]+)us', unit: us, better: lower}
replicates: 10
warmup: 0
order: {strategy: random, seed: 1}
report:
  metrics: [noop_us]
"""

COMPARED = """\
name: compared
inventory: config/inventory/test.yml
factors:
  mode: [a, b]
  size: [1, 2, 4]
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "print('lat=1 tp=2')"]
  metrics:
    lat: {regex: 'lat=(?P<value>[0-9.]+)', unit: us, better: lower}
    tp: {regex: 'tp=(?P<value>[0-9.]+)', unit: KiB/s, better: higher}
  timeout: 60
replicates: 5
warmup: 1
order: {strategy: random, seed: 3, control: {mode: a, size: 2}, control_every: 6}
report:
  metrics: [tp, lat]
  compare: {factor: mode, baseline: a, by: [size]}
"""

#: Packages whose import time (their modules' own times added up) the table shows.
HEAVY = ("pandas", "matplotlib", "scipy", "numpy", "pyarrow", "jinja2", "jsonschema", "benchmatrix")


def tree_of(ref: str, dest: Path) -> Path:
    """The project's tree at ``ref`` (git archive), unpacked into ``dest``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")
    return dest


def make_campaigns(root: Path) -> dict[str, Path]:
    """The synthetic campaigns, each a project directory of its own."""
    from campaign_factory import Campaign, make_experiment

    def means(factors: dict[str, Any], metric: str) -> float:
        return (850.0 if metric == "lat" else 80000.0) * (1.1 if factors["mode"] == "b" else 1.0)

    make_experiment(root / "noop", NOOP, name="noop")
    make_experiment(root / "compared", COMPARED, name="compared", hosts=("h1", "h2"), means=means,
                    campaigns=[Campaign(failed=[3])])
    return {"noop": root / "noop", "compared": root / "compared"}


def job(tree: Path, project: Path, name: str, importtime: bool = False) -> tuple[float, str]:
    """Rule collect's command of ``tree`` on ``project``: its CPU seconds and stderr."""
    argv = [PY, *(["-X", "importtime"] if importtime else []), str(tree / "scripts" / "collect.py"),
            "--spec", f"config/experiments/{name}.yaml", "--project-dir", ".", "--plan",
            f"results/{name}/plan.csv"]
    # Bytecode written and used, as a user's jobs do: with PYTHONDONTWRITEBYTECODE set (as
    # in some shells here) a tree without __pycache__ compiles its package in every job.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"collect of {name} with {tree} failed:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, err


def imports(stderr: str) -> dict[str, Any]:
    """Modules imported, and the seconds each of :data:`HEAVY` took (its modules' own
    times, which add up where cumulative ones nest), from ``-X importtime``."""
    rows = [line[len("import time:"):].split("|") for line in stderr.splitlines()
            if line.startswith("import time:") and "cumulative" not in line]
    heavy: dict[str, float] = {}
    for own, _, name in rows:
        top = name.strip().split(".")[0]
        if top in HEAVY:
            heavy[top] = heavy.get(top, 0.0) + int(own) / 1e6
    return {"modules": len(rows), "heavy_s": heavy}


def differing(a: Path, b: Path) -> list[str]:
    """Files of results tree ``a`` that differ from ``b``'s, masking the generation time and paths."""
    out = []
    for path in sorted(p for p in a.rglob("*") if p.is_file()):
        rel = path.relative_to(a)
        other = b / rel
        if not other.is_file():
            out.append(f"{rel} (only before)")
        elif not filecmp.cmp(path, other, shallow=False):
            if path.suffix in (".html", ".md", ".json"):
                strip = [re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00|/\S+?/(before|after)/", "",
                                p.read_text()) for p in (path, other)]
                if strip[0] == strip[1]:
                    continue
            out.append(str(rel))
    out += [f"{p.relative_to(b)} (only after)" for p in b.rglob("*")
            if p.is_file() and not (a / p.relative_to(b)).exists()]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="main", help="commit of the 'before' variant (default: main)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    data: dict[str, Any] = {"args": vars(args), "jobs": [], "imports": {}, "differing": {}}
    with temp_dir("bmx-collect-job-") as tmp:
        trees = {"before": tree_of(args.before, tmp / "before-tree"), "after": ROOT}
        campaigns = make_campaigns(tmp / "made")
        copies = {(v, c): tmp / v / c for v in trees for c in campaigns}
        for (v, c), dest in copies.items():
            shutil.copytree(campaigns[c], dest)
            job(trees[v], dest, c)  # unmeasured: compiled files and the template cache warm
        for rnd in range(args.rounds):
            for c in campaigns:
                order = list(trees)
                rng.shuffle(order)
                for v in order:
                    cpu, _ = job(trees[v], copies[v, c], c)
                    data["jobs"].append({"round": rnd, "variant": v, "campaign": c, "cpu_s": cpu})
            print(f"round {rnd} done, load {os.getloadavg()[0]:.1f}", flush=True)
        for (v, c), dest in copies.items():
            data["imports"][f"{v}/{c}"] = imports(job(trees[v], dest, c, importtime=True)[1])
        for c in campaigns:
            data["differing"][c] = differing(copies["before", c] / "results" / c, copies["after", c] / "results" / c)
    rows = []
    for c in campaigns:
        for v in trees:
            cpu = [j["cpu_s"] for j in data["jobs"] if j["variant"] == v and j["campaign"] == c]
            imp = data["imports"][f"{v}/{c}"]
            heavy = ", ".join(f"{k} {s:.2f}" for k, s in sorted(imp["heavy_s"].items(), key=lambda t: -t[1]))
            rows.append([c, v, f"{median(cpu):.3f}", f"{min(cpu):.3f}", str(imp["modules"]), heavy])
    print(table(["campaign", "variant", "CPU-s (median)", "min", "modules", "imports, s (wall)"], rows))
    for c, files in data["differing"].items():
        print(f"{c}: outputs {'identical' if not files else 'differ: ' + ', '.join(files)}")
    print(f"wrote {write_result('collect_job', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
