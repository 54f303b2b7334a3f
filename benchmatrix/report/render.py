"""The experiment report: ``report.html`` and ``report.md`` from plan, runs and summary.

The tables are computed here with pandas; how they look is decided by the Jinja2
templates in ``benchmatrix/templates`` (number formats are template filters). Both
formats carry the same content, so a reader of the Markdown misses nothing but style.

The report renders from whatever exists: a campaign that is still running or that
had failures gets a report too, with a visible "partial results" notice, and every
cell of the matrix is listed even before it has a single result.

Rendering reads the tables collect computed (comparisons, summary by host, record
notes: :mod:`benchmatrix.results.tables`) and writes no CSV; beside the two reports it
writes only the plots, as ``plots/NAME.svg`` for the Markdown.
Long tables are capped so that a million-run campaign still gives a readable page:
the executed order shows the first and last ``ORDER_HEAD`` / ``ORDER_TAIL`` runs,
failed runs the first ``FAILED_ROWS``; ``runs.csv`` holds everything. The template
context is documented in ``docs/report.md``; users may bring their own templates
(``report.template_dir`` in the spec, or ``template_dir=`` here), which render in a
sandbox bounded in CPU time, memory and output (:mod:`benchmatrix.report.sandbox`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np
import pandas as pd

from benchmatrix import layout
from benchmatrix.analyze import comparisons as analysis
from benchmatrix.analyze.explain import SHOWN, decided_positions, finding_lists, finding_runs
from benchmatrix.analyze.stats import (
    bool_column,
    effective_runs,
    execution_order,
    is_ok,
    metric_direction,
    start_ns,
)
from benchmatrix.analyze.tables import (
    campaign_hosts,
    cell_labels,
    derive_checks,
    derive_tables,
    normalized,
    report_metrics,
)
from benchmatrix.files import atomic_write, user_cache_dir
from benchmatrix.layout import STATES
from benchmatrix.names import name_problem, printable
from benchmatrix.report import plots, sandbox, units
from benchmatrix.report.diff import grouped
from benchmatrix.report.plot_worker import PlotWorker, in_process
from benchmatrix.report.terminal import compare_page_rows
from benchmatrix.report.units import display_unit
from benchmatrix.results.status import decide
from benchmatrix.results.tables import Tables, metric_units

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Placeholder shown for a missing value.
MISSING = layout.MISSING
#: Above this many executed runs the HTML order table starts collapsed.
COLLAPSE_ORDER_ROWS = 200
#: Rows of the executed-order table: the first ORDER_HEAD and the last ORDER_TAIL.
ORDER_HEAD = 100
ORDER_TAIL = 100
#: Failed attempts listed (runs.csv has them all).
FAILED_ROWS = 200
#: Comparisons listed in the table and significant findings spelled out as sentences.
COMPARISON_ROWS = 500
FINDING_SENTENCES = 40
#: Findings that get a section of their own under "What moved with each finding" (the
#: first ones that moved a counter): the counters' table and a plot each.
FINDING_SECTIONS = 5
#: Batches listed in the timeline (first and last half).
TIMELINE_BATCHES = 40
#: Rows per metric of the per-host tables (summary_by_host.csv has them all).
HOST_ROWS = 2000
#: Templates rendered by default; user template dirs may add more.
TEMPLATES = ("report.html.j2", "report.md.j2")

_KINDS = ("measured", "warm-up", "control")


# ----------------------------------------------------------------- template filters

#: Numbers as the report writes them (a template filter): :func:`benchmatrix.report.units.format_number`.
format_number = units.format_number
_is_missing = units.is_missing


def format_percent(fraction: Any) -> str:
    """A fraction as a percentage with one decimal (``0.0123`` -> ``1.2``)."""
    if _is_missing(fraction):
        return MISSING
    return f"{float(fraction) * 100:.1f}"


#: Any cell value as text (a template filter): :func:`benchmatrix.layout.level_text`.
format_value = layout.level_text


def markdown_cell(text: Any) -> str:
    """Text made safe for one GitHub-flavoured table cell (pipes, line breaks)."""
    # "<" would start an HTML tag in GitHub's renderer and hide text like "<stdin>".
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace("\r", " ").replace("\n", " "))


#: Options of the report's Jinja2 environment that shape the compiled templates
#: (the autoescape rule is :func:`_autoescape`); they name the template cache.
_JINJA_OPTIONS = {"trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": True}


def _autoescape(name: str | None) -> bool:
    # User text must not become markup in HTML; Markdown keeps it verbatim.
    return bool(name) and name.endswith(".html.j2")


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between jobs, best effort: an unreadable or unwritable
    cache only costs the compilation."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _template_cache(sandboxed: bool = False) -> jinja2.BytecodeCache | None:
    """Where compiled templates are kept: ``$XDG_CACHE_HOME/benchmatrix`` (default
    ``~/.cache/benchmatrix``), or nowhere when it cannot be made.

    Compiling the two reports' templates costs about 0.25 s of every collect job;
    loading them compiled, a few milliseconds. Jinja2 checks each template's source
    against the cached code; the folder name covers what else is compiled in (Python,
    Jinja2, the environment's options, the sandbox, whose code routes every call
    through its checks), so a change of any of them starts afresh.
    """
    rule = _autoescape.__code__  # its bytecode and constants: an edited rule is a new key
    key = repr((sys.version_info[:2], jinja2.__version__, sorted(_JINJA_OPTIONS.items()),
                rule.co_code, rule.co_consts, sandboxed)).encode()
    try:
        folder = user_cache_dir() / f"templates-{hashlib.sha256(key).hexdigest()[:12]}"
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):
        return None
    return _TemplateCache(str(folder))


#: Bounds of a render with user templates (docs/report.md): CPU seconds, megabytes of
#: memory beyond what the report's context holds, megabytes of output (all files
#: together). The built-in templates, extended by a user's, render a 5000-cell campaign
#: in 1.9 s of CPU, 9 MB of output, within 32 MB more memory (measured 2026-12-02);
#: the largest spec (100000 cells) needs about 20 times that.
TEMPLATE_CPU_SECONDS = 60
TEMPLATE_MEMORY_MB = 512
TEMPLATE_OUTPUT_MB = 256


def _environment(template_dir: str | Path | None = None) -> jinja2.Environment:
    """The Jinja2 environment: user templates first, then the built-in ones.

    Without ``template_dir``, a plain environment of the built-in templates (the
    package's own code). With it, a sandbox (:class:`benchmatrix.report.sandbox.ReportSandbox`)
    that loads user templates only from inside the directory; a user's ``report.html.j2``
    replaces the built-in one, or extends it as ``builtin/report.html.j2`` and overrides
    only some blocks. Compiled templates are cached (:func:`_template_cache`).
    """
    builtin = jinja2.PackageLoader("benchmatrix.report", "templates")
    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        loaders.append(sandbox.ConfinedLoader(template_dir))
    loaders += [jinja2.PrefixLoader({"builtin": builtin}), builtin]
    kind = jinja2.Environment if template_dir is None else sandbox.ReportSandbox
    env = kind(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=_autoescape,
        bytecode_cache=_template_cache(sandboxed=template_dir is not None),
        **_JINJA_OPTIONS,
    )
    env.filters.update(num=format_number, pct=format_percent, val=format_value, md=markdown_cell,
                       grouped_differences=grouped, pct_interval=units.pct_interval, pct_bound=units.pct_bound,
                       compare_rows=compare_page_rows)
    return env


#: Longest name of a user template's output file.
MAX_OUTPUT_NAME = 200


def _user_outputs(user_dir: Path) -> dict[str, str]:
    """Output name -> template name of a user directory's templates: the two reports,
    then every other ``NAME.j2`` (sorted).

    Raises:
        ReportTemplateError: a template would write over a file the experiment owns
            (plan.csv, the lock, ...), a hidden file, or a directory.
    """
    outputs = {name[:-3]: name for name in TEMPLATES}
    owned = (layout.OWNED_FILES | layout.OWNED_DIRS) - {layout.REPORT_HTML, layout.REPORT_MD}
    for extra in sorted(user_dir.glob("*.j2")):
        out = extra.name[:-3]
        if extra.name in TEMPLATES:
            continue
        if out in owned or out.startswith(".") or not out:
            raise sandbox.ReportTemplateError(
                f"{extra}: would render to {out!r}, a name the experiment owns (its tables, lock, "
                "directories, or a hidden file); rename the template")
        # A line break, an escape or a right-to-left override in a file name garbles
        # every listing of results/ (ls, bmx publish).
        problem = name_problem(out, "report template output", max_chars=MAX_OUTPUT_NAME)
        if problem:
            raise sandbox.ReportTemplateError(f"{user_dir}/{printable(extra.name)}: {problem}")
        outputs[out] = extra.name
    return outputs


# ----------------------------------------------------------------- table building

def _rows_of(runs: pd.DataFrame, keys: list[tuple[str, int]]) -> pd.DataFrame:
    """The rows of ``runs`` with these (run_id, attempt), in the order given."""
    if not keys or runs.empty:
        return runs.iloc[0:0]
    at = pd.Series(np.arange(len(runs)), index=pd.MultiIndex.from_arrays(
        [runs["run_id"].astype(str), pd.to_numeric(runs["attempt"], errors="coerce").fillna(0).astype("int64")]))
    at = at[~at.index.duplicated(keep="last")]
    pos = at.reindex(pd.MultiIndex.from_tuples(keys)).dropna().astype("int64")
    return runs.iloc[pos.to_numpy()]


def _kind(warmup: pd.Series, control: pd.Series) -> pd.Series:
    w, c = bool_column(warmup), bool_column(control)
    return pd.Series(np.select([w.to_numpy(), c.to_numpy()], ["warm-up", "control"], "measured"),
                     index=warmup.index)


def _run_states(plan: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run_id (planned or executed): cell_id, host, kind, state.

    The state comes from :func:`benchmatrix.results.status.decide`, the rule ``bmx status``
    uses too, so the two never disagree (an interrupted run or a requested re-run
    not yet run is pending in both)."""
    planned = plan.drop_duplicates("run_id", keep="first")
    planned = pd.DataFrame({"run_id": planned["run_id"], "cell_id": planned["cell_id"],
                            "host": planned["host"], "kind": _kind(planned["warmup"], planned["control"])})
    executed = runs.drop_duplicates("run_id", keep="first")
    executed = executed[~executed["run_id"].isin(planned["run_id"])]
    extra = pd.DataFrame({"run_id": executed["run_id"], "cell_id": executed["cell_id"],
                          "host": executed["host"], "kind": _kind(executed["warmup"], executed["control"])})
    ids = pd.concat([planned, extra], ignore_index=True)
    decided = decide(plan, runs)
    ids["state"] = ids["run_id"].astype(str).map(dict(zip(decided["run_id"], decided["state"])))
    return ids


def _progress(states: pd.DataFrame) -> dict[str, Any]:
    counts = (pd.crosstab(states["kind"], states["state"])
              .reindex(index=list(_KINDS), columns=list(STATES), fill_value=0))
    rows = []
    for kind in _KINDS:
        row = {s: int(counts.at[kind, s]) for s in STATES}
        rows.append({"kind": kind, "planned_or_run": sum(row.values()), **row})
    total = {s: int(counts[s].sum()) for s in STATES}
    rows.append({"kind": "all", "planned_or_run": sum(total.values()), **total})
    measured = rows[0]
    return {
        "rows": rows,
        "planned_measured": measured["planned_or_run"],
        "ok_measured": measured["ok"],
        "failed": total["failed"],
        "pending": total["pending"],
        "total": rows[-1]["planned_or_run"],
        "partial": bool(total["failed"] or total["pending"]),
    }


def _cell_table(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                states: pd.DataFrame) -> pd.DataFrame:
    """Every cell: the spec's cells in matrix order, then any unknown to the spec
    (results of an older matrix) with factor values taken from the data."""
    known = cell_labels(spec, plan, runs, summary)

    measured = states[states["kind"] == "measured"]
    counts = (pd.crosstab(measured["cell_id"], measured["state"])
              .reindex(columns=list(STATES), fill_value=0))
    cells = known.join(counts, on="cell_id")
    cells[list(STATES)] = cells[list(STATES)].fillna(0).astype("int64")
    cells["planned"] = cells[list(STATES)].sum(axis=1)
    return cells


#: Summary columns in the metric's unit (scaled together to the display unit).
_SCALED = ["max", "mean", "min", "median", "ci_low", "ci_high"]


def _metric_tables(spec: Spec, summary: pd.DataFrame, cells: pd.DataFrame, units: dict[str, str]) -> dict[str, Any]:
    """Per metric, the summary table in its display unit; ``units`` are collect's
    (:func:`benchmatrix.results.tables.metric_units`)."""
    present = sorted(summary["metric"].dropna().unique().tolist()) if len(summary) else []
    wanted = list(dict.fromkeys(spec.report.metrics))
    shown = [m for m in wanted if m in present] or present
    declared = spec.declared_metrics
    factors = spec.factor_names
    tables = []
    for metric in shown:
        rows = summary[summary["metric"] == metric].drop_duplicates("cell_id").set_index("cell_id")
        unit = units.get(metric, "")
        stats = rows.reindex(cells["cell_id"])[["n", "max", "mean", "min", "median", "cv", "ci_low", "ci_high",
                                                "ci_method"]]
        stats["n"] = stats["n"].fillna(0).astype("int64")
        # Shown in the unit that reads best (MiB/s, ms); summary.csv keeps the raw values.
        unit, factor = display_unit(unit, pd.to_numeric(stats["mean"], errors="coerce").abs().median())
        stats[_SCALED] = stats[_SCALED].apply(pd.to_numeric, errors="coerce") * factor
        table = pd.concat([cells[["cell_id", *factors]].reset_index(drop=True),
                           stats.reset_index(drop=True)], axis=1)
        tables.append({
            "name": metric,
            "unit": unit,
            "better": (declared.get(metric) or {}).get("better", ""),
            "rows": [_row(r, factors) for r in table.to_dict("records")],
        })
    return {
        "tables": tables,
        "missing": [m for m in wanted if m not in present],
        "others": [m for m in present if m not in shown],
    }


def _row(record: dict[str, Any], factors: list[str]) -> dict[str, Any]:
    # Templates iterate factor values positionally, so factor names that clash with
    # statistic names cannot shadow them.
    record = {k: (None if _is_missing(v) else v) for k, v in record.items()}
    record["levels"] = [record.pop(f) for f in factors]
    return record


# shape: the spec, hosts, both per-host tables, cells, metrics and units that report_context already holds
def _by_host(spec: Spec, hosts: list[str], summary_by_host: pd.DataFrame | None, host_table: pd.DataFrame | None,
             cells: pd.DataFrame, metrics: list[str], units: dict[str, str]) -> dict[str, Any]:
    """The per-host results of a campaign on several hosts.

    ``tables``: per metric, the Max/Avg/Min table with one row per (cell, host) that
    has values, cells in matrix order. ``compared``: per metric, one row per cell
    measured on two or more hosts: each host's mean, the spread between them and the
    host effect's adjusted p-value (:func:`benchmatrix.analyze.sanity.host_differences`).
    """
    mode = spec.hosts_mode
    out: dict[str, Any] = {"enabled": len(hosts) > 1, "mode": mode, "hosts": hosts, "tables": [],
                           "compared": [], "row_cap": HOST_ROWS}
    if not out["enabled"]:
        return out
    factors = spec.factor_names
    declared = spec.declared_metrics
    order = {c: i for i, c in enumerate(cells["cell_id"])}
    host_rank = {h: i for i, h in enumerate(hosts)}
    levels = cells.set_index("cell_id")[factors]
    sbh = summary_by_host if summary_by_host is not None else pd.DataFrame(columns=["metric"])
    diffs = host_table if host_table is not None else pd.DataFrame(columns=["metric"])
    for metric in metrics:
        part = sbh[sbh["metric"] == metric]
        part = part.assign(_c=part["cell_id"].map(order).fillna(len(order)),
                           _h=part["host"].astype(str).map(host_rank).fillna(len(hosts)))
        part = part.sort_values(["_c", "_h"], kind="stable")
        total = len(part)
        part = part.iloc[:HOST_ROWS]
        unit, factor = display_unit(units.get(metric, ""), pd.to_numeric(part["mean"], errors="coerce").abs().median()
                                    if len(part) else None)
        part = part.assign(**{c: pd.to_numeric(part[c], errors="coerce") * factor for c in _SCALED if c in part})
        rows, previous = [], None
        for r in part.to_dict("records"):
            lv = levels.loc[r["cell_id"]].tolist() if r["cell_id"] in levels.index else [r.get(f) for f in factors]
            row = {k: (None if _is_missing(r.get(k)) else r.get(k))
                   for k in ("cell_id", "host", "n", "max", "mean", "min", "median", "cv", "ci_low", "ci_high",
                             "ci_method")}
            row["levels"] = [None if _is_missing(v) else v for v in lv]
            row["first"] = r["cell_id"] != previous
            previous = r["cell_id"]
            rows.append(row)
        common = {"name": metric, "unit": unit,
                  "better": (declared.get(metric) or {}).get("better", "")}
        out["tables"].append({**common, "rows": rows, "total": total, "omitted": total - len(rows)})
        d = diffs[diffs["metric"] == metric]
        d = d.assign(_c=d["cell_id"].map(order).fillna(len(order))).sort_values("_c", kind="stable")
        total = len(d)
        d = d.iloc[:HOST_ROWS]
        crow = []
        for r in d.to_dict("records"):
            lv = levels.loc[r["cell_id"]].tolist() if r["cell_id"] in levels.index else [None] * len(factors)
            crow.append({"cell_id": r["cell_id"], "levels": [None if _is_missing(v) else v for v in lv],
                         "means": [None if r["host_means"].get(h) is None else r["host_means"][h] * factor
                                   for h in hosts],
                         "spread": None if _is_missing(r["spread"]) else r["spread"],
                         "p_value": None if _is_missing(r["p_value"]) else r["p_value"],
                         "flagged": bool(r["flagged"])})
        out["compared"].append({**common, "rows": crow, "total": total, "omitted": total - len(crow)})
    return out


def _labels(frame: pd.DataFrame, cells: pd.DataFrame) -> pd.Series:
    return frame["cell_id"].map(cells.set_index("cell_id")["label"]).astype(object)


def _failed(runs: pd.DataFrame, cells: pd.DataFrame, states: pd.DataFrame) -> dict[str, Any]:
    """Every attempt that did not end ok, with the state its run is in now."""
    ok = is_ok(runs["status"]).to_numpy()
    bad = runs[~ok]
    if bad.empty:
        return {"rows": [], "total": 0, "omitted": 0}
    total = len(bad)
    bad = bad.iloc[:FAILED_ROWS]
    ok_ids = runs.loc[ok, "run_id"]
    run_path = "runs/" + bad["run_id"].astype(str) + "/" + bad["attempt"].astype(str)
    batch = bad["batch"].astype(str)
    table = pd.DataFrame({
        "run_id": bad["run_id"], "attempt": bad["attempt"], "host": bad["host"],
        "cell_id": bad["cell_id"], "label": _labels(bad, cells), "status": bad["status"],
        "reason": bad["reason"], "kind": _kind(bad["warmup"], bad["control"]),
        "recovered": bad["run_id"].isin(ok_ids),
        "state": bad["run_id"].astype(str).map(dict(zip(states["run_id"].astype(str), states["state"]))),
        "stderr": run_path + "/stderr", "stdout": run_path + "/stdout",
        "batch_log": ("logs/ansible/" + batch + ".log").where(bad["batch"].notna(), None),
    })
    return {"rows": _records(table), "total": total, "omitted": total - len(table)}


def _execution_sorted(runs: pd.DataFrame) -> np.ndarray:
    """Positions of ``runs`` in start order (never-started runs last, in plan order)."""
    return execution_order(runs)


def _executed(runs: pd.DataFrame, cells: pd.DataFrame) -> dict[str, Any]:
    """The executed-order table: first ORDER_HEAD and last ORDER_TAIL attempts."""
    if runs.empty:
        return {"head": [], "tail": [], "total": 0, "omitted": 0}
    order = _execution_sorted(runs)
    total = len(order)
    if total > ORDER_HEAD + ORDER_TAIL:
        head_pos, tail_pos = order[:ORDER_HEAD], order[-ORDER_TAIL:]
    else:
        head_pos, tail_pos = order, order[:0]

    def rows(pos: np.ndarray) -> list[dict[str, Any]]:
        part = runs.iloc[pos]
        table = pd.DataFrame({
            "seq": part["seq"], "host": part["host"], "run_id": part["run_id"], "attempt": part["attempt"],
            "cell_id": part["cell_id"], "label": _labels(part, cells),
            "warmup": bool_column(part["warmup"]), "control": bool_column(part["control"]),
            "status": part["status"], "started_at": part["started_at"], "duration_s": part["duration_s"],
        })
        return _records(table)

    return {"head": rows(head_pos), "tail": rows(tail_pos), "total": total,
            "omitted": total - len(head_pos) - len(tail_pos)}


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if _is_missing(v) else v) for k, v in r.items()}
            for r in table.astype(object).to_dict("records")]


