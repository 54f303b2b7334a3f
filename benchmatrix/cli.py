"""The ``bmx`` command line: validate, plan, run, report.

Every error a user can cause is one line on stderr and a non-zero exit status:
2 for a bad spec or plan, 4 when another bmx holds the experiment, 1 for failed
runs or jobs, 130 after Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmatrix import __version__, layout
from benchmatrix.errors import BenchmatrixError, PlanError, SpecErrors
from benchmatrix.execute.lock import experiment_lock, refuse_if_held
from benchmatrix.execute.supervise import execute, fmt_hms
from benchmatrix.names import printable

if TYPE_CHECKING:
    from benchmatrix.spec.config import ProjectConfig
    from benchmatrix.spec.load import Spec

EXAMPLES = {
    "validate": "example:\n  bmx validate config/experiments/quickstart.yaml",
    "plan": "example:\n  bmx plan config/experiments/quickstart.yaml\n"
            "  bmx plan config/experiments/quickstart.yaml --json\n"
            "  bmx plan config/experiments/ht_cores.yaml --detect 3% --cv 0.04\n"
            "  bmx plan config/experiments/quickstart.yaml --detect 5% --pilot results/quickstart",
    "run": "example:\n  bmx run config/experiments/quickstart.yaml\n"
           "  bmx run config/experiments/quickstart.yaml --cores 4\n"
           "  bmx run config/experiments/quickstart.yaml --campaign kernel-6.6",
    "report": "example:\n  bmx report config/experiments/quickstart.yaml",
    "restore": "example:\n  bmx restore config/experiments/readahead_scan.yaml",
    "check": "example:\n  bmx check config/experiments/readahead_scan.yaml",
    "status": "example:\n  bmx status config/experiments/quickstart.yaml\n"
              "  bmx status config/experiments/quickstart.yaml --json",
    "rerun": "example:\n  bmx rerun config/experiments/quickstart.yaml --failed\n"
             "  bmx rerun config/experiments/quickstart.yaml --where \"bs == '4k' and status == 'ok'\"",
    "campaigns": "example:\n  bmx campaigns config/experiments/quickstart.yaml\n"
                 "  bmx campaigns config/experiments/quickstart.yaml --json",
    "compare": "example:\n  bmx compare kernel-6.1 kernel-6.6 --spec config/experiments/quickstart.yaml\n"
               "  bmx compare results/quickstart/campaigns/3f2a9c1b7d0e results/quickstart",
    "export": "example:\n  bmx export config/experiments/quickstart.yaml --format parquet\n"
              "  bmx export config/experiments/quickstart.yaml --format pyperf --out before.json\n"
              "  bmx export config/experiments/quickstart.yaml --format bmf --out -\n"
              "  bmx export config/experiments/quickstart.yaml --campaign kernel-6.1 --format csv --out before.csv",
    "history": "example:\n  bmx history config/experiments/quickstart.yaml\n"
               "  bmx history config/experiments/quickstart.yaml --json",
    "publish": "example:\n  bmx publish --to site/\n  bmx publish --to /srv/www/bench --results results/",
    "time": "example:\n  bmx time 'python3 -c pass' 'python3 -S -c pass'\n"
            "  bmx time 'sleep 0.05' 'sleep 0.2' -n 5 --warmup 0\n"
            "  bmx time 'sh -c \"sort big.txt | uniq -c\"' --spec config/experiments/uniq.yaml",
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


# ---------------------------------------------------------------- commands

def _roles(spec_path: str) -> set[str]:
    """The roles bmx validate, bmx check and bmx run accept: the project's and the spec's project's."""
    from benchmatrix.spec.load import shipped_roles

    try:
        proj: Path | None = project_dir()
    except BenchmatrixError:
        proj = None  # a spec outside any checkout: its own project's roles only
    return shipped_roles(spec_path, proj)


def cmd_validate(args: argparse.Namespace) -> int:
    from benchmatrix.spec.load import load_spec
    from benchmatrix.workloads import metric_names, workload_variables

    spec = load_spec(args.spec, roles=_roles(args.spec), metric_names=metric_names, variables=workload_variables)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    runs_per_host = len(spec.cells) * (spec.replicates + spec.warmup)
    if args.json:
        print(json.dumps({"spec": str(args.spec), "ok": True, "experiment": spec.name,
                          "factors": len(spec.factor_names), "cells": len(spec.cells),
                          "measured_runs_per_host": len(spec.cells) * spec.replicates,
                          "runs_per_host_with_warmups": runs_per_host, "warnings": list(spec.warnings)}, indent=2))
        return 0
    print(f"{args.spec}: ok: experiment {spec.name}, {len(spec.factor_names)} factors, "
          f"{len(spec.cells)} cells, {len(spec.cells) * spec.replicates} measured runs per host "
          f"(at least {runs_per_host} with warm-ups)")
    return 0


def _alternative_plans(spec: Spec, hosts: list[str], max_runs: int, max_seconds: float | None = None,
                       estimates: dict[str, float] | None = None) -> dict[str, list[Any]]:
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
        out[strategy] = make_plan(alt, hosts, max_runs, max_seconds, estimates)
    return out


def _detect_inputs(args: argparse.Namespace, spec: Spec, proj: Path
                   ) -> tuple[float, list[Any], str, list[str]] | None:
    """Check the ``--detect`` options before anything is written: (difference, spreads,
    source, notes on the scales)."""
    from benchmatrix.analyze.power import (
        family_metrics,
        given_cv_samples,
        parse_fraction,
        pilot_samples,
        workload_units,
    )

    if args.detect is None:
        if args.cv is not None or args.pilot is not None:
            raise BenchmatrixError("--cv and --pilot only serve --detect; add e.g. --detect 3%")
        return None
    detect = parse_fraction(args.detect, "--detect")
    for name, value in (("--alpha", args.alpha), ("--power", args.power)):
        if not 0 < value < 1:
            raise BenchmatrixError(f"{name} {value}: must lie between 0 and 1")
    if args.cv is not None:
        samples = given_cv_samples(parse_fraction(args.cv, "--cv"), family_metrics(spec)[0],
                                   spec.declared_metrics, workload_units(spec))
        return detect, samples, f"--cv {args.cv}", []
    if args.pilot is None:
        raise BenchmatrixError("--detect needs the runs' coefficient of variation: give --cv 0.04 "
                               "or --pilot results/NAME of an earlier campaign")
    pilot = Path(args.pilot)
    if not pilot.exists() and not pilot.is_absolute() and (proj / pilot).exists():
        pilot = proj / pilot
    samples, notes = pilot_samples(pilot, list(spec.report.metrics) or None, spec.declared_metrics,
                                   workload_units(spec))
    where = pilot if not pilot.is_dir() else pilot / layout.SUMMARY
    runs = where.parent / layout.RUNS
    detail = "runs.csv beside it gives the log sd" if runs.is_file() else "no runs.csv: log sd from each cell's CV"
    return detect, samples, f"{where}, per cell and metric ({detail})", notes


