"""Helpers the Snakefile calls: spec validation at load time and input functions.

The Snakefile stays a table of contents; what needs logic lives here, unit-tested.
Input functions read plan.csv only after the ``plan`` checkpoint has produced it.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.errors import SpecErrors
from benchmatrix.plan.design import batches
from benchmatrix.spec.load import Spec, load_spec

#: A batch id as written by benchmatrix.plan.design.assign_batches.
BATCH_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*-b[0-9][0-9][0-9][0-9]+-[0-9a-f]+"


def spec_from_config(config: dict[str, Any]) -> Spec:
    """Load and validate the spec named by ``config['spec']``; exit 2 on errors.

    Errors are printed one per line as ``FILE:LINE: message``, never as a traceback.
    """
    path = config.get("spec")
    if not path:
        sys.stderr.write("benchmatrix: no experiment spec given; use --config spec=config/experiments/NAME.yaml\n")
        raise SystemExit(2)
    try:
        return load_spec(path)
    except SpecErrors as exc:
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(2) from None


def name_pattern(spec: Spec) -> str:
    """Wildcard constraint matching exactly this experiment's name."""
    return re.escape(spec.name)


class InputFunctions:
    """Input functions of the execution rules, bound to the workflow's checkpoints."""

    def __init__(self, checkpoints: Any, spec: Spec):
        self._checkpoints = checkpoints
        self._spec = spec

    def plan_digest(self, wildcards: Any) -> str:
        """What the plan depends on: the spec's content and the re-run requests.

        A param of the plan rule, so that Snakemake (rerun trigger ``params``)
        re-plans exactly when one of them changes.
        """
        from benchmatrix.plan.reruns import reruns_digest

        return f"{self._spec.digest}-{reruns_digest(Path('results') / wildcards.experiment)}"

    def _plan(self, wildcards: Any) -> str:
        return self._checkpoints.plan.get(experiment=wildcards.experiment).output[0]

    def plan_path(self, wildcards: Any) -> str:
        """plan.csv, once the plan checkpoint has written it."""
        return self._plan(wildcards)

    def previous_marker(self, wildcards: Any) -> list[str]:
        """The marker of the same host's previous batch: chains each host's batches in order."""
        order, host_of = batches(self._plan(wildcards))
        host = host_of[wildcards.batch]
        mine = [b for b in order if host_of[b] == host]
        i = mine.index(wildcards.batch)
        return [] if i == 0 else [f"results/{wildcards.experiment}/batches/{mine[i - 1]}.done"]

    def host_of(self, wildcards: Any) -> str:
        """The batch's host (a params function)."""
        _, host_of = batches(self._plan(wildcards))
        return host_of[wildcards.batch]

    def last_marker(self, wildcards: Any) -> str:
        """The marker of the host's last batch: its baseline is restored after it."""
        order, host_of = batches(self._plan(wildcards))
        mine = [b for b in order if host_of[b] == wildcards.host]
        return f"results/{wildcards.experiment}/batches/{mine[-1]}.done"

    def restore_markers(self, wildcards: Any) -> list[str]:
        """The restore marker of every host that may have something to put back (the
        collect rule waits for those restores; a host with no knob and no workload
        clean-up gets no restore job, :func:`benchmatrix.execute.restore.restore_needed`)."""
        from benchmatrix.execute.restore import restore_needed

        _, host_of = batches(self._plan(wildcards))
        exp = Path(layout.RESULTS_DIR) / wildcards.experiment
        return [f"results/{wildcards.experiment}/hosts/{h}/restored.json" for h in sorted(set(host_of.values()))
                if restore_needed(self._spec, exp, h)]

    def all_markers(self, wildcards: Any) -> list[str]:
        """Every batch marker of the plan (the collect rule's input)."""
        order, _ = batches(self._plan(wildcards))
        return [f"results/{wildcards.experiment}/batches/{b}.done" for b in order]


def on_error(spec: Spec) -> None:
    """The Snakefile's ``onerror``: put back every host a failed workflow left reconfigured.

    Only a workflow holding the experiment lock does: a refused one must never
    restore hosts under the campaign that holds it.
    """
    from benchmatrix.execute.restore import restore_touched_hosts

    if _HELD or _inherited_lock(spec):
        restore_touched_hosts(spec, Path.cwd())