def _hosts(host_facts: dict[str, dict], plan: pd.DataFrame, runs: pd.DataFrame) -> dict[str, Any]:
    names = set(host_facts) | {str(h) for h in plan["host"].dropna().unique()} | \
        {str(h) for h in runs["host"].dropna().unique()}
    keys = sorted({str(k) for facts in host_facts.values() for k in (facts or {})})
    rows = []
    for host in sorted(names):
        facts = {str(k): v for k, v in (host_facts.get(host) or {}).items()}
        rows.append({"host": host, "facts": [facts.get(k) for k in keys]})
    return {"columns": keys, "rows": rows}


def _reconfigurations(spec: Spec, plan: pd.DataFrame) -> dict[str, int]:
    """Knob changes per cost class over every host's plan (the first setting counts)."""
    counts = {"none": 0, "restart": 0, "reboot": 0}
    if plan.empty or not spec.knobs:
        return counts
    ordered = plan.assign(_seq=pd.to_numeric(plan["seq"], errors="coerce")).sort_values("_seq", kind="stable")
    host = ordered["host"].astype(str)
    new_host = (host != host.shift()).to_numpy()
    for factor, knob in spec.knobs.items():
        if factor not in ordered.columns:
            continue
        value = analysis.level_keys(ordered[factor])
        changed = new_host | (value != value.shift()).to_numpy()
        counts[knob.cost_class] = counts.get(knob.cost_class, 0) + int(changed.sum())
    return counts


