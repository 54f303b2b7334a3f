"""Experiment specs: loading, schema and semantic validation, templating of vars.

``load_spec`` returns a validated :class:`Spec` or raises :class:`SpecErrors`, whose
lines read ``FILE:LINE: message`` (the line of the offending key).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from benchmatrix.errors import SpecError, SpecErrors
from benchmatrix.host.knobs import BACKENDS as KNOB_BACKENDS
from benchmatrix.names import BIDI_CONTROLS, name_problem
from benchmatrix.names import shown as shown_name
from benchmatrix.spec.declared import MetricNames, MetricNamesOf, check_declarations
from benchmatrix.spec.matrix import (
    Cell,
    Level,
    _same_level,
    as_declared,
    cell_id_of,
    declared_levels,
    expand,
    level_key,
    matches,
)
from benchmatrix.spec.yamlload import LocatedDocument, load_located

# Every name is also held to benchmatrix.names.name_problem. The patterns are matched
# whole (fullmatch): with re.match, '$' also matches before a final newline ('t\n').
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
FACTOR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: Role names (the schema's patterns, matched whole).
ROLE_RE = {"knob": re.compile(r"knob_[a-z0-9_]+"), "workload": re.compile(r"workload_[a-z0-9_]+")}
#: Column names of plan.csv / runs.csv that a factor may not shadow.
RESERVED = frozenset({
    "seq", "host", "run_id", "cell_id", "replicate", "warmup", "control", "visit",
    "batch", "attempt", "status", "reason", "started_at", "ended_at", "duration_s",
    "metric", "unit", "experiment", "n", "mean", "median", "min", "max", "sd", "cv",
    "ci_low", "ci_high", "ci_method", "exit_code", "log",
    "schema_version", "campaign", "direction", "value",  # the long table's (docs/export.md)
    "env_governor", "env_turbo", "env_thp", "env_mitigations", "env_numa_nodes", "env_cmdline",
    "env_load_before", "env_load_after",  # the host's noise settings (results/host_env.py)
})
#: Metric names: they become columns of runs.csv and parts of file names (plots).
METRIC_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
#: Most cells a matrix may have (counted before ``exclude``), and most runs per host.
MAX_CELLS = 100_000
MAX_RUNS_PER_HOST = 1_000_000
#: Most cell x exclude-entry comparisons expansion may make.
MAX_EXCLUDE_CHECKS = 5_000_000
#: Most templates (strings with {{ or {%) in workload.vars, and most renders validation
#: makes to try them on every cell (beyond it: a warning, not an error).
MAX_TEMPLATES = 500
MAX_RENDERS = 50_000
MAX_RENDER_SECONDS = 5.0
#: Variables a workload template may use besides the factors.
RUN_VARIABLES = frozenset({"experiment", "host", "run_id", "cell_id", "replicate", "warmup"})
#: Cost classes of a knob change, cheapest first.
COST_CLASSES = ("none", "restart", "reboot")
#: Classes whose changes are worth restricting the randomization for (whole-plot factors).
COSTLY_CLASSES = ("restart", "reboot")
#: Default estimated seconds of one knob change per cost class; ``cost_seconds`` in
#: config/config.yaml overrides them, a knob's own ``{class, seconds}`` overrides both.
DEFAULT_COST_SECONDS = {"none": 0.0, "restart": 60.0, "reboot": 300.0}
#: Knob roles whose every change takes a reboot (their backend's ``reboot``): their knobs
#: must be of cost class reboot, or the plan would interleave their levels as if they were free.
REBOOT_ROLES = frozenset(role for role, backend in KNOB_BACKENDS.items() if backend.reboot)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of experiment specs shipped in the package."""
    text = resources.files("benchmatrix.spec").joinpath("spec.schema.json").read_text()
    return json.loads(text)


@dataclass(frozen=True)
class Knob:
    """A factor that reconfigures the host through an Ansible role."""

    factor: str
    role: str
    cost_class: str
    cost_seconds: float
    vars: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def _report_default(key: str) -> Any:
    return schema()["properties"]["report"]["properties"][key]["default"]


#: Defaults of ``report.alpha``, ``report.cv_threshold`` and ``report.drift_threshold``
#: (the schema's, which docs/spec.md shows).
DEFAULT_ALPHA: float = _report_default("alpha")
DEFAULT_CV_THRESHOLD: float = _report_default("cv_threshold")
DEFAULT_DRIFT_THRESHOLD: float = _report_default("drift_threshold")


#: A threshold written as text: ASCII digits, an optional point, an optional '%' (the
#: schema's pattern). ``float()`` alone also takes '1e-320', '1_0' and other scripts' digits.
_THRESHOLD_TEXT = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", re.ASCII)
#: Smallest practical threshold (0.0001 %): below it no benchmark measures a difference.
MIN_THRESHOLD = 1e-6


def _fraction(value: Any) -> float:
    """A percentage (``"5%"``) or a fraction (``0.05``) as a fraction; nan when it is neither."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = _THRESHOLD_TEXT.fullmatch(value) if isinstance(value, str) else None
    if not m:
        return math.nan
    number = float(m.group(1))
    return number / 100.0 if m.group(2) else number


def threshold_fraction(value: Any) -> float:
    """A practical threshold as a fraction: ``"5%"`` or ``0.05`` -> 0.05.

    The one parser of ``report.threshold``, ``replicates.detect`` and ``bmx compare
    --threshold``, so that each takes exactly what the others take.

    Raises:
        ValueError: not a percentage or a fraction from :data:`MIN_THRESHOLD` to below 1.
    """
    fraction = _fraction(value)
    if not MIN_THRESHOLD <= fraction < 1:  # also false for nan
        raise ValueError(f"threshold {value!r}: write a percentage such as 5% or a fraction such as 0.05 "
                         f"(from {MIN_THRESHOLD:.0e} to below 1)")
    return fraction


def campaign_sd_fraction(value: Any) -> float:
    """A campaign SD (``report.campaign_sd``) as a fraction: ``"2%"`` or ``0.02`` -> 0.02.

    Written as :func:`threshold_fraction` takes a threshold, but 0 is allowed (campaigns
    that do not move at all).

    Raises:
        ValueError: not a percentage or a fraction from 0 to below 1.
    """
    fraction = _fraction(value)
    if not 0 <= fraction < 1:  # also false for nan
        raise ValueError(f"campaign SD {value!r}: write a percentage such as 2% or a fraction such as 0.02 "
                         f"(from 0 to below 1)")
    return fraction


#: A duration: numbers of ASCII digits, each with its unit (``\\d`` would take other
#: scripts' digits, which float() reads too).
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([hms])", re.ASCII)
#: Bounds of a duration (a time budget): a second, and a leap year.
MIN_DURATION_SECONDS = 1.0
MAX_DURATION_SECONDS = 366 * 86400.0


def parse_duration(text: str) -> float:
    """``2h``, ``90m``, ``45s`` or ``1h30m`` -> seconds.

    Raises:
        ValueError: not such a duration, or outside :data:`MIN_DURATION_SECONDS` to
            :data:`MAX_DURATION_SECONDS` (an empty, zero, infinite or endless budget
            would silently mean no budget).
    """
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0}
    low = str(text).strip().lower()
    parts = _DURATION_PART.findall(low)
    if not parts or _DURATION_PART.sub("", low).strip():
        raise ValueError(f"{text!r}: write a duration such as 2h, 90m or 1h30m")
    seconds = sum(float(v) * unit[u] for v, u in parts)
    if not MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS:  # also false for inf
        raise ValueError(f"{text!r}: write a duration from 1s to 8784h (a year), such as 2h, 90m or 1h30m")
    return seconds


#: Default of ``report.threshold`` as a fraction.
DEFAULT_THRESHOLD: float = threshold_fraction(_report_default("threshold"))
#: Default of ``report.campaign_sd`` (the prior campaign-to-campaign SD) as a fraction.
DEFAULT_CAMPAIGN_SD: float = campaign_sd_fraction(_report_default("campaign_sd"))
#: Values of ``hosts_mode``, the default first.
HOSTS_MODES = ("replicate", "partition")


@dataclass(frozen=True)
class CompareSettings:
    """``report.compare``: every level of ``factor`` against ``baseline`` within each
    combination of the ``by`` factors."""

    factor: str
    baseline: Level
    by: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The settings as the spec writes them (``by`` a list), for templates and tables."""
        return {"factor": self.factor, "baseline": self.baseline, "by": list(self.by)}