def cmd_plan(args: argparse.Namespace) -> int:
    from benchmatrix.analyze.power import family_size, replicate_plan
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.planning import plan
    from benchmatrix.plan.design import per_run_estimate, plan_costs, run_estimates, visits_per_cell
    from benchmatrix.plan.measured_costs import orchestration_costs
    from benchmatrix.plan.wall_time import WallModel
    from benchmatrix.spec.config import project_config
    from benchmatrix.spec.load import load_spec
    from benchmatrix.workloads import metric_names, workload_variables

    proj = project_dir()
    cfg = project_config(proj)
    spec = load_spec(args.spec, cost_seconds=cfg.cost_seconds, metric_names=metric_names, variables=workload_variables)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    max_runs = args.batch_max_runs or cfg.batch_max_runs
    detect = _detect_inputs(args, spec, proj)
    exp = layout.exp_dir_of(proj, spec)
    out = exp / layout.PLAN
    with experiment_lock(exp, "bmx plan", args.spec):
        _start_campaign(exp, spec, None, sys.stderr)
        max_seconds = cfg.batch_max_seconds
        estimates = run_estimates(spec, exp)
        runs = plan(args.spec, proj, out, max_runs, max_seconds)
    # Re-run rounds appended after the planned runs are not part of the design compared here.
    planned = [r for r in runs if getattr(r, "round", 0) == 0]
    hosts = resolve_hosts(spec.inventory_path(proj), spec.hosts)
    per_run, per_run_source = per_run_estimate(spec, exp / layout.RUNS)
    orch = orchestration_costs(spec, exp, cfg.batch_overhead_seconds, cfg.campaign_overhead_seconds)
    overhead = orch.batch_s
    chosen = plan_costs(spec, planned, per_run, overhead, orch.class_seconds, orch.campaign_s)
    alternatives = {k: plan_costs(spec, v, per_run, overhead, orch.class_seconds, orch.campaign_s)
                    for k, v in _alternative_plans(spec, hosts, max_runs, max_seconds, estimates).items()}
    replicates = None
    if detect is not None:
        whole = spec.whole_plot_factors()
        family = family_size(spec, hosts, [s.metric for s in detect[1] if s.metric != "(any)"])
        replicates = replicate_plan(detect[0], detect[1], spec.replicates,
                                    visits_per_cell(planned) if whole else None, whole, detect[2],
                                    args.alpha, args.power, family, detect[3])
    data = {"experiment": spec.name, "plan": str(out), "hosts": hosts, "cells": len(spec.cells),
            "replicates": spec.replicates, "strategy": spec.order["strategy"],
            "seed": spec.order["seed"],
            "whole_plot_factors": {"reboot": spec.costly_factors("reboot"),
                                   "restart": spec.costly_factors("restart")},
            "visits_per_whole_plot": spec.visits if spec.order["strategy"] == "restricted" else None,
            "per_run_s": per_run, "per_run_source": per_run_source,
            "cost_seconds": cfg.cost_seconds, "batch_overhead_s": overhead,
            "batch_overhead_source": orch.batch_source, "measured_cost_seconds": orch.class_seconds,
            "measured_cost_source": orch.class_source, "campaign_overhead_s": orch.campaign_s,
            "campaign_overhead_source": orch.campaign_source,
            "this_plan": chosen, "alternatives": alternatives, "replicate_planning": replicates,
            "until_decided": _until_decided_figures(spec, exp, len(hosts), per_run, detect, args.alpha)}
    if data["until_decided"]:
        _until_decided_wall(data["until_decided"], spec, planned, WallModel(estimates, per_run, orch), cfg)
    if args.json:
        # stdout stays pure JSON; the shortfalls are also in replicate_planning.warnings.
        for w in (replicates or {}).get("warnings", []):
            print(w, file=sys.stderr)
        print(json.dumps(data, indent=2))
        return 0
    print(f"experiment {spec.name}: {len(spec.cells)} cells x {spec.replicates} replicates "
          f"on {len(hosts)} host(s) ({printable(', '.join(hosts))}); strategy {data['strategy']}, seed {data['seed']}")
    if data["visits_per_whole_plot"]:
        wp = spec.whole_plot_factors()
        print(f"whole plots: {', '.join(wp) if wp else 'none (no restart or reboot knob)'}; "
              f"{spec.visits} visit(s) of each")
    print(_plan_table(chosen, alternatives, data["strategy"]))
    print(f"per-run estimate: {fmt_hms(per_run) + f' ({per_run:g} s)' if per_run is not None else '-'}"
          f" from {per_run_source}; {_orchestration_text(orch)}")
    for w in plan_warnings(chosen, alternatives, data["strategy"], spec.warmup_after):
        print(w, file=sys.stderr)
    if replicates:
        print(_replicates_text(replicates))
    if data["until_decided"]:
        print(_until_decided_text(data["until_decided"], chosen))
    print(f"wrote {out}")
    return 0


def _orchestration_text(orch: Any) -> str:
    """What a batch and a measured reconfiguration cost in the estimates, and from where."""
    text = f"batch overhead {round(orch.batch_s, 1):g} s from {orch.batch_source}"
    if orch.class_seconds:
        each = ", ".join(f"{cls} {s:.0f} s" for cls, s in orch.class_seconds.items())
        text += f"; reconfiguration {each} ({orch.class_source}, instead of cost_seconds)"
    return text + f"; campaign start and end {orch.campaign_s:.0f} s from {orch.campaign_source}"


def _until_decided_figures(spec: Spec, exp: Path, hosts: int, per_run: float | None, detect: Any,
                           alpha: float) -> dict[str, Any] | None:
    """``bmx plan``'s figures of an adaptive design (None for a fixed one)."""
    from benchmatrix.analyze.adaptive import design_figures, settings_of
    from benchmatrix.analyze.power import log_sd_from_cv
    from benchmatrix.results.campaign import read_meta

    settings = settings_of(spec, read_meta(exp))
    if settings is None:
        return None
    sd_log = None
    if detect is not None:
        logs = [s.sd_log for s in detect[1] if getattr(s, "sd_log", None)]
        sd_log = max(logs) if logs else log_sd_from_cv(max(s.cv for s in detect[1]))
    return design_figures(settings, len(spec.cells), hosts, per_run, spec.report.alpha if alpha is None else alpha,
                          sd_log, detect[0] if detect is not None else None)


