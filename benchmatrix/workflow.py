"""Helpers the Snakefile calls: spec validation at load time and input functions.

The Snakefile stays a table of contents; what needs logic lives here, unit-tested.
Input functions read plan.csv only after the ``plan`` checkpoint has produced it.
"""

from __future__ import annotations

import csv
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmatrix.errors import SpecErrors
from benchmatrix.spec import Spec, load_spec

#: A batch id as written by benchmatrix.design.assign_batches.
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


@lru_cache(maxsize=8)
def _batches(plan_path: str, mtime_ns: int) -> tuple[list[str], dict[str, str]]:
    order: list[str] = []
    host_of: dict[str, str] = {}
    with open(plan_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            b = row["batch"]
            if b not in host_of:
                host_of[b] = row["host"]
                order.append(b)
    return order, host_of


def batches(plan_path: str | Path) -> tuple[list[str], dict[str, str]]:
    """Batch ids in plan order and the host of each (cached per file version)."""
    p = Path(plan_path)
    return _batches(str(p), p.stat().st_mtime_ns)


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
        from benchmatrix.reruns import reruns_digest

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

    def facts(self, wildcards: Any) -> str:
        """facts.json of the batch's host."""
        _, host_of = batches(self._plan(wildcards))
        return f"results/{wildcards.experiment}/hosts/{host_of[wildcards.batch]}/facts.json"

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
        """One restore marker per host (the collect rule waits for every host's restore)."""
        _, host_of = batches(self._plan(wildcards))
        return [f"results/{wildcards.experiment}/hosts/{h}/restored.json" for h in sorted(set(host_of.values()))]

    def all_markers(self, wildcards: Any) -> list[str]:
        """Every batch marker of the plan (the collect rule's input)."""
        order, _ = batches(self._plan(wildcards))
        return [f"results/{wildcards.experiment}/batches/{b}.done" for b in order]


def on_error(spec: Spec) -> None:
    """The Snakefile's ``onerror``: put back every host a failed workflow left reconfigured."""
    from benchmatrix.tasks import restore_touched_hosts

    restore_touched_hosts(spec, Path.cwd())