def _per_metric(given: Any, default: float, parse: Callable[[Any], float]) -> tuple[float, dict[str, float]]:
    """A report setting given once or per metric (``{default: 5%, METRIC: 10%}``): its
    default and the per-metric values, each read by ``parse``."""
    if isinstance(given, dict):
        per_metric = {str(k): parse(v) for k, v in given.items()}
        return per_metric.pop("default", default), per_metric
    return (default if given is None else parse(given)), {}


@dataclass(frozen=True)
class ReportSettings:
    """The ``report`` section of a spec, with every default filled in.

    Attributes:
        metrics: Metrics the report shows (empty: every measured metric).
        primary: The primary metrics (Holm's family); empty: every report metric.
        alpha: Significance level of verdicts and drift tests.
        cv_threshold: Coefficient of variation above which a cell earns a warning.
        drift_threshold: Smallest relative change that earns a drift or warm-up warning.
        threshold: The practical threshold (a fraction): the smallest relative change
            that matters (verdicts ``equivalent``; across campaigns without a history,
            ``better``/``worse`` beyond it).
        thresholds: Per-metric thresholds that replace ``threshold``, as ``(metric,
            fraction)`` pairs.
        campaign_sd: The prior campaign-to-campaign SD (a fraction) of comparisons
            across campaigns (:mod:`benchmatrix.analyze.campaign_model`).
        campaign_sds: Per-metric ones that replace ``campaign_sd``, as pairs.
        template_dir: Directory of user templates, relative to the spec file.
        tables: Extra pivot tables, as the spec writes them.
        compare: The comparison asked for, or None.
    """

    metrics: tuple[str, ...] = ()
    primary: tuple[str, ...] = ()
    alpha: float = DEFAULT_ALPHA
    cv_threshold: float = DEFAULT_CV_THRESHOLD
    drift_threshold: float = DEFAULT_DRIFT_THRESHOLD
    threshold: float = DEFAULT_THRESHOLD
    thresholds: tuple[tuple[str, float], ...] = ()
    campaign_sd: float = DEFAULT_CAMPAIGN_SD
    campaign_sds: tuple[tuple[str, float], ...] = ()
    template_dir: str | None = None
    tables: tuple[dict[str, Any], ...] = ()
    compare: CompareSettings | None = None

    def threshold_for(self, metric: str) -> float:
        """The practical threshold of ``metric`` (its own, else the default)."""
        return dict(self.thresholds).get(metric, self.threshold)

    def campaign_sd_for(self, metric: str) -> float:
        """The prior campaign SD of ``metric`` (its own, else the default)."""
        return dict(self.campaign_sds).get(metric, self.campaign_sd)

    @classmethod
    def of(cls, report: dict[str, Any] | None) -> ReportSettings:
        """The settings of a ``report`` mapping (None or missing keys: the defaults)."""
        cfg = report or {}
        cmp = cfg.get("compare")
        default, per_metric = _per_metric(cfg.get("threshold"), DEFAULT_THRESHOLD, threshold_fraction)
        sd_default, sds = _per_metric(cfg.get("campaign_sd"), DEFAULT_CAMPAIGN_SD, campaign_sd_fraction)
        return cls(
            metrics=tuple(cfg.get("metrics") or ()),
            primary=tuple(cfg.get("primary") or ()),
            alpha=float(cfg.get("alpha") or DEFAULT_ALPHA),
            cv_threshold=float(cfg.get("cv_threshold", DEFAULT_CV_THRESHOLD)),
            drift_threshold=float(cfg.get("drift_threshold", DEFAULT_DRIFT_THRESHOLD)),
            threshold=default, thresholds=tuple(per_metric.items()),
            campaign_sd=sd_default, campaign_sds=tuple(sds.items()),
            template_dir=cfg.get("template_dir"),
            tables=tuple(cfg.get("tables") or ()),
            compare=CompareSettings(cmp["factor"], cmp["baseline"], tuple(cmp.get("by") or ())) if cmp else None)


@dataclass
class Spec:
    """A validated experiment spec with defaults filled in.

    Attributes:
        path: The spec file as given.
        data: The document with schema defaults applied.
        digest: Hash of the canonical document; changes only when content changes.
        warnings: Non-fatal findings, each ``FILE:LINE: message``.
    """

    path: str
    data: dict[str, Any]
    digest: str
    cells: list[Cell]
    knobs: dict[str, Knob]
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def factor_names(self) -> list[str]:
        return list(self.data["factors"])

    @property
    def workload(self) -> dict[str, Any]:
        return self.data["workload"]

    @property
    def order(self) -> dict[str, Any]:
        return self.data["order"]

    @property
    def batch_live_knobs(self) -> bool:
        """Whether a batch may span settings of cost-none knobs (``order.batch_live_knobs``,
        on unless a spec says false): the batch runner sets them between runs."""
        return bool(self.order.get("batch_live_knobs", True))

    @property
    def visits(self) -> int:
        """Whole-plot visits per whole plot of a restricted plan (``order.visits``, else replicates)."""
        return int(self.order.get("visits") or self.replicates)

    # The typed view: read from ``data`` on every access, so a copy whose ``data`` is
    # changed (the planner's alternative strategies, tests) sees the change.
    @property
    def report(self) -> ReportSettings:
        """The ``report`` section, defaults filled in."""
        return ReportSettings.of(self.data.get("report"))

    @property
    def hosts_mode(self) -> str:
        """``hosts_mode``: ``replicate`` (every host runs the whole plan, the default) or
        ``partition`` (the replicates of each cell are dealt over the hosts)."""
        mode = str(self.data.get("hosts_mode") or HOSTS_MODES[0]).strip().lower()
        return mode if mode in HOSTS_MODES else HOSTS_MODES[0]

    @property
    def hosts(self) -> str:
        """The inventory host pattern."""
        return self.data["hosts"]

    @property
    def description(self) -> str:
        return self.data.get("description") or ""

    @property
    def replicates(self) -> int:
        return int(self.data["replicates"])

    @property
    def warmup(self) -> int:
        """Unmeasured runs of a cell after each reconfiguration (see :attr:`warmup_after`)."""
        return int(self.data.get("warmup") or 0)

    @property
    def warmup_after(self) -> str:
        """What cools a cell, so that its next measured run gets warm-ups (``warmup_after``):
        ``change`` any change of the host's knob settings, ``costly_change`` only a change
        of a knob of cost restart or reboot, ``first_run`` nothing after the cell's first run."""
        return str(self.data.get("warmup_after") or "change")

    @property
    def cooling_knobs(self) -> list[str]:
        """The knob factors whose change cools every cell (by :attr:`warmup_after`), sorted."""
        if self.warmup_after == "first_run":
            return []
        return sorted(self.whole_plot_factors() if self.warmup_after == "costly_change" else self.knobs)

    @property
    def levels(self) -> dict[str, list[Level]]:
        """Factor name -> its levels, in the spec's order."""
        return self.data.get("factors") or {}

    @property
    def declared_metrics(self) -> dict[str, dict[str, Any]]:
        """``workload.metrics``: metric name -> its declaration (unit, better, ...)."""
        return (self.data.get("workload") or {}).get("metrics") or {}

    @property
    def before_run(self) -> list[str]:
        return list(self.data.get("before_run") or [])

    @property
    def collect(self) -> list[str]:
        """System counters sampled beside each run."""
        return list(self.data.get("collect") or [])

    @property
    def allow_reboot(self) -> bool:
        return bool(self.data.get("allow_reboot", False))

    def costly_factors(self, cost_class: str) -> list[str]:
        """Knob factors of one cost class, in the spec's factor order."""
        return [f for f in self.factor_names if f in self.knobs and self.knobs[f].cost_class == cost_class]

    def whole_plot_factors(self) -> list[str]:
        """Factors that define the whole plots of a restricted plan: reboot class, then restart class."""
        return self.costly_factors("reboot") + self.costly_factors("restart")

    def control_cell(self) -> Cell | None:
        """The drift-sentinel cell of ``order.control``, if any."""
        ctl = self.order.get("control")
        if not ctl:
            return None
        factors = as_declared(self.data["factors"], ctl)
        return Cell(cell_id_of(factors), factors)

    def inventory_path(self, project_dir: str | Path) -> Path:
        """Absolute path of the inventory (project dir first, then the spec's dir)."""
        inv = Path(self.data["inventory"])
        if inv.is_absolute():
            return inv
        for base in (Path(project_dir), Path(self.path).resolve().parent):
            if (base / inv).exists():
                return (base / inv).resolve()
        return (Path(project_dir) / inv).resolve()