def _until_decided_wall(f: dict[str, Any], spec: Spec, planned: list[Any], model: Any, cfg: Any) -> None:
    """Make ``bmx plan``'s until-decided times wall times (in place; ``wall`` says so): each
    look is a Snakemake pass with its batches (:func:`benchmatrix.plan.wall_time.adaptive_seconds`),
    not only its runs, which came out about 5x short. Left as they are when a run's time is unknown."""
    from benchmatrix.plan.wall_time import adaptive_seconds

    walls = adaptive_seconds(spec, planned, f["schedule"], model, cfg.batch_max_runs, cfg.batch_max_seconds)
    f["wall"] = walls is not None
    if walls is None:
        return
    f["seconds_min"], f["seconds_max"] = walls[0], walls[-1]
    if f.get("typical_runs_per_cell"):
        f["expected_seconds"] = {k: walls[f["schedule"].index(n)] if n in f["schedule"] else None
                                 for k, n in f["typical_runs_per_cell"].items()}


def _until_decided_text(f: dict[str, Any], fixed: dict[str, Any]) -> str:
    """The adaptive design beside the fixed one, for ``bmx plan``."""
    def hms(v: float | None) -> str:
        return fmt_hms(v) if v is not None else "-"

    lines = [f"replicates until decided: {' -> '.join(map(str, f['schedule']))} runs a cell, at most {f['looks']} "
             f"looks, verdicts at alpha / {f['looks']} = {f['level']:.4g}; stops a comparison when decided, when a "
             f"change of ±{f['detect_pct']:g} % is ruled out, at max" + (" or at the budget" if f["budget_s"] else ""),
             f"  measured runs: {f['runs_min']} (all decided after the first look) to {f['runs_max']} (every cell at "
             f"max); {'wall time' if f.get('wall') else 'time of the runs'} {hms(f['seconds_min'])} to "
             f"{hms(f['seconds_max'])}" + (" (each look a pass of its own, with its batches)" if f.get("wall") else "")]
    typical = f.get("typical_runs_per_cell")
    if typical:
        runs, secs = f["expected_runs"], f["expected_seconds"]
        lines.append(f"  expected: {runs['no_change']} measured runs ({typical['no_change']} a cell, time "
                     f"{hms(secs['no_change'])}) where nothing changed"
                     + (f"; {runs['change']} ({typical['change']} a cell, time {hms(secs['change'])}) where every "
                        f"comparison has the --detect change" if typical["change"] else "")
                     + f"; this plan's first round: {fixed.get('measured', '-')} measured runs")
    return "\n".join(lines)


#: bmx plan warns when the orchestration takes more than this share of a plan's time.
OVERHEAD_WARN_PCT = 30.0


def plan_warnings(chosen: dict[str, Any], alternatives: dict[str, Any], strategy: str,
                  warmup_after: str = "change") -> list[str]:
    """``bmx plan``'s warnings on the design's cost: the orchestration over
    :data:`OVERHEAD_WARN_PCT` of the time, and warm-ups for half the measured runs or more."""
    out = []
    pct = chosen.get("overhead_pct")
    if pct is not None and pct > OVERHEAD_WARN_PCT:
        cheaper = {k: v["overhead_pct"] for k, v in alternatives.items()
                   if v.get("overhead_pct") is not None and v["overhead_pct"] < pct / 2}
        hint = ("; " + ", ".join(f"{k}: {v:.0f} %" for k, v in cheaper.items())
                + " (fewer visits, less protection against drift)") if cheaper else ""
        out.append(f"bmx plan warning: orchestration (Ansible calls, reconfigurations) takes {pct:.0f} % of "
                   f"this plan's time ({strategy}){hint}")
    if chosen["warmup"] and 2 * chosen["warmup"] >= chosen["measured"] > 0:
        out.append(f"bmx plan warning: {chosen['warmup']} warm-up runs for {chosen['measured']} measured runs "
                   f"(warmup_after: {warmup_after}); warmup_after: costly_change or first_run warms "
                   "a cell up less often")
    return out


def _plan_table(chosen: dict[str, Any], alternatives: dict[str, Any], strategy: str) -> str:
    """The cost table of ``bmx plan``: this plan beside the other strategies."""
    cols = [(f"this plan ({strategy})", chosen)] + [(k, v) for k, v in alternatives.items()]
    width = max(len(c[0]) for c in cols) + 2

    def hms(v: float | None) -> str:
        return "-" if v is None else fmt_hms(v)

    rows: list[tuple[str, Any]] = [
        ("runs", lambda c: c["runs"]), ("measured runs", lambda c: c["measured"]),
        ("warm-up runs", lambda c: c["warmup"]), ("control runs", lambda c: c["control"]),
        ("visits", lambda c: c["visits"]), ("batches (Ansible calls)", lambda c: c["batches"]),
        ("reboots", lambda c: c["reconfigurations"]["reboot"]),
        ("restarts (without reboot)", lambda c: c["reconfigurations"]["restart"]),
        ("cheap reconfigurations", lambda c: c["reconfigurations"]["none"]),
    ] + [(f"knob changes, {cls}", lambda c, cls=cls: c["knob_changes"][cls])
         for cls in ("reboot", "restart", "none")] + [
        ("reconfiguration time", lambda c: hms(c["reconfiguration_s"])),
        ("workload time", lambda c: hms(c["workload_s"])),
        ("orchestration time", lambda c: hms(c["orchestration_s"])),
        ("overhead %", lambda c: "-" if c["overhead_pct"] is None else f"{c['overhead_pct']:.0f} %"),
        ("warm-up share of runs", lambda c: f"{c['warmup_pct']:.0f} %"),
        ("campaign start and end", lambda c: hms(c["campaign_overhead_s"])),
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
             f"  spread from {rp['source']}",
             f"  positive metrics (scale log) are compared as ratios: Welch's test on log values, planned for a "
             f"ratio of {rp['detect_ratio']:g} (a drop of {rp['detect'] * 100:g}% is detected with more power) "
             f"with the sd of the log values pooled over the cells; others (scale linear) with the largest CV"]
    lines.append(f"  {'metric':24}{'scale':>7}{'cells':>6}{'sigma':>9}{'median':>9}{'max':>9}"
                 f"{'runs needed (sigma; median / max cell)':>41}")
    for m in rp["metrics"]:
        runs = f"{m['needed']} ({m['needed_at_median_sigma']} / {m['needed_at_max_sigma']})"
        lines.append(f"  {m['metric']:24}{m['scale']:>7}{m['cells']:>6}{m['sigma']:>9.4g}{m['median_sigma']:>9.4g}"
                     f"{m['max_sigma']:>9.4g}{runs:>41}")
    lines.append("  sigma: on the log scale the sd of log(value), on the linear scale the CV (sd / mean)")
    c = rp["cheap"]
    lines.append(f"  cheap factors: {c['needed']} replicates per cell needed, the spec has {c['planned']}")
    w = rp["whole_plot"]
    if w:
        lines.append(f"  whole-plot factors ({', '.join(w['factors'])}): each cell's runs in {w['needed']} "
                     f"separate visits needed, the plan gives {w['planned']}")
    lines += [f"  note: {x}" for x in rp.get("notes", [])]
    lines += [f"  {x}" for x in rp["warnings"]]
    # Metric names come from a pilot's runs.csv, the source from the command line: a
    # control or bidirectional character among them is shown escaped, not run.
    return "\n".join(printable(line) for line in lines)


