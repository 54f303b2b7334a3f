"""The work behind each Snakemake rule (scripts/*.py are thin entry points).

Each function takes plain paths, so it can be unit-tested without Snakemake, and
raises typed errors; the ``*_main`` wrappers print the one-line message and exit 1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import benchmatrix
from benchmatrix.ansible import run_playbook
from benchmatrix.design import PlannedRun, make_plan, plan_csv_text, read_plan
from benchmatrix.errors import AnsibleError, BenchmatrixError, Interrupted, ParseError, PlanError
from benchmatrix.hosts import resolve_hosts
from benchmatrix.results import atomic_write, load_records, record_path, run_dir, runs_rows, write_record
from benchmatrix.spec import Spec, load_spec, render_vars

PACKAGE_DIR = Path(benchmatrix.__file__).resolve().parent


def exp_dir_of(project_dir: Path, spec: Spec) -> Path:
    """``results/NAME`` of an experiment."""
    return (Path(project_dir) / "results" / spec.name).resolve()


def iso(ts: float | None) -> str | None:
    """Epoch seconds -> ISO 8601 UTC with microseconds."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="microseconds")


# ---------------------------------------------------------------- plan

def plan(spec_path: str, project_dir: Path, out: Path, batch_max_runs: int) -> list[PlannedRun]:
    """Expand and order the runs of every host; write plan.csv atomically."""
    spec = load_spec(spec_path)
    hosts = resolve_hosts(spec.inventory_path(project_dir), spec.data["hosts"])
    runs = make_plan(spec, hosts, batch_max_runs)
    atomic_write(out, plan_csv_text(runs, spec.factor_names))
    return runs


# ---------------------------------------------------------------- hosts

def prepare_host(spec_path: str, project_dir: Path, host: str, out: Path, log: Path) -> dict[str, Any]:
    """Gather the host's facts and install the workload tool; write facts.json."""
    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    result = run_playbook(
        "prepare_host.yml", project_dir=Path(project_dir) / "playbooks",
        inventory=spec.inventory_path(project_dir), host=host,
        extravars={"bmx_host": host, "bmx_workload_role": spec.workload["role"], "bmx_experiment": spec.name},
        data_dir=exp / "ansible" / f"prepare-{host}", log=exp / "logs" / "ansible" / f"prepare-{host}.log")
    res = result.task_result("Report host facts to benchmatrix", host) or {}
    facts = dict(res.get("msg") or {})
    facts["inventory_name"] = host
    facts["gathered_at"] = iso(time.time())
    atomic_write(out, json.dumps(facts, indent=1) + "\n")
    return facts


# ---------------------------------------------------------------- batches

def _cells_by_id(spec: Spec) -> dict[str, dict[str, Any]]:
    cells = {c.cell_id: c.factors for c in spec.cells}
    ctl = spec.control_cell()
    if ctl is not None:
        cells[ctl.cell_id] = ctl.factors
    return cells


def _parser_for(role: str) -> Callable[[str], Any]:
    from benchmatrix.parsers import PARSERS

    try:
        return PARSERS[role]
    except KeyError:
        raise BenchmatrixError(f"workload role {role} has no parser") from None


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return ""
    return lines[-1][:300] if lines else ""