_HELD: list[Any] = []  # the lock a plain `snakemake` takes, held until the process ends


def _inherited_lock(spec: Spec) -> bool:
    """Whether bmx handed this Snakemake the experiment's lock (``BMX_LOCK_FD``)."""
    from benchmatrix.execute import lock

    fd = os.environ.get(lock.LOCK_FD_ENV, "")
    return fd.isdigit() and lock.is_inherited(int(fd), Path(layout.RESULTS_DIR) / spec.name / layout.LOCK)


def hold_experiment_lock(spec: Spec) -> None:
    """The Snakefile's ``onstart``: the same experiment lock as ``bmx run``.

    Under ``bmx run`` the lock is already held and inherited (``BMX_LOCK_FD``); a
    plain ``snakemake --config spec=...`` takes it here, before any job runs, and
    exits 4 with one line when another bmx or snakemake has the experiment.
    """
    from benchmatrix.errors import LockError
    from benchmatrix.execute import lock

    if _inherited_lock(spec):
        return
    try:
        exp = Path(layout.RESULTS_DIR) / spec.name
        _HELD.append(lock.acquire(exp, "snakemake", f"'bmx run {spec.path} --stop-orphan'"))
    except LockError as exc:
        sys.stderr.write(f"benchmatrix: {exc}\n")
        raise SystemExit(exc.exit_code) from None


def die_with_bmx(spec: Spec, poll_s: float = 0.5) -> None:
    """In a Snakemake started by ``bmx run``: stop when that bmx dies, even by SIGKILL.

    A watcher thread polls the parent pid. Once bmx is gone it first points this
    process's stdout and stderr at ``results/NAME/logs/snakemake.log`` (they were a
    pipe to bmx: every later write would fail with EPIPE and wedge Snakemake's
    logging), then sends SIGINT to this Snakemake's process group, which holds its
    batch jobs too: exactly what bmx forwards on Ctrl-C, so each job stops the
    runner on its host and restores it, and Snakemake exits, releasing the
    experiment lock. A no-op when not started by bmx as a group leader (a plain
    ``snakemake`` stays in the user's shell group).
    """
    parent = os.environ.get("BMX_PARENT_PID", "")
    if not parent.isdigit() or int(parent) != os.getppid() or os.getpgrp() != os.getpid():
        return
    log = Path(layout.RESULTS_DIR) / spec.name / layout.LOGS_DIR / "snakemake.log"

    def watch() -> None:
        while os.getppid() == int(parent):
            time.sleep(poll_s)
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError:
            fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        try:
            os.write(2, f"benchmatrix: bmx (pid {parent}) is gone; stopping this Snakemake and its jobs\n".encode())
        except OSError:
            pass
        os.killpg(os.getpgrp(), signal.SIGINT)

    threading.Thread(target=watch, name="bmx-parent-watch", daemon=True).start()


def params_without_pandas() -> None:
    """Let Snakemake record the jobs' params without importing pandas.

    Snakemake keeps each job's params for the ``params`` rerun trigger; to hash a pandas
    object by its content it imports pandas first, for every workflow, although the
    rules' params are strings and numbers (about 0.45 CPU-s of each Snakemake, issue 34).
    A pandas object can only exist once pandas is imported, so the check is skipped
    until then; a param that is one is still hashed by Snakemake's own code. Called by
    the Snakefile; does nothing on a Snakemake without that method.
    """
    try:
        from snakemake.persistence import PersistenceBase
    except ImportError:
        return
    original = getattr(PersistenceBase, "_serialize_param_pandas", None)
    if original is None or getattr(original, "bmx_lean", False):
        return

    def serialize(self: Any, value: Any) -> Any:
        if "pandas" not in sys.modules:
            return self._serialize_param_builtin(value)
        return original(self, value)

    serialize.bmx_lean = True  # type: ignore[attr-defined]
    PersistenceBase._serialize_param_pandas = serialize
