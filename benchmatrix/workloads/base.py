"""What every workload shares: its descriptor (:class:`Workload`), the result type of the
parsers and the parser signature, and for the argv builders the Ansible filter-module
wrapper and template rendering."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from benchmatrix.spec.declared import MetricNames


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
    """A workload's parser (:attr:`Workload.parse`).

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


@dataclass(frozen=True)
class DryRunCommand:
    """What ``bmx check`` runs on the host to try one built command (:attr:`Workload.dry_run`).

    Attributes:
        kind: ``parse``: the tool checks the command itself (``argv`` must exit 0);
            ``options``: ``argv`` prints the tool's help, and every option of ``options``
            must appear in it or in the ``general`` help.
        argv: The command to run (its first item becomes the host's own tool).
        options: The ``--options`` the built command uses (kind ``options``).
        stdin: Text fed to ``argv`` (fio's job file to ``fio --parse-only -``).
        general: A help listing the options every command of the tool knows
            (``sysbench --help`` beside ``sysbench cpu help``); empty when none.
    """

    kind: str
    argv: tuple[str, ...]
    options: tuple[str, ...] = ()
    stdin: str | None = None
    general: tuple[str, ...] = ()


_OPTION = re.compile(r"^(--[A-Za-z0-9][A-Za-z0-9_-]*)")


def long_options(argv: list[str]) -> tuple[str, ...]:
    """The ``--options`` of an argv after its first item, sorted, each once (``--time=5`` gives ``--time``)."""
    return tuple(sorted({m.group(1) for a in argv[1:] if (m := _OPTION.match(a))}))


