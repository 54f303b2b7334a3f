"""Every name under ``results/NAME/``: its files, their column lists, the run statuses.

One place to read what a campaign leaves on disk and to rename any of it. The
module imports nothing from benchmatrix, so every stage (planner, rules, analysis,
report, campaigns) can use it without an import circle.

``results/NAME/`` holds::

    plan.csv                 one row per run in execution order    (PLAN_COLUMNS + factors)
    reruns.csv               re-run rounds requested                (RERUN_COLUMNS)
    campaign.json, spec.json the campaign's id and metadata, the spec it was planned with
    hosts/HOST/              facts.json, baseline.json, restored.json
    batches/BATCH.done       a batch job's marker (its Snakemake output)
    runs/RUN_ID/ATTEMPT/     record.json and raw outputs of one attempt
    runs.csv                 one row per attempt                    (RUN_COLUMNS + factors + metrics)
    summary.csv              one row per cell and metric            (summary columns)
    summary_by_host.csv      the same per host (several hosts only)
    comparisons.csv          one row per comparison                 (comparison_columns)
    analysis.json            what the tables cannot hold: metric units, the comparisons'
                             explanations, notes and warnings
    record_notes.csv         findings only the records hold         (NOTE_COLUMNS)
    runs_long.parquet        the tidy long table (export, compare, publish read it)
    report.html, report.md   the reports; plots/ beside report.md
    findings.json            the report's findings and warnings, for the terminal
    logs/                    one log per job
    campaigns/ID/            earlier campaigns, same layout
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

# ---------------------------------------------------------------- files

RESULTS_DIR = "results"
PLAN = "plan.csv"
RERUNS = "reruns.csv"
CAMPAIGN = "campaign.json"
SPEC = "spec.json"
RUNS = "runs.csv"
SUMMARY = "summary.csv"
SUMMARY_BY_HOST = "summary_by_host.csv"
COMPARISONS = "comparisons.csv"
#: The counters that moved with each decided comparison (benchmatrix.analyze.explain).
MOVED_WITH = "moved_with.csv"
ANALYSIS = "analysis.json"
RECORD_NOTES = "record_notes.csv"
RUNS_LONG = "runs_long.parquet"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"
FINDINGS = "findings.json"
PLOTS_DIR = "plots"
LOGS_DIR = "logs"
HOSTS_DIR = "hosts"
BATCHES_DIR = "batches"
RUNS_DIR = "runs"
CAMPAIGNS_DIR = "campaigns"
RECORD = "record.json"
FACTS = "facts.json"
BASELINE = "baseline.json"
RESTORED = "restored.json"
LOCK = ".bmx.lock"
STAGING_DIR = ".staging"
HOST_CACHE_DIR = ".hosts"

#: The tables collect writes, in the order it writes them (each a Snakemake output).
COLLECTED = (RUNS, SUMMARY, SUMMARY_BY_HOST, COMPARISONS, RECORD_NOTES, MOVED_WITH, ANALYSIS, RUNS_LONG)
#: bmx compare's pages of two campaigns: ``compare/A_vs_B/``.
COMPARE_DIR = "compare"
#: Files directly under results/NAME (and a kept campaign's directory) that bmx writes
#: and reads back: nothing else (an export's --out, a report template's output) may
#: take their names.
OWNED_FILES = frozenset({PLAN, RERUNS, CAMPAIGN, SPEC, *COLLECTED, REPORT_HTML, REPORT_MD, FINDINGS, LOCK})
#: Directories under results/NAME whose whole content is the experiment's.
OWNED_DIRS = frozenset({HOSTS_DIR, BATCHES_DIR, RUNS_DIR, LOGS_DIR, PLOTS_DIR, STAGING_DIR, CAMPAIGNS_DIR,
                        COMPARE_DIR})


def exp_dir(project_dir: str | Path, name: str) -> Path:
    """``results/NAME`` of an experiment, absolute."""
    return (Path(project_dir) / RESULTS_DIR / name).resolve()


def exp_dir_of(project_dir: str | Path, spec) -> Path:
    """``results/NAME`` of an experiment's spec (anything with a ``name``), absolute."""
    return exp_dir(project_dir, spec.name)


