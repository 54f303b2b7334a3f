"""The ``bmx`` command line: validate, plan, run, report.

Every error a user can cause is one line on stderr and a non-zero exit status:
2 for a bad spec or plan, 4 when another bmx holds the experiment, 1 for failed
runs or jobs, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from contextlib import contextmanager

from benchmatrix import __version__
from benchmatrix.errors import BenchmatrixError, LockError, SpecErrors

EXAMPLES = {
    "validate": "example:\n  bmx validate config/experiments/quickstart.yaml",
    "plan": "example:\n  bmx plan config/experiments/quickstart.yaml\n  bmx plan config/experiments/quickstart.yaml --json",
    "run": "example:\n  bmx run config/experiments/quickstart.yaml\n  bmx run config/experiments/quickstart.yaml --cores 4",
    "report": "example:\n  bmx report config/experiments/quickstart.yaml",
}


def project_dir() -> Path:
    """The benchmatrix project directory (Snakefile, playbooks/, config/).

    ``BMX_PROJECT_DIR`` wins; otherwise the nearest directory upwards from the
    current one that has a Snakefile and playbooks/, else the checkout the
    package was installed from.
    """
    env = os.environ.get("BMX_PROJECT_DIR")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "Snakefile").is_file() and (d / "playbooks").is_dir():
            return d
    pkg_parent = Path(__file__).resolve().parent.parent
    if (pkg_parent / "Snakefile").is_file():
        return pkg_parent
    raise BenchmatrixError("cannot find the benchmatrix project directory (a Snakefile beside playbooks/); "
                           "run bmx from the checkout or set BMX_PROJECT_DIR")


def _spec_arg(spec: str, proj: Path) -> str:
    """The spec path as Snakemake's rules see it (relative to the project when inside it)."""
    p = Path(spec).resolve()
    try:
        return str(p.relative_to(proj))
    except ValueError:
        return str(p)


@contextmanager
def experiment_lock(exp_dir: Path) -> Iterator[Any]:
    """Hold the experiment's lock for one bmx run; refuse if another process has it.

    The lock is an flock, so a killed bmx releases it with its process: a stale
    lock file is never an obstacle. Children given the file descriptor keep the
    lock while they live, so an orphaned Snakemake still counts as running.
    """
    exp_dir.mkdir(parents=True, exist_ok=True)
    path = exp_dir / ".bmx.lock"
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        other = fh.read().strip() or "unknown"
        fh.close()
        raise LockError(f"experiment {exp_dir.name} is in use by another bmx process ({other}); "
                        f"wait for it or stop it first") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} on {os.uname().nodename} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
    fh.flush()
    try:
        yield fh
    finally:
        fh.seek(0)
        fh.truncate()
        fh.close()


# ---------------------------------------------------------------- commands

def cmd_validate(args: argparse.Namespace) -> int:
    from benchmatrix.spec import load_spec

    spec = load_spec(args.spec)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    runs_per_host = len(spec.cells) * (spec.data["replicates"] + spec.data["warmup"])
    print(f"{args.spec}: ok: experiment {spec.name}, {len(spec.factor_names)} factors, "
          f"{len(spec.cells)} cells, {len(spec.cells) * spec.data['replicates']} measured runs per host "
          f"(at least {runs_per_host} with warm-ups)")
    return 0


def plan_summary(spec: Any, runs: list[Any]) -> dict[str, Any]:
    """Figures ``bmx plan`` prints for one plan."""
    from benchmatrix.design import knob_changes

    changes = knob_changes(runs, spec)
    reconf_s = 0.0
    last: dict[str, dict[str, Any]] = {}
    for r in runs:
        prev = last.get(r.host)
        for f, k in spec.knobs.items():
            if prev is None or prev[f] != r.factors[f]:
                reconf_s += k.cost_seconds
        last[r.host] = r.factors
    wl = spec.workload
    per_run = wl.get("estimate_s") or None
    return {
        "runs": len(runs),
        "measured": sum(1 for r in runs if not r.warmup and not r.control),
        "warmup": sum(1 for r in runs if r.warmup),
        "control": sum(1 for r in runs if r.control),
        "batches": len({r.batch for r in runs}),
        "knob_changes": changes,
        "reconfiguration_s": reconf_s,
        "workload_s": per_run * len(runs) if per_run else None,
    }