def whole_seconds(value: Any) -> float | None:
    """A time limit in seconds as a number (``30``, ``"2.5"``), or None."""
    try:
        return None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Workload:
    """Everything the controller knows of one workload role, in one record: each
    ``benchmatrix/workloads/NAME/__init__.py`` defines one as ``WORKLOAD`` and
    :data:`benchmatrix.workloads.WORKLOADS` holds them by role. The run (``execute``),
    ``bmx check``, the planner's units, the verdicts' directions, docs/workloads.md's
    table and the tests read it; the role itself (playbooks/roles/ROLE) does what only
    the host can do.

    Attributes:
        role: The Ansible role, ``workload_NAME``.
        summary: One line for docs/workloads.md's table: what it runs.
        parse: The parser of the tool's output (:class:`Parser`).
        argv: The module of the argv builder, whose ``FilterModule`` the role's filter
            plugin imports (``benchmatrix.workloads.NAME.argv``).
        binary: The executable ``bmx check`` looks for and asks ``--version`` (the
            role's ``ROLE_binary`` default); "" when the spec's argv names it
            (workload_command).
        metrics: The metric catalogue, name -> unit; empty when the units come with
            each run (sysbench) or from the spec (workload_command).
        metric_names: The names the parser gives beyond ``metrics`` (sysbench's, whose
            units come with each run).
        metric_patterns: ``(regex, shown)`` pairs for the names the parser makes from
            the run (sysbench's ``latency_pN_ms`` after ``--percentile``): the regex
            matches a whole name, ``shown`` stands for them in messages.
        directions: ``(regex, "higher" | "lower")`` pairs: a metric whose name the
            regex finds is better that way (verdicts say better/worse); first match wins.
        install_once: ``tasks/install.yml`` only installs the tool and reads its
            version, so a known host skips it (others also start services).
        cleanup: ``tasks/finish.yml`` has work to do at campaign end (restore_host
            calls it; the host's ``workload_cleanup`` fact (tasks/prepare.yml) may still say there is
            nothing to undo on a host: see ``cleanup_var``).
        cleanup_var: The host variable (a whole number, default 0) that says whether
            ``tasks/finish.yml`` has work on a host: only when it is above 0
            (``workload_fio_loopfs_mb``: a loop file system to unmount); "" when a role
            with ``cleanup`` always has work. tasks/prepare.yml records the answer as the
            ``workload_cleanup`` fact.
        directory_var: The host variable holding the directory the workload's files go
            to (``workload_fio_directory``), the workload path tasks/prepare.yml probes
            when the inventory sets no ``bmx_workload_path``; "" for the default scratch
            directory.
        files_var: The host variable holding the directory the role puts the workload's
            files in (``workload_sysbench_directory``), whose file system ``bmx check``
            resolves on the host; "" for a role without one.
        files_default: Its default, as the role's defaults file writes it (may be a
            template of ``bmx_experiment``): ``bmx check`` reads it here, not in the role.
        binary_var: The host variable that names the tool's executable on a host
            (``workload_fio_binary``; "" for none): ``bmx check`` asks it before ``binary``.
        install_var: The host variable that says whether the role installs the tool
            (``workload_fio_install``; "" for none, read as true).
        loopfs_var: The host variable of the size in MiB of a loop file system the role
            mounts on its directory (``workload_fio_loopfs_mb``; "" for none).
        version_var: The fact the role's ``tasks/install.yml`` sets to the tool's version
            (``workload_fio_version``): tasks/prepare.yml records it as ``tool_version``.
        seconds: How long one run takes by the tool's own time limit, from the run's
            rendered variables (``{"runtime": "30s"}``): seconds, or None when the run
            is not time-based (:mod:`benchmatrix.plan.workload_time`); None when the
            workload has no time limit of its own.
        command: For ``bmx check``: ``command(run, binary, project_dir)``, the command
            the role builds for one run (``{argv, job}``, ``job`` a job file's text or
            None) with the role's own builder; raises
            :class:`benchmatrix.errors.WorkloadVarsError` as the role would. None: the
            check builds nothing for this workload.
        dry_run: For ``bmx check``: ``dry_run(argv, job)``, the cheap check of one built
            command on the host (a :class:`DryRunCommand`), or None when the tool has none.
            Also asked for a ``workload_command`` argv that runs this tool (by binary).
        build: For the one-call batch (playbooks/run_known_batch.yml): ``build(runs, role_vars)``,
            the batch's commands built by the batch job with the role's own builder from the
            runs (manifest entries with ``vars``) and the host's values of ``build_vars``:
            ``{commands, files: [{path, content}], dirs}`` (the files and directories the
            call writes on the host first). Raises
            :class:`benchmatrix.errors.WorkloadVarsError`. None: the role's tasks/main.yml
            builds them in run_batch.yml (the tool needs work on the host first).
        build_vars: The role variables ``build`` reads (their values on the host, from the
            host's last run_batch.yml call; the one call checks they still hold).
        env_var: The host variable of an environment every run gets under its own
            (``workload_command_env``, the place for secrets): never known to the
            controller, the one call merges it on the host; "" for none.
        measure: ``measure(workload)``: whether the batch runner times each run's command
            itself for the spec's ``workload`` section (wall time, user and system CPU, peak
            memory in the run's ``usage.json``, which the parser reads); None: never.
        explained_by: Regexes of the counter metrics (``collect``) that usually explain
            this workload's findings (fio: the device's request size and await): those that
            moved with a finding are listed first (:func:`benchmatrix.analyze.explain.moved_with`).
        variables: ``variables(vars)``: the names ``workload.vars`` may hold for the spec's
            ``vars`` and whether another name is an error (True: the role reads only these)
            or a warning (False: they become the tool's own options, which the host's tool
            decides); None (or a None answer): any name (``bmx validate`` checks them).
    """

    role: str
    summary: str
    parse: Parser
    argv: str
    binary: str = ""
    metrics: Mapping[str, str] = field(default_factory=dict)
    metric_names: tuple[str, ...] = ()
    metric_patterns: tuple[tuple[str, str], ...] = ()
    directions: tuple[tuple[str, str], ...] = ()
    install_once: bool = False
    cleanup: bool = False
    cleanup_var: str = ""
    directory_var: str = ""
    files_var: str = ""
    files_default: str = ""
    binary_var: str = ""
    install_var: str = ""
    loopfs_var: str = ""
    version_var: str = ""
    seconds: Callable[[Mapping[str, Any]], float | None] | None = None
    command: Callable[[dict[str, Any], str, str], dict[str, Any]] | None = None
    dry_run: Callable[[list[str], str | None], DryRunCommand | None] | None = None
    build: Callable[[list[dict[str, Any]], Mapping[str, Any]], dict[str, Any]] | None = None
    build_vars: tuple[str, ...] = ()
    env_var: str = ""
    measure: Callable[[Mapping[str, Any]], bool] | None = None
    explained_by: tuple[str, ...] = ()
    variables: Callable[[Mapping[str, Any]], tuple[frozenset[str], bool] | None] | None = None

    def names(self) -> MetricNames:
        """Every metric name the parser can give (``report.threshold``'s keys are checked
        against them); not complete when the names come from the output or the spec
        (workload_command: none here)."""
        fixed = frozenset(self.metrics) | frozenset(self.metric_names)
        return MetricNames(fixed, self.metric_patterns, complete=bool(fixed or self.metric_patterns))

    def direction(self, metric: str) -> str:
        """``higher``, ``lower`` or "" (not known) for one of this workload's metrics."""
        return next((better for pattern, better in self.directions if re.search(pattern, metric)), "")


def registry(workloads: Iterable[Workload]) -> dict[str, Workload]:
    """``{role: descriptor}`` of ``workloads``.

    Raises:
        ValueError: two descriptors name the same role (a dict would keep only the last).
    """
    out: dict[str, Workload] = {}
    for w in workloads:
        if w.role in out:
            raise ValueError(f"workload {w.role!r} registered twice: {out[w.role].summary!r} and {w.summary!r}")
        out[w.role] = w
    return out