def cmd_run(args: argparse.Namespace) -> int:
    from benchmatrix.spec.load import load_spec
    from benchmatrix.workloads import metric_names, workload_variables

    budget_s = None
    if args.budget is not None:  # an empty --budget '' used to mean no budget at all
        from benchmatrix.analyze.adaptive import parse_budget

        budget_s = parse_budget(args.budget)
    if args.campaign is not None:  # refused where it enters, before the results directory is touched
        from benchmatrix.campaigns.store import check_label

        args.campaign = check_label(args.campaign)
    proj = project_dir()
    # The roles too, as bmx validate checks them: a typo'd role would fail every run. With
    # no roles directory at all there is nothing to check against (and nothing could run).
    spec = load_spec(args.spec, roles=_roles(args.spec) or None, metric_names=metric_names,
                     variables=workload_variables)
    for w in spec.warnings:
        print(w, file=sys.stderr)
    exp = layout.exp_dir_of(proj, spec)
    until = None
    if args.against is not None and not args.until_decided:
        raise PlanError(f"--against {args.against} needs --until-decided: the gate adds runs until B's comparison "
                        f"with A is decided (for a one-off check: bmx run {args.spec}, then bmx compare A B)")
    if args.until_decided or budget_s is not None:
        from benchmatrix.analyze.adaptive import flag_settings, settings_of

        if not args.until_decided and settings_of(spec) is None:
            raise PlanError("--budget needs --until-decided (or replicates: {min, max, until: decided} in the spec)")
        if spec.report.compare is None and args.against is None:
            raise PlanError(f"{args.spec}: --until-decided needs report.compare: the comparisons whose verdicts "
                            "decide when to stop (or --against A: B's cells against campaign A)")
        until = flag_settings(spec, budget_s or 0.0, gate=args.against is not None)
    if args.against is not None:
        args.against = _gate_baseline(args.against, proj, exp, spec).id
    if args.json:
        return _run_json(args, spec, proj, exp, until)
    with experiment_lock(exp, "bmx run", args.spec, args.stop_orphan) as lock:
        _begin_run(exp, spec, args.campaign, until, args.against)
        return execute(args, spec, proj, exp, lock)


def _gate_baseline(ref: str, proj: Path, exp: Path, spec: Spec) -> Any:
    """Campaign A of ``--against``, refused in one line when unknown or not comparable
    with what ``spec`` measures (before anything runs)."""
    from benchmatrix.campaigns.compare import NotComparable, resolve
    from benchmatrix.campaigns.store import MEASUREMENT_KEYS, SPEC_FILE, measured

    try:
        a = resolve(ref, proj, exp)
    except BenchmatrixError as exc:  # a usage error (2): a gate reads 1 as "worse"
        raise PlanError(f"--against {ref}: {exc}") from None
    if not (a.path / layout.RUNS).is_file():
        raise NotComparable(f"--against {ref}: campaign {a.name} ({a.path}) has no runs.csv; run or report it first")
    try:
        kept = json.loads((a.path / SPEC_FILE).read_text())
    except (OSError, ValueError):
        kept = None  # planned before spec.json was kept: compare checks each run's workload
    keys = [k for k in MEASUREMENT_KEYS if kept is not None and json.dumps(measured(kept, k), sort_keys=True,
                                                                             default=str)
            != json.dumps(measured(spec.data, k), sort_keys=True, default=str)]
    if keys:
        raise NotComparable(f"--against {ref}: campaign {a.name} measured differently from {spec.path} "
                            f"({', '.join(keys)} differ): not comparable")
    return a


def _begin_run(exp: Path, spec: Spec, label: str | None, until: Any, against: str | None = None) -> None:
    """Start or continue the campaign (under the lock), keeping ``--until-decided``'s
    settings and the gate's campaign A (``--against``, its id)."""
    _start_campaign(exp, spec, label)
    if until is not None:
        from benchmatrix.results.campaign import campaign_id, read_meta, update_meta

        # Kept with the campaign: its collect job judges at the sequential level too.
        campaign_id(exp, spec_digest=spec.digest)
        if against is not None and read_meta(exp).get("id") == against:
            raise PlanError(f"--against {against}: that is the campaign this run adds runs to (B); name an earlier "
                            f"campaign, or start a new one with --campaign LABEL")
        update_meta(exp, until_decided=until.as_dict(), against=against)
    (exp / layout.LOGS_DIR).mkdir(parents=True, exist_ok=True)


def _run_json(args: argparse.Namespace, spec: Spec, proj: Path, exp: Path, until: Any = None) -> int:
    """``bmx run --json``: the progress on stderr, then one JSON document on stdout."""
    import contextlib
    import time

    from benchmatrix.report.terminal import read_findings
    from benchmatrix.results.status import campaign_status

    t0 = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):
        with experiment_lock(exp, "bmx run", args.spec, args.stop_orphan) as lock:
            _begin_run(exp, spec, args.campaign, until, args.against)
            code = execute(args, spec, proj, exp, lock)
        status = campaign_status(exp, spec.factor_names)
    print(json.dumps({"experiment": spec.name, "exit_code": code, "elapsed_s": round(time.monotonic() - t0, 3),
                      "totals": status["totals"], "failed": status["failed"], "findings": read_findings(exp),
                      **({"gate": args.gate} if getattr(args, "gate", None) else {})},
                     indent=2, default=str))
    return code


def _start_campaign(exp: Path, spec: Spec, label: str | None, out: Any = None) -> None:
    """Keep a finished campaign and start a new one where due (docs/campaigns.md);
    say so on ``out`` (stdout; ``bmx plan`` passes stderr, its stdout may be JSON)."""
    from benchmatrix.campaigns.store import start_campaign
    from benchmatrix.results.campaign import read_meta

    what, kept = start_campaign(exp, spec, label)
    if kept is not None:
        print(f"bmx: campaign {kept.name} kept in {kept.path}", file=out, flush=True)
    meta = read_meta(exp)
    if kept is not None or what == "relabel" or label:
        print(f"bmx: campaign {meta.get('label') or meta.get('id')} ({meta.get('id')})", file=out, flush=True)