def _apply_defaults(data: dict[str, Any]) -> dict[str, Any]:
    props = schema()["properties"]
    out = copy.deepcopy(data)
    for key in ("description", "hosts", "hosts_mode", "inventory", "allow_reboot", "collect", "zip",
                "exclude", "include", "knobs", "before_run", "replicates", "warmup"):
        out.setdefault(key, props[key]["default"])
    order = out.setdefault("order", {})
    for key, sub in props["order"]["properties"].items():
        if "default" in sub and key != "batch_live_knobs":  # absent, a spec's digest stays as it was
            order.setdefault(key, sub["default"])
    wl = out["workload"]
    for key, sub in props["workload"]["properties"].items():
        if key != "role":
            wl.setdefault(key, json.loads(json.dumps(sub["default"])))
    given = out.get("replicates")
    if isinstance(given, dict):
        # Adaptive replication: the plan starts with min replicates; the rounds' settings
        # live beside them (benchmatrix.analyze.adaptive reads them).
        until = {"min": given["min"], "max": given["max"], "until": given["until"]}
        if given.get("detect") is not None:
            until["detect"] = given["detect"]  # checked (and made a fraction) by the semantic checks
        if given.get("budget") is not None:  # an empty one is refused by the semantic checks
            until["budget"] = str(given["budget"])
        out["replicates_until"] = until
        out["replicates"] = int(given["min"])
    report = out.setdefault("report", {})
    report.setdefault("metrics", [])
    report.setdefault("compare", None)
    if report["compare"] is not None:
        report["compare"].setdefault("by", [])
    return out


#: Set by :func:`load_spec` to the key (:func:`_schema_key`) of the document that passed
#: the JSON Schema in this process: the processes it starts (Snakemake and its jobs) load
#: the same spec again, and the same document against the same schema passes again, so
#: they skip the check and the import of jsonschema (about 0.09 CPU-s a process; issue 34).
SCHEMA_OK_ENV = "BMX_SPEC_SCHEMA_OK"


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    import jsonschema

    # JSON Schema counts 3.0 as an integer; a spec's counts must be written as whole numbers
    # (3.0 replicates would crash the planner later).
    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)))


def _schema_key(data: Any) -> str | None:
    """A digest of ``data`` and the schema it is checked against; None for a document
    JSON cannot spell one way only (a key that is not a string, a date): always checked."""
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                return None
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif not (v is None or isinstance(v, (str, int, float))):
            return None
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{_schema_digest()}\n{text}".encode()).hexdigest()


@lru_cache(maxsize=1)
def _schema_digest() -> str:
    from benchmatrix import __version__

    return hashlib.sha256(f"{__version__}\n{json.dumps(schema(), sort_keys=True)}".encode()).hexdigest()