def cmd_plan(args: argparse.Namespace) -> int:
    from benchmatrix.design import make_plan
    from benchmatrix.hosts import resolve_hosts
    from benchmatrix.spec import load_spec
    from benchmatrix.tasks import exp_dir_of, plan

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    out = exp / "plan.csv"
    with experiment_lock(exp):
        runs = plan(args.spec, proj, out, args.batch_max_runs)
    hosts = resolve_hosts(spec.inventory_path(proj), spec.data["hosts"])
    strategy_chosen = spec.order["strategy"]
    alternatives = {}
    for strategy in ("random", "sequential"):
        if strategy != spec.order["strategy"]:
            spec.order["strategy"] = strategy
            alternatives[strategy] = plan_summary(spec, make_plan(spec, hosts, args.batch_max_runs))
    chosen = plan_summary(spec, runs)
    data = {"experiment": spec.name, "plan": str(out), "hosts": hosts, "cells": len(spec.cells),
            "strategy": strategy_chosen,
            "seed": spec.order["seed"], "this_plan": chosen, "alternatives": alternatives}
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"experiment {spec.name}: {len(spec.cells)} cells x {spec.data['replicates']} replicates "
          f"on {len(hosts)} host(s) ({', '.join(hosts)}); strategy {data['strategy']}, seed {data['seed']}")
    cols = [("this plan", chosen)] + [(f"{k} order", v) for k, v in alternatives.items()]
    rows = [("runs", "runs"), ("measured runs", "measured"), ("warm-up runs", "warmup"),
            ("control runs", "control"), ("batches (Ansible calls)", "batches")]
    width = max(len(c[0]) for c in cols) + 2
    print(f"{'':28}" + "".join(f"{c[0]:>{width}}" for c in cols))
    for label, key in rows:
        print(f"{label:28}" + "".join(f"{c[1][key]:>{width}}" for c in cols))
    for cls in ("restart", "reboot", "none"):
        print(f"{'knob changes, ' + cls:28}" + "".join(f"{c[1]['knob_changes'][cls]:>{width}}" for c in cols))
    print(f"{'reconfiguration time (s)':28}" + "".join(f"{c[1]['reconfiguration_s']:>{width}.0f}" for c in cols))
    print(f"wrote {out}")
    return 0


_PROGRESS = re.compile(r"^(\d+) of (\d+) steps \((\d+)%\) done")
_ERROR_RULE = re.compile(r"^Error in rule (\w+):")
_LOG_LINE = re.compile(r"^\s+log: (\S+)")