def _design(spec: Spec, plan: pd.DataFrame) -> dict[str, Any]:
    order = spec.order
    control = spec.control_cell()
    visits = None
    if not plan.empty and "visit" in plan.columns:
        visit = pd.to_numeric(plan["visit"], errors="coerce")
        visits = int(pd.DataFrame({"h": plan["host"].astype(str), "v": visit}).dropna().drop_duplicates().shape[0])
    return {
        "strategy": order.get("strategy"),
        "seed": order.get("seed"),
        "replicates": spec.replicates,
        "warmup": spec.warmup,
        "control": control.label() if control else None,
        "control_every": order.get("control_every") if control else None,
        "visits": visits,
        "planned_runs": int(plan["run_id"].nunique()) if not plan.empty else 0,
        "reconfigurations": _reconfigurations(spec, plan),
        "knobs": [{"factor": k.factor, "role": k.role, "cost_class": k.cost_class, "seconds": k.cost_seconds}
                  for k in spec.knobs.values()],
        "whole_plot_factors": analysis.whole_plot_factors(spec),
        "hosts": sorted(plan["host"].dropna().astype(str).unique().tolist()) if not plan.empty else [],
        "hosts_mode": spec.hosts_mode,
    }


def _timeline(runs: pd.DataFrame) -> dict[str, Any]:
    """Per host and per batch: first start, last end, attempts and failures."""
    if runs.empty or runs["started_at"].isna().all():
        return {"hosts": [], "batches": [], "batches_total": 0, "batches_omitted": 0}
    never = np.iinfo("int64").max
    start, end = start_ns(runs), start_ns(runs, "ended_at")
    frame = pd.DataFrame({
        "host": runs["host"].astype(str), "batch": runs["batch"].astype(str),
        "start": pd.to_datetime(np.where(start == never, np.iinfo("int64").min, start), utc=True),
        "end": pd.to_datetime(np.where(end == never, np.iinfo("int64").min, end), utc=True),
        "ok": is_ok(runs["status"]).to_numpy(),
    }, index=runs.index)

    def table(keys: list[str]) -> pd.DataFrame:
        g = frame.groupby(keys, sort=False).agg(first_start=("start", "min"), last_end=("end", "max"),
                                                attempts=("ok", "size"), ok=("ok", "sum"))
        g = g.reset_index().sort_values("first_start", kind="stable", na_position="last")
        g["failed"] = g["attempts"] - g["ok"]
        g["elapsed_s"] = (g["last_end"] - g["first_start"]).dt.total_seconds()
        for c in ("first_start", "last_end"):
            g[c] = g[c].map(lambda t: t.isoformat(timespec="seconds") if not pd.isna(t) else None)
        return g

    hosts = table(["host"])
    batches = table(["host", "batch"])
    total = len(batches)
    half = TIMELINE_BATCHES // 2
    if total > TIMELINE_BATCHES:
        batches = pd.concat([batches.iloc[:half], batches.iloc[-half:]])
    return {"hosts": _records(hosts), "batches": _records(batches), "batches_total": total,
            "batches_omitted": total - len(batches)}


