"""The result type every workload parser returns, and the parser signature."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class Parsed:
    """Metrics read from one run of a workload.

    Attributes:
        metrics: Aggregate over all jobs of the run: metric name -> ``(value, unit)``.
        jobs: Per job, keyed by job name (a repeated name gets ``#2``, ``#3``, ...
            appended in output order), with the same metric names as ``metrics``.
            For pgbench a "job" is one script, for sysbench there is none.
        extra: Free-form, JSON-serialisable details of the run (tool version, job
            timings, notes the tool printed); may be empty.
        groups: Per reporting group (fio's ``groupid``), keyed by the group number
            as a string, with the same metric names as ``metrics``; may be empty.
        warnings: Sanity-check findings, one sentence each: the run is kept, but its
            numbers deserve a second look (for example fio jobs that ran at the same
            time although the job file meant them to run one after another).
    """

    metrics: dict[str, tuple[float, str]]
    jobs: dict[str, dict[str, tuple[float, str]]]
    extra: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, tuple[float, str]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Parser(Protocol):
    """What :data:`benchmatrix.workloads.PARSERS` maps a workload role to.

    Args:
        stdout: What the workload printed on standard output.
        workload: The spec's ``workload`` section (``role``, ``vars``, ``metrics``,
            ``success``, ...); parsers of generic workloads read their declared
            metrics from it. May be empty.
        run_dir: The run's directory of raw files as the batch runner wrote it
            (``stdout``, ``stderr``, ``counters.json``, ``inputs/`` with the job
            file or script the run used), when there is one.

    Raises:
        benchmatrix.errors.ParseError: The output holds no usable result.
    """

    def __call__(self, stdout: str, workload: Mapping[str, Any] | None = None,
                 run_dir: Path | None = None) -> Parsed: ...


def as_text(stdout: Any, tool: str) -> str:
    """``stdout`` as ``str`` (bytes are decoded, None is empty)."""
    from benchmatrix.errors import ParseError

    if stdout is None:
        return ""
    if isinstance(stdout, bytes):
        return stdout.decode("utf-8", errors="replace")
    if not isinstance(stdout, str):
        raise ParseError(f"{tool} output must be text, got {type(stdout).__name__}")
    return stdout


def unique_name(name: str, taken: Any) -> str:
    """``name``, or ``name#2``, ``name#3``... when ``taken`` already holds it (duplicate job names)."""
    if name not in taken:
        return name
    n = 2
    while f"{name}#{n}" in taken:
        n += 1
    return f"{name}#{n}"


def headline(text: str, limit: int = 200) -> str:
    """The first non-blank line of ``text``, shortened to ``limit`` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[:limit] + "..."
    return ""


def read_input(run_dir: Path | None, name: str) -> str | None:
    """Text of ``run_dir/inputs/NAME`` (a file the run used), or None."""
    if run_dir is None:
        return None
    path = Path(run_dir) / "inputs" / name
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