def _judge(spec: Spec, res: dict[str, Any], stdout: str, stderr_path: Path,
           parse: Callable[[str], Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """Status, reason, metrics and per-job metrics of one finished run."""
    outcome = res.get("outcome")
    if outcome == "timeout":
        return "timeout", res.get("error") or "timeout", {}, {}
    if outcome != "exited":
        return "failed", res.get("error") or f"runner outcome {outcome}", {}, {}
    want = spec.workload["success"].get("exit_code", 0)
    if res.get("exit_code") != want:
        tail = _last_line(stderr_path)
        return "failed", f"exit status {res.get('exit_code')} (expected {want})" + (f": {tail}" if tail else ""), {}, {}
    try:
        parsed = parse(stdout)
    except ParseError as exc:
        return "failed", f"parse error: {exc}", {}, {}
    metrics = {k: {"value": v, "unit": u} for k, (v, u) in parsed.metrics.items()}
    jobs = {j: {k: {"value": v, "unit": u} for k, (v, u) in m.items()} for j, m in parsed.jobs.items()}
    return "ok", "", metrics, {"jobs": jobs, **(parsed.extra or {})}


def run_batch(spec_path: str, project_dir: Path, plan_path: Path, batch: str, marker: Path,
              log: Path, facts_path: Path | None = None) -> dict[str, Any]:
    """Execute one batch through Ansible and write a record.json per finished run.

    Runs that already have a record are left out; if none is left, no Ansible call
    is made. The marker (the Snakemake output) is written last.
    """
    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    runs, _ = read_plan(plan_path)
    mine = [r for r in runs if r.batch == batch]
    if not mine:
        raise PlanError(f"{plan_path}: no runs in batch {batch}; re-plan with 'bmx plan'")
    host = mine[0].host
    todo = [r for r in mine if not record_path(exp, r.run_id, r.attempt).is_file()]
    summary: dict[str, Any] = {"batch": batch, "host": host, "runs": len(mine), "executed": 0,
                               "already_done": len(mine) - len(todo)}
    if todo:
        cells = _cells_by_id(spec)
        facts = json.loads(Path(facts_path).read_text()) if facts_path and Path(facts_path).is_file() else {}
        wl = spec.workload
        bmx_runs = []
        for r in todo:
            if r.cell_id not in cells:
                raise PlanError(f"{plan_path}: cell {r.cell_id} of run {r.run_id} is not in the spec; re-plan")
            ctx = {**cells[r.cell_id], "experiment": spec.name, "host": host, "run_id": r.run_id,
                   "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup}
            bmx_runs.append({"run_id": r.run_id, "attempt": r.attempt, "seq": r.seq,
                             "timeout": wl["timeout"], "before_run": spec.data["before_run"],
                             "vars": render_vars(wl["vars"], ctx)})
        staging = exp / "staging" / batch
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        t0 = time.time()
        try:
            result = run_playbook(
                "run_batch.yml", project_dir=Path(project_dir) / "playbooks",
                inventory=spec.inventory_path(project_dir), host=host,
                extravars={"bmx_host": host, "bmx_workload_role": wl["role"], "bmx_experiment": spec.name,
                           "bmx_runs": bmx_runs, "batch_runner_source": str(PACKAGE_DIR / "batch_runner.py"),
                           "batch_runner_batch": batch, "batch_runner_fetch_dir": str(staging),
                           "batch_runner_timeout": int(sum(wl["timeout"] + 30 for _ in todo) + 60)},
                data_dir=exp / "ansible" / batch, log=exp / "logs" / "ansible" / f"{batch}.log")
        except (KeyboardInterrupt, Interrupted):
            stop_runner(spec, project_dir, host)
            raise Interrupted(f"batch {batch} interrupted; the runner on {host} was stopped, "
                              "its finished runs are kept there for the next 'bmx run'") from None
        archive = staging / f"{batch}.tar.gz"
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        parse = _parser_for(wl["role"])
        workload_total = 0.0
        results = {}
        for r in todo:
            src = staging / "runs" / r.run_id / str(r.attempt)
            if (src / "result.json").is_file():
                results[r.run_id] = json.loads((src / "result.json").read_text())
                workload_total += results[r.run_id].get("duration_s") or 0.0
        overhead_share = max(result.seconds - workload_total, 0.0) / max(len(results), 1)
        for r in todo:
            res = results.get(r.run_id)
            if res is None:
                continue
            src = staging / "runs" / r.run_id / str(r.attempt)
            dest = run_dir(exp, r.run_id, r.attempt)
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("stdout", "stderr"):
                shutil.copyfile(src / name, dest / name)
            stdout = (src / "stdout").read_text(errors="replace")
            p0 = time.monotonic()
            status, reason, metrics, details = _judge(spec, res, stdout, src / "stderr", parse)
            parse_s = time.monotonic() - p0
            record = {
                "schema_version": benchmatrix.RECORD_SCHEMA_VERSION,
                "benchmatrix_version": benchmatrix.__version__,
                "experiment": spec.name, "spec_digest": spec.digest,
                "run_id": r.run_id, "attempt": r.attempt, "seq": r.seq, "host": host,
                "cell_id": r.cell_id, "replicate": r.replicate, "warmup": r.warmup, "control": r.control,
                "visit": r.visit, "batch": batch, "factors": cells[r.cell_id],
                "status": status, "reason": reason, "exit_code": res.get("exit_code"),
                "started_at": iso(res.get("started_at")), "ended_at": iso(res.get("ended_at")),
                "duration_s": res.get("duration_s"),
                "phases": {"before_run_s": sum(a["seconds"] for a in res.get("before_run", [])),
                           "workload_s": res.get("duration_s"), "parse_s": round(parse_s, 6),
                           "batch_overhead_share_s": round(overhead_share, 6)},
                "workload": {"role": wl["role"], "argv": res.get("argv"), "before_run": res.get("before_run")},
                "knobs": {},
                "host_facts": facts,
                "metrics": metrics,
                "details": details,
                "raw": {"stdout": str((dest / "stdout").relative_to(exp)),
                        "stderr": str((dest / "stderr").relative_to(exp))},
                "batch_started_at": iso(t0),
            }
            write_record(exp, record)
            summary["executed"] += 1
        shutil.rmtree(staging, ignore_errors=True)
    atomic_write(marker, json.dumps(summary) + "\n")
    return summary


def stop_runner(spec: Spec, project_dir: Path, host: str) -> None:
    """End the batch runner and its workload on ``host`` (after an interrupt).

    ansible-runner starts ansible-playbook in a session of its own, so a Ctrl-C on
    the controller never reaches the host: the runner is stopped explicitly.
    """
    exp = exp_dir_of(project_dir, spec)
    try:
        run_playbook("stop_batch.yml", project_dir=Path(project_dir) / "playbooks",
                     inventory=spec.inventory_path(project_dir), host=host,
                     extravars={"bmx_host": host, "bmx_experiment": spec.name},
                     data_dir=exp / "ansible" / f"stop-{host}", log=exp / "logs" / "ansible" / f"stop-{host}.log",
                     timeout=120)
    except AnsibleError as exc:
        sys.stderr.write(f"benchmatrix: could not stop the runner on {host}: {exc}\n")


# ---------------------------------------------------------------- collect and report

def collect(spec_path: str, project_dir: Path, plan_path: Path, runs_csv: Path, summary_csv: Path) -> None:
    """Write runs.csv (every attempt) and summary.csv from the records."""
    import pandas as pd

    from benchmatrix.stats import summarize

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    runs, _ = read_plan(plan_path)
    rows, units = runs_rows(load_records(exp, runs), spec.factor_names)
    from benchmatrix.results import RUN_COLUMNS

    columns = RUN_COLUMNS + spec.factor_names + sorted(units)
    table = pd.DataFrame(rows, columns=columns)
    atomic_write(runs_csv, table.to_csv(index=False))
    atomic_write(summary_csv, summarize(table, spec.factor_names, units).to_csv(index=False))


def load_tables(exp: Path):
    """plan, runs and summary tables of an experiment directory (empty when missing)."""
    import pandas as pd

    def read(name: str) -> pd.DataFrame:
        path = exp / name
        return pd.read_csv(path, keep_default_na=True) if path.is_file() and path.stat().st_size else pd.DataFrame()

    return read("plan.csv"), read("runs.csv"), read("summary.csv")


def report(spec_path: str, project_dir: Path) -> tuple[Path, Path]:
    """Render report.html and report.md from the experiment's result files."""
    from benchmatrix.report import render_report

    spec = load_spec(spec_path)
    exp = exp_dir_of(project_dir, spec)
    plan_df, runs_df, summary_df = load_tables(exp)
    facts = {}
    for path in sorted((exp / "hosts").glob("*/facts.json")):
        facts[path.parent.name] = json.loads(path.read_text())
    return render_report(spec, plan_df, runs_df, summary_df, facts, exp)


# ---------------------------------------------------------------- entry points

def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _main(fn: Callable[[argparse.Namespace], Any], parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    # SIGTERM (Snakemake cancelling a job) cleans up like Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        fn(args)
    except KeyboardInterrupt:
        sys.stderr.write("benchmatrix: interrupted\n")
        return 130
    except BenchmatrixError as exc:
        sys.stderr.write(f"benchmatrix: {exc}\n")
        return exc.exit_code if isinstance(exc, Interrupted) else 1
    return 0


def entry(task: str, argv: list[str]) -> int:
    """Command-line entry for ``scripts/TASK.py`` (used by the Snakemake rules)."""
    p = argparse.ArgumentParser(prog=f"scripts/{task}.py")
    p.add_argument("--spec", required=True)
    p.add_argument("--project-dir", default=".", type=Path)
    if task == "plan":
        p.add_argument("--out", required=True, type=Path)
        p.add_argument("--batch-max-runs", type=int, default=50)
        return _main(lambda a: plan(a.spec, a.project_dir, a.out, a.batch_max_runs), p, argv)
    if task == "prepare_host":
        p.add_argument("--host", required=True)
        p.add_argument("--out", required=True, type=Path)
        p.add_argument("--log", required=True, type=Path)
        return _main(lambda a: prepare_host(a.spec, a.project_dir, a.host, a.out, a.log), p, argv)
    if task == "run_batch":
        p.add_argument("--plan", required=True, type=Path)
        p.add_argument("--batch", required=True)
        p.add_argument("--marker", required=True, type=Path)
        p.add_argument("--facts", type=Path)
        p.add_argument("--log", required=True, type=Path)
        return _main(lambda a: run_batch(a.spec, a.project_dir, a.plan, a.batch, a.marker, a.log, a.facts), p, argv)
    if task == "collect":
        p.add_argument("--plan", required=True, type=Path)
        p.add_argument("--runs", required=True, type=Path)
        p.add_argument("--summary", required=True, type=Path)
        return _main(lambda a: collect(a.spec, a.project_dir, a.plan, a.runs, a.summary), p, argv)
    if task == "report":
        return _main(lambda a: report(a.spec, a.project_dir), p, argv)
    raise SystemExit(f"unknown task {task}")