def _pivots(spec: Spec, runs: pd.DataFrame, units: dict[str, str]) -> dict[str, Any]:
    """``report.tables``: pivots of a statistic of measured runs, rows x columns."""
    wanted = spec.report.tables
    out, notes = [], []
    if not wanted:
        return {"tables": out, "notes": notes}
    eff = effective_runs(runs) if len(runs) else runs
    labels = {"mean": "Avg", "median": "Median", "min": "Min", "max": "Max", "sd": "SD", "cv": "CV %", "n": "n"}
    for i, t in enumerate(wanted, start=1):
        rows = [t["rows"]] if isinstance(t.get("rows"), str) else list(t.get("rows") or [])
        cols = [t["columns"]] if isinstance(t.get("columns"), str) else list(t.get("columns") or [])
        stat_list = t.get("stat") or ["max", "mean", "min"]
        stat_list = [stat_list] if isinstance(stat_list, str) else list(stat_list)
        metric = t.get("metric")
        unknown = [f for f in rows + cols if f not in spec.factor_names]
        if unknown or not rows:
            notes.append(f"table {i}: " + (f"unknown factor(s) {', '.join(unknown)}" if unknown else "no rows"))
            continue
        if eff.empty or metric not in eff.columns:
            notes.append(f"table {i}: no values of {metric} yet")
            continue
        keys = rows + cols
        frame = eff[keys].copy()
        for k in keys:
            frame[k] = analysis.level_keys(eff[k])
        frame["_y"] = pd.to_numeric(eff[metric], errors="coerce")
        g = frame.groupby(keys, sort=False)["_y"]
        agg = pd.DataFrame({"mean": g.mean(), "median": g.median(), "min": g.min(), "max": g.max(),
                            "sd": g.std(), "n": g.count()})
        agg["cv"] = agg["sd"] / agg["mean"]
        unit, factor = display_unit(units.get(metric, ""), agg["mean"].abs().median())
        agg[["mean", "median", "min", "max", "sd"]] *= factor
        order = {k: [analysis.level_key(v) for v in spec.levels[k]] for k in keys}

        def sort_key(combo: tuple[str, ...], names: list[str], order: dict = order) -> tuple[int, ...]:
            return tuple(order[n].index(v) if v in order[n] else len(order[n]) for n, v in zip(names, combo))

        idx = [k if isinstance(k, tuple) else (k,) for k in agg.index]
        row_keys = sorted({k[: len(rows)] for k in idx}, key=lambda c: sort_key(c, rows))
        col_keys = sorted({k[len(rows):] for k in idx}, key=lambda c: sort_key(c, cols)) if cols else [()]
        lookup = dict(zip(idx, agg.to_dict("records")))
        body = []
        for rk in row_keys:
            for si, stat in enumerate(stat_list):
                values = []
                for ck in col_keys:
                    rec = lookup.get(rk + ck)
                    v = None if rec is None else rec.get(stat)
                    values.append(None if v is None or _is_missing(v) else (v * 100 if stat == "cv" else v))
                body.append({"levels": list(rk) if si == 0 else [""] * len(rk), "stat": labels.get(stat, stat),
                             "cells": values, "first": si == 0})
        out.append({
            "title": t.get("title") or f"{metric} by {', '.join(rows)}" + (f" and {', '.join(cols)}" if cols else ""),
            "metric": metric, "unit": unit, "rows": rows, "columns": cols,
            "column_labels": [", ".join(f"{c}={v}" for c, v in zip(cols, ck)) or metric for ck in col_keys],
            "stats": [labels.get(s_, s_) for s_ in stat_list], "body": body,
        })
    return {"tables": out, "notes": notes}