def campaign_dirs(exp: str | Path) -> list[Path]:
    """``results/NAME`` (the current campaign) and every kept campaign's directory
    (``campaigns/ID``, in id order): where a file of each campaign lies."""
    exp = Path(exp)
    return [exp, *sorted(p for p in (exp / CAMPAIGNS_DIR).glob("*") if p.is_dir())]


def host_file(exp: str | Path, host: str, name: str) -> Path:
    """``hosts/HOST/NAME`` (facts.json, baseline.json, restored.json)."""
    return Path(exp) / HOSTS_DIR / host / name


def ansible_log(exp: str | Path, name: str) -> Path:
    """``logs/ansible/NAME.log``: one Ansible call's log (BATCH, BATCH-collect, lease-BATCH,
    restore-HOST, stop-HOST)."""
    return Path(exp) / LOGS_DIR / "ansible" / f"{name}.log"


def batch_log(exp: str | Path, batch: str) -> Path:
    """``logs/batches/BATCH.log``: the Snakemake job log of a batch (its start marks the host touched)."""
    return Path(exp) / LOGS_DIR / BATCHES_DIR / f"{batch}.log"


def staging_dir(exp: str | Path, batch: str) -> Path:
    """``.staging/BATCH``: a batch's fetched archive while its runs are unpacked (removed after)."""
    return Path(exp) / STAGING_DIR / batch


def progress_path(exp: str | Path, batch: str) -> Path:
    """``batches/BATCH.progress.json``: the runs a running batch has finished (bmx status)."""
    return Path(exp) / BATCHES_DIR / f"{batch}.progress.json"


def host_cache_path(project_dir: str | Path, host: str, role: str) -> Path:
    """``results/.hosts/HOST/ROLE.json``: the facts kept of a host across campaigns and
    experiments, per workload role."""
    return Path(project_dir) / RESULTS_DIR / HOST_CACHE_DIR / host / f"{role}.json"


def run_dir(exp: str | Path, run_id: str, attempt: int | str) -> Path:
    """Directory of one attempt of one run."""
    return Path(exp) / RUNS_DIR / str(run_id) / str(attempt)


def run_dir_text(exp: str | Path, run_id: str, attempt: int | str) -> str:
    """:func:`run_dir` as a text path, for the loops that take a batch's runs in (pathlib's
    joins cost about 0.1 ms a run there, bench/README.md)."""
    return f"{exp}/{RUNS_DIR}/{run_id}/{attempt}"


def record_path(exp: str | Path, run_id: str, attempt: int | str) -> Path:
    """Path of an attempt's record.json (it exists only once the attempt is complete)."""
    return run_dir(exp, run_id, attempt) / RECORD


# ---------------------------------------------------------------- columns

#: plan.csv, before one column per factor.
PLAN_COLUMNS = ["seq", "host", "run_id", "cell_id", "replicate", "warmup", "control",
                "visit", "batch", "attempt"]
#: runs.csv, before the factor columns and then the metric columns (sorted).
#: The host's noise settings at the batch's start and the load around the run
#: (benchmatrix.results.host_env), so a step in the history joins an environment change.
ENV_COLUMNS = ["env_governor", "env_turbo", "env_thp", "env_mitigations", "env_numa_nodes", "env_cmdline",
               "env_load_before", "env_load_after"]
RUN_COLUMNS = PLAN_COLUMNS + ["status", "reason", "started_at", "ended_at", "duration_s"] + ENV_COLUMNS
#: Columns a runs.csv may hold that are neither factors nor metrics.
NON_METRIC_COLUMNS = frozenset(RUN_COLUMNS) | {"exit_code"}
#: summary.csv and summary_by_host.csv after ``cell_id`` (``host``) and the factors.
SUMMARY_STATS = ["metric", "unit", "n", "mean", "median", "min", "max", "sd", "cv",
                 "ci_low", "ci_high", "ci_method"]