def _unusable(value: Any, at: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every value no key of a spec can use: .inf / .nan, and strings with a NUL
    character (no program can take one as an argument; plan.csv would hold it too)."""
    stack = [(value, at)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            yield where, f"{v} is not a finite number"
        elif isinstance(v, str) and "\x00" in v:
            yield where, "contains a NUL character (\\0), which no program argument or file name can hold"
        elif isinstance(v, dict):
            stack.extend((sub, where + (k,)) for k, sub in v.items())
        elif isinstance(v, list):
            stack.extend((sub, where + (i,)) for i, sub in enumerate(v))


def _schema_errors(doc: LocatedDocument) -> list[SpecError]:
    key = _schema_key(doc.data)
    if key is not None and os.environ.get(SCHEMA_OK_ENV) == key:
        return []
    validator = _validator_class()(schema())
    unusable = dict(_unusable(doc.data, ()))
    errors = [doc.error(at, f"{'.'.join(map(str, at))}: {why}") for at, why in unusable.items()]
    for err in validator.iter_errors(doc.data):
        if tuple(err.absolute_path) in unusable:
            continue  # already said why
        if err.validator == "anyOf" and tuple(err.absolute_path) == ("replicates",):
            # A number or a mapping: say what is wrong with the form that was written
            # (a whole number's bounds, a mapping's keys), not "not valid under any".
            err = _form_error(err)
        if err.validator == "anyOf" and tuple(err.absolute_path) in _THRESHOLD_PATHS:
            # "not valid under any of the given schemas" says nothing: the parser says why.
            errors += _threshold_form_errors(doc, tuple(err.absolute_path), err.instance)
            continue
        where = ".".join(str(p) for p in err.absolute_path) or "spec"
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            # Point at the unknown key itself, not at its parent.
            for key in extra:
                allowed = sorted(err.schema.get("properties", {}))
                errors.append(doc.error(tuple(err.absolute_path) + (key,),
                                        f"unknown key '{key}' in {where} (allowed: {', '.join(allowed)})"
                                        + did_you_mean(key, allowed)))
            continue
        if err.validator == "oneOf" and where.endswith(".cost"):
            msg = "must be none, restart, reboot or {class: ..., seconds: ...}"
        elif err.validator == "minItems" and err.instance == []:
            msg = "must not be empty"
        elif err.validator == "type" and err.validator_value == "integer" and isinstance(err.instance, float):
            msg = f"must be a whole number, not {err.instance!r}"
        elif err.validator == "enum" and isinstance(err.instance, str):
            # A misspelt name (collect: [memroy]) gets the closest one, as unknown keys do.
            msg = err.message + did_you_mean(err.instance, err.validator_value)
        else:
            msg = err.message
        errors.append(doc.error(tuple(err.absolute_path), f"{where}: {msg}"))
    if not errors and key is not None:
        os.environ[SCHEMA_OK_ENV] = key
    return errors


#: Spec keys whose values :func:`threshold_fraction` parses.
_THRESHOLD_PATHS = (("report", "threshold"), ("replicates", "detect"))


def _threshold_form_errors(doc: LocatedDocument, at: tuple[Any, ...], value: Any) -> list[SpecError]:
    """A threshold (or a mapping of them) the schema refused, each bad value with the
    parser's reason at its own line."""
    items = [(at + (k,), v) for k, v in value.items()] if isinstance(value, dict) else [(at, value)]
    errs = []
    for path, v in items:
        try:
            threshold_fraction(v)
        except ValueError as exc:
            errs.append(doc.error(path, f"{'.'.join(map(str, path))}: {exc}"))
    return errs or [doc.error(at, f"{'.'.join(map(str, at))}: write a percentage such as 5%, a fraction such as "
                                  "0.05, or a mapping of them per metric")]


def _form_error(err: Any) -> Any:
    """The error of the ``anyOf`` branch that matches the value's form (a mapping's
    branch for a mapping, else the number's)."""
    want = "object" if isinstance(err.instance, dict) else "integer"
    for sub in err.context or ():
        if err.schema["anyOf"][sub.schema_path[0]].get("type") == want:
            return sub
    return err


def _templates(value: Any, at: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        if "{{" in value or "{%" in value:
            yield at, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _templates(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _templates(v, at + (i,))


_WHOLE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
#: Names Jinja2 reads as constants, not variables, in "{{ name }}".
_JINJA_CONSTANTS = frozenset({"true", "false", "none", "True", "False", "None"})


def whole_variable(text: str) -> str | None:
    """The variable's name when ``text`` is exactly ``{{ name }}`` (most templates), else
    None: such a template is its variable's value, checked and rendered without Jinja2
    (about 0.05 CPU-s of every process that loads the spec, a batch job's a quarter).
    ``{{ true }}`` and the other constants Jinja2 knows are no variables."""
    m = _WHOLE_VAR.fullmatch(text)
    return m.group(1) if m and m.group(1) not in _JINJA_CONSTANTS else None


def render_vars(value: Any, context: dict[str, Any]) -> Any:
    """Render Jinja2 templates inside ``value`` with a run's context.

    A string that is exactly ``{{ name }}`` takes the context value with its type;
    other templates render to strings. Sandboxed and bounded (see
    :mod:`benchmatrix.spec.templating`): templates reach no Python internals and cannot
    exhaust time or memory.
    """
    if isinstance(value, str):
        name = whole_variable(value)
        if name is not None and name in context:
            return context[name]
        if "{{" in value or "{%" in value:
            from benchmatrix.spec import templating  # imported late: "{{ name }}" needs no Jinja2

            return templating.render(value, context)
        return value
    if isinstance(value, dict):
        return {k: render_vars(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_vars(v, context) for v in value]
    return value


def _semantic_errors(doc: LocatedDocument) -> tuple[list[SpecError], list[str]]:
    d = doc.data
    factors: dict[str, list[Level]] = d["factors"]
    names = list(factors)

    factor_list = ", ".join(names)  # once: many errors may cite it
    if len(factor_list) > 200:
        factor_list = factor_list[:200] + f", ... ({len(names)} factors)"

    def unknown(at: tuple[Any, ...], name: Any, what: str) -> SpecError:
        return doc.error(at, f"{what} names unknown factor '{name}' (factors: {factor_list})")

    errs = _name_errors(doc)
    errs += _level_text_errors(doc)
    zipped, zip_errs = _zip_errors(doc, unknown)
    errs += zip_errs
    size_error = _size_error(doc, factors, zipped)
    if size_error:
        errs.append(size_error)
    errs += _selection_errors(doc, unknown)
    for factor, knob in d["knobs"].items():
        if factor not in factors:
            errs.append(unknown(("knobs", factor), factor, "knobs"))
        errs += _knob_errors(doc, factor, knob)
    order_errs, warns = _order_errors(doc, unknown)
    errs += order_errs
    errs += _report_errors(doc, unknown)
    errs += _replicates_errors(doc)
    errs += _threshold_errors(doc)
    errs += _table_errors(doc, unknown)
    errs += _metric_errors(doc)
    template_errs, used = _template_errors(doc, factor_list)
    errs += template_errs
    for name in names:
        if name not in used and name not in d["knobs"]:
            warns.append(str(doc.error(("factors", name),
                                       f"warning: factor '{name}' is used by no knob and no workload variable "
                                       "(fine if it labels a condition changed by hand)")))
    return errs, warns


_Unknown = Callable[[tuple[Any, ...], Any, str], SpecError]
"""Builds the error for a name that is no factor: (path, name, what names it)."""


def _name_errors(doc: LocatedDocument) -> list[SpecError]:
    """The experiment's name, the workload's and knobs' roles, and each factor's name and levels."""
    d = doc.data
    errs: list[SpecError] = []
    problem = name_problem(d["name"], "experiment name")
    if problem or not NAME_RE.fullmatch(d["name"]):
        errs.append(doc.error(("name",), f"{problem or 'invalid experiment name ' + shown_name(d['name'])}: use "
                                         "letters, digits, '_' and '-', starting with a letter or digit, at most "
                                         "64 characters"))
    roles = [(("workload", "role"), "workload", d["workload"].get("role"))]
    roles += [(("knobs", f, "role"), "knob", k.get("role")) for f, k in d["knobs"].items() if isinstance(k, dict)]
    for at, kind, role in roles:
        if isinstance(role, str) and not ROLE_RE[kind].fullmatch(role):
            errs.append(doc.error(at, f"invalid {kind} role {shown_name(role)}: use {kind}_ and lower-case letters, "
                                      "digits and '_'"))
    for name, levels in d["factors"].items():
        if not isinstance(name, str):
            errs.append(doc.error(("factors", name), f"factor name {name!r} is not a string (YAML reads "
                                                     "on/off/yes/no as booleans and digits as numbers: quote it)"))
        elif name_problem(name, "factor name") or not FACTOR_RE.fullmatch(name):
            why = name_problem(name, "factor name") or f"invalid factor name {shown_name(name)}"
            errs.append(doc.error(("factors", name), f"{why}: use letters, digits and '_', not starting with a digit"))
        elif name in RESERVED:
            errs.append(doc.error(("factors", name),
                                  f"factor name '{name}' is reserved (it is a column of the result files)"))
        if not levels:
            errs.append(doc.error(("factors", name), f"factor '{name}' has an empty level list"))
        seen: set[tuple[str, Any]] = set()
        as_float: dict[float, Level] = {}
        for i, lvl in enumerate(levels):
            key = level_key(lvl)  # linear: a factor may list many levels
            if key in seen:
                errs.append(doc.error(("factors", name, i), f"factor '{name}' lists level '{lvl}' twice"))
                continue
            seen.add(key)
            number = _float_of(lvl)
            if number is not None and as_float.setdefault(number, lvl) is not lvl:
                # runs.csv and the analysis read a column of numbers as floats: 2**53 + 1 and
                # 2**53.0 would become one level there, their runs mixed in one cell.
                errs.append(doc.error(("factors", name, i),
                                      f"factor '{name}' lists levels {as_float[number]!r} and {lvl!r}, one number "
                                      "once read as floating-point (as runs.csv and the analysis read them): "
                                      "list one of them, or quote both to make them text"))
    return errs


def _float_of(level: Any) -> float | None:
    """A numeric level as the float it becomes in a column of numbers; None for text,
    booleans and integers too large for any float (which no float can equal)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        return None
    try:
        return float(level)
    except OverflowError:
        return None


def _level_text_errors(doc: LocatedDocument) -> list[SpecError]:
    """Levels (of the factors, include entries and order.control) are printed in tables,
    plan.csv, cell labels and on terminals: a control character (ESC starts a terminal
    command, a newline breaks a line) or a bidirectional control (U+202E shows text in
    another order) in one would garble or forge what the user reads. Refused, as in names."""
    d = doc.data
    places = [(("factors", name, i), f"factor '{name}'", lvl)
              for name, levels in d["factors"].items() for i, lvl in enumerate(levels or ())]
    places += [(("include", ii, k), "include entry", v)
               for ii, entry in enumerate(d["include"]) for k, v in entry.items()]
    control = d["order"].get("control") or {}
    places += [(("order", "control", k), "order.control", v) for k, v in control.items()]
    errs = []
    for at, what, level in places:
        bad = next((ch for ch in level if not ch.isprintable() or ch in BIDI_CONTROLS), None) \
            if isinstance(level, str) else None
        if bad is not None:
            kind = "bidirectional control" if bad in BIDI_CONTROLS else "unprintable"
            errs.append(doc.error(at, f"{what}: level {shown_name(level)} holds the {kind} character "
                                      f"U+{ord(bad):04X}; levels are printed in tables, plan.csv and on "
                                      "terminals: leave it out"))
    return errs


def _zip_errors(doc: LocatedDocument, unknown: _Unknown) -> tuple[dict[str, int], list[SpecError]]:
    """Each zipped factor's group index, and the zip groups' errors."""
    factors = doc.data["factors"]
    errs: list[SpecError] = []
    zipped: dict[str, int] = {}
    for gi, group in enumerate(doc.data["zip"]):
        lengths = {}
        for mi, member in enumerate(group):
            if member not in factors:
                errs.append(unknown(("zip", gi, mi), member, "zip group"))
            elif member in zipped:
                errs.append(doc.error(("zip", gi, mi), f"factor '{member}' is in more than one zip group"))
            else:
                zipped[member] = gi
                lengths[member] = len(factors[member])
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{k} has {v}" for k, v in lengths.items())
            errs.append(doc.error(("zip", gi), f"zip group levels differ in length: {desc}"))
    return zipped, errs


def _selection_errors(doc: LocatedDocument, unknown: _Unknown) -> list[SpecError]:
    """The exclude and include entries: known factors, declared levels, include entries complete."""
    factors = doc.data["factors"]
    errs: list[SpecError] = []
    declared = declared_levels(factors)
    for ei, entry in enumerate(doc.data["exclude"]):
        for key, want in entry.items():
            if key not in factors:
                errs.append(unknown(("exclude", ei, key), key, "exclude entry"))
                continue
            for w in (want if isinstance(want, list) else [want]):
                # A set lookup: entries x levels stays linear.
                if not isinstance(w, (str, int, float)) or level_key(w) not in declared[key]:
                    levels_text = ", ".join(map(str, factors[key][:20])) + (", ..." if len(factors[key]) > 20 else "")
                    errs.append(doc.error(("exclude", ei, key),
                                          f"exclude entry: '{w}' is not a level of factor '{key}'"
                                          f" (levels: {levels_text})"))
    for ii, entry in enumerate(doc.data["include"]):
        for key in entry:
            if key not in factors:
                errs.append(unknown(("include", ii, key), key, "include entry"))
        missing = [n for n in factors if n not in entry]
        if missing:
            errs.append(doc.error(("include", ii), f"include entry misses factor(s): {', '.join(missing)}"))
    return errs


def _order_errors(doc: LocatedDocument, unknown: _Unknown) -> tuple[list[SpecError], list[str]]:
    """order.control's errors, and order.visits' warnings."""
    d = doc.data
    errs: list[SpecError] = []
    warns: list[str] = []
    ctl = d["order"].get("control")
    if ctl:
        for key in ctl:
            if key not in d["factors"]:
                errs.append(unknown(("order", "control", key), key, "order.control"))
        missing = [n for n in d["factors"] if n not in ctl]
        if missing:
            errs.append(doc.error(("order", "control"), f"order.control misses factor(s): {', '.join(missing)}"))
    visits = d["order"].get("visits")
    if visits is not None:
        if d["order"]["strategy"] != "restricted":
            warns.append(str(doc.error(("order", "visits"),
                                       f"warning: order.visits applies to the restricted strategy only; "
                                       f"'{d['order']['strategy']}' ignores it")))
        elif visits < d["replicates"]:
            warns.append(str(doc.error(("order", "visits"),
                                       f"warning: order.visits {visits} is below replicates {d['replicates']}: "
                                       "a cell runs several times per visit and whole-plot effects rest on "
                                       f"only {visits} visit(s)")))
    return errs, warns


def _report_errors(doc: LocatedDocument, unknown: _Unknown) -> list[SpecError]:
    """report.compare's factor, baseline and by; report.primary within report.metrics."""
    d = doc.data
    factors = d["factors"]
    errs: list[SpecError] = []
    compare = d["report"].get("compare")
    if compare:
        if compare["factor"] not in factors:
            errs.append(unknown(("report", "compare", "factor"), compare["factor"], "report.compare.factor"))
        elif not any(_same_level(compare["baseline"], lvl) for lvl in factors[compare["factor"]]):
            errs.append(doc.error(("report", "compare", "baseline"),
                                  f"report.compare.baseline '{compare['baseline']}' is not a level of factor "
                                  f"'{compare['factor']}'"))
        for bi, by in enumerate(compare["by"]):
            if by not in factors:
                errs.append(unknown(("report", "compare", "by", bi), by, "report.compare.by"))
    shown = d["report"].get("metrics") or []
    for pi, name in enumerate(d["report"].get("primary") or []):
        # With report.metrics empty (every measured metric shown) the names can only
        # be checked against the runs; the report notes a primary metric never measured.
        if shown and name not in shown:
            errs.append(doc.error(("report", "primary", pi),
                                  f"report.primary names '{name}', which is not in report.metrics "
                                  f"({', '.join(map(str, shown))}): the primary metrics are a subset of them"
                                  + did_you_mean(name, shown)))
    return errs


def _replicates_errors(doc: LocatedDocument) -> list[SpecError]:
    """replicates until decided: max not below min, a comparison to decide on, a budget and
    detect that parse (detect is replaced by its fraction)."""
    d = doc.data
    errs: list[SpecError] = []
    until = d.get("replicates_until")
    if until:
        if until["max"] < until["min"]:
            errs.append(doc.error(("replicates", "max"), f"replicates.max {until['max']} is below replicates.min "
                                                         f"{until['min']}"))
        if not d["report"].get("compare"):
            errs.append(doc.error(("replicates", "until"), "replicates until decided needs report.compare: the "
                                                           "comparisons whose verdicts decide when to stop"))
        if until.get("budget") is not None:
            try:
                parse_duration(until["budget"])
            except ValueError as exc:
                errs.append(doc.error(("replicates", "budget"), f"replicates.budget: {exc}"))
        if until.get("detect") is not None:
            try:
                until["detect"] = threshold_fraction(until["detect"])
            except ValueError as exc:
                errs.append(doc.error(("replicates", "detect"), f"replicates.detect: {exc}"))
    return errs


def _threshold_errors(doc: LocatedDocument) -> list[SpecError]:
    """report.threshold and report.campaign_sd, one value or one per metric: each a
    fraction or percentage."""
    errs: list[SpecError] = []
    for key, parse in (("threshold", threshold_fraction), ("campaign_sd", campaign_sd_fraction)):
        given = doc.data["report"].get(key)
        for path, value in ([(("report", key, k), v) for k, v in given.items()] if isinstance(given, dict)
                            else [(("report", key), given)] if given is not None else []):
            try:
                parse(value)
            except ValueError as exc:
                errs.append(doc.error(path, f"report.{'.'.join(map(str, path[1:]))}: {exc}"))
    return errs


def _known_metrics(doc: LocatedDocument, metric_names: MetricNamesOf | None) -> tuple[MetricNames, str] | None:
    """The metrics report.threshold's keys may name and how a message calls them, or
    None when they are not known before the runs."""
    report, workload = doc.data["report"], doc.data["workload"]
    if report.get("metrics"):
        listed = frozenset(report["metrics"]) | frozenset(report.get("primary") or ())
        return MetricNames(listed, complete=True), "which is no metric of the report"
    collect = list(doc.data.get("collect") or [])
    produced = metric_names(str(workload["role"]), collect) if metric_names is not None else None
    declared = frozenset(workload.get("metrics") or {})
    if declared:
        if produced is None and collect:
            return None  # the counters' names are the workloads' to say
        return MetricNames(declared, complete=True) | (produced or MetricNames(complete=True)), \
            "which is no metric of the report"
    if produced is None or not produced.complete:
        return None  # a built-in workload's names need the descriptors; workload_command's come from its output
    return produced, f"which no metric of {workload['role']} can be"


def did_you_mean(name: Any, known: Any) -> str:
    """``; did you mean 'X'?`` with the known name closest to ``name``, or "" when none
    is close (difflib's ratio 0.6): the tail of an error that names an unknown name."""
    import difflib  # imported late: only a misspelt name needs it

    close = difflib.get_close_matches(str(name), sorted(str(k) for k in known), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


#: What gives the names a role's ``workload.vars`` may hold for the given vars and whether
#: another name is an error, or None when any name goes
#: (:func:`benchmatrix.workloads.workload_variables`).
VariablesOf = Callable[[str, Mapping[str, Any]], tuple[frozenset[str], bool] | None]


def _variable_errors(doc: LocatedDocument, variables: VariablesOf | None) -> tuple[list[SpecError], list[str]]:
    """``workload.vars`` keys the role does not read: an error with "did you mean" (the
    first batch would refuse them), or a warning for a role whose variables are the
    tool's own options (fio: the host's fio decides, bmx check asks it).

    Returns:
        The errors and the warnings (``FILE:LINE: warning: ...``).
    """
    workload = doc.data["workload"]
    given = workload.get("vars")
    role = str(workload.get("role"))
    known_strict = variables(role, given) if variables is not None and isinstance(given, dict) else None
    if known_strict is None:
        return [], []
    known, strict = known_strict
    errs: list[SpecError] = []
    warns: list[str] = []
    for name in given:
        if name in known:
            continue
        hint = did_you_mean(name, known)
        if strict:
            errs.append(doc.error(("workload", "vars", name),
                                  f"unknown variable {shown_name(str(name))} in workload.vars: {role} reads "
                                  f"{', '.join(sorted(known))}{hint}"))
        else:
            warns.append(str(doc.error(("workload", "vars", name),
                                       f"warning: unknown variable {shown_name(str(name))} in workload.vars: no "
                                       f"option of the fio bmx knows (bmx check asks the host's fio){hint}")))
    return errs, warns


def _threshold_key_errors(doc: LocatedDocument, metric_names: MetricNamesOf | None) -> list[SpecError]:
    """report.threshold's and report.campaign_sd's metric keys name metrics the runs can
    hold: a misspelt key would silently leave its metric at the default.

    The metrics are known when the spec lists them (``report.metrics``), when the
    workload declares its own, or from the workload descriptors (``metric_names``) for a
    built-in workload; a workload whose names come from its output alone is not checked
    here.
    """
    keyed = {name: given for name in ("threshold", "campaign_sd")
             if isinstance(given := doc.data["report"].get(name), dict)}
    known_as = _known_metrics(doc, metric_names) if keyed else None
    if known_as is None:
        return []
    known, what = known_as
    errs: list[SpecError] = []
    for name, given in keyed.items():
        for key in given:
            if key == "default" or known.matches(str(key)):
                continue
            errs.append(_unknown_metric(doc, ("report", name, key), f"report.{name}", key, known, what))
    return errs


def _unknown_metric(doc: LocatedDocument, at: tuple[Any, ...], where: str, name: Any, known: MetricNames,
                    what: str) -> SpecError:
    """``WHERE names 'X', WHAT (metrics: ...); did you mean 'Y'?`` at ``at``."""
    shown = sorted(known.names) + [form for _, form in known.patterns]
    listed = ", ".join(shown[:20]) + (", ..." if len(shown) > 20 else "")
    return doc.error(at, f"{where} names {shown_name(str(name))}, {what} (metrics: {listed})"
                         + did_you_mean(name, known.names))


def _metric_reference_errors(doc: LocatedDocument, metric_names: MetricNamesOf | None) -> list[SpecError]:
    """Metric names the spec refers to (report.metrics, report.primary, report.tables' metric,
    workload.success.metrics) that no run can hold, with "did you mean": a misspelt name
    showed nothing, or a criterion that never applies. Checked against the workload
    descriptors' names (a built-in workload, a command timed by bmx), the spec's declared
    metrics and the counters of collect; not without the descriptors, nor for a role whose
    names come from its output."""
    if metric_names is None:
        return []
    d = doc.data
    produced = metric_names(str(d["workload"]["role"]), list(d.get("collect") or []))
    declared = frozenset(d["workload"].get("metrics") or {})
    known = MetricNames(declared, complete=True) | produced if declared else produced
    if not known.complete:
        return []
    what = f"which no metric of {d['workload']['role']} can be"
    errs: list[SpecError] = []
    for at, name in _metric_names(d):
        if at[:2] == ("workload", "metrics") or (at[:2] == ("report", "primary") and d["report"].get("metrics")):
            continue  # a declaration names itself; primary within report.metrics is checked there
        if metric_name_problem(name, list(d["factors"])) is None and not known.matches(str(name)):
            # The key's path without the name itself: report.metrics, report.tables.0.metric, ...
            where = ".".join(map(str, at[:-1] if at[0] == "workload" or isinstance(at[-1], int) else at))
            errs.append(_unknown_metric(doc, at, where, name, known, what))
    return errs


def _table_errors(doc: LocatedDocument, unknown: _Unknown) -> list[SpecError]:
    """report.tables' rows and columns name factors."""
    errs: list[SpecError] = []
    for ti, table in enumerate(doc.data["report"].get("tables") or []):
        for side in ("rows", "columns"):
            given = table.get(side) or []
            for fi, factor in enumerate([given] if isinstance(given, str) else given):
                if factor not in doc.data["factors"]:
                    errs.append(unknown(("report", "tables", ti, side) + (() if isinstance(given, str) else (fi,)),
                                        factor, f"report.tables.{ti}.{side}"))
    return errs


def _metric_errors(doc: LocatedDocument) -> list[SpecError]:
    """Declared metrics (regexes compile with a `value` group, JSON paths parse) and every
    metric name the spec gives."""
    d = doc.data
    errs: list[SpecError] = []
    for path, msg in check_declarations(d["workload"].get("metrics") or {}):
        errs.append(doc.error(("workload", "metrics") + tuple(path), msg))
    for at, metric in _metric_names(d):
        problem = metric_name_problem(metric, list(d["factors"]))
        if problem:
            # The path holds the name itself: escaped, so that the message stays one line.
            where = ".".join(str(p) if isinstance(p, int) or not name_problem(p, "") else shown_name(p) for p in at)
            errs.append(doc.error(at, f"{where}: {problem}"))
    return errs


def _template_errors(doc: LocatedDocument, factor_list: str) -> tuple[list[SpecError], set[str]]:
    """Workload templates may use factors and a few run variables only: their errors, and
    the variables they use."""
    d = doc.data
    errs: list[SpecError] = []
    used: set[str] = set()
    allowed = set(d["factors"]) | RUN_VARIABLES
    templates = list(_templates(d["workload"]["vars"], ("workload", "vars")))
    if len(templates) > MAX_TEMPLATES:
        errs.append(doc.error(("workload", "vars"), f"workload.vars holds {len(templates)} templates, more than the "
                                                     f"limit of {MAX_TEMPLATES}"))
        templates = []
    for at, text in templates:
        name = whole_variable(text)
        try:
            names_in = {name} if name is not None else _template_names(text)
        except _jinja2().TemplateSyntaxError as exc:
            errs.append(doc.error(at, f"template error in {'.'.join(map(str, at))}: {exc.message}"))
            continue
        used |= names_in
        for bad in sorted(names_in - allowed):
            errs.append(doc.error(at, f"{'.'.join(map(str, at))} uses unknown variable '{bad}' "
                                      f"(factors: {factor_list})"))
    return errs, used


def metric_name_problem(name: Any, factor_names: list[str]) -> str | None:
    """Why ``name`` cannot be a metric's name, or None when it can.

    A metric becomes a column of runs.csv (beside the factor and run columns) and
    part of file names (``plots/lines_NAME.svg``), so it is a plain identifier.
    """
    problem = name_problem(name, "metric name")
    if problem or not METRIC_RE.fullmatch(name) or ".." in name:
        return (f"{problem or 'invalid metric name ' + shown_name(name)}: use letters, digits, '_', '-' and '.', "
                "starting with a letter or '_', at most 64 characters (no '/' or '..')")
    if name in RESERVED:
        return f"metric name '{name}' is reserved (it is a column of the result files)"
    if name in factor_names:
        return f"metric name '{name}' is also a factor's name (both would be columns of runs.csv)"
    return None


def _metric_names(d: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every metric name the spec declares or refers to, with its document path."""
    for name in d["workload"].get("metrics") or {}:
        yield ("workload", "metrics", name), name
    for name in (d["workload"].get("success") or {}).get("metrics") or {}:
        yield ("workload", "success", "metrics", name), name
    report = d.get("report") or {}
    for i, name in enumerate(report.get("metrics") or []):
        yield ("report", "metrics", i), name
    for i, table in enumerate(report.get("tables") or []):
        yield ("report", "tables", i, "metric"), table["metric"]
    for i, name in enumerate(report.get("primary") or []):
        yield ("report", "primary", i), name


def _size_error(doc: LocatedDocument, factors: dict[str, list[Level]], zipped: dict[str, int]) -> SpecError | None:
    """The matrix's size, counted before expanding it: too many cells or runs is an error.

    A zip group is one dimension (its first member's length); ``include`` adds
    cells; ``exclude`` is not subtracted (it needs the expansion this avoids).
    """
    d = doc.data
    dims, groups = [], set()
    for name, levels in factors.items():
        if name in zipped:
            if zipped[name] in groups:
                continue
            groups.add(zipped[name])
        dims.append(len(levels))
    cells = math.prod(dims) + len(d["include"])
    shape = " x ".join(map(str, dims[:12])) + (f" x ... ({len(dims)} dimensions)" if len(dims) > 12 else "")
    if cells > MAX_CELLS:
        return doc.error(("factors",), f"the matrix has {cells} cells ({shape}"
                                       f"{' + %d included' % len(d['include']) if d['include'] else ''}), "
                                       f"more than the limit of {MAX_CELLS}")
    runs = cells * (d["replicates"] + d["warmup"])
    if runs > MAX_RUNS_PER_HOST:
        return doc.error(("replicates",), f"{cells} cells x ({d['replicates']} replicates + {d['warmup']} warm-up) "
                                          f"= {runs} runs per host, more than the limit of {MAX_RUNS_PER_HOST}")
    if cells * len(d["exclude"]) > MAX_EXCLUDE_CHECKS:
        return doc.error(("exclude",), f"{len(d['exclude'])} exclude entries over {cells} cells are too many "
                                       f"to check (limit: {MAX_EXCLUDE_CHECKS} comparisons); use fewer entries, "
                                       "each with lists of levels")
    return None


def _jinja2() -> Any:
    """Jinja2, imported when a template is more than :func:`whole_variable`."""
    import jinja2

    return jinja2


def _template_names(text: str) -> set[str]:
    """The variables a template uses (Jinja2's parse, in the spec's sandbox)."""
    import jinja2.meta

    from benchmatrix.spec import templating

    return set(jinja2.meta.find_undeclared_variables(templating.ENV.parse(text)))


def render_failures() -> tuple[type[Exception], ...]:
    """What :func:`render_vars` raises for a value its templates cannot render: evaluate
    it in the ``except`` clause, Jinja2's errors are there only once a template needed it."""
    jinja2 = sys.modules.get("jinja2")
    return (TypeError, ValueError, ArithmeticError, AttributeError) + ((jinja2.TemplateError,) if jinja2 else ())


def _render_errors(doc: LocatedDocument, cells: list[Cell]) -> tuple[list[SpecError], list[str]]:
    """Render every workload template once per distinct value combination it uses.

    A template that fails for one cell would otherwise fail that cell's batch in
    the middle of a campaign. Only the factors a template names matter, so each
    distinct combination of their values is rendered once; in practice far fewer
    than the cells. The first failure per template is reported. Past
    :data:`MAX_RENDERS` renders or :data:`MAX_RENDER_SECONDS` of CPU time the rest
    is left unchecked, with a warning.

    Returns:
        The errors and the warnings (``FILE:LINE: warning: ...``).
    """
    d = doc.data
    errs: list[SpecError] = []
    budget, tried = MAX_RENDERS, 0
    deadline = time.thread_time() + MAX_RENDER_SECONDS
    for at, text in _templates(d["workload"]["vars"], ("workload", "vars")):
        if whole_variable(text) is not None:
            continue  # exactly {{ name }}: the value itself, nothing to render
        from benchmatrix.spec import templating

        used = sorted(_template_names(text))
        done: set[tuple[Any, ...]] = set()
        for cell in cells:
            combo = tuple(level_key(cell.factors[n]) for n in used if n in cell.factors)
            if combo in done:
                continue
            if tried == budget or time.thread_time() > deadline:
                return errs, [str(doc.error(at, f"warning: workload templates were tried on the first {tried} "
                                                "distinct value combinations only; a template may still fail for "
                                                "a later cell"))]
            tried += 1
            done.add(combo)
            ctx = {**cell.factors, "experiment": d["name"], "host": "localhost", "run_id": "r0",
                   "cell_id": cell.cell_id, "replicate": 1, "warmup": False}
            try:
                if "\x00" in templating.render(text, ctx):
                    raise ValueError("the rendered value contains a NUL character")
            except (_jinja2().TemplateError, TypeError, ValueError, ArithmeticError, AttributeError,
                    LookupError, RecursionError, MemoryError) as exc:
                errs.append(doc.error(at, f"{'.'.join(map(str, at))} cannot be rendered for cell {cell.label()}: "
                                          f"{type(exc).__name__}: {exc}"))
                break
    return errs, []


def _restricted_errors(doc: LocatedDocument, cells: list[Cell], knobs: dict[str, Knob]) -> list[SpecError]:
    """Checks that need the expanded matrix: a restricted plan must be possible."""
    d = doc.data
    if d["order"]["strategy"] != "restricted":
        return []
    errs: list[SpecError] = []
    costly = [f for f in d["factors"] if f in knobs and knobs[f].cost_class in COSTLY_CLASSES]
    per_plot: dict[tuple[Any, ...], int] = {}
    for cell in cells:
        key = tuple(level_key(cell.factors[f]) for f in costly)
        per_plot[key] = per_plot.get(key, 0) + 1
    visits = d["order"].get("visits") or d["replicates"]
    smallest = min(per_plot.values())
    if smallest * d["replicates"] < visits:
        errs.append(doc.error(("order", "visits"),
                              f"order.visits {visits} would leave visits empty: the smallest whole plot has "
                              f"{smallest} cell(s) x {d['replicates']} replicate(s) = "
                              f"{smallest * d['replicates']} measured run(s); use at most that many visits"))
    ctl = d["order"].get("control")
    if ctl and costly:
        key = tuple(level_key(ctl[f]) for f in costly)
        if key not in per_plot:
            where = ", ".join(f"{f}={ctl[f]}" for f in costly)
            errs.append(doc.error(("order", "control"),
                                  f"order.control sets {where}, which is no whole plot of the matrix: a restricted "
                                  "plan runs the control only in visits of its own whole plot, so it would never run"))
    return errs


def _control_errors(doc: LocatedDocument, cells: list[Cell], knobs: dict[str, Knob]) -> list[SpecError]:
    """``order.control`` must share its knob levels with some cell: control runs go only
    right after a measured run in their knob setting (docs/spec.md), else never."""
    ctl = doc.data["order"].get("control")
    names = [f for f in doc.data["factors"] if f in knobs]
    if not ctl or not names:
        return []
    setting = {f: ctl[f] for f in names}
    if any(matches(c.factors, setting) for c in cells):
        return []
    where = ", ".join(f"{f}={ctl[f]}" for f in names)
    return [doc.error(("order", "control"),
                      f"order.control sets {where}, which no cell of the matrix has: control runs go only where a "
                      "host already is in their knob setting (so they never cost a reconfiguration), so it would "
                      "never run")]


def _knob_errors(doc: LocatedDocument, factor: str, knob: dict[str, Any]) -> list[SpecError]:
    """A knob against its backend's declaration (benchmatrix.host.knobs): a cost class
    cheaper than its changes take, a variable the role does not read, a value of the
    wrong type. A role without a backend is left to the roles check (:func:`_role_errors`)."""
    backend = KNOB_BACKENDS.get(knob.get("role"))
    if backend is None:
        return []
    errs = []
    cost = knob.get("cost", "none")
    cls = cost if isinstance(cost, str) else cost.get("class")
    if cls in COST_CLASSES and COST_CLASSES.index(cls) < COST_CLASSES.index(backend.cost):
        why = "takes effect only after a reboot" if backend.reboot else f"takes a {backend.cost}"
        errs.append(doc.error(("knobs", factor), f"knob '{factor}': {knob['role']} {why}; "
                                                 f"declare cost: {backend.cost} (not {cls})"))
    options = {o.name: o for o in backend.options}
    variables = knob.get("vars")
    for name, value in (variables.items() if isinstance(variables, dict) else ()):
        if name not in options:
            errs.append(doc.error(("knobs", factor, "vars", name),
                                  f"knob '{factor}': {knob['role']} has no variable {shown_name(str(name))} "
                                  f"(its variables: {', '.join(options) or 'none'}){did_you_mean(name, options)}"))
        elif options[name].type_problem(value):
            errs.append(doc.error(("knobs", factor, "vars", name),
                                  f"knob '{factor}': {options[name].type_problem(value)}"))
    return errs


def shipped_roles(spec_path: str | Path, project_dir: str | Path | None = None) -> set[str]:
    """The Ansible roles a spec can name: those of ``project_dir/playbooks/roles`` and
    those of the spec's own project (the nearest directory above the spec file with
    ``playbooks/roles``), so a role added to either counts without a list to update."""
    dirs = [Path(project_dir) / "playbooks" / "roles"] if project_dir is not None else []
    for d in Path(spec_path).resolve().parents:
        if (d / "playbooks" / "roles").is_dir():
            dirs.append(d / "playbooks" / "roles")
            break
    # A knob role may be only meta/ and defaults/ (its backend is in benchmatrix/host/knobs.py).
    return {p.name for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")}


def _role_errors(doc: LocatedDocument, roles: set[str]) -> list[SpecError]:
    """A knob or workload role that no roles directory ships: the error lists the ones that exist."""
    d = doc.data
    wanted = [(("workload", "role"), "workload", d["workload"].get("role"))]
    wanted += [(("knobs", f, "role"), "knob", k.get("role")) for f, k in d["knobs"].items() if isinstance(k, dict)]
    errs = []
    for at, kind, role in wanted:
        if isinstance(role, str) and ROLE_RE[kind].fullmatch(role) and role not in roles:
            kinds = sorted(r for r in roles if r.startswith(kind + "_"))
            errs.append(doc.error(at, f"unknown {kind} role '{role}' ({kind} roles: {', '.join(kinds) or 'none'})"
                                      + did_you_mean(role, kinds)))
    return errs


def load_spec(path: str | Path, cost_seconds: dict[str, float] | None = None,
              roles: set[str] | None = None, metric_names: MetricNamesOf | None = None,
              variables: VariablesOf | None = None) -> Spec:
    """Load, validate and normalize an experiment spec.

    Args:
        path: The spec file.
        cost_seconds: Seconds of a knob change per cost class for knobs that give no
            ``seconds`` of their own (see :func:`benchmatrix.spec.config.read_config`); default
            :data:`DEFAULT_COST_SECONDS`. They feed estimates only, never the plan.
        roles: The roles that exist (:func:`shipped_roles`); when given, a knob or
            workload role outside them is an error. None: not checked.
        metric_names: The metric names of a workload role and its counters
            (:func:`benchmatrix.workloads.metric_names`); when given, ``report.threshold``'s
            keys of a built-in workload are checked against them. None: only against the
            names the spec gives (``report.metrics``, declared ``metrics``).
        variables: The names a built-in workload's ``vars`` may hold
            (:func:`benchmatrix.workloads.workload_variables`); when given, another name is an
            error with "did you mean" (a warning for fio's options). None: not checked.

    Raises:
        SpecErrors: every problem found, each ``FILE:LINE: message``.
    """
    defaults = {**DEFAULT_COST_SECONDS, **(cost_seconds or {})}
    try:
        doc = load_located(path)
    except SpecError as exc:
        raise SpecErrors([exc]) from None
    errors = _schema_errors(doc)
    if errors:
        raise SpecErrors(errors)
    doc.data = _apply_defaults(doc.data)
    errors, warnings = _semantic_errors(doc)
    errors += _role_errors(doc, roles) if roles is not None else []
    errors += _threshold_key_errors(doc, metric_names)
    errors += _metric_reference_errors(doc, metric_names)
    var_errors, var_warnings = _variable_errors(doc, variables)
    errors += var_errors
    warnings += var_warnings
    if errors:
        raise SpecErrors(errors)
    d = doc.data
    cells = expand(d["factors"], d["zip"], d["exclude"], d["include"])
    if not cells:
        at = ("exclude",) if d["exclude"] else ("factors",)
        raise SpecErrors([doc.error(at, "the matrix expands to zero cells (every cell is excluded)")])
    knobs = {}
    for factor, k in d["knobs"].items():
        cost = k.get("cost", "none")
        cls = cost if isinstance(cost, str) else cost["class"]
        secs = defaults[cls] if isinstance(cost, str) or "seconds" not in cost else float(cost["seconds"])
        knobs[factor] = Knob(factor, k["role"], cls, secs, dict(k.get("vars", {})))
    render_errors, render_warnings = _render_errors(doc, cells)
    warnings += render_warnings
    errors = (_restricted_errors(doc, cells, knobs) or _control_errors(doc, cells, knobs)) + render_errors
    if errors:
        raise SpecErrors(errors)
    # Key order is irrelevant except the factors': it sets the matrix order, hence the plan.
    canonical = json.dumps({"spec": d, "factor_order": list(d["factors"])}, sort_keys=True,
                           separators=(",", ":"), default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return Spec(str(path), d, digest, cells, knobs, warnings)
