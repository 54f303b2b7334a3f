#!/usr/bin/env python3
"""Issue 34, items 1 and 2: the controller's CPU seconds of a campaign on known SSH hosts,
before and after (the one-call batch; one Ansible call per wave of hosts), side by side in one run.

Each variant is a whole tree of the project (``--before REF``: that commit, taken with
``git archive``; after: this working tree), with its own throw-away project copy; ``bmx``
runs with ``PYTHONPATH`` pointing at the variant's package. Hosts are namespace SSH hosts
(tests/netns.py; root). Per variant, a first campaign makes every host known (its facts
and role variables kept under ``results/.hosts``); then, in rounds whose variant order is
shuffled, a campaign of ``--runs`` no-op runs (``/bin/echo``, row g's) on one host and the same on
each count of ``--hosts`` hosts at once (``--hosts-parallel``). The figure is the CPU seconds of every
process ``bmx`` starts (wait4's rusage of its whole tree: Snakemake, the jobs,
ansible-playbook and its workers, ssh clients); the hosts' side (sshd, the runner) is
not the controller's. Per extra host: (N hosts - 1 host) / (N - 1).

``--trace`` (issue 34, item 4) also says where the 1-host campaign's seconds go: a
``sitecustomize`` on ``PYTHONPATH`` makes every Python process of the campaign write its own
CPU seconds (self, and the children it waited for), its number of modules and the top-level
packages it loaded (``packages`` in lean.json: which process still imports pandas, say) at exit;
the table gives the median per process kind (bmx, Snakemake, each job's script, ansible-playbook).
The hook's own cost is a few milliseconds a process.

    bench/lean.py                        # 3 rounds, 10 runs, 2 and 4 hosts, before = main
    bench/lean.py --before 623d8a3 --rounds 5 --hosts 4
    bench/lean.py --before 6d83747 --trace             # and the per-process table

Writes bench/results/lean.json.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

import netns  # noqa: E402
from _common import PROJECT_PARTS, ROOT, median, run_measured, table, temp_dir, write_result  # noqa: E402
from overhead import noop_workload, spec_text  # noqa: E402

PY = sys.executable

# Written by --trace into the throw-away copy: each Python process's CPU at its exit.
TRACE_SITE = """import atexit, json, os, resource, sys
_OUT = os.environ.get("BMX_BENCH_TRACE_DIR")
def _dump():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(_OUT, str(os.getpid()) + ".json"), "w") as f:
        json.dump({"argv": sys.orig_argv[:4], "self_s": s.ru_utime + s.ru_stime,
                   "children_s": c.ru_utime + c.ru_stime, "modules": len(sys.modules),
                   "packages": sorted({m.split(".")[0] for m in sys.modules if not m.startswith("_")})}, f)
if _OUT:
    atexit.register(_dump)
"""
KINDS = {"benchmatrix.cli": "bmx run", "snakemake": "Snakemake",
         # bmx run's Snakemake since a1ebb63: snakemake.api in a process of its own
         "benchmatrix.execute.snakemake_run": "Snakemake", "ansible-playbook": "ansible-playbook",
         "collect.py": "collect job", "run_batch.py": "batch job", "plan.py": "plan job",
         "restore_host.py": "restore_host job"}


def kind_of(argv: list[str]) -> str:
    """The process kind of a traced command line (``other`` when none of :data:`KINDS`)."""
    for word in argv:
        for key, kind in KINDS.items():
            if Path(word).name == key or word == key:
                return kind
    return "other"


def tree_of(ref: str, dest: Path) -> Path:
    """The project's tree at ``ref`` (git archive), unpacked into ``dest``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")
    return dest


def project(tree: Path, root: Path, net: Any, tmp: Path, label: str) -> Path:
    """A project copy of ``tree`` with an inventory of the namespace hosts."""
    root.mkdir(parents=True)
    for part in PROJECT_PARTS:
        src = tree / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, root / part)
    per_host = {h: {"batch_runner_root": str(tmp / "hosts" / label / h)} for h in net.hosts}
    (root / "config" / "inventory" / "ssh.yml").write_text(net.inventory(per_host))
    return root