def _findings(result: analysis.Comparisons) -> dict[str, Any]:
    """The comparisons as plain sentences, significant ones first, and trade-offs."""
    table = result.table
    by = (result.config or {}).get("by") or []
    if result.config is None:
        return {"configured": False, "sentences": [], "decided": [], "equivalent": 0, "inconclusive": 0,
                "insufficient": 0, "descriptive": 0, "tradeoffs": [], "omitted": 0, "total": 0}
    records = _records(table) if len(table) else []
    significant = [r for r in records if r["verdict"] in ("better", "worse", "higher", "lower")]
    significant.sort(key=lambda r: -abs(r["rel_diff_pct"] or 0))
    # Every decided comparison, for findings.json (the terminal reads it); the report shows the first ones.
    decided = [{"sentence": analysis.sentence(r, by) + _means_text(r), "verdict": r["verdict"],
                "metric": r["metric"], "rel_diff_pct": r["rel_diff_pct"], "ci_low_pct": r.get("ci_low_adj_pct"),
                "ci_high_pct": r.get("ci_high_adj_pct")} for r in significant]
    sentences = [d["sentence"] for d in decided[:FINDING_SENTENCES]]
    tradeoffs = []
    if len(table):
        host = layout.HOST_COLUMN in table.columns
        keycols = ["level", *[layout.by_column(b) for b in by], *([layout.HOST_COLUMN] if host else [])]
        for key, part in table.groupby(keycols, sort=False, dropna=False):
            good = part[part["verdict"] == "better"]
            bad = part[part["verdict"] == "worse"]
            if len(good) and len(bad):
                key = key if isinstance(key, tuple) else (key,)
                at = ", ".join(f"{b}={format_value(v)}" for b, v in zip(by, key[1:1 + len(by)]))
                on = ""
                if host:
                    on = " on all hosts" if str(key[-1]) == layout.ALL_HOSTS else f" on {format_value(key[-1])}"
                tradeoffs.append(
                    f"{result.config['factor']}={format_value(key[0])} vs {format_value(result.config['baseline'])}"
                    f"{' at ' + at if at else ''}{on}: better "
                    + ", ".join(f"{m} ({v:+.1f}%)" for m, v in zip(good["metric"], good["rel_diff_pct"]))
                    + " but worse " + ", ".join(f"{m} ({v:+.1f}%)" for m, v in zip(bad["metric"], bad["rel_diff_pct"])))
    return {"configured": True, "sentences": sentences, "decided": decided,
            "omitted": max(len(significant) - FINDING_SENTENCES, 0),
            "equivalent": sum(r["verdict"] == "equivalent" for r in records),
            "inconclusive": sum(r["verdict"] == "inconclusive" for r in records),
            "insufficient": sum(r["verdict"] == "insufficient_data" for r in records),
            "descriptive": sum(r["verdict"] == analysis.DESCRIPTIVE for r in records),
            "tradeoffs": tradeoffs, "total": len(records)}


def _plot_entry(plot: plots.Plot) -> dict[str, Any]:
    """A plot as the templates show it: its words, file (``plots/NAME.svg``) and the SVG as a data URI."""
    return {"name": plot.name, "title": plot.title, "caption": plot.caption, "file": f"plots/{plot.name}.svg",
            "data_uri": "data:image/svg+xml;base64," + base64.b64encode(plot.svg.encode()).decode("ascii"),
            "svg": plot.svg}


def _explained(result: analysis.Comparisons, findings: dict[str, Any],
               moved: pd.DataFrame | None) -> list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]]:
    """The first :data:`FINDING_SECTIONS` findings that moved a counter: each finding, its
    comparison row and its counters (as collect listed them, moved_with.csv)."""
    lists = finding_lists(result.table, moved)
    out: list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]] = []
    for finding, position, counters in zip(findings["decided"], decided_positions(result.table), lists):
        if counters and len(out) < FINDING_SECTIONS:
            out.append((finding, result.table.iloc[position].to_dict(), counters))
    return out


def _explained_jobs(result: analysis.Comparisons, explained: list[tuple[dict[str, Any], dict[str, Any], Any]],
                    runs: pd.DataFrame, units: dict[str, str]) -> list[plots.PlotJob]:
    """One plot job per explained finding: its metric against its first counter per run."""
    config = result.config or {}
    factor, by = config.get("factor"), list(config.get("by") or [])
    if not factor:
        return []
    jobs = []
    for i, (finding, row, counters) in enumerate(explained, 1):
        sides = {"level": f"{factor}={format_value(row.get('level'))}",
                 "baseline": f"{factor}={format_value(row.get('baseline'))}"}
        jobs.append(plots.PlotJob("metric_against_counter", (
            f"moved_with_{i}", finding["sentence"], finding["metric"], counters[0]["counter"], units,
            finding_runs(runs, row, factor=factor, by=by), sides)))
    return jobs


