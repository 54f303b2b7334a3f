"""The ``bmx`` command line: validate, plan, run, report.

Every error a user can cause is one line on stderr and a non-zero exit status:
2 for a bad spec or plan, 4 when another bmx holds the experiment, 1 for failed
runs or jobs, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmatrix import __version__
from benchmatrix.errors import BenchmatrixError, SpecErrors

EXAMPLES = {
    "validate": "example:\n  bmx validate config/experiments/quickstart.yaml",
    "plan": "example:\n  bmx plan config/experiments/quickstart.yaml\n  bmx plan config/experiments/quickstart.yaml --json\n"
            "  bmx plan config/experiments/ht_cores.yaml --detect 3% --cv 0.04\n"
            "  bmx plan config/experiments/quickstart.yaml --detect 5% --pilot results/quickstart",
    "run": "example:\n  bmx run config/experiments/quickstart.yaml\n  bmx run config/experiments/quickstart.yaml --cores 4\n"
           "  bmx run config/experiments/quickstart.yaml --campaign kernel-6.6",
    "report": "example:\n  bmx report config/experiments/quickstart.yaml",
    "restore": "example:\n  bmx restore config/experiments/readahead_scan.yaml",
    "check": "example:\n  bmx check config/experiments/readahead_scan.yaml",
    "status": "example:\n  bmx status config/experiments/quickstart.yaml\n  bmx status config/experiments/quickstart.yaml --json",
    "rerun": "example:\n  bmx rerun config/experiments/quickstart.yaml --failed\n"
             "  bmx rerun config/experiments/quickstart.yaml --where \"bs == '4k' and status == 'ok'\"",
    "campaigns": "example:\n  bmx campaigns config/experiments/quickstart.yaml\n"
                 "  bmx campaigns config/experiments/quickstart.yaml --json",
    "compare": "example:\n  bmx compare kernel-6.1 kernel-6.6 --spec config/experiments/quickstart.yaml\n"
               "  bmx compare results/quickstart/campaigns/3f2a9c1b7d0e results/quickstart",
    "export": "example:\n  bmx export config/experiments/quickstart.yaml --format parquet\n"
              "  bmx export config/experiments/quickstart.yaml --format pyperf --out before.json\n"
              "  bmx export config/experiments/quickstart.yaml --format bmf --out -",
    "publish": "example:\n  bmx publish --to site/\n  bmx publish --to /srv/www/bench --results results/",
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
def experiment_lock(exp_dir: Path, what: str = "bmx", spec: str = "",
                    stop_orphan: bool = False) -> Iterator[Any]:
    """Hold the experiment's lock for one bmx command; refuse if another process has it.

    The lock is an flock (:mod:`benchmatrix.execute.lock`), so a killed bmx releases it
    with its process: a stale lock file is never an obstacle. Children given the
    file descriptor keep the lock while they live; when such a child outlived its
    bmx (an orphan), the refusal says so, and ``stop_orphan`` stops it first.
    """
    from benchmatrix.execute import lock

    hint = f"'bmx run {spec} --stop-orphan'" if spec else ""
    if stop_orphan:
        stopped = lock.stop_orphans(exp_dir)
        if stopped:
            print(f"bmx: stopped the orphan holding {exp_dir.name} (pid {', '.join(map(str, stopped))}); "
                  "finished runs are kept", file=sys.stderr, flush=True)
    fh = lock.acquire(exp_dir, what, hint)
    try:
        yield fh
    finally:
        lock.release(fh)


# ---------------------------------------------------------------- commands

def cmd_validate(args: argparse.Namespace) -> int:
    from benchmatrix.spec.load import load_spec

    spec = load_spec(args.spec)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    runs_per_host = len(spec.cells) * (spec.data["replicates"] + spec.data["warmup"])
    print(f"{args.spec}: ok: experiment {spec.name}, {len(spec.factor_names)} factors, "
          f"{len(spec.cells)} cells, {len(spec.cells) * spec.data['replicates']} measured runs per host "
          f"(at least {runs_per_host} with warm-ups)")
    return 0


def plan_summary(spec: Any, runs: list[Any], per_run_s: float | None = None,
                 batch_overhead_s: float = 0.0) -> dict[str, Any]:
    """Figures ``bmx plan`` prints for one plan (see :func:`benchmatrix.plan.design.plan_costs`)."""
    from benchmatrix.plan.design import plan_costs

    return plan_costs(spec, runs, per_run_s, batch_overhead_s)


def _alternative_plans(spec: Any, hosts: list[str], max_runs: int) -> dict[str, list[Any]]:
    """The same matrix and seed planned by the other strategies, for comparison.

    Full randomization and sequential order always; the restricted plan too when the
    spec has costly knobs, so a random spec shows what restriction would save.
    """
    import copy
    import dataclasses

    from benchmatrix.plan.design import make_plan

    strategies = (["restricted"] if spec.whole_plot_factors() else []) + ["random", "sequential"]
    out = {}
    for strategy in strategies:
        if strategy == spec.order["strategy"]:
            continue
        alt = dataclasses.replace(spec, data=copy.deepcopy(spec.data))
        alt.order["strategy"] = strategy
        out[strategy] = make_plan(alt, hosts, max_runs)
    return out


def _detect_inputs(args: argparse.Namespace, spec: Any, proj: Path) -> tuple[float, list[Any], str] | None:
    """Check the ``--detect`` options before anything is written: (difference, CVs, source)."""
    from benchmatrix.plan.power import CvSample, parse_fraction, pilot_cvs

    if args.detect is None:
        if args.cv is not None or args.pilot is not None:
            raise BenchmatrixError("--cv and --pilot only serve --detect; add e.g. --detect 3%")
        return None
    detect = parse_fraction(args.detect, "--detect")
    for name, value in (("--alpha", args.alpha), ("--power", args.power)):
        if not 0 < value < 1:
            raise BenchmatrixError(f"{name} {value}: must lie between 0 and 1")
    if args.cv is not None:
        return detect, [CvSample("(any)", "(every cell)", parse_fraction(args.cv, "--cv"), 0)], f"--cv {args.cv}"
    if args.pilot is None:
        raise BenchmatrixError("--detect needs the runs' coefficient of variation: give --cv 0.04 "
                               "or --pilot results/NAME of an earlier campaign")
    pilot = Path(args.pilot)
    if not pilot.exists() and not pilot.is_absolute() and (proj / pilot).exists():
        pilot = proj / pilot
    samples = pilot_cvs(pilot, spec.data["report"].get("metrics") or None)
    return detect, samples, f"CV per cell and metric in {pilot / 'summary.csv' if pilot.is_dir() else pilot}"


def cmd_plan(args: argparse.Namespace) -> int:
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.rules import exp_dir_of, plan
    from benchmatrix.plan.design import DEFAULT_BATCH_MAX_RUNS, per_run_estimate, visits_per_cell
    from benchmatrix.plan.power import family_size, replicate_plan
    from benchmatrix.spec.load import load_spec, read_planning_config

    proj = project_dir()
    cfg_path = proj / "config" / "config.yaml"
    cfg = read_planning_config(cfg_path)
    spec = load_spec(args.spec, cost_seconds=cfg["cost_seconds"])
    for w in spec.warnings:
        print(w, file=sys.stderr)
    max_runs = args.batch_max_runs or cfg["batch_max_runs"] or DEFAULT_BATCH_MAX_RUNS
    detect = _detect_inputs(args, spec, proj)
    exp = exp_dir_of(proj, spec)
    out = exp / "plan.csv"
    with experiment_lock(exp, "bmx plan", args.spec):
        _start_campaign(exp, spec, None, sys.stderr)
        runs = plan(args.spec, proj, out, max_runs)
    # Re-run rounds appended after the planned runs are not part of the design compared here.
    planned = [r for r in runs if getattr(r, "round", 0) == 0]
    hosts = resolve_hosts(spec.inventory_path(proj), spec.data["hosts"])
    per_run, per_run_source = per_run_estimate(spec, exp / "runs.csv")
    overhead = cfg["batch_overhead_seconds"]
    chosen = plan_summary(spec, planned, per_run, overhead)
    alternatives = {k: plan_summary(spec, v, per_run, overhead)
                    for k, v in _alternative_plans(spec, hosts, max_runs).items()}
    replicates = None
    if detect is not None:
        whole = spec.whole_plot_factors()
        family = family_size(spec, hosts, [s.metric for s in detect[1] if s.metric != "(any)"])
        replicates = replicate_plan(detect[0], detect[1], spec.data["replicates"],
                                    visits_per_cell(planned) if whole else None, whole, detect[2],
                                    args.alpha, args.power, family)
    data = {"experiment": spec.name, "plan": str(out), "hosts": hosts, "cells": len(spec.cells),
            "replicates": spec.data["replicates"], "strategy": spec.order["strategy"],
            "seed": spec.order["seed"],
            "whole_plot_factors": {"reboot": spec.costly_factors("reboot"),
                                   "restart": spec.costly_factors("restart")},
            "visits_per_whole_plot": spec.visits if spec.order["strategy"] == "restricted" else None,
            "per_run_s": per_run, "per_run_source": per_run_source,
            "cost_seconds": cfg["cost_seconds"], "batch_overhead_s": overhead,
            "this_plan": chosen, "alternatives": alternatives, "replicate_planning": replicates}
    if args.json:
        # stdout stays pure JSON; the shortfalls are also in replicate_planning.warnings.
        for w in (replicates or {}).get("warnings", []):
            print(w, file=sys.stderr)
        print(json.dumps(data, indent=2))
        return 0
    print(f"experiment {spec.name}: {len(spec.cells)} cells x {spec.data['replicates']} replicates "
          f"on {len(hosts)} host(s) ({', '.join(hosts)}); strategy {data['strategy']}, seed {data['seed']}")
    if data["visits_per_whole_plot"]:
        wp = spec.whole_plot_factors()
        print(f"whole plots: {', '.join(wp) if wp else 'none (no restart or reboot knob)'}; "
              f"{spec.visits} visit(s) of each")
    print(_plan_table(chosen, alternatives, data["strategy"]))
    print(f"per-run estimate: {_fmt_s(per_run) + f' ({per_run:g} s)' if per_run is not None else '-'}"
          f" from {per_run_source}; batch overhead {overhead:g} s")
    if replicates:
        print(_replicates_text(replicates))
    print(f"wrote {out}")
    return 0


def _plan_table(chosen: dict[str, Any], alternatives: dict[str, Any], strategy: str) -> str:
    """The cost table of ``bmx plan``: this plan beside the other strategies."""
    cols = [(f"this plan ({strategy})", chosen)] + [(k, v) for k, v in alternatives.items()]
    width = max(len(c[0]) for c in cols) + 2

    def hms(v: float | None) -> str:
        return "-" if v is None else _fmt_s(v)

    rows: list[tuple[str, Any]] = [
        ("runs", lambda c: c["runs"]), ("measured runs", lambda c: c["measured"]),
        ("warm-up runs", lambda c: c["warmup"]), ("control runs", lambda c: c["control"]),
        ("visits", lambda c: c["visits"]), ("batches (Ansible calls)", lambda c: c["batches"]),
        ("reboots", lambda c: c["reconfigurations"]["reboot"]),
        ("restarts (without reboot)", lambda c: c["reconfigurations"]["restart"]),
        ("cheap reconfigurations", lambda c: c["reconfigurations"]["none"]),
    ] + [(f"knob changes, {cls}", (lambda cls: lambda c: c["knob_changes"][cls])(cls))
         for cls in ("reboot", "restart", "none")] + [
        ("reconfiguration time", lambda c: hms(c["reconfiguration_s"])),
        ("workload time", lambda c: hms(c["workload_s"])),
        ("campaign time (estimate)", lambda c: hms(c["campaign_s"])),
    ]
    lines = [f"{'':28}" + "".join(f"{c[0]:>{width}}" for c in cols)]
    for label, get in rows:
        lines.append(f"{label:28}" + "".join(f"{get(c[1])!s:>{width}}" for c in cols))
    return "\n".join(lines)


def _replicates_text(rp: dict[str, Any]) -> str:
    """The ``--detect`` section of ``bmx plan``."""
    fam = rp["family"]
    lines = [f"replicate planning: detect {rp['detect'] * 100:g}% between two levels at alpha {rp['alpha']:g} "
             f"with {rp['power']:.0%} power (Welch's t-test, Holm-adjusted like the report)",
             f"  Holm family assumed: {fam['size']} comparison(s) = {fam['comparisons_per_metric']} per metric x "
             f"{max(1, len(fam['metrics']))} metric(s) from {fam['metrics_source']}"
             f"{' (' + ', '.join(fam['metrics']) + ')' if fam['metrics'] else ''}; "
             f"planned at alpha/{fam['size']} = {fam['alpha_per_comparison']:.3g} per comparison",
             f"  CV from {rp['source']}; {rp['rule']}"]
    lines.append(f"  {'metric':24}{'cells':>6}{'median cv':>11}{'max cv':>9}{'runs needed (median/max cv)':>30}")
    for m in rp["metrics"]:
        lines.append(f"  {m['metric']:24}{m['cells']:>6}{m['median_cv']:>11.2%}{m['max_cv']:>9.2%}"
                     f"{str(m['needed_at_median_cv']) + ' / ' + str(m['needed_at_max_cv']):>30}")
    c = rp["cheap"]
    lines.append(f"  cheap factors: {c['needed']} replicates per cell needed, the spec has {c['planned']}")
    w = rp["whole_plot"]
    if w:
        lines.append(f"  whole-plot factors ({', '.join(w['factors'])}): each cell's runs in {w['needed']} "
                     f"separate visits needed, the plan gives {w['planned']}")
    lines += [f"  {x}" for x in rp["warnings"]]
    return "\n".join(lines)


_PROGRESS = re.compile(r"^(\d+) of (\d+) steps \((\d+)%\) done")
_ERROR_RULE = re.compile(r"^Error in rule (\w+):")
_LOG_LINE = re.compile(r"^\s+log: (\S+)")


def _snakemake_child_setup() -> None:
    """In the Snakemake child, before exec: take SIGINT by default again.

    A bmx started with SIGINT ignored (``nohup bmx run ... &``, a non-interactive
    shell's background job) would hand that on, and Snakemake could then never be
    stopped by the SIGINT that bmx forwards or that the workflow sends its own
    group when bmx dies (benchmatrix.execute.snakefile.die_with_bmx). That watcher replaces
    PR_SET_PDEATHSIG, which only signalled Snakemake itself: Snakemake then waited
    for its in-flight batch job, whose runner went on measuring.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _fmt_s(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _disk_hint(exp: Path) -> str:
    """What to say about a job that left no message: often a full disk ate its log."""
    import shutil

    try:
        free = shutil.disk_usage(exp).free
    except OSError:
        return "no message"
    if free < 4 << 20:
        return f"no message; only {free / 2**20:.1f} MiB free on the file system of {exp}"
    return "no message"


def _last_error_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if ln.startswith("benchmatrix:"):
            return ln
    return lines[-1] if lines else ""


def _collected_early(exp: Path) -> bool:
    """runs.csv exists although a batch of plan.csv has not finished.

    ``bmx report`` after an interrupt writes runs.csv; Snakemake does not re-create a
    missing intermediate file (a batch marker) of an up-to-date output, so the next
    ``bmx run`` would see nothing to do and leave the rest of the campaign pending.
    """
    from benchmatrix.execute.snakefile import batches

    if not (exp / "runs.csv").is_file() or not (exp / "plan.csv").is_file():
        return False
    order, _ = batches(exp / "plan.csv")
    return any(not (exp / "batches" / f"{b}.done").is_file() for b in order)


def _snakemake_pass(args: argparse.Namespace, spec: Any, proj: Path, exp: Path, lock: Any,
                    t0: float) -> tuple[int, bool, list[tuple[str, str, str]], str]:
    """One Snakemake invocation.

    Returns:
        (exit status, interrupted, failed jobs as (rule, log, the job's last
        ``benchmatrix:`` line seen on the stream), why bmx stopped the campaign itself
        ("" when it did not: a full disk makes it stop cleanly rather than fail on)).
    """
    from benchmatrix.execute.lock import LOCK_FD_ENV, note_child
    from benchmatrix.execute.rules import describe_os_error

    target = f"results/{spec.name}/report.html"
    # The target comes first: --config takes every following word as a KEY=VALUE.
    # Batch jobs wait on their hosts, not on this machine's CPUs: allow one job per
    # parallel host even on a small controller.
    slots = args.hosts_parallel or len(args.hosts)
    cmd = [sys.executable, "-m", "snakemake", target, "--snakefile", str(proj / "Snakefile"),
           "--directory", str(proj), "--cores", str(max(args.cores, slots)), "--nolock",
           "--resources", f"host_slots={slots}",
           *(["--forcerun", "collect"] if _collected_early(exp) else []),
           "--config", f"spec={_spec_arg(args.spec, proj)}"]
    if args.batch_max_runs:
        cmd.append(f"batch_max_runs={args.batch_max_runs}")
    log_path = exp / "logs" / "snakemake.log"
    failed: list[tuple[str, str, str]] = []
    pending_rule = None
    interrupted: list[int] = []
    stopped: list[str] = []  # why bmx stopped Snakemake itself (a full disk)
    last_msg = ""
    with open(log_path, "a") as log:
        # Snakemake runs in its own process group so that one Ctrl-C reaches it, its
        # jobs and the batch runners exactly once, forwarded by the handler below.
        # The workflow knows the inherited lock by BMX_LOCK_FD (it takes the lock itself
        # otherwise), and watches BMX_PARENT_PID: when bmx dies, it interrupts itself.
        env = {**os.environ, LOCK_FD_ENV: str(lock.fileno()), "BMX_PARENT_PID": str(os.getpid())}
        proc = subprocess.Popen(cmd, cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True, env=env,
                                pass_fds=(lock.fileno(),), preexec_fn=_snakemake_child_setup)
        note_child(lock, proc.pid)

        def forward(signum: int, frame: Any) -> None:
            if not interrupted:
                interrupted.append(signum)
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

        def stop(reason: str) -> None:
            # Like Ctrl-C: each batch job stops its runner and restores its host.
            if not stopped and not interrupted:
                stopped.append(reason)
                print(f"bmx: {reason}; stopping the campaign", file=sys.stderr, flush=True)
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

        old = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        logging = True
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if logging:
                    try:
                        log.write(line)
                        log.flush()
                    except OSError as exc:  # keep reading: a blocked pipe would hang Snakemake
                        logging = False
                        stop(describe_os_error(exc, log_path))
                if line.startswith("benchmatrix:"):
                    last_msg = line.strip()
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
                    msg = _last_error_line(proj / m.group(1)) or last_msg
                    failed.append((pending_rule, m.group(1), msg))
                    pending_rule = None
                    if "No space left on device" in msg:
                        stop(msg.removeprefix("benchmatrix: "))
            rc = proc.wait()
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            try:
                log.close()
            except OSError:
                pass  # a full disk: the reason is already printed
    return rc, bool(interrupted), failed, stopped[0] if stopped else ""


def _execute(args: argparse.Namespace, spec: Any, proj: Path, exp: Path, lock: Any) -> int:
    """Run the workflow until no new re-run round appears; print the outcome."""
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.plan.reruns import reruns_digest
    from benchmatrix.results.status import campaign_status, exit_code

    log_path = exp / "logs" / "snakemake.log"
    args.hosts = resolve_hosts(spec.inventory_path(proj), spec.data["hosts"])
    print(f"bmx: running {spec.name} ({len(spec.cells)} cells) on {len(args.hosts)} host(s); log {log_path}",
          flush=True)
    t0 = time.monotonic()
    # Interrupted runs found while executing become a re-run round (their next
    # attempt): one more pass executes them. Bounded, in case runs keep ending that way.
    for _ in range(3):
        before = reruns_digest(exp)
        rc, interrupted, failed, stopped = _snakemake_pass(args, spec, proj, exp, lock, t0)
        if stopped:
            for rule, log_file, msg in failed:
                if stopped not in msg:  # the reason itself was printed when bmx stopped
                    print(f"bmx: job {rule} failed: {msg} (log: {log_file})", file=sys.stderr)
            print(f"bmx: stopped; every finished run is kept (on its host until fetched). "
                  f"Free some space, then resume with: bmx run {args.spec}", file=sys.stderr)
            return 1
        if interrupted:
            print(f"bmx: interrupted; every finished run is kept. Resume with: bmx run {args.spec}",
                  file=sys.stderr)
            return 130
        if rc != 0 or reruns_digest(exp) == before:
            break
        print("bmx: resuming the runs that an interrupt cut short", flush=True)
    if rc != 0:
        for rule, log_file, msg in failed:
            print(f"bmx: job {rule} failed: {msg or _disk_hint(exp)} (log: {log_file})", file=sys.stderr)
        if not failed:
            print(f"bmx: snakemake failed (exit {rc}); see {log_path}", file=sys.stderr)
        return 1
    status = campaign_status(exp, spec.factor_names)
    t = status["totals"]
    bad = sum(t[k] for k in ("failed", "timeout", "unreachable", "invalid"))
    print(f"bmx: done in {_fmt_s(time.monotonic() - t0)}: {t['ok']} of {t['planned']} runs ok, "
          f"{bad} failed, {t['pending']} pending")
    for f in status["failed"][:10]:
        print(f"bmx: {f['status']}: {f['run_id']} (attempt {f['attempt']}): {f['reason']}", file=sys.stderr)
    if bad:
        print(f"bmx: details with 'bmx status {args.spec}'; retry with 'bmx rerun {args.spec} --failed'",
              file=sys.stderr)
    print(f"report: {exp / 'report.html'}")
    print(f"report: {exp / 'report.md'}")
    return exit_code(status) if bad else 0


def cmd_run(args: argparse.Namespace) -> int:
    from benchmatrix.execute.rules import exp_dir_of
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    exp = exp_dir_of(proj, spec)
    with experiment_lock(exp, "bmx run", args.spec, args.stop_orphan) as lock:
        _start_campaign(exp, spec, args.campaign)
        (exp / "logs").mkdir(parents=True, exist_ok=True)
        return _execute(args, spec, proj, exp, lock)


def _start_campaign(exp: Path, spec: Any, label: str | None, out: Any = None) -> None:
    """Keep a finished campaign and start a new one where due (docs/campaigns.md);
    say so on ``out`` (stdout; ``bmx plan`` passes stderr, its stdout may be JSON)."""
    from benchmatrix.campaigns.store import read_meta, start_campaign

    what, kept = start_campaign(exp, spec, label)
    if kept is not None:
        print(f"bmx: campaign {kept.name} kept in {kept.path}", file=out, flush=True)
    meta = read_meta(exp)
    if kept is not None or what == "relabel" or label:
        print(f"bmx: campaign {meta.get('label') or meta.get('id')} ({meta.get('id')})", file=out, flush=True)


def _status_table(status: dict[str, Any], factor_names: list[str]) -> str:
    cols = factor_names + ["cell_id", "planned", "ok", "failed", "timeout", "unreachable", "invalid",
                           "pending", "reruns"]
    rows = [[str(c["factors"].get(f)) for f in factor_names] + [c["cell_id"]] +
            [str(c[k]) for k in cols[len(factor_names) + 1:]] for c in status["cells"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(cols)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    from benchmatrix.execute.rules import exp_dir_of
    from benchmatrix.results.status import campaign_status, exit_code
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    if not (exp / "plan.csv").is_file():
        raise BenchmatrixError(f"{exp / 'plan.csv'}: no plan yet; run 'bmx run {args.spec}' first")
    status = campaign_status(exp, spec.factor_names)
    code = exit_code(status)
    if args.json:
        print(json.dumps({**status, "exit_code": code}, indent=2, default=str))
        return code
    t = status["totals"]
    print(f"experiment {spec.name}: {t['planned']} runs planned (warm-ups and controls included), "
          f"{t['ok']} ok, {t['pending']} pending, "
          + ", ".join(f"{t[k]} {k}" for k in ("failed", "timeout", "unreachable", "invalid")))
    print(_status_table(status, spec.factor_names))
    if status["failed"]:
        print("\nfailed runs:")
        for f in status["failed"]:
            print(f"  {f['run_id']} attempt {f['attempt']} on {f['host']}: {f['status']}: {f['reason']}"
                  + (f" (log: results/{spec.name}/{f['log']})" if f["log"] else ""))
    remaining = status["remaining_s"]
    print(f"\nelapsed {_fmt_s(status['elapsed_s'])}"
          + (f", estimated remaining {_fmt_s(remaining)}" if remaining is not None and t["pending"] else ""))
    return code


def cmd_check(args: argparse.Namespace) -> int:
    """``bmx check SPEC``: every host's knobs, planned levels and tool, and the campaign's time; exit 1 on a blocker."""
    from benchmatrix.execute.check import check_spec, check_table, planned_levels
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.rules import exp_dir_of
    from benchmatrix.plan.design import DEFAULT_BATCH_MAX_RUNS, make_plan, per_run_estimate
    from benchmatrix.spec.load import load_spec, read_planning_config

    proj = project_dir()
    cfg = read_planning_config(proj / "config" / "config.yaml")
    spec = load_spec(args.spec, cost_seconds=cfg["cost_seconds"])
    exp = exp_dir_of(proj, spec)
    checks = check_spec(spec, proj, exp / "logs" / "ansible")
    print(check_table(checks, planned_levels(spec)))
    for c in checks:
        print(f"{c.host}: workload tool {c.tool or '-'}")
    per_run, source = per_run_estimate(spec, exp / "runs.csv")
    runs = make_plan(spec, resolve_hosts(spec.inventory_path(proj), spec.data["hosts"]),
                     cfg["batch_max_runs"] or DEFAULT_BATCH_MAX_RUNS)
    costs = plan_summary(spec, runs, per_run, cfg["batch_overhead_seconds"])
    when = _fmt_s(costs["campaign_s"]) if costs["campaign_s"] is not None else "unknown (no per-run estimate)"
    print(f"estimated campaign time: {when}: {costs['runs']} runs, {costs['batches']} batches (per run: {source})")
    blockers = [b for c in checks for b in c.blockers]
    for b in blockers:
        print(f"bmx check: {b}", file=sys.stderr)
    print(f"{spec.name}: {'cannot run: ' + str(len(blockers)) + ' blocker(s)' if blockers else 'ready to run'}")
    return 1 if blockers else 0


def cmd_restore(args: argparse.Namespace) -> int:
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.rules import exp_dir_of, restore_host
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    hosts = [h for h in resolve_hosts(spec.inventory_path(proj), spec.data["hosts"])
             if (exp / "hosts" / h / "baseline.json").is_file()]
    if not hosts:
        print(f"bmx: no baseline recorded for {spec.name}: no host was reconfigured")
        return 0
    code = 0
    with experiment_lock(exp, "bmx restore", args.spec):
        for host in hosts:
            try:
                done = restore_host(spec, proj, host, exp / "hosts" / host / "restored.json")
            except BenchmatrixError as exc:
                print(f"bmx: {exc}", file=sys.stderr)
                code = 1
                continue
            knobs = ", ".join(f"{f}={k['actual']}" for f, k in done["knobs"].items())
            print(f"bmx: {host}: back at baseline ({knobs})")
    return code


def select_reruns(exp: Path, factor_names: list[str], failed: bool, where: str | None) -> list[tuple[str, int]]:
    """(run_id, next attempt) of the runs ``bmx rerun`` selects.

    ``failed`` picks every run whose state is failed, timeout, unreachable or invalid;
    ``where`` is an expression of :mod:`benchmatrix.spec.where` over one row per run (its
    newest attempt): the factor columns, run_id, cell_id, host, status, attempt,
    replicate, warmup, control and the metrics of that attempt.

    Raises:
        benchmatrix.spec.where.WhereError: ``where`` is outside the language (one line).
    """
    from benchmatrix.results.status import FAILED_STATES, run_states
    from benchmatrix.spec.where import Where

    states = [s for s in run_states(exp) if s.attempts]
    picked = []
    if failed:
        picked += [s for s in states if s.state in FAILED_STATES]
    if where:
        rows = []
        for s in states:
            row = {"run_id": s.run.run_id, "cell_id": s.run.cell_id, "host": s.run.host, "status": s.state,
                   "attempt": s.latest["attempt"], "replicate": s.run.replicate, "warmup": s.run.warmup,
                   "control": s.run.control}
            # Metrics first, so that a factor or a run column of the same name wins.
            metrics = {k: (m or {}).get("value") for k, m in (s.latest.get("metrics") or {}).items()}
            rows.append({**metrics, **{f: s.run.factors.get(f) for f in factor_names}, **row})
        columns = set(factor_names) | {"run_id", "cell_id", "host", "status", "attempt", "replicate",
                                       "warmup", "control"}
        columns |= {k for r in rows for k in r}
        expr = Where(where, columns)  # parsed before anything is selected: a bad one never half-runs
        hit = {r["run_id"] for r in rows if expr.matches(r)}
        picked += [s for s in states if s.run.run_id in hit and s not in picked]
    # Warm-ups are never re-run on their own: the planner adds the ones a re-run needs.
    return [(s.run.run_id, max(a["attempt"] for a in s.attempts) + 1) for s in picked if not s.run.warmup]


def cmd_rerun(args: argparse.Namespace) -> int:
    from benchmatrix.execute.rules import exp_dir_of
    from benchmatrix.plan.reruns import append_round
    from benchmatrix.spec.load import load_spec

    if not args.failed and not args.where:
        raise BenchmatrixError("bmx rerun: say which runs: --failed and/or --where EXPR")
    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    if not (exp / "plan.csv").is_file():
        raise BenchmatrixError(f"{exp / 'plan.csv'}: no plan yet; run 'bmx run {args.spec}' first")
    with experiment_lock(exp, "bmx rerun", args.spec, args.stop_orphan) as lock:
        picks = select_reruns(exp, spec.factor_names, args.failed, args.where)
        if not picks:
            print("bmx: no run matches; nothing to re-run")
            return 0
        reason = "failed" if args.failed and not args.where else f"where {args.where}" if not args.failed \
            else f"failed or where {args.where}"
        rnd = append_round(exp, picks, reason)
        print(f"bmx: re-run round {rnd}: {len(picks)} run(s) as new attempts")
        (exp / "logs").mkdir(parents=True, exist_ok=True)
        return _execute(args, spec, proj, exp, lock)


def cmd_report(args: argparse.Namespace) -> int:
    from benchmatrix.execute.rules import collect, exp_dir_of, report
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = exp_dir_of(proj, spec)
    plan_path = exp / "plan.csv"
    if not plan_path.is_file():
        raise BenchmatrixError(f"{plan_path}: no plan yet; run 'bmx run {args.spec}' (or 'bmx plan') first")
    collect(args.spec, proj, plan_path, exp / "runs.csv", exp / "summary.csv")
    html, md = report(args.spec, proj, template_dir=args.templates)
    print(f"report: {html}")
    print(f"report: {md}")
    return 0


def cmd_campaigns(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.store import campaign_rows, campaigns_table
    from benchmatrix.execute.rules import exp_dir_of
    from benchmatrix.spec.load import load_spec

    rows = campaign_rows(exp_dir_of(project_dir(), load_spec(args.spec)))
    print(json.dumps(rows, indent=2) if args.json else campaigns_table(rows))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.compare import compare_main

    try:
        return compare_main(args.a, args.b, project_dir(), args.spec, args.out, args.json)
    except BenchmatrixError as exc:
        exc.exit_code = 2  # a CI job reads 1 as "worse": whatever stops a comparison is "not comparable"
        raise


def cmd_export(args: argparse.Namespace) -> int:
    from benchmatrix.results.export import export

    path = export(args.spec, project_dir(), args.format, args.out)
    if path is not None:
        print(f"export: {path}")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.publish import publish

    # Like every other command, the results of the project bmx runs in (BMX_PROJECT_DIR).
    results = args.results if args.results is not None else project_dir() / "results"
    counts = publish(results, args.to)
    print(f"publish: {counts['experiments']} experiment(s), {counts['campaigns']} campaign(s), "
          f"{counts['steps']} step(s) in histories: {Path(args.to) / 'index.html'}")
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
    sp.add_argument("--batch-max-runs", type=int, default=0, help="override config.yaml's batch_max_runs")
    sp.add_argument("--detect", metavar="DIFF", help="replicate planning: the relative difference between two "
                    "levels to detect, e.g. 3%% (needs --cv or --pilot)")
    src = sp.add_mutually_exclusive_group()
    src.add_argument("--cv", metavar="CV", help="run-to-run coefficient of variation, e.g. 0.04 or 4%%")
    src.add_argument("--pilot", metavar="DIR", help="earlier campaign (results/NAME) whose summary.csv gives "
                     "the CV per cell and metric")
    sp.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    sp.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    sp = add("run", "plan if needed, execute every missing run through Snakemake and Ansible, render the report")
    sp.add_argument("--cores", type=int, default=max(os.cpu_count() or 1, 1),
                    help="Snakemake jobs at once (hosts run in parallel, each host in plan order)")
    sp.add_argument("--batch-max-runs", type=int, default=0, help="override config.yaml's batch_max_runs")
    sp.add_argument("--hosts-parallel", type=int, default=0, metavar="N",
                    help="at most N hosts busy at once (default: all); each host runs in plan order")
    sp.add_argument("--campaign", metavar="LABEL", help="start a new campaign with this label (the finished "
                    "one is kept in results/NAME/campaigns/ID/; docs/campaigns.md)")
    sp.add_argument("--stop-orphan", action="store_true",
                    help="first stop a Snakemake left running by a killed bmx that still locks the experiment")
    sp = add("report", "collect whatever runs exist into runs.csv and summary.csv and render report.html and report.md")
    sp.add_argument("--templates", type=Path, default=None, metavar="DIR",
                    help="directory of Jinja2 templates overriding the report's (see docs/report.md)")
    sp = add("status", "runs done, failed and pending per cell; exit 0 all ok, 1 some failed, 3 some pending")
    sp.add_argument("--json", action="store_true", help="print the status as JSON")
    add("restore", "put every host's knobs back to the state before the campaign's first change")
    add("check", "preflight: every host's knobs (current value, can each planned level be set), the workload "
        "tool and the campaign's estimated time; exit 1 with one line per blocker")
    sp = add("rerun", "re-execute failed or selected runs as new attempts (earlier attempts are kept)")
    sp.add_argument("--failed", action="store_true", help="every run whose newest attempt failed, timed out, "
                    "was unreachable or invalid")
    sp.add_argument("--where", metavar="EXPR", help="runs selected by an expression over factors, metrics, status, "
                    "host, run_id, cell_id, attempt, replicate: comparisons, in, and/or/not, e.g. \"bs == '4k' and status == 'ok'\"")
    sp.add_argument("--cores", type=int, default=max(os.cpu_count() or 1, 1), help="Snakemake jobs at once")
    sp.add_argument("--batch-max-runs", type=int, default=0, help="override config.yaml's batch_max_runs")
    sp.add_argument("--hosts-parallel", type=int, default=0, metavar="N",
                    help="at most N hosts busy at once (default: all)")
    sp.add_argument("--stop-orphan", action="store_true",
                    help="first stop a Snakemake left running by a killed bmx that still locks the experiment")
    sp = add("export", "write the campaign as Parquet or CSV (the long table), Bencher Metric Format or pyperf JSON")
    sp.add_argument("--format", required=True, metavar="FORMAT", help="bmf, pyperf, csv or parquet (docs/export.md)")
    sp.add_argument("--out", metavar="FILE", help="output file; - for stdout (default: results/NAME/runs_long.parquet, "
                    "runs_long.csv, bmf.json or pyperf.json)")
    sp = add("campaigns", "list the experiment's campaigns: id, label, start, end, hosts, runs ok/failed")
    sp.add_argument("--json", action="store_true", help="print the campaigns as JSON")
    sp = sub.add_parser("compare", help=HELP_COMPARE, description=HELP_COMPARE, epilog=EXAMPLES["compare"],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("a", metavar="A", help="the baseline campaign: id, unique id prefix, label or directory")
    sp.add_argument("b", metavar="B", help="the campaign compared with A")
    sp.add_argument("--spec", metavar="SPEC", help="resolve A and B among this experiment's campaigns")
    sp.add_argument("--out", type=Path, metavar="DIR", help="where to write compare.csv, compare.md and "
                    "compare.html (default results/NAME/compare/A_vs_B/)")
    sp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    sp = sub.add_parser("publish", help="write every experiment's campaigns, history and downloads as a static site",
                        description="write every experiment's campaigns, history and downloads as a static site "
                                    "(no server, no external request; docs/publish.md)",
                        epilog=EXAMPLES["publish"], formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("--to", required=True, metavar="DIR", help="site directory: new, empty, or an earlier site "
                    "(replaced whole)")
    sp.add_argument("--results", type=Path, default=None, metavar="DIR",
                    help="results directory (default: the project's results/)")
    return p


HELP_COMPARE = ("compare two campaigns cell by cell: relative difference B vs A with CIs, Holm-adjusted verdicts; "
                "exit 0 no worse, 1 something worse, 2 not comparable")

COMMANDS = {"validate": cmd_validate, "plan": cmd_plan, "run": cmd_run, "report": cmd_report,
            "status": cmd_status, "rerun": cmd_rerun, "restore": cmd_restore, "check": cmd_check,
            "export": cmd_export, "campaigns": cmd_campaigns, "compare": cmd_compare, "publish": cmd_publish}


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
    except OSError as exc:
        # A full disk or an unwritable results directory: one line, no traceback,
        # naming the path and, for a full disk, the space left.
        from benchmatrix.execute.rules import describe_os_error

        print(f"bmx: {describe_os_error(exc, Path.cwd())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