def _die_with_parent() -> None:
    """In the Snakemake child: get SIGINT when bmx dies, even by SIGKILL (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _fmt_s(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _last_error_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if ln.startswith("benchmatrix:"):
            return ln
    return lines[-1] if lines else ""


def cmd_run(args: argparse.Namespace) -> int:
    from benchmatrix.spec import load_spec
    from benchmatrix.tasks import exp_dir_of

    proj = project_dir()
    spec = load_spec(args.spec)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    exp = exp_dir_of(proj, spec)
    target = f"results/{spec.name}/report.html"
    # The target comes first: --config takes every following word as a KEY=VALUE.
    cmd = [sys.executable, "-m", "snakemake", target, "--snakefile", str(proj / "Snakefile"),
           "--directory", str(proj), "--cores", str(args.cores), "--nolock",
           "--config", f"spec={_spec_arg(args.spec, proj)}"]
    if args.batch_max_runs:
        cmd.append(f"batch_max_runs={args.batch_max_runs}")
    log_path = exp / "logs" / "snakemake.log"
    with experiment_lock(exp) as lock:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        print(f"bmx: running {spec.name} ({len(spec.cells)} cells); log {log_path}", flush=True)
        t0 = time.monotonic()
        failed: list[tuple[str, str]] = []
        pending_rule = None
        interrupted: list[int] = []
        with open(log_path, "w") as log:
            # Snakemake runs in its own process group so that one Ctrl-C reaches it, its
            # jobs and the batch runners exactly once, forwarded by the handler below.
            proc = subprocess.Popen(cmd, cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, start_new_session=True,
                                    pass_fds=(lock.fileno(),), preexec_fn=_die_with_parent)

            def forward(signum: int, frame: Any) -> None:
                if not interrupted:
                    interrupted.append(signum)
                    try:
                        os.killpg(proc.pid, signal.SIGINT)
                    except ProcessLookupError:
                        pass

            old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    m = _PROGRESS.match(line)
                    if m and not interrupted:
                        done, total = int(m.group(1)), int(m.group(2))
                        el = time.monotonic() - t0
                        eta = el / done * (total - done) if done else 0
                        n_rec = sum(1 for _ in (exp / "runs").glob("*/*/record.json")) if (exp / "runs").is_dir() else 0
                        print(f"bmx: {done}/{total} jobs done, {n_rec} run records, "
                              f"elapsed {_fmt_s(el)}, ETA {_fmt_s(eta)}", flush=True)
                    m = _ERROR_RULE.match(line)
                    if m:
                        pending_rule = m.group(1)
                    m = _LOG_LINE.match(line)
                    if m and pending_rule:
                        failed.append((pending_rule, m.group(1)))
                        pending_rule = None
                rc = proc.wait()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
        if interrupted:
            print(f"bmx: interrupted; every finished run is kept. Resume with: bmx run {args.spec}",
                  file=sys.stderr)
            return 130
    if rc != 0:
        for rule, log_file in failed:
            msg = _last_error_line(proj / log_file)
            print(f"bmx: job {rule} failed: {msg} (log: {log_file})", file=sys.stderr)
        if not failed:
            print(f"bmx: snakemake failed (exit {rc}); see {log_path}", file=sys.stderr)
        return 1
    print(f"bmx: done in {_fmt_s(time.monotonic() - t0)}")
    print(f"report: {exp / 'report.html'}")
    print(f"report: {exp / 'report.md'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from benchmatrix.spec import load_spec
    from benchmatrix.tasks import collect, exp_dir_of, report

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    plan_path = exp / "plan.csv"
    if not plan_path.is_file():
        raise BenchmatrixError(f"{plan_path}: no plan yet; run 'bmx run {args.spec}' (or 'bmx plan') first")
    collect(args.spec, proj, plan_path, exp / "runs.csv", exp / "summary.csv")
    html, md = report(args.spec, proj)
    print(f"report: {html}")
    print(f"report: {md}")
    return 0


# ---------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bmx", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="benchmatrix: run a YAML matrix of benchmark configurations on real hosts, "
                    "in a randomized order, and report the results honestly.",
        epilog="example:\n  bmx validate config/experiments/quickstart.yaml\n"
               "  bmx plan config/experiments/quickstart.yaml\n"
               "  bmx run config/experiments/quickstart.yaml\n"
               "  bmx report config/experiments/quickstart.yaml")
    p.add_argument("--version", action="version", version=f"benchmatrix {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.add_argument("spec", metavar="SPEC", help="experiment spec (YAML), e.g. config/experiments/quickstart.yaml")
        return sp

    add("validate", "check a spec: schema and semantic checks, errors as FILE:LINE: message")
    sp = add("plan", "expand and order the runs, write results/NAME/plan.csv, print the costs")
    sp.add_argument("--json", action="store_true", help="print the figures as JSON")
    sp.add_argument("--batch-max-runs", type=int, default=50, help="most runs per batch (default 50)")
    sp = add("run", "plan if needed, execute every missing run through Snakemake and Ansible, render the report")
    sp.add_argument("--cores", type=int, default=max(os.cpu_count() or 1, 1),
                    help="Snakemake jobs at once (hosts run in parallel, each host in plan order)")
    sp.add_argument("--batch-max-runs", type=int, default=0, help="override config.yaml's batch_max_runs")
    add("report", "collect whatever runs exist into runs.csv and summary.csv and render report.html and report.md")
    return p


COMMANDS = {"validate": cmd_validate, "plan": cmd_plan, "run": cmd_run, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bmx`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except SpecErrors as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except BenchmatrixError as exc:
        print(f"bmx: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("bmx: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
