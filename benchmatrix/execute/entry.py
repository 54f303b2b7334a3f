"""Command-line entry of scripts/TASK.py, the thin scripts the Snakemake rules run: parse the
task's options, call its rule body, print one line on an error.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmatrix.errors import (
    BenchmatrixError,
    Interrupted,
    describe_os_error,
)
from benchmatrix.execute.lock import same_file
from benchmatrix.spec.config import DEFAULT_BATCH_MAX_RUNS, DEFAULT_BATCH_MAX_SECONDS


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
    except (BenchmatrixError, OSError) as exc:
        line = f"benchmatrix: {describe_os_error(exc) if isinstance(exc, OSError) else exc}\n"
        sys.stderr.write(line)
        if not isinstance(exc, Interrupted) and not same_file(1, 2):
            # Also on stdout, which reaches the terminal (bmx) when the job's log cannot:
            # a full disk swallows the log's last line.
            sys.stdout.write(line)
        return exc.exit_code if isinstance(exc, Interrupted) else 1
    return 0


def _plan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--batch-max-runs", type=int, default=DEFAULT_BATCH_MAX_RUNS)
    p.add_argument("--batch-max-seconds", type=float, default=DEFAULT_BATCH_MAX_SECONDS)


def _run_batch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path)
    p.add_argument("--batch", required=True)
    p.add_argument("--marker", required=True, type=Path)
    p.add_argument("--log", required=True, type=Path)


def _no_options(p: argparse.ArgumentParser) -> None:
    pass


def _restore_host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", required=True)
    p.add_argument("--out", required=True, type=Path)


def _collect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", required=True, type=Path)
    p.add_argument("--no-render", action="store_true", help="write the tables only (bench/report.py)")


# Each rule body is imported by its own task only: a job pays for the modules it uses
# (the plan job none of the batch machinery, the restore job no tables; issue 34).
def _plan(a: argparse.Namespace) -> Any:
    from benchmatrix.execute.planning import plan

    return plan(a.spec, a.project_dir, a.out, a.batch_max_runs, a.batch_max_seconds)


def _run_batch(a: argparse.Namespace) -> Any:
    from benchmatrix.execute.batch import run_batch

    return run_batch(a.spec, a.project_dir, a.plan, a.batch, a.marker, a.log)


def _restore_host(a: argparse.Namespace) -> Any:
    from benchmatrix.execute.restore import restore_host
    from benchmatrix.spec.load import load_spec

    return restore_host(load_spec(a.spec), a.project_dir, a.host, a.out)


def _collect(a: argparse.Namespace) -> Any:
    from benchmatrix.execute.collect import collect

    return collect(a.spec, a.project_dir, a.plan, render=not a.no_render)


def _report(a: argparse.Namespace) -> Any:
    from benchmatrix.execute.collect import report

    return report(a.spec, a.project_dir)


#: ``scripts/TASK.py`` -> (adds the task's options beyond ``--spec`` and ``--project-dir``,
#: calls the rule body with the parsed arguments).
TASKS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], Any]]] = {
    "plan": (_plan_options, _plan),
    "run_batch": (_run_batch_options, _run_batch),
    "restore_host": (_restore_host_options, _restore_host),
    "collect": (_collect_options, _collect),
    "report": (_no_options, _report),
}


def entry(task: str, argv: list[str]) -> int:
    """Command-line entry for ``scripts/TASK.py`` (used by the Snakemake rules)."""
    if task not in TASKS:
        raise SystemExit(f"unknown task {task}")
    options, fn = TASKS[task]
    p = argparse.ArgumentParser(prog=f"scripts/{task}.py")
    p.add_argument("--spec", required=True)
    p.add_argument("--project-dir", default=".", type=Path)
    options(p)
    return _main(fn, p, argv)