def campaign(net: Any, tree: Path, root: Path, tmp: Path, name: str, hosts: int, runs: int,
             trace: bool = False) -> dict[str, Any]:
    spec = root / "config" / "experiments" / f"{name}.yaml"
    # The same no-op workload as targets.py's row g.
    spec.write_text(spec_text(name, noop_workload(), runs, "config/inventory/ssh.yml",
                               ":".join(f"h{i}" for i in range(1, hosts + 1))))
    env = {"PATH": f"{Path(PY).parent}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp),
           "PYTHONPATH": str(tree), "BMX_PROJECT_DIR": str(root),
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp / "cp")}
    traced = tmp / "traced" / name
    if trace:
        (tmp / "site").mkdir(exist_ok=True)
        (tmp / "site" / "sitecustomize.py").write_text(TRACE_SITE)
        traced.mkdir(parents=True)
        env.update(PYTHONPATH=f"{tree}:{tmp / 'site'}", BMX_BENCH_TRACE_DIR=str(traced))
    out = tmp / f"{name}.out"
    res = run_measured(net.ctl_cmd([PY, "-m", "benchmatrix.cli", "run", str(spec), "--cores", str(2 + hosts),
                                    "--hosts-parallel", str(hosts)]),
                       cwd=root, env=env, output=out, timeout=1800)
    if res["rc"] != 0:
        raise RuntimeError(f"{name} failed (rc {res['rc']}):\n{out.read_text()[-3000:]}")
    out_data: dict[str, Any] = {"cpu_s": res["user_s"] + res["sys_s"], "wall_s": res["wall_s"]}
    if trace:
        procs = [json.loads(p.read_text()) for p in traced.glob("*.json")]
        out_data["processes"] = [{**p, "kind": kind_of(p["argv"])} for p in procs]
    return out_data


def per_process(rounds: list[dict[str, Any]]) -> str:
    """Median CPU seconds (self) and modules per process kind and variant, 1-host campaigns."""
    kinds = sorted({p["kind"] for r in rounds for p in r.get("processes", [])})
    rows = []
    for kind in kinds:
        row = [kind]
        for v in ("before", "after"):
            mine = [r for r in rounds if r["variant"] == v and r.get("processes")]
            cpu = [sum(p["self_s"] for p in r["processes"] if p["kind"] == kind) for r in mine]
            mods = [p["modules"] for r in mine for p in r["processes"] if p["kind"] == kind]
            row.append(f"{median(cpu):.2f} ({median(mods):.0f})" if mods else "—")
        rows.append(row)
    return table(["process", "before: CPU-s (modules)", "after: CPU-s (modules)"], rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="main", help="commit of the 'before' variant (default: main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10, help="no-op runs per host and campaign")
    ap.add_argument("--hosts", default="2,4", help="hosts of the many-host campaigns, comma-separated")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--trace", action="store_true", help="also the 1-host campaign's CPU seconds per process")
    args = ap.parse_args()
    why = netns.available()
    if why:
        print(f"lean.py: {why}", file=sys.stderr)
        return 2
    counts = sorted({int(n) for n in str(args.hosts).split(",")})
    rng = random.Random(args.seed)
    data: dict[str, Any] = {"args": vars(args), "rounds": []}
    with temp_dir("bmx-lean-") as tmp, netns.NamespaceHosts(tmp / "net", max(counts)) as net:
        trees = {"before": tree_of(args.before, tmp / "before-tree"), "after": ROOT}
        roots = {v: project(t, tmp / f"project-{v}", net, tmp, v) for v, t in trees.items()}
        for v in trees:  # every host known to each variant
            campaign(net, trees[v], roots[v], tmp, f"warm_{v}", max(counts), 1)
        for rnd in range(args.rounds):
            order = list(trees)
            rng.shuffle(order)
            for v in order:
                for n in (1, *counts):
                    res = campaign(net, trees[v], roots[v], tmp, f"c{rnd}_{v}_{n}", n, args.runs,
                                   trace=args.trace and n == 1)
                    data["rounds"].append({"round": rnd, "variant": v, "hosts": n, **res})
                    print(f"round {rnd} {v:6} {n} host(s): {res['cpu_s']:.2f} CPU-s, {res['wall_s']:.1f} s wall",
                          flush=True)
    rows, summary = [], {}
    for v in ("before", "after"):
        one = median(r["cpu_s"] for r in data["rounds"] if r["variant"] == v and r["hosts"] == 1)
        summary[v] = {"one_host_cpu_s": one}
        for n in counts:
            many = median(r["cpu_s"] for r in data["rounds"] if r["variant"] == v and r["hosts"] == n)
            extra = (many - one) / max(n - 1, 1)
            summary[v][f"{n}_hosts"] = {"cpu_s": many, "per_extra_host_cpu_s": extra}
            rows.append([v, str(n), f"{one:.2f}", f"{many:.2f}", f"{extra:.2f}"])
    data["summary"] = summary
    if args.trace:
        print(per_process(data["rounds"]))
    print(table(["variant", "hosts", f"1 host x {args.runs} runs, CPU-s", "N hosts, CPU-s",
                 "per extra host, CPU-s"], rows))
    print(f"wrote {write_result('lean', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