def _status_table(status: dict[str, Any], factor_names: list[str]) -> str:
    cols = factor_names + ["cell_id", "planned", "ok", "failed", "timeout", "unreachable", "invalid",
                           "pending", "reruns"]
    # Levels of plan.csv (an older version's may hold ESC or U+202E): shown escaped.
    rows = [[printable(str(c["factors"].get(f))) for f in factor_names] + [printable(c["cell_id"])] +
            [str(c[k]) for k in cols[len(factor_names) + 1:]] for c in status["cells"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(cols)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _no_plan(exp: Path, spec: str, alternative: str = "") -> BenchmatrixError:
    """The error of a command that finds no plan.csv: while a ``bmx run`` holds the
    experiment (it has not written its plan yet), the lock's refusal (exit 4)."""
    refuse_if_held(exp, f"'bmx run {spec} --stop-orphan'")
    return BenchmatrixError(f"{exp / layout.PLAN}: no plan yet; run 'bmx run {spec}'{alternative} first")


def cmd_status(args: argparse.Namespace) -> int:
    from benchmatrix.results.status import campaign_status, exit_code
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = layout.exp_dir_of(proj, spec)
    if not (exp / layout.PLAN).is_file():
        raise _no_plan(exp, args.spec)
    status = campaign_status(exp, spec.factor_names)
    code = exit_code(status)
    if args.json:
        print(json.dumps({**status, "exit_code": code}, indent=2, default=str))
        return code
    print(_status_text(spec.name, status, spec.factor_names))
    return code


def _status_text(name: str, status: dict[str, Any], factor_names: list[str]) -> str:
    """What ``bmx status`` prints: the totals, the table of cells, the failed runs, the time."""
    t = status["totals"]
    lines = [f"experiment {name}: {t['planned']} runs planned (warm-ups and controls included), "
             f"{t['ok']} ok, {t['pending']} pending, "
             + ", ".join(f"{t[k]} {k}" for k in ("failed", "timeout", "unreachable", "invalid"))
             + (f"; {t['finished_on_host']} of the pending finished on their host, results come back with "
                "their batch" if t.get("finished_on_host") else ""),
             _status_table(status, factor_names)]
    if status["failed"]:
        lines.append("\nfailed runs:")
        from benchmatrix.results.status import group_failures

        for g in group_failures(status["failed"]):
            f, n = g["first"], g["count"]
            # A reason shared by many runs is said once, with their count and the first of them.
            who = f"{n} runs, first {f['run_id']}" if n > 1 else f["run_id"]
            # A reason quotes the tool's output, which may hold terminal escapes: shown escaped.
            lines.append(printable(f"  {who} attempt {f['attempt']} on {f['host']}: {f['status']}: "
                                   f"{f['reason']}" + (f" (log: results/{name}/{f['log']})" if f["log"] else "")))
    remaining = status["remaining_s"]
    lines.append(f"\nelapsed {fmt_hms(status['elapsed_s'])}"
                 + (f", estimated remaining {fmt_hms(remaining)}" if remaining is not None and t["pending"] else ""))
    return "\n".join(lines)


def _check_costs(spec: Spec, proj: Path, exp: Path, cfg: ProjectConfig) -> tuple[dict[str, Any], str]:
    """The plan bmx plan and bmx run would make (batches sized by time as configured), priced."""
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.plan.design import make_plan, per_run_estimate, plan_costs, run_estimates
    from benchmatrix.plan.measured_costs import orchestration_costs
    from benchmatrix.plan.wall_time import WallModel

    per_run, source = per_run_estimate(spec, exp / layout.RUNS)
    runs = make_plan(spec, resolve_hosts(spec.inventory_path(proj), spec.hosts),
                     cfg.batch_max_runs, cfg.batch_max_seconds, run_estimates(spec, exp))
    orch = orchestration_costs(spec, exp, cfg.batch_overhead_seconds, cfg.campaign_overhead_seconds)
    costs = plan_costs(spec, runs, per_run, orch.batch_s, orch.class_seconds, orch.campaign_s)
    return {**costs, "batch_overhead_s": orch.batch_s, "batch_overhead_source": orch.batch_source,
            "campaign_overhead_source": orch.campaign_source,
            "until_decided_max_s": _until_decided_max_s(spec, exp, runs, WallModel(run_estimates(spec, exp),
                                                                                  per_run, orch), cfg),
            "orchestration_text": _orchestration_text(orch)}, source


def _until_decided_max_s(spec: Spec, exp: Path, runs: list[Any], model: Any, cfg: ProjectConfig) -> float | None:
    """Wall seconds of an until-decided campaign whose every comparison goes to max
    (:func:`benchmatrix.plan.wall_time.adaptive_seconds`); None for a fixed design or
    without a per-run estimate."""
    from benchmatrix.analyze.adaptive import settings_of
    from benchmatrix.plan.wall_time import adaptive_seconds
    from benchmatrix.results.campaign import read_meta

    settings = settings_of(spec, read_meta(exp))
    if settings is None:
        return None
    walls = adaptive_seconds(spec, runs, settings.schedule, model, cfg.batch_max_runs, cfg.batch_max_seconds)
    return walls[-1] if walls else None


def _check_json(spec: Spec, proj: Path, exp: Path, cfg: ProjectConfig, checks: list[Any]) -> int:
    """``bmx check --json``: ``{experiment, ready, hosts: [HostCheck as a mapping], estimate}``."""
    from dataclasses import asdict

    costs, source = _check_costs(spec, proj, exp, cfg)
    blockers = [b for c in checks for b in c.blockers]
    print(json.dumps({"experiment": spec.name, "ready": not blockers, "blockers": blockers,
                      "hosts": [asdict(c) for c in checks],
                      "estimate": {"campaign_s": costs["campaign_s"], "runs": costs["runs"],
                                   "batches": costs["batches"], "per_run_source": source,
                                   "batch_overhead_s": costs["batch_overhead_s"],
                                   "batch_overhead_source": costs["batch_overhead_source"],
                                   "campaign_overhead_s": costs["campaign_overhead_s"],
                                   "campaign_overhead_source": costs["campaign_overhead_source"],
                                   "until_decided_max_s": costs["until_decided_max_s"]}},
                     indent=2, default=str))
    return 1 if blockers else 0


def cmd_check(args: argparse.Namespace) -> int:
    """``bmx check SPEC``: every host's knobs, planned levels and tool, and the campaign's time; exit 1 on a blocker."""
    from benchmatrix.execute.check import check_lines, check_spec, planned_levels
    from benchmatrix.spec.config import project_config
    from benchmatrix.spec.load import load_spec
    from benchmatrix.workloads import metric_names, workload_variables

    proj = project_dir()
    cfg = project_config(proj)
    spec = load_spec(args.spec, cost_seconds=cfg.cost_seconds, roles=_roles(args.spec), metric_names=metric_names,
                     variables=workload_variables)
    exp = layout.exp_dir_of(proj, spec)
    checks = check_spec(spec, proj, exp / layout.LOGS_DIR / "ansible")
    if args.json:
        return _check_json(spec, proj, exp, cfg, checks)
    out, warnings, blockers = check_lines(checks, planned_levels(spec))
    print("\n".join(out))
    for line in warnings:
        print(line, file=sys.stderr)
    costs, source = _check_costs(spec, proj, exp, cfg)
    when = fmt_hms(costs["campaign_s"]) if costs["campaign_s"] is not None else "unknown (no per-run estimate)"
    if costs["until_decided_max_s"] is not None:
        when += f" (until decided: up to {fmt_hms(costs['until_decided_max_s'])} if every comparison goes to max)"
    print(printable(f"estimated campaign time: {when}: {costs['runs']} runs, {costs['batches']} batches "
                    f"(per run: {source}; {costs['orchestration_text']})"))
    for line in blockers:
        print(line, file=sys.stderr)
    print(f"{spec.name}: {'cannot run: ' + str(len(blockers)) + ' blocker(s)' if blockers else 'ready to run'}")
    return 1 if blockers else 0


def cmd_restore(args: argparse.Namespace) -> int:
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.restore import may_be_reconfigured, restore_host
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = layout.exp_dir_of(proj, spec)
    hosts = [h for h in resolve_hosts(spec.inventory_path(proj), spec.hosts) if may_be_reconfigured(spec, exp, h)]
    if not hosts:
        print(f"bmx: no baseline recorded for {spec.name}: no host was reconfigured")
        return 0
    code = 0
    with experiment_lock(exp, "bmx restore", args.spec):
        for host in hosts:
            try:
                done = restore_host(spec, proj, host, exp / layout.HOSTS_DIR / host / layout.RESTORED)
            except BenchmatrixError as exc:
                print(f"bmx: {exc}", file=sys.stderr)
                code = 1
                continue
            knobs = ", ".join(f"{f}={k['actual']}" for f, k in done["knobs"].items())
            print(f"bmx: {host}: back at baseline ({knobs})")
    return code


def cmd_rerun(args: argparse.Namespace) -> int:
    from benchmatrix.plan.reruns import append_round
    from benchmatrix.results.status import select_reruns
    from benchmatrix.spec.load import load_spec

    if not args.failed and not args.where:
        raise BenchmatrixError("bmx rerun: say which runs: --failed and/or --where EXPR")
    proj = project_dir()
    spec = load_spec(args.spec)
    exp = layout.exp_dir_of(proj, spec)
    if not exp.is_dir():
        raise _no_plan(exp, args.spec)  # and no lock to take: the experiment's directory stays unmade
    # The lock first: a bmx run that holds it may not have written plan.csv yet.
    with experiment_lock(exp, "bmx rerun", args.spec, args.stop_orphan) as lock:
        if not (exp / layout.PLAN).is_file():
            raise _no_plan(exp, args.spec)
        picks = select_reruns(exp, spec.factor_names, args.failed, args.where)
        if not picks:
            print("bmx: no run matches; nothing to re-run")
            return 0
        reason = "failed" if args.failed and not args.where else f"where {args.where}" if not args.failed \
            else f"failed or where {args.where}"
        rnd = append_round(exp, picks, reason)
        print(f"bmx: re-run round {rnd}: {len(picks)} run(s) as new attempts")
        (exp / layout.LOGS_DIR).mkdir(parents=True, exist_ok=True)
        return execute(args, spec, proj, exp, lock)


def cmd_report(args: argparse.Namespace) -> int:
    from benchmatrix.execute.collect import collect
    from benchmatrix.spec.load import load_spec

    proj = project_dir()
    spec = load_spec(args.spec)
    exp = layout.exp_dir_of(proj, spec)
    plan_path = exp / layout.PLAN
    if not plan_path.is_file():
        raise _no_plan(exp, args.spec, " (or 'bmx plan')")
    # Whatever runs exist now: the tables from the records, the reports from the tables.
    collect(args.spec, proj, plan_path, template_dir=args.templates)
    from benchmatrix.report.terminal import print_findings, read_findings

    if args.json:
        print(json.dumps(read_findings(exp), indent=2))
    else:
        print_findings(exp, sys.stdout, args.color)
    return 0


def cmd_campaigns(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.store import campaign_rows, campaigns_table
    from benchmatrix.spec.load import load_spec

    rows = campaign_rows(layout.exp_dir_of(project_dir(), load_spec(args.spec)))
    print(json.dumps(rows, indent=2) if args.json else campaigns_table(rows))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.compare import NOT_COMPARABLE, compare_main

    threshold = None
    if args.threshold is not None:
        from benchmatrix.spec.load import threshold_fraction

        try:
            threshold = threshold_fraction(args.threshold)
        except ValueError as exc:  # a usage error (exit 2), like a bad --budget
            raise PlanError(f"--threshold {str(exc).removeprefix('threshold ')}") from None
    try:
        from benchmatrix.analyze.campaign_model import parse_history

        return compare_main(args.a, args.b, project_dir(), args.spec, args.out, args.json, threshold,
                            args.fail_on_inconclusive, color=args.color, history=parse_history(args.history))
    except BenchmatrixError as exc:
        # A CI job reads 1 as "worse": whatever else stops a comparison is a usage error
        # (2) unless it says the campaigns cannot be compared (3).
        exc.exit_code = exc.exit_code if exc.exit_code == NOT_COMPARABLE else 2
        raise


def cmd_export(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.export import export

    path = export(args.spec, project_dir(), args.format, args.out, make_parents=args.mkdir,
                  campaign_ref=args.campaign)
    if path is not None:
        print(json.dumps({"format": args.format, "path": str(path)}) if args.json else f"export: {path}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.publish import experiment_history
    from benchmatrix.report.terminal import history_text, use_color
    from benchmatrix.spec.load import load_spec

    pages, history = experiment_history(layout.exp_dir_of(project_dir(), load_spec(args.spec)))
    names = [p.campaign.name for p in pages]
    table = None if history is None else history.steps
    steps = [] if table is None else table.astype(object).where(table.notna(), None).to_dict("records")
    if args.json:
        print(json.dumps({"campaigns": names, "steps": steps}, indent=2, default=str))
    else:
        print(history_text(names, steps, use_color(sys.stdout, args.color)))
    return 0


def cmd_time(args: argparse.Namespace) -> int:
    """``bmx time CMD...``: write the spec that times the commands on localhost (kept for the
    user to extend), run it as any campaign and print its answer."""
    from benchmatrix.files import atomic_write
    from benchmatrix.spec.time_spec import TimeOptions, time_spec_name, time_spec_text, timer_floor_kib

    proj = project_dir()
    options = TimeOptions(args.runs, args.warmup, args.timeout, args.inventory)
    name = args.name or time_spec_name(args.commands, options)
    path = Path(args.spec) if args.spec else proj / "config" / "experiments" / f"{name}.yaml"
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    text = time_spec_text(args.commands, options, name=name, path=shown)
    if path.exists() and path.read_text(errors="replace") != text:
        raise BenchmatrixError(f"{shown}: exists and is not the spec this bmx time writes; run it with "
                               f"'bmx run {shown}', or give --spec PATH (or --name) for a new one")
    if path.exists():
        print(f"bmx: spec {shown} (written by an earlier bmx time; each call measures a new campaign)", flush=True)
    else:
        atomic_write(path, text)
        print(f"bmx: wrote {shown} (an ordinary spec: keep it, extend it, run it again with 'bmx run {shown}')",
              flush=True)
    run = ["run", str(path)]
    label = args.campaign or _time_label(proj, path)
    if label:
        run += ["--campaign", label]
    code = cmd_run(build_parser().parse_args(run))
    floor = timer_floor_kib()
    if floor is not None:
        print(f"bmx: max_rss_kib reads at least {floor / 1024:.1f} MiB on this host ('true' does): the timer's "
              "own memory until the command starts counts, so a smaller command shows that floor "
              "(docs/workloads.md, \"Timed by bmx\")")
    return code


def _time_label(proj: Path, path: Path) -> str | None:
    """A new campaign's label when the experiment's current campaign is complete (each
    ``bmx time`` measures again; the earlier campaigns are kept), else None."""
    import time

    from benchmatrix.results.status import campaign_status
    from benchmatrix.spec.load import load_spec

    spec = load_spec(path)
    exp = layout.exp_dir_of(proj, spec)
    if not (exp / layout.PLAN).is_file() or campaign_status(exp, spec.factor_names)["totals"]["pending"]:
        return None
    return time.strftime("time-%Y%m%d-%H%M%S", time.gmtime())


def cmd_publish(args: argparse.Namespace) -> int:
    from benchmatrix.campaigns.publish import publish

    # Like every other command, the results of the project bmx runs in (BMX_PROJECT_DIR).
    results = args.results if args.results is not None else project_dir() / layout.RESULTS_DIR
    counts = publish(results, args.to, replace=args.replace,
                     say=lambda line: print(f"publish: {line}", file=sys.stderr))
    print(f"publish: {counts['experiments']} experiment(s), {counts['campaigns']} campaign(s), "
          f"{counts['steps']} step(s) in histories: {Path(args.to) / 'index.html'}")
    return 0


# ---------------------------------------------------------------- parser

def _output_options(sp: argparse.ArgumentParser, json_help: str) -> None:
    """``--json`` and ``--color`` of a command that prints findings."""
    sp.add_argument("--json", action="store_true", help=json_help)
    sp.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                    help="colour the verdicts: auto (default) on a terminal unless NO_COLOR is set")


def build_parser() -> argparse.ArgumentParser:
    import shtab

    p = argparse.ArgumentParser(
        prog="bmx", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="benchmatrix: run a YAML matrix of benchmark configurations on real hosts, "
                    "in a randomized order, and report the results honestly.",
        epilog="example:\n  bmx validate config/experiments/quickstart.yaml\n"
               "  bmx plan config/experiments/quickstart.yaml\n"
               "  bmx run config/experiments/quickstart.yaml\n"
               "  bmx report config/experiments/quickstart.yaml")
    p.add_argument("--version", action="version", version=f"benchmatrix {__version__}")
    # The completion script is generated from this parser, so it never lags behind it.
    shtab.add_argument_to(p, ["--print-completion"], help="print the completion script of a shell and exit, e.g. "
                          "eval \"$(bmx --print-completion bash)\"")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_commands(sub)
    _add_campaign_commands(sub)
    _add_time_command(sub)
    return p


def _spec_command(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand whose first argument is an experiment spec."""
    import shtab

    sp = sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("spec", metavar="SPEC", help="experiment spec (YAML), e.g. config/experiments/quickstart.yaml"
                    ).complete = shtab.FILE  # type: ignore[attr-defined]
    return sp


def _add_run_commands(sub: Any) -> None:
    """The commands of one experiment's life: validate, plan, run, report, status, restore, check, rerun."""

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return _spec_command(sub, name, help_text)

    sp = add("validate", "check a spec: schema and semantic checks, errors as FILE:LINE: message")
    sp.add_argument("--json", action="store_true", help="print the figures as JSON")
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
    sp.add_argument("--until-decided", action="store_true",
                    help="adaptive replication: after each round, add runs to the cells of undecided comparisons "
                         "until every primary comparison is decided (replicates: {min, max, until: decided}; "
                         "docs/spec.md)")
    sp.add_argument("--budget", metavar="TIME", help="with --until-decided: start no round that would pass this "
                    "much time, e.g. 2h or 90m")
    sp.add_argument("--against", metavar="A", help="with --until-decided: the CI gate: add runs to this campaign's "
                    "cells until each one's comparison with campaign A (as bmx compare names it) is decided; exit "
                    "1 when one is worse (docs/campaigns.md, CI gate)")
    sp.add_argument("--campaign", metavar="LABEL", help="start a new campaign with this label (the finished "
                    "one is kept in results/NAME/campaigns/ID/; docs/campaigns.md)")
    sp.add_argument("--stop-orphan", action="store_true",
                    help="first stop a Snakemake left running by a killed bmx that still locks the experiment")
    _keep_going_option(sp)
    _output_options(sp, "print the run's summary and findings as JSON (progress goes to stderr)")
    sp = add("report", "collect whatever runs exist into runs.csv and summary.csv and render report.html and report.md")
    sp.add_argument("--templates", type=Path, default=None, metavar="DIR",
                    help="directory of Jinja2 templates overriding the report's (see docs/report.md)")
    _output_options(sp, "print the findings and warnings as JSON (findings.json)")
    sp = add("status", "runs done, failed and pending per cell; exit 0 all ok, 1 some failed, 3 some pending")
    sp.add_argument("--json", action="store_true", help="print the status as JSON")
    add("restore", "put every host's knobs back to the state before the campaign's first change")
    sp = add("check", "preflight: every host's knobs (current value, can each planned level be set), the workload "
             "tool and the campaign's estimated time; exit 1 with one line per blocker")
    sp.add_argument("--json", action="store_true", help="print every host's findings and the estimate as JSON "
                    "(the exit status is the same)")
    sp = add("rerun", "re-execute failed or selected runs as new attempts (earlier attempts are kept)")
    sp.add_argument("--failed", action="store_true", help="every run whose newest attempt failed, timed out, "
                    "was unreachable or invalid")
    sp.add_argument("--where", metavar="EXPR", help="runs selected by an expression over factors, metrics, status, "
                    "host, run_id, cell_id, attempt, replicate: comparisons, in, and/or/not, "
                    "e.g. \"bs == '4k' and status == 'ok'\"")
    sp.add_argument("--cores", type=int, default=max(os.cpu_count() or 1, 1), help="Snakemake jobs at once")
    sp.add_argument("--batch-max-runs", type=int, default=0, help="override config.yaml's batch_max_runs")
    sp.add_argument("--hosts-parallel", type=int, default=0, metavar="N",
                    help="at most N hosts busy at once (default: all)")
    sp.add_argument("--stop-orphan", action="store_true",
                    help="first stop a Snakemake left running by a killed bmx that still locks the experiment")
    _keep_going_option(sp)


def _keep_going_option(sp: argparse.ArgumentParser) -> None:
    """``--keep-going-on-failures`` of bmx run and rerun (docs/failures.md, "A doomed campaign")."""
    sp.add_argument("--keep-going-on-failures", action="store_true",
                    help="run on when the first runs all fail the same way (by default bmx stops the campaign "
                         "once 5 runs over 2 or more cells failed for one reason and none was ok)")


def _add_campaign_commands(sub: Any) -> None:
    """The commands over an experiment's campaigns: export, history, campaigns, compare, publish."""

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return _spec_command(sub, name, help_text)

    sp = add("export", "write the campaign as Parquet or CSV (the long table), Bencher Metric Format or pyperf JSON")
    sp.add_argument("--format", required=True, metavar="FORMAT", help="bmf, pyperf, csv or parquet (docs/export.md)")
    sp.add_argument("--out", metavar="FILE", help="output file; - for stdout (default: results/NAME/runs_long.parquet, "
                    "runs_long.csv, bmf.json or pyperf.json); an existing FILE must be a regular file")
    sp.add_argument("--mkdir", action="store_true", help="create --out's missing directories (default: an error)")
    sp.add_argument("--campaign", metavar="ID", help="export a kept campaign: id, unique id prefix, label or "
                    "directory (default: the current one; bmx campaigns lists them)")
    sp.add_argument("--json", action="store_true", help="print the file written as JSON")
    sp = add("history", "the experiment's history across its campaigns: the steps detected, largest first")
    _output_options(sp, "print the campaigns and every series' step row (steps.csv) as JSON")
    sp = add("campaigns", "list the experiment's campaigns: id, label, start, end, hosts, runs ok/failed")
    sp.add_argument("--json", action="store_true", help="print the campaigns as JSON")
    sp = sub.add_parser("compare", help=HELP_COMPARE, description=HELP_COMPARE, epilog=EXAMPLES["compare"],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("a", metavar="A", help="the baseline campaign: id, unique id prefix, label or directory")
    sp.add_argument("b", metavar="B", help="the campaign compared with A")
    sp.add_argument("--spec", metavar="SPEC", help="resolve A and B among this experiment's campaigns")
    sp.add_argument("--out", type=Path, metavar="DIR", help="where to write compare.csv, compare.md and "
                    "compare.html (default results/NAME/compare/A_vs_B/)")
    _output_options(sp, "print the comparison as JSON, with every row of compare.csv")
    sp.add_argument("--threshold", metavar="PCT", help="the practical threshold for every metric, e.g. 5%% "
                    "(default: the spec's report.threshold, else 5%%): changes inside it are 'equivalent'; without "
                    "earlier campaigns to estimate their variation, better/worse need the interval beyond it")
    sp.add_argument("--fail-on-inconclusive", action="store_true",
                    help="exit 1 also when a comparison is inconclusive (a CI gate that wants an answer)")
    sp.add_argument("--history", default="auto", metavar="auto|none|N|LABEL,...",
                    help="which earlier campaigns estimate how much campaigns vary: auto (default: those with A's "
                    "spec digest and host state, on A's side of the last step), none (report.campaign_sd alone), "
                    "the N most recent comparable ones, or campaigns by label or id")
    sp = sub.add_parser("publish", help="write every experiment's campaigns, history and downloads as a static site",
                        description="write every experiment's campaigns, history and downloads as a static site "
                                    "(no server, no external request; docs/publish.md)",
                        epilog=EXAMPLES["publish"], formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("--to", required=True, metavar="DIR", help="site directory: new, empty, or an earlier site "
                    "(replaced whole)")
    sp.add_argument("--results", type=Path, default=None, metavar="DIR",
                    help="results directory (default: the project's results/)")
    sp.add_argument("--replace", action="store_true", help="also delete files in --to that bmx publish did not "
                    "write (default: such files stop the publish)")


def _add_time_command(sub: Any) -> None:
    """``bmx time CMD...``: the one-line entry for timing commands."""
    help_text = ("time commands on this machine: writes the spec it runs (config/experiments/time_*.yaml), runs it "
                 "as a campaign and compares each command with the first on wall time, CPU and peak memory")
    sp = sub.add_parser("time", help=help_text, description=help_text, epilog=EXAMPLES["time"],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("commands", nargs="+", metavar="COMMAND", help="a command line, split into arguments as a "
                    "shell splits words and run without a shell (for a pipeline: 'sh -c \"a | b\"')")
    sp.add_argument("-n", "--runs", type=int, default=10, metavar="N", help="measured runs per command (default 10)")
    sp.add_argument("--warmup", type=int, default=1, metavar="N",
                    help="unmeasured runs of each command first (default 1)")
    sp.add_argument("--timeout", type=int, default=600, metavar="S", help="seconds a run may take (default 600)")
    sp.add_argument("--name", metavar="NAME", help="the experiment's name (default time_ and a digest of the "
                    "commands and options)")
    sp.add_argument("--spec", metavar="PATH", help="where to write the spec (default "
                    "config/experiments/NAME.yaml)")
    sp.add_argument("--campaign", metavar="LABEL", help="the campaign's label (default: a new one named by the "
                    "time when the experiment's last campaign is complete)")
    sp.add_argument("--inventory", default="config/inventory/local.yml", metavar="PATH",
                    help="the inventory whose localhost runs the commands (default config/inventory/local.yml)")


HELP_COMPARE = ("compare two campaigns cell by cell: relative change B vs A with CIs (ratios of geometric means for "
                "positive metrics), Holm-adjusted verdicts better/worse/equivalent/inconclusive; exit 0 nothing "
                "worse, 1 something worse (or inconclusive with --fail-on-inconclusive), 2 usage error, "
                "3 not comparable")

COMMANDS = {"validate": cmd_validate, "plan": cmd_plan, "run": cmd_run, "report": cmd_report,
            "status": cmd_status, "rerun": cmd_rerun, "restore": cmd_restore, "check": cmd_check,
            "export": cmd_export, "campaigns": cmd_campaigns, "compare": cmd_compare, "publish": cmd_publish,
            "history": cmd_history, "time": cmd_time}


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
        from benchmatrix.errors import describe_os_error

        print(f"bmx: {describe_os_error(exc, Path.cwd())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