def _means_text(row: dict[str, Any]) -> str:
    """``, means BASELINE → LEVEL UNIT``: the two means in the unit that reads best (``, means 95.6 → 296.4 ms``)."""
    a, b = row.get("mean_baseline"), row.get("mean_level")
    if a is None or b is None or _is_missing(a) or _is_missing(b):
        return ""
    unit, factor = display_unit(row.get("unit") if isinstance(row.get("unit"), str) else "", max(abs(a), abs(b)))
    return f", means {format_number(a * factor)} → {format_number(b * factor)}{' ' + unit if unit else ''}"


def _comparison_context(result: analysis.Comparisons) -> dict[str, Any]:
    by = (result.config or {}).get("by") or []
    table = result.table
    rows = []
    for r in _records(table.iloc[:COMPARISON_ROWS]) if len(table) else []:
        r["by_values"] = [r.get(layout.by_column(b)) for b in by]
        # The interval shown beside a verdict is the Holm-adjusted one, so the two
        # agree; a descriptive metric has no verdict and shows its unadjusted 95 %.
        descriptive = r.get("verdict") == analysis.DESCRIPTIVE
        r["ci_kind"] = "unadjusted" if descriptive else "holm"
        r["ci_shown_low"] = r.get("ci_low_pct" if descriptive else "ci_low_adj_pct")
        r["ci_shown_high"] = r.get("ci_high_pct" if descriptive else "ci_high_adj_pct")
        rows.append(r)
    return {"configured": result.config is not None, "config": result.config, "by": by, "rows": rows,
            "table": table, "host_column": layout.HOST_COLUMN in table.columns,
            "total": len(table), "omitted": max(len(table) - COMPARISON_ROWS, 0), "alpha": result.alpha,
            "explanations": result.explanations, "notes": result.notes, "holm_count":
            int(table["p_value"].notna().sum()) if len(table) else 0,
            "family": result.family, "descriptive": result.descriptive,
            "scales": _scale_groups(result), "thresholds": _threshold_text(result),
            "adaptive": _adaptive_context(result.adaptive, by)}


#: Why a comparison of an adaptive campaign stopped, in words.
_STOP_WORDS = {"decided": "decided", "futile": "futile (a change as large as the target is ruled out)",
               "max": "at max replicates", "budget": "time budget spent", "running": "still running"}


def _adaptive_context(adaptive: dict[str, Any] | None, by: list[str]) -> dict[str, Any] | None:
    """The rounds of adaptive replication as the templates show them, or None."""
    if not adaptive:
        return None
    rows = []
    for r in adaptive.get("rows") or []:
        rows.append({**r, "host": r.get("host") or "", "by_values": [r.get(b) for b in by],
                     "why": _STOP_WORDS.get(r.get("reason"), r.get("reason"))})
    saved = adaptive.get("fixed_max_runs") or 0
    return {**adaptive, "rows": rows[:COMPARISON_ROWS], "omitted": max(len(rows) - COMPARISON_ROWS, 0),
            "share_pct": 100.0 * adaptive.get("measured_runs", 0) / saved if saved else None,
            "reasons_text": ", ".join(f"{v} {k}" for k, v in sorted((adaptive.get("reasons") or {}).items()))}


