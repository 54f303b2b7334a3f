"""The spec ``bmx time 'cmd A' 'cmd B'`` writes and runs: one factor ``command`` whose
levels are the command lines, a ``workload_command`` without declared metrics (so the
batch runner times each run: wall_s, user_s, system_s, max_rss_kib), compared with the
first command. It is an ordinary spec, written as a commented file the user can keep,
extend (hosts, factors, replicates) and run again with ``bmx run``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass

from benchmatrix.errors import BenchmatrixError

#: The metrics a timed command gets (workloads.command.TIMED_METRICS), in the report's order.
TIME_METRICS = ("wall_s", "user_s", "system_s", "max_rss_kib")

_TEMPLATE = """\
# Written by bmx time: {argv}
# An ordinary experiment spec: keep it, extend it (more commands, hosts, factors,
# replicates) and run it again with: bmx run {path}
# The commands are split into arguments as a shell splits words and run without a shell
# (for a pipeline: 'sh -c "a | b"'); without declared metrics each run is timed by bmx
# (docs/workloads.md, "Timed by bmx").
name: {name}
description: {description}
hosts: localhost
inventory: {inventory}
factors:
  command: [{levels}]
workload:
  role: workload_command
  vars:
    command: "{{{{ command }}}}"
  timeout: {timeout}  # seconds; a run past it is killed and recorded as timeout
replicates: {replicates}  # measured runs per command
warmup: {warmup}  # unmeasured runs of each command first
order:
  strategy: random  # the commands' runs interleaved at random ...
  seed: {seed}  # ... reproducibly
report:
  metrics: [{metrics}]
{compare}"""


def _check(commands: list[str]) -> None:
    """Refuse what cannot be timed: no command, an empty or unsplittable one, one given twice."""
    if not commands:
        raise BenchmatrixError("bmx time: give at least one command, e.g. bmx time 'sleep 0.1' 'sleep 0.2'")
    seen: set[str] = set()
    for i, command in enumerate(commands, 1):
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise BenchmatrixError(f"bmx time: command {i} {command!r} cannot be split into arguments: {exc}") from None
        if not words:
            raise BenchmatrixError(f"bmx time: command {i} is empty")
        if not command.isprintable():
            raise BenchmatrixError(f"bmx time: command {i} {command!r} holds an unprintable character")
        if command in seen:
            raise BenchmatrixError(f"bmx time: the command {command!r} is given twice")
        seen.add(command)


@dataclass(frozen=True)
class TimeOptions:
    """The options of ``bmx time`` that shape its spec.

    Attributes:
        replicates: Measured runs per command (``-n``).
        warmup: Unmeasured runs per command before them.
        timeout: Seconds a run may take.
        inventory: The inventory whose ``localhost`` runs the commands.
    """

    replicates: int = 10
    warmup: int = 1
    timeout: int = 600
    inventory: str = "config/inventory/local.yml"


def time_spec_name(commands: list[str], options: TimeOptions = TimeOptions()) -> str:
    """The experiment name of these commands and options: ``time_`` and 8 hex digits of their digest,
    so the same call finds its earlier campaigns and another call gets an experiment of its own."""
    text = json.dumps([list(commands), options.replicates, options.warmup, options.timeout])
    return "time_" + hashlib.sha256(text.encode()).hexdigest()[:8]


def time_spec_text(commands: list[str], options: TimeOptions = TimeOptions(), name: str | None = None,
                   path: str = "SPEC") -> str:
    """The spec's text for ``bmx time COMMAND... -n REPLICATES --warmup WARMUP``.

    Args:
        commands: The command lines, the first the baseline of the comparison.
        options: Replicates, warm-ups, timeout and inventory.
        name: The experiment's name (default :func:`time_spec_name`).
        path: Where the spec is written (named in its header).

    Raises:
        BenchmatrixError: no command, an empty one, one that cannot be split into
            arguments or has an unprintable character, or one given twice.
    """
    _check(commands)
    name = name or time_spec_name(commands, options)
    # JSON strings are YAML double-quoted scalars: any quote or backslash in a command stays as it is.
    levels = ", ".join(json.dumps(c, ensure_ascii=False) for c in commands)
    compare = ""
    if len(commands) > 1:
        compare = (f"  compare: {{factor: command, baseline: {json.dumps(commands[0], ensure_ascii=False)}}}"
                   "  # each command against the first\n")
    argv = "bmx time " + " ".join(shlex.quote(c) for c in commands) + f" -n {options.replicates} --warmup " \
        f"{options.warmup}"
    description = json.dumps("bmx time: " + " vs ".join(commands), ensure_ascii=False)
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:6], 16)
    return _TEMPLATE.format(argv=argv, path=path, name=name, description=description, levels=levels,
                            inventory=json.dumps(options.inventory, ensure_ascii=False),
                            timeout=options.timeout, replicates=options.replicates, warmup=options.warmup, seed=seed,
                            metrics=", ".join(TIME_METRICS), compare=compare)


def timer_floor_kib() -> int | None:
    """The least ``max_rss_kib`` the batch runner's timer reads on this machine: that of
    ``true`` under it, or None when it cannot be measured.

    A process's peak memory keeps the pages its fork carried until the exec (Linux keeps
    the high-water mark across exec), so a command smaller than the timer reads as the
    timer's size; ``bmx time`` says so beside its answer.
    """
    from benchmatrix.host import batch_runner

    with tempfile.TemporaryDirectory(prefix="bmx-floor-") as tmp:
        usage = os.path.join(tmp, "usage.json")
        try:
            # The runner's own timer command line (private there, one copy), on 'true'.
            subprocess.run(batch_runner._timed(["true"], usage), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
            with open(usage, encoding="utf-8") as fh:
                value = json.load(fh).get("max_rss_kib")
        except (OSError, ValueError, AttributeError, subprocess.SubprocessError):
            return None
    return value if isinstance(value, int) and value > 0 else None
