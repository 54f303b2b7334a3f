"""Experiment specs: loading, schema and semantic validation, templating of vars.

``load_spec`` returns a validated :class:`Spec` or raises :class:`SpecErrors`, whose
lines read ``FILE:LINE: message`` (the line of the offending key).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import jinja2
import jinja2.meta
import jinja2.sandbox
import jsonschema

from benchmatrix.errors import SpecError, SpecErrors
from benchmatrix.matrix import Cell, Level, cell_id_of, expand, _same_level
from benchmatrix.yamlload import LocatedDocument, load_located

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
FACTOR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Column names of plan.csv / runs.csv that a factor may not shadow.
RESERVED = frozenset({
    "seq", "host", "run_id", "cell_id", "replicate", "warmup", "control", "visit",
    "batch", "attempt", "status", "reason", "started_at", "ended_at", "duration_s",
    "metric", "unit", "experiment", "n", "mean", "median", "min", "max", "sd", "cv",
    "ci_low", "ci_high", "ci_method", "exit_code", "log",
})
#: Variables a workload template may use besides the factors.
RUN_VARIABLES = frozenset({"experiment", "host", "run_id", "cell_id", "replicate", "warmup"})
#: Cost classes of a knob change, cheapest first.
COST_CLASSES = ("none", "restart", "reboot")
#: Classes whose changes are worth restricting the randomization for (whole-plot factors).
COSTLY_CLASSES = ("restart", "reboot")
#: Default estimated seconds of one knob change per cost class; ``cost_seconds`` in
#: config/config.yaml overrides them, a knob's own ``{class, seconds}`` overrides both.
DEFAULT_COST_SECONDS = {"none": 0.0, "restart": 60.0, "reboot": 300.0}
#: Knob roles whose every change takes a reboot: their knobs must be of cost class
#: reboot, or the plan would interleave their levels as if they were free.
REBOOT_ROLES = frozenset({"knob_kernel_cmdline"})


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of experiment specs shipped in the package."""
    text = resources.files("benchmatrix").joinpath("schemas/spec.schema.json").read_text()
    return json.loads(text)


@dataclass(frozen=True)
class Knob:
    """A factor that reconfigures the host through an Ansible role."""

    factor: str
    role: str
    cost_class: str
    cost_seconds: float
    vars: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


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
    def visits(self) -> int:
        """Whole-plot visits per whole plot of a restricted plan (``order.visits``, else replicates)."""
        return int(self.order.get("visits") or self.data["replicates"])

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
        factors = {n: ctl[n] for n in self.factor_names}
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
        order.setdefault(key, sub["default"])
    wl = out["workload"]
    for key, sub in props["workload"]["properties"].items():
        if key != "role":
            wl.setdefault(key, json.loads(json.dumps(sub["default"])))
    report = out.setdefault("report", {})
    report.setdefault("metrics", [])
    report.setdefault("compare", None)
    if report["compare"] is not None:
        report["compare"].setdefault("by", [])
    return out


def _schema_errors(doc: LocatedDocument) -> list[SpecError]:
    validator = jsonschema.Draft202012Validator(schema())
    errors = []
    for err in validator.iter_errors(doc.data):
        where = ".".join(str(p) for p in err.absolute_path) or "spec"
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            # Point at the unknown key itself, not at its parent.
            for key in extra:
                errors.append(doc.error(tuple(err.absolute_path) + (key,),
                                        f"unknown key '{key}' in {where}"
                                        f" (allowed: {', '.join(sorted(err.schema.get('properties', {})))})"))
            continue
        if err.validator == "oneOf" and where.endswith(".cost"):
            msg = "must be none, restart, reboot or {class: ..., seconds: ...}"
        elif err.validator == "minItems" and err.instance == []:
            msg = "must not be empty"
        else:
            msg = err.message
        errors.append(doc.error(tuple(err.absolute_path), f"{where}: {msg}"))
    return errors


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


_ENV = jinja2.sandbox.ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined,
                                                    autoescape=False, keep_trailing_newline=True)