#: record_notes.csv.
NOTE_COLUMNS = ["run_id", "attempt", "host", "started_at", "check", "detail"]
#: reruns.csv.
RERUN_COLUMNS = ["round", "run_id", "attempt", "reason", "requested_at"]
#: comparisons.csv: these, then ``host`` (several hosts), the ``by`` factors, then TAIL.
COMPARISON_HEAD = ["metric", "factor", "level", "baseline"]
COMPARISON_TAIL = ["n_level", "n_baseline", "rel_diff_pct", "ci_low_pct", "ci_high_pct", "p_value",
                   "analysis", "verdict", "unit", "better", "mean_level", "mean_baseline",
                   "p_value_unadjusted", "df", "ci_low_adj_pct", "ci_high_adj_pct", "scale", "threshold_pct",
                   "detectable_pct"]
#: The host column of comparisons.csv in a campaign with several hosts ...
HOST_COLUMN = "host"
#: ... and its value for a comparison that pools the hosts (``hosts_mode: partition``).
ALL_HOSTS = "all"


def summary_columns(factor_names: list[str]) -> list[str]:
    """The columns of ``summary.csv``, in file order, for these factors."""
    return ["cell_id", *factor_names, *SUMMARY_STATS]


def summary_by_host_columns(factor_names: list[str]) -> list[str]:
    """The columns of ``summary_by_host.csv``: those of summary.csv with ``host`` after ``cell_id``."""
    return ["cell_id", "host", *factor_names, *SUMMARY_STATS]


def by_column(name: str, fixed: set[str] | frozenset[str] | None = None) -> str:
    """The comparisons.csv column of a ``by`` factor: ``by_NAME`` when NAME clashes with a fixed column."""
    fixed = fixed if fixed is not None else _COMPARISON_FIXED
    return f"by_{name}" if name in fixed else name


_COMPARISON_FIXED = frozenset(COMPARISON_HEAD) | frozenset(COMPARISON_TAIL)


def comparison_columns(by: list[str], host: bool = False) -> list[str]:
    """Columns of comparisons.csv for these ``by`` factors.

    A ``by`` factor whose name clashes with a fixed column is written as ``by_NAME``.
    With ``host`` (a campaign on several hosts) a ``host`` column follows ``baseline``.
    """
    return [*COMPARISON_HEAD, *([HOST_COLUMN] if host else []), *[by_column(b) for b in by], *COMPARISON_TAIL]


# ---------------------------------------------------------------- cell labels

#: How a missing value is shown.
MISSING = "–"


def level_text(value: object) -> str:
    """A factor level (any cell value) as text: booleans as YAML writes them, whole
    floats without ``.0`` (a column with gaps turns integers into floats), ``–`` when
    missing. plan.csv, the report, the exports and the site all write levels so."""
    if value is None or type(value).__name__ in _MISSING_TYPES:
        return MISSING
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):  # numpy's bool too
        return "true" if value else "false"
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            return MISSING
        if number.is_integer():
            return str(int(number))
    return str(value)


#: pandas' missing values (pd.NA, pd.NaT) by their type, so this module needs no pandas import.
_MISSING_TYPES = frozenset({"NAType", "NaTType"})


def cell_label(levels: Iterable[tuple[str, object]]) -> str:
    """The label of a cell: ``factor=level`` pairs joined by spaces, e.g. ``rw=read bs=4k``.

    The one derivation of a cell's name: the report, the spec's messages, the BMF and
    pyperf benchmark names and the published site all use it.

    Args:
        levels: ``(factor, level)`` pairs in the spec's factor order (``dict.items()``).
    """
    return " ".join(f"{factor}={level_text(level)}" for factor, level in levels)


# ---------------------------------------------------------------- run states

class Status(StrEnum):
    """How one attempt of a run ended (``status`` in record.json and runs.csv)."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    INVALID = "invalid"
    INTERRUPTED = "interrupted"


class State(StrEnum):
    """Where a run stands over all its attempts (:func:`benchmatrix.results.status.decide`)."""

    OK = "ok"
    FAILED = "failed"
    PENDING = "pending"


#: Every attempt status, in the order of :class:`Status`.
STATUSES = tuple(s.value for s in Status)
#: The statuses that leave a run failed when they end its newest attempt.
FAILED_STATES = tuple(s.value for s in (Status.FAILED, Status.TIMEOUT, Status.UNREACHABLE, Status.INVALID))
#: Every state, in the order tables show them.
STATES = tuple(s.value for s in State)