def _scale_groups(result: analysis.Comparisons) -> dict[str, list[str]]:
    """Compared metrics by scale: ``ratio`` (log scale) and ``difference``."""
    out: dict[str, list[str]] = {"ratio": [], "difference": []}
    # In the report's metric order (analysis.json keeps the mapping's keys sorted).
    order = {m: i for i, m in enumerate([*result.family, *result.descriptive])}
    for metric, scale in sorted((result.scales or {}).items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        out["ratio" if scale == "log" else "difference"].append(metric)
    return out


def _threshold_text(result: analysis.Comparisons) -> str:
    """The practical threshold(s) in words: ``±5 %`` or ``±5 % (lat ±20 %)``."""
    values = {m: round(v * 100, 6) for m, v in (result.thresholds or {}).items()}
    if not values:
        return ""
    common = max(set(values.values()), key=list(values.values()).count)
    others = ", ".join(f"{m} ±{v:g} %" for m, v in values.items() if v != common)
    return f"±{common:g} %" + (f" ({others})" if others else "")


def _spec_text(spec: Spec) -> str:
    try:
        return Path(spec.path).read_text(encoding="utf-8")
    except OSError:
        import yaml

        return yaml.safe_dump(spec.data, sort_keys=False)


# ----------------------------------------------------------------- entry point

# shape: begin_context's parameters, passed through (the context at once)
def report_context(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                   host_facts: dict[str, dict], *, record_notes: pd.DataFrame | None = None,
                   with_plots: bool = True, tables: Tables | None = None,
                   plot_worker: PlotWorker | None = None) -> dict[str, Any]:
    """Everything the report templates show, as plain Python values (no file I/O).

    :func:`begin_context` and its result at once; the arguments are its.
    """
    return begin_context(spec, plan, runs, summary, host_facts, record_notes=record_notes, with_plots=with_plots,
                         tables=tables, plot_worker=plot_worker)()


# shape: assembles the template context: each value is computed once and many feed several keys of the returned dict
def begin_context(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                  host_facts: dict[str, dict], *, record_notes: pd.DataFrame | None = None,
                  with_plots: bool = True, tables: Tables | None = None,
                  plot_worker: PlotWorker | None = None) -> Callable[[], dict[str, Any]]:
    """The report's context with its plots under way: the returned callable waits for the
    plots and returns the whole context (everything the report templates show, as plain
    Python values; no file I/O). Collect begins it before it writes the tables, so that its
    plot worker draws while they are written.

    Args:
        spec: The loaded :class:`~benchmatrix.spec.load.Spec`.
        plan: Rows of ``plan.csv``.
        runs: Rows of ``runs.csv`` (may be empty).
        summary: Rows of ``summary.csv`` (may be empty).
        host_facts: Host name -> facts (any keys).
        record_notes: Notes from the run records (:func:`benchmatrix.analyze.sanity.record_notes`),
            used when ``tables`` is not given; None: the records were not checked.
        with_plots: Render the plots (the slowest part).
        tables: The tables collect computed (comparisons, summary by host, record
            notes, units, the checks: warnings, drift and host tables); without them
            they are derived from the frames given, as collect would
            (:func:`benchmatrix.analyze.tables.derive_tables`). The report computes no
            statistic and no warning itself.
        plot_worker: A process that draws the plots while the rest is built (collect's,
            :class:`~benchmatrix.report.plot_worker.PlotWorker`); without one they are drawn here.

    Returns:
        A callable returning the template context; ``docs/report.md`` describes every key.
    """
    plan, runs, summary = normalized(plan, runs, summary)
    states = _run_states(plan, runs)
    cells = _cell_table(spec, plan, runs, summary, states)
    effective = effective_runs(runs)
    metrics = report_metrics(spec, summary)
    if tables is None:
        tables = derive_tables(spec, plan, runs, metric_units(None, summary), summary=summary,
                               record_notes=record_notes)
    units = tables.units
    comparisons = analysis.Comparisons.from_tables(tables.comparisons, tables.analysis)
    checks = tables.checks
    if checks is None:
        # Tables collected before analysis.json held the checks (a re-render of an old campaign).
        checks = derive_checks(spec, plan, runs, summary, comparisons=comparisons,
                               summary_by_host=tables.summary_by_host, record_notes=tables.record_notes)
    cfg = spec.report
    alpha = comparisons.alpha
    hosts = campaign_hosts(plan, runs)
    summary_by_host = host_table = None
    if len(hosts) > 1 and len(effective):
        summary_by_host = tables.summary_by_host
        host_table = checks.host_differences
    warnings_ = checks.warnings
    labels = dict(zip(cells["cell_id"], cells["label"]))
    metric_tables = _metric_tables(spec, summary, cells, units)
    findings = _findings(comparisons)
    explained = _explained(comparisons, findings, tables.moved_with)
    jobs: list[plots.PlotJob] = []
    if with_plots:
        jobs = [plots.PlotJob("control_over_time", (checks.drift, metrics, units, _rows_of(runs, checks.control_runs))),
                # One job a metric: the plot worker draws two at once (report/plot_worker.py).
                *(plots.PlotJob("factor_lines", (spec, summary, shown, units))
                  for shown in [[m] for m in metrics[:plots.MAX_METRICS]] or [[]]),
                plots.PlotJob("latency_beside_throughput", (spec, summary, metrics, units, labels)),
                plots.PlotJob("run_order", (runs, metrics, units, labels))]
    moved_jobs = _explained_jobs(comparisons, explained, runs, units) if with_plots else []
    # Drawn while the rest of the context is built (in collect's plot worker, if it has one).
    all_jobs = [*jobs, *moved_jobs]
    drawing = plot_worker.submit(all_jobs, len(runs)) if plot_worker is not None else in_process(all_jobs)
    context = {
        "name": spec.name,
        "description": spec.description,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "spec_path": str(spec.path),
        "spec_text": _spec_text(spec),
        "digest": spec.digest,
        "design": _design(spec, plan),
        "factor_names": spec.factor_names,
        "progress": _progress(states),
        "effective_runs": int(len(effective)),
        "cells": [_row(r, spec.factor_names) for r in cells.to_dict("records")],
        # Positive metrics: their summary intervals come from the log values (ci_method "cox").
        "ratio_metrics": list(dict.fromkeys(summary.loc[summary["ci_method"].astype(str) == "cox", "metric"]
                                            .astype(str))),
        "hosts": _hosts(host_facts, plan, runs),
        "metrics": metric_tables,
        "by_host": _by_host(spec, hosts, summary_by_host, host_table, cells, metrics, units),
        "pivots": _pivots(spec, runs, units),
        "findings": findings,
        # The counters that moved with each finding, as collect computed them (moved_with.csv).
        "moved_with": tables.moved_with,
        "explained": [{"sentence": finding["sentence"], "metric": finding["metric"], "verdict": finding["verdict"],
                       "counters": counters, "plot": None} for finding, _row, counters in explained],
        # Under each finding's sentence: its first counters in words, as the terminal prints them.
        "moved_lines": [", ".join(m["text"] for m in moved[:SHOWN])
                        for moved in finding_lists(comparisons.table, tables.moved_with)][:FINDING_SENTENCES],
        "numbers": cell_numbers(metric_tables, labels, spec.declared_metrics, spec.report.primary),
        "comparisons": _comparison_context(comparisons),
        "warnings": [w for w in warnings_ if w["severity"] == "warning"],
        "notices": [w for w in warnings_ if w["severity"] != "warning"],
        "drift_detected": any(w["check"] == "drift" and w["severity"] == "warning" for w in warnings_),
        "failed": _failed(runs, cells, states),
        "executed": _executed(runs, cells),
        "timeline": _timeline(runs),
        "collapse_order_rows": COLLAPSE_ORDER_ROWS,
        "thresholds": {"cv": cfg.cv_threshold,
                       "drift": cfg.drift_threshold,
                       "alpha": alpha},
        "missing": MISSING,
    }

    def finish() -> dict[str, Any]:
        drawn = drawing()
        plot_list = [_plot_entry(p) for got, _notes in drawn[:len(jobs)] for p in got]
        context["control_plot"] = next((p for p in plot_list if p["name"] == "control"), None)
        context["plots"] = plot_list
        # Each metric's line plot job leaves the same note on panels or lines left out: once.
        context["plot_notes"] = list(dict.fromkeys(note for _got, notes in drawn[:len(jobs)] for note in notes))
        for section, (got, _notes) in zip(context["explained"], drawn[len(jobs):]):
            section["plot"] = _plot_entry(got[0]) if got else None
        return context

    return finish


def template_dir_of(spec: Spec, override: str | Path | None = None) -> Path | None:
    """The user template directory: ``override``, else ``report.template_dir``
    (relative to the spec file's directory, then to the working directory)."""
    value = override if override is not None else spec.report.template_dir
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        beside = Path(spec.path).resolve().parent / path
        path = beside if beside.is_dir() else Path.cwd() / path
    if not path.is_dir():
        from benchmatrix.errors import BenchmatrixError

        raise BenchmatrixError(f"report template directory {value} does not exist")
    return path


# shape: report_context's tables plus the output and template directories, the optional ones keyword-only
def render_report(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                  host_facts: dict[str, dict], out_dir: Path, *,
                  template_dir: str | Path | None = None,
                  record_notes: pd.DataFrame | None = None, tables: Tables | None = None,
                  plot_worker: PlotWorker | None = None) -> tuple[Path, Path]:
    """Render ``report.html``, ``report.md`` and ``plots/``; no table is written (collect writes them).

    Every file is written atomically (temporary file in its directory, then
    ``os.replace``), so an existing report stays intact if rendering fails. With a
    user template directory, its ``report.html.j2`` / ``report.md.j2`` replace the
    built-in ones, and every other ``NAME.j2`` in it renders to ``out_dir/NAME``; all
    of them render in the sandbox (:func:`benchmatrix.report.sandbox.render_bounded`,
    bounds :data:`TEMPLATE_CPU_SECONDS`, :data:`TEMPLATE_MEMORY_MB`,
    :data:`TEMPLATE_OUTPUT_MB`).

    Args:
        spec: The loaded :class:`~benchmatrix.spec.load.Spec`.
        plan: Rows of ``plan.csv``.
        runs: Rows of ``runs.csv`` (may be empty or lack optional columns).
        summary: Rows of ``summary.csv``, as :func:`benchmatrix.analyze.stats.summarize`
            returns them (may be empty).
        host_facts: Host name -> facts such as hostname, cpu_model, kernel.
        out_dir: Directory to write into (normally ``results/NAME``); created if needed.
        template_dir: User templates (default: the spec's ``report.template_dir``).
        record_notes: Notes from the run records, if the caller has them (without
            ``tables``).
        tables: The tables collect computed (:func:`benchmatrix.results.tables.read_tables`);
            see :func:`report_context`.
        plot_worker: Collect's plot process (:func:`report_context`).

    Returns:
        The paths of ``report.html`` and ``report.md``.

    Raises:
        ReportTemplateError: a user template failed, broke a bound, or would write over
            a file the experiment owns; nothing is written then.
    """
    return begin_render(spec, plan, runs, summary, host_facts, out_dir, template_dir=template_dir,
                        record_notes=record_notes, tables=tables, plot_worker=plot_worker)()


# shape: render_report's parameters, passed through (its files written when the result is called)
def begin_render(spec: Spec, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                 host_facts: dict[str, dict], out_dir: Path, *,
                 template_dir: str | Path | None = None,
                 record_notes: pd.DataFrame | None = None, tables: Tables | None = None,
                 plot_worker: PlotWorker | None = None) -> Callable[[], tuple[Path, Path]]:
    """:func:`render_report` begun: the context computed and its plots under way
    (:func:`begin_context`); the returned callable renders and writes every file and
    returns the paths of ``report.html`` and ``report.md``. Nothing is read or written
    before it is called. The arguments are :func:`render_report`'s.
    """
    finish_context = begin_context(spec, plan, runs, summary, host_facts, record_notes=record_notes, tables=tables,
                                   plot_worker=plot_worker)
    return lambda: _write_report(spec, Path(out_dir), template_dir, finish_context)


def _write_report(spec: Spec, out_dir: Path, template_dir: str | Path | None,
                  finish_context: Callable[[], dict[str, Any]]) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    user_dir = template_dir_of(spec, template_dir)
    outputs = _user_outputs(user_dir) if user_dir is not None else None
    context = finish_context()
    if outputs is None:
        # The package's own templates: trusted, rendered here without the child's cost.
        env = _environment()
        rendered = {name[:-3]: env.get_template(name).render(context) for name in TEMPLATES}
    else:
        rendered = sandbox.render_bounded(_environment(user_dir), outputs, context,
                                          cpu_seconds=TEMPLATE_CPU_SECONDS, memory_mb=TEMPLATE_MEMORY_MB,
                                          output_mb=TEMPLATE_OUTPUT_MB)
    # Always made, even empty: rule collect declares plots/ as an output directory.
    plot_dir = out_dir / layout.PLOTS_DIR
    plot_dir.mkdir(exist_ok=True)
    drawn = [*context["plots"], *(s["plot"] for s in context["explained"] if s["plot"])]
    for plot in drawn:
        atomic_write(out_dir / plot["file"], plot["svg"])
    # Plots of an earlier render that this one did not draw would mislead the Markdown.
    keep = {Path(p["file"]).name for p in drawn}
    for stale in plot_dir.glob("*.svg"):
        if stale.name not in keep:
            stale.unlink(missing_ok=True)
    for name, text in rendered.items():
        atomic_write(out_dir / name, text)
    atomic_write(out_dir / layout.FINDINGS, json.dumps(findings_digest(context, out_dir), indent=2, default=str))
    return out_dir / layout.REPORT_HTML, out_dir / layout.REPORT_MD


def cell_numbers(metric_tables: dict[str, Any], labels: dict[str, str],
                 declared: dict[str, Any] | None = None, primary: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Each shown metric's cells, best first: what the terminal and the report's top show
    when no comparison is configured (hyperfine's mean ± interval per command).

    Args:
        metric_tables: :func:`_metric_tables`' result (values already in the display unit).
        labels: Cell id -> its label (``bs=4k, iodepth=8``).
        declared: ``workload.metrics`` of the spec (each metric's ``better``).
        primary: ``report.primary``: only these metrics, when any of them is shown.

    Returns:
        Per metric: ``metric``, ``unit`` (the display unit), ``better`` (``higher``,
        ``lower`` or "" when unknown: then in matrix order), ``cells`` (``cell_id``,
        ``cell``, ``n``, ``mean``, ``ci_low``, ``ci_high``; cells without a mean left out).
    """
    out = []
    tables = metric_tables["tables"]
    tables = [t for t in tables if t["name"] in primary] or tables
    for table in tables:
        better = table["better"] or metric_direction(table["name"], declared)
        rows = [r for r in table["rows"] if isinstance(r.get("mean"), (int, float)) and np.isfinite(r["mean"])]
        if better in ("higher", "lower"):
            rows.sort(key=lambda r: -r["mean"] if better == "higher" else r["mean"])
        cells = [{"cell_id": str(r["cell_id"]), "cell": labels.get(r["cell_id"], str(r["cell_id"])),
                  "n": int(r.get("n") or 0), "mean": float(r["mean"]),
                  "ci_low": None if _is_missing(r.get("ci_low")) else float(r["ci_low"]),
                  "ci_high": None if _is_missing(r.get("ci_high")) else float(r["ci_high"])} for r in rows]
        out.append({"metric": table["name"], "unit": table["unit"], "better": better, "cells": cells})
    return out


def findings_digest(context: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """What ``findings.json`` holds: the report's findings and warnings, for the terminal.

    Keys: ``experiment``, ``configured``, ``total`` (comparisons), ``counts`` (per
    verdict), ``findings`` (every decided comparison, largest effect first: sentence,
    verdict, metric, rel_diff_pct and its Holm-adjusted interval, and ``moved_with``: the
    counters that moved with it, largest first, :func:`benchmatrix.analyze.explain.finding_lists`),
    ``warnings`` (check, title, message, in the report's order), ``numbers`` (each shown metric's cells best
    first, in the unit shown: :func:`cell_numbers`), ``report`` (paths of html and md).
    """
    f = context["findings"]
    table = context["comparisons"]["table"]
    counts = ({str(k): int(v) for k, v in table["verdict"].value_counts().items()}
              if len(table) and "verdict" in table else {})
    lists = finding_lists(table, context.get("moved_with"))
    lists += [[]] * (len(f["decided"]) - len(lists))
    return {"experiment": context["name"], "configured": f["configured"], "total": f["total"], "counts": counts,
            "findings": [{**{k: (None if _is_missing(v) else v) for k, v in r.items()}, "moved_with": moved}
                         for r, moved in zip(f["decided"], lists)],
            "warnings": [{"check": w["check"], "title": w["title"], "message": w["message"]}
                         for w in context["warnings"]],
            "numbers": context["numbers"],
            "report": {"html": str(out_dir / layout.REPORT_HTML), "md": str(out_dir / layout.REPORT_MD)}}