_WHOLE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_vars(value: Any, context: dict[str, Any]) -> Any:
    """Render Jinja2 templates inside ``value`` with a run's context.

    A string that is exactly ``{{ name }}`` takes the context value with its type;
    other templates render to strings. Sandboxed: templates cannot reach Python.
    """
    if isinstance(value, str):
        m = _WHOLE_VAR.fullmatch(value)
        if m and m.group(1) in context:
            return context[m.group(1)]
        if "{{" in value or "{%" in value:
            return _ENV.from_string(value).render(context)
        return value
    if isinstance(value, dict):
        return {k: render_vars(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_vars(v, context) for v in value]
    return value


def _semantic_errors(doc: LocatedDocument) -> tuple[list[SpecError], list[str]]:
    d = doc.data
    errs: list[SpecError] = []
    warns: list[str] = []
    factors: dict[str, list[Level]] = d["factors"]
    names = list(factors)
    known = set(names)

    def unknown(at: tuple[Any, ...], name: Any, what: str) -> None:
        errs.append(doc.error(at, f"{what} names unknown factor '{name}' (factors: {', '.join(names)})"))

    if not NAME_RE.match(str(d["name"])):
        errs.append(doc.error(("name",), f"invalid experiment name '{d['name']}': use letters, digits, "
                                         "'_' and '-', starting with a letter or digit, at most 64 characters"))
    for name, levels in factors.items():
        if not isinstance(name, str):
            errs.append(doc.error(("factors", name), f"factor name {name!r} is not a string (YAML reads "
                                                     "on/off/yes/no as booleans and digits as numbers: quote it)"))
        elif not FACTOR_RE.match(name):
            errs.append(doc.error(("factors", name), f"invalid factor name '{name}': use letters, digits and '_', "
                                                     "not starting with a digit"))
        elif name in RESERVED:
            errs.append(doc.error(("factors", name), f"factor name '{name}' is reserved (it is a column of the result files)"))
        if not levels:
            errs.append(doc.error(("factors", name), f"factor '{name}' has an empty level list"))
        for i, lvl in enumerate(levels):
            if any(_same_level(lvl, other) for other in levels[:i]):
                errs.append(doc.error(("factors", name, i), f"factor '{name}' lists level '{lvl}' twice"))

    zipped: dict[str, int] = {}
    for gi, group in enumerate(d["zip"]):
        lengths = {}
        for mi, member in enumerate(group):
            if member not in known:
                unknown(("zip", gi, mi), member, "zip group")
            elif member in zipped:
                errs.append(doc.error(("zip", gi, mi), f"factor '{member}' is in more than one zip group"))
            else:
                zipped[member] = gi
                lengths[member] = len(factors[member])
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{k} has {v}" for k, v in lengths.items())
            errs.append(doc.error(("zip", gi), f"zip group levels differ in length: {desc}"))

    for ei, entry in enumerate(d["exclude"]):
        for key, want in entry.items():
            if key not in known:
                unknown(("exclude", ei, key), key, "exclude entry")
                continue
            for w in (want if isinstance(want, list) else [want]):
                if not any(_same_level(w, lvl) for lvl in factors[key]):
                    errs.append(doc.error(("exclude", ei, key),
                                          f"exclude entry: '{w}' is not a level of factor '{key}'"
                                          f" (levels: {', '.join(map(str, factors[key]))})"))
    for ii, entry in enumerate(d["include"]):
        for key in entry:
            if key not in known:
                unknown(("include", ii, key), key, "include entry")
        missing = [n for n in names if n not in entry]
        if missing:
            errs.append(doc.error(("include", ii), f"include entry misses factor(s): {', '.join(missing)}"))

    for factor, knob in d["knobs"].items():
        if factor not in known:
            unknown(("knobs", factor), factor, "knobs")
        cost = knob.get("cost", "none")
        cls = cost if isinstance(cost, str) else cost.get("class")
        if knob.get("role") in REBOOT_ROLES and cls != "reboot":
            errs.append(doc.error(("knobs", factor), f"knob '{factor}': {knob['role']} takes effect only after a "
                                                     f"reboot; declare cost: reboot (not {cls})"))

    ctl = d["order"].get("control")
    if ctl:
        for key in ctl:
            if key not in known:
                unknown(("order", "control", key), key, "order.control")
        missing = [n for n in names if n not in ctl]
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

    compare = d["report"].get("compare")
    if compare:
        if compare["factor"] not in known:
            unknown(("report", "compare", "factor"), compare["factor"], "report.compare.factor")
        elif not any(_same_level(compare["baseline"], lvl) for lvl in factors[compare["factor"]]):
            errs.append(doc.error(("report", "compare", "baseline"),
                                  f"report.compare.baseline '{compare['baseline']}' is not a level of factor "
                                  f"'{compare['factor']}'"))
        for bi, by in enumerate(compare["by"]):
            if by not in known:
                unknown(("report", "compare", "by", bi), by, "report.compare.by")

    # Declared metrics: regexes must compile with a `value` group, JSON paths parse.
    from benchmatrix.parsers import check_declarations

    for path, msg in check_declarations(d["workload"].get("metrics") or {}):
        errs.append(doc.error(("workload", "metrics") + tuple(path), msg))

    # Workload templates may use factors and a few run variables only.
    used: set[str] = set()
    allowed = known | RUN_VARIABLES
    for at, text in _templates(d["workload"]["vars"], ("workload", "vars")):
        try:
            names_in = jinja2.meta.find_undeclared_variables(_ENV.parse(text))
        except jinja2.TemplateSyntaxError as exc:
            errs.append(doc.error(at, f"template error in {'.'.join(map(str, at))}: {exc.message}"))
            continue
        used |= names_in
        for bad in sorted(names_in - allowed):
            errs.append(doc.error(at, f"{'.'.join(map(str, at))} uses unknown variable '{bad}' "
                                      f"(factors: {', '.join(names)})"))
    for name in names:
        if name not in used and name not in d["knobs"]:
            warns.append(str(doc.error(("factors", name),
                                       f"warning: factor '{name}' is used by no knob and no workload variable "
                                       "(fine if it labels a condition changed by hand)")))
    return errs, warns


def _restricted_errors(doc: LocatedDocument, cells: list[Cell], knobs: dict[str, Knob]) -> list[SpecError]:
    """Checks that need the expanded matrix: a restricted plan must be possible."""
    d = doc.data
    if d["order"]["strategy"] != "restricted":
        return []
    errs: list[SpecError] = []
    costly = [f for f in d["factors"] if f in knobs and knobs[f].cost_class in COSTLY_CLASSES]
    per_plot: dict[tuple[Any, ...], int] = {}
    for cell in cells:
        key = tuple(repr(cell.factors[f]) for f in costly)
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
        key = tuple(repr(ctl[f]) for f in costly)
        if key not in per_plot:
            where = ", ".join(f"{f}={ctl[f]}" for f in costly)
            errs.append(doc.error(("order", "control"),
                                  f"order.control sets {where}, which is no whole plot of the matrix: a restricted "
                                  "plan runs the control only in visits of its own whole plot, so it would never run"))
    return errs


#: Default seconds one batch (one Ansible call) adds to a campaign, for estimates.
DEFAULT_BATCH_OVERHEAD_SECONDS = 3.0


def read_planning_config(config_path: str | Path) -> dict[str, Any]:
    """The estimate settings of config/config.yaml.

    Returns:
        ``cost_seconds``: default seconds of a knob change per cost class (classes
        the file leaves out keep :data:`DEFAULT_COST_SECONDS`),
        ``batch_overhead_seconds`` and ``batch_max_runs`` (None when not set).
        A missing file or key means the defaults.

    Raises:
        SpecErrors: a malformed entry, as ``FILE:LINE: message``.
    """
    out: dict[str, Any] = {"cost_seconds": dict(DEFAULT_COST_SECONDS),
                           "batch_overhead_seconds": DEFAULT_BATCH_OVERHEAD_SECONDS,
                           "batch_max_runs": None}
    if not Path(config_path).is_file():
        return out
    try:
        doc = load_located(config_path)
    except SpecError as exc:
        raise SpecErrors([exc]) from None

    def seconds(value: Any) -> bool:
        return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0

    errs = []
    given = doc.data.get("cost_seconds")
    if given is not None and not isinstance(given, dict):
        errs.append(doc.error(("cost_seconds",), "cost_seconds must be a mapping "
                                                 "{none: S, restart: S, reboot: S} of seconds"))
    for cls, secs in (given or {}).items() if isinstance(given, dict) else ():
        if cls not in COST_CLASSES:
            errs.append(doc.error(("cost_seconds", cls), f"cost_seconds: unknown cost class '{cls}' "
                                                         f"(classes: {', '.join(COST_CLASSES)})"))
        elif not seconds(secs):
            errs.append(doc.error(("cost_seconds", cls), f"cost_seconds.{cls} must be a number of seconds >= 0, "
                                                         f"not {secs!r}"))
        else:
            out["cost_seconds"][cls] = float(secs)
    overhead = doc.data.get("batch_overhead_seconds")
    if overhead is not None:
        if seconds(overhead):
            out["batch_overhead_seconds"] = float(overhead)
        else:
            errs.append(doc.error(("batch_overhead_seconds",), "batch_overhead_seconds must be a number of "
                                                               f"seconds >= 0, not {overhead!r}"))
    max_runs = doc.data.get("batch_max_runs")
    if max_runs is not None:
        if isinstance(max_runs, int) and not isinstance(max_runs, bool) and max_runs >= 1:
            out["batch_max_runs"] = max_runs
        else:
            errs.append(doc.error(("batch_max_runs",), f"batch_max_runs must be a whole number >= 1, not {max_runs!r}"))
    if errs:
        raise SpecErrors(errs)
    return out


def load_spec(path: str | Path, cost_seconds: dict[str, float] | None = None) -> Spec:
    """Load, validate and normalize an experiment spec.

    Args:
        path: The spec file.
        cost_seconds: Seconds of a knob change per cost class for knobs that give no
            ``seconds`` of their own (see :func:`read_planning_config`); default
            :data:`DEFAULT_COST_SECONDS`. They feed estimates only, never the plan.

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
    errors = _restricted_errors(doc, cells, knobs)
    if errors:
        raise SpecErrors(errors)
    # Key order is irrelevant except the factors': it sets the matrix order, hence the plan.
    canonical = json.dumps({"spec": d, "factor_order": list(d["factors"])}, sort_keys=True,
                           separators=(",", ":"), default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return Spec(str(path), d, digest, cells, knobs, warnings)