def unknown_variables(given: Iterable[Any], known: Iterable[str]) -> str:
    """The refusal of workload variables the role does not read, or "" when there are none:
    ``unknown variable(s) X (known: ...)`` with ``did you mean`` the closest known name."""
    from benchmatrix.spec.load import did_you_mean

    names = sorted(known)
    unknown = sorted(str(name) for name in set(given) - set(names))
    if not unknown:
        return ""
    hint = next((h for h in (did_you_mean(name, names) for name in unknown) if h), "")
    return f"unknown variable(s) {', '.join(unknown)} (known: {', '.join(names)}){hint}"


def read_only(names: Iterable[str]) -> Callable[[Mapping[str, Any]], tuple[frozenset[str], bool]]:
    """:attr:`Workload.variables` of a role that reads ``names`` and nothing else."""
    known = frozenset(names)
    return lambda _vars: (known, True)


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


def last_line(text: str) -> str:
    """The last non-blank line of ``text``, shortened like :func:`headline` (a tool's final words)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return headline(lines[-1]) if lines else ""


def read_input(run_dir: Path | None, name: str) -> str | None:
    """Text of ``run_dir/inputs/NAME`` (a file the run used), or None."""
    if run_dir is None:
        return None
    path = Path(run_dir) / "inputs" / name
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def filter_module(**filters: Callable[..., Any]) -> type:
    """An Ansible ``FilterModule`` class offering ``filters`` (name -> function).

    A role's ``filter_plugins/ROLE.py`` is one line that imports the class from the
    tool's ``argv`` module. Filter plugins run on the controller, in the interpreter of
    ansible-playbook, the virtualenv benchmatrix is installed in. A
    :class:`benchmatrix.errors.WorkloadVarsError` becomes Ansible's filter error, so the
    task fails with the message alone (it names the role and the run).
    """
    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            from benchmatrix.errors import WorkloadVarsError

            try:
                return func(*args, **kwargs)
            except WorkloadVarsError as exc:
                from ansible.errors import AnsibleFilterError

                raise AnsibleFilterError(str(exc)) from None
        return call

    class FilterModule:
        """Ansible filter plugin entry point."""

        def filters(self) -> dict[str, Callable[..., Any]]:
            return {name: wrap(func) for name, func in filters.items()}

    return FilterModule


def runs_filter(func: Callable[..., Any], commands: str | None = None) -> Callable[..., Any]:
    """The filter form of a builder whose first argument is a batch's runs.

    run_batch.yml hands a workload role the runs as one JSON text (``bmx_runs``), and
    the role hands the batch runner its commands the same way: Ansible then neither
    checks a role's arguments nor templates the data run by run, which cost milliseconds
    a run (bench/README.md, issue 15 row a). The filter decodes a text (a list is taken
    as it is, for callers that still pass one).

    Args:
        func: The builder, ``func(runs, *args)``, working on lists.
        commands: Where the builder's result holds the commands, which the filter then
            returns as JSON text: ``""`` for a builder that returns the list itself, a
            key for one that returns a dict holding it; None leaves the result as it is.
    """
    @functools.wraps(func)
    def call(runs: Any, *args: Any, **kwargs: Any) -> Any:
        from benchmatrix.errors import WorkloadVarsError

        if isinstance(runs, str):
            try:
                runs = json.loads(runs)
            except ValueError as exc:
                raise WorkloadVarsError(f"{func.__name__}: the batch's runs are not JSON ({exc})") from None
        result = func(runs, *args, **kwargs)
        if commands is None:
            return result
        if commands == "":
            return json.dumps(result)
        return {**result, commands: json.dumps(result[commands])}
    return call


@functools.cache
def refuse_characters(forbidden: str, what: str) -> Callable[[Any], Any]:
    """A template ``finalize`` that raises ValueError for a value holding any of ``forbidden``.

    Cached, so one pair gives one function and one compiled-template cache.
    """
    def check(value: Any) -> Any:
        text = str(value)
        if any(ch in text for ch in forbidden):
            raise ValueError(f"value {text[:40]!r} contains {what}")
        return value
    return check


def render_template(source: str, context: dict[str, Any], finalize: Callable[[Any], Any]) -> str:
    """Render a job file or script in the bounded sandbox of :mod:`benchmatrix.spec.templating`.

    Raises:
        ValueError: ``finalize`` refused a value.
        jinja2.TemplateError: a syntax error, an undefined name or a bound exceeded.
    """
    from benchmatrix.spec import templating  # Jinja2 only for the argv builders, not the parsers

    return templating.render(source, context, finalize)


def run_cpus(role: str, run: Mapping[str, Any], value: Any) -> str | list[int]:
    """A run's ``cpus`` for the batch runner's manifest: ``"all"`` or the explicit CPU numbers.

    Raises:
        WorkloadVarsError: ``value`` is not a CPU list (names the role and the run).
    """
    from benchmatrix.errors import WorkloadVarsError
    from benchmatrix.workloads.cpulist import manifest_cpus

    try:
        return manifest_cpus(value)
    except ValueError as exc:
        raise WorkloadVarsError(f"{role}: run {run.get('run_id', '?')}: cpus: {exc}") from None
