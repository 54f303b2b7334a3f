"""The workflow as ``bmx run`` starts it: ``snakemake.api`` in a process of its own.

``python -m benchmatrix.execute.snakemake_run TARGET --snakefile F --directory D --cores N
[--nolock] [--resources NAME=INT ...] [--forcerun RULE ...] [--config KEY=VALUE ...]``: the
options ``bmx run`` gave the ``snakemake`` command, with the command's meaning (its
defaults: ``--latency-wait 5``, the ILP scheduler, every rerun trigger), and the same
output on the same stream, which ``bmx run`` reads for its progress lines.

Why not the command (issue 34, item 4): ``snakemake``'s command line builds a parser of
every option of every installed plugin and imports its whole CLI (about 0.4 CPU-s of each
campaign), and its default job rate limit (``--max-jobs-per-timespan 100/1s``) leaves a
one-second timer that the process waits for at its exit when the last job was short; and
the process ends without the interpreter's teardown (:func:`exit_now`). A plain
``snakemake --config spec=...`` still runs the same Snakefile.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from pathlib import Path
from typing import Any, NoReturn


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmatrix.execute.snakemake_run", description=__doc__)
    p.add_argument("targets", nargs="*", help="files or rules to make")
    p.add_argument("--snakefile", type=Path, required=True, help="the Snakefile")
    p.add_argument("--directory", type=Path, required=True, help="the project directory (the workflow's workdir)")
    p.add_argument("--cores", type=int, required=True, help="jobs at once on this machine")
    p.add_argument("--nolock", action="store_true", help="no Snakemake lock (bmx holds the experiment's)")
    p.add_argument("--resources", nargs="+", action="extend", default=[], metavar="NAME=INT",
                   help="resources that bound the jobs at once, as snakemake --resources")
    p.add_argument("--forcerun", nargs="+", action="extend", default=[], metavar="RULE",
                   help="rules whose jobs run again, as snakemake --forcerun")
    p.add_argument("--config", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="workflow config values, as snakemake --config (an int or a float where it reads as one)")
    return p


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _pairs(items: list[str], what: str) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"snakemake_run: --{what} takes KEY=VALUE, not {item!r}")
        out[key] = _value(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the workflow; 0 when every job succeeded, 1 otherwise (as ``snakemake``)."""
    args = _parser().parse_args(argv)
    resources = _pairs(args.resources, "resources")
    config = _pairs(args.config, "config")
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        ExecutionSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
        WorkflowSettings,
    )

    with SnakemakeApi(OutputSettings()) as api:
        try:
            workflow = api.workflow(
                resource_settings=ResourceSettings(cores=args.cores, resources=resources),
                config_settings=ConfigSettings(config=config, config_args=args.config),
                storage_settings=StorageSettings(),
                workflow_settings=WorkflowSettings(),
                snakefile=args.snakefile, workdir=args.directory)
            dag = workflow.dag(dag_settings=DAGSettings(targets=set(args.targets), forcerun=set(args.forcerun)))
            # snakemake's command-line defaults where the API's differ: a job's outputs may take
            # 5 s to appear on a network file system; "standalone" lets Snakemake set up this process.
            dag.execute_workflow(executor="local",
                                 execution_settings=ExecutionSettings(lock=not args.nolock, latency_wait=5,
                                                                      standalone=True))
        except Exception as exc:  # noqa: BLE001 (as snakemake's command: the error printed, exit 1)
            api.print_exception(exc)
            return 1
    return 0


def exit_now(status: int) -> NoReturn:
    """End the process with ``status`` after its exit handlers, without the interpreter's teardown.

    Taking apart Snakemake's thousand modules and their objects took about 0.3 s after
    the last job, on every campaign's critical path (bmx waits for this process). Nothing
    of it reaches a file: the exit handlers (logging's flush and close, finalizers that
    remove temporary files) run first, then the standard streams are flushed.
    """
    atexit._run_exitfuncs()  # noqa: SLF001 (what the interpreter would run at its exit)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stream: nothing more to say on it
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
