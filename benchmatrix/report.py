"""The experiment report: ``report.html`` and ``report.md`` from plan, runs and summary.

The tables are computed here with pandas; how they look is decided by the Jinja2
templates in ``benchmatrix/templates`` (number formats are template filters). Both
formats carry the same content, so a reader of the Markdown misses nothing but style.

The report renders from whatever exists: a campaign that is still running or that
had failures gets a report too, with a visible "partial results" notice, and every
cell of the matrix is listed even before it has a single result.
"""

from __future__ import annotations

import math
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import jinja2
import numpy as np
import pandas as pd

from benchmatrix.stats import bool_column, effective_runs, is_ok

#: Placeholder shown for a missing value.
MISSING = "–"
#: Above this many executed runs the HTML order table starts collapsed.
COLLAPSE_ORDER_ROWS = 200

_KINDS = ("measured", "warm-up", "control")
_STATES = ("ok", "failed", "pending")


# ----------------------------------------------------------------- template filters

def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def format_number(value: Any) -> str:
    """About four significant digits, grouped thousands, never scientific for
    everyday magnitudes (``123,457``, ``12.35``, ``0.01235``); ``–`` when missing."""
    if _is_missing(value):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    x = float(value)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    magnitude = abs(x)
    if magnitude >= 1e15 or magnitude < 1e-4:
        return f"{x:.3e}"
    if magnitude >= 1000:
        return f"{x:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(magnitude)))
    text = f"{x:.{decimals}f}"
    # 999.96 rounds up to four digits before the point; regroup it.
    return f"{float(text):,.0f}" if abs(float(text)) >= 1000 else text


def format_percent(fraction: Any) -> str:
    """A fraction as a percentage with one decimal (``0.0123`` -> ``1.2``)."""
    if _is_missing(fraction):
        return MISSING
    return f"{float(fraction) * 100:.1f}"


def format_value(value: Any) -> str:
    """Any cell value as text: booleans as YAML writes them, whole floats without
    ``.0`` (a column with gaps turns integers into floats), ``–`` when missing."""
    if _is_missing(value):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def markdown_cell(text: Any) -> str:
    """Text made safe for one GitHub-flavoured table cell (pipes, line breaks)."""
    # "<" would start an HTML tag in GitHub's renderer and hide text like "<stdin>".
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace("\r", " ").replace("\n", " "))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("benchmatrix", "templates"),
        undefined=jinja2.StrictUndefined,
        # User text must not become markup in HTML; Markdown keeps it verbatim.
        autoescape=lambda name: bool(name) and name.endswith(".html.j2"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(num=format_number, pct=format_percent, val=format_value, md=markdown_cell)
    return env


# ----------------------------------------------------------------- table building

def _with_columns(table: pd.DataFrame | None, columns: Iterable[str]) -> pd.DataFrame:
    # Results written by older or partial steps may lack optional columns; the report
    # shows them as missing instead of failing.
    table = pd.DataFrame() if table is None else table
    missing = [c for c in columns if c not in table.columns]
    if missing:
        table = table.assign(**{c: pd.Series(pd.NA, index=table.index, dtype=object) for c in missing})
    return table


def _kind(warmup: pd.Series, control: pd.Series) -> pd.Series:
    w, c = bool_column(warmup), bool_column(control)
    return pd.Series(np.select([w.to_numpy(), c.to_numpy()], ["warm-up", "control"], "measured"),
                     index=warmup.index)


def _run_states(plan: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run_id (planned or executed): cell_id, host, kind, state."""
    planned = plan.drop_duplicates("run_id", keep="first")
    planned = pd.DataFrame({"run_id": planned["run_id"], "cell_id": planned["cell_id"],
                            "host": planned["host"], "kind": _kind(planned["warmup"], planned["control"])})
    executed = runs.drop_duplicates("run_id", keep="first")
    executed = executed[~executed["run_id"].isin(planned["run_id"])]
    extra = pd.DataFrame({"run_id": executed["run_id"], "cell_id": executed["cell_id"],
                          "host": executed["host"], "kind": _kind(executed["warmup"], executed["control"])})
    ids = pd.concat([planned, extra], ignore_index=True)
    ok_ids = runs.loc[is_ok(runs["status"]).to_numpy(), "run_id"]
    has_ok = ids["run_id"].isin(ok_ids).to_numpy()
    attempted = ids["run_id"].isin(runs["run_id"]).to_numpy()
    ids["state"] = np.select([has_ok, attempted], ["ok", "failed"], "pending")
    return ids


def _progress(states: pd.DataFrame) -> dict[str, Any]:
    counts = (pd.crosstab(states["kind"], states["state"])
              .reindex(index=list(_KINDS), columns=list(_STATES), fill_value=0))
    rows = []
    for kind in _KINDS:
        row = {s: int(counts.at[kind, s]) for s in _STATES}
        rows.append({"kind": kind, "planned_or_run": sum(row.values()), **row})
    total = {s: int(counts[s].sum()) for s in _STATES}
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


def _cell_table(spec: Any, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                states: pd.DataFrame) -> pd.DataFrame:
    """Every cell: the spec's cells in matrix order, then any unknown to the spec
    (results of an older matrix) with factor values taken from the data."""
    factors = spec.factor_names
    known = pd.DataFrame([{"cell_id": c.cell_id, **c.factors} for c in spec.cells],
                         columns=["cell_id", *factors])
    known["label"] = [c.label() for c in spec.cells]
    seen = [t[["cell_id", *[f for f in factors if f in t.columns]]]
            for t in (runs, plan, summary) if "cell_id" in t.columns]
    others = pd.concat(seen, ignore_index=True) if seen else pd.DataFrame(columns=["cell_id"])
    others = others.dropna(subset=["cell_id"]).drop_duplicates("cell_id")
    others = _with_columns(others[~others["cell_id"].isin(known["cell_id"])], factors)
    if len(others):
        others = others.assign(label=[" ".join(f"{f}={format_value(v)}" for f, v in zip(factors, vals))
                                      for vals in others[factors].itertuples(index=False)])
        known = pd.concat([known, others[["cell_id", *factors, "label"]]], ignore_index=True)

    measured = states[states["kind"] == "measured"]
    counts = (pd.crosstab(measured["cell_id"], measured["state"])
              .reindex(columns=list(_STATES), fill_value=0))
    cells = known.join(counts, on="cell_id")
    cells[list(_STATES)] = cells[list(_STATES)].fillna(0).astype("int64")
    cells["planned"] = cells[list(_STATES)].sum(axis=1)
    return cells


def _metric_tables(spec: Any, summary: pd.DataFrame, cells: pd.DataFrame) -> dict[str, Any]:
    present = sorted(summary["metric"].dropna().unique().tolist()) if len(summary) else []
    wanted = list(dict.fromkeys(spec.data.get("report", {}).get("metrics") or []))
    shown = [m for m in wanted if m in present] or present
    declared = spec.data.get("workload", {}).get("metrics") or {}
    factors = spec.factor_names
    tables = []
    for metric in shown:
        rows = summary[summary["metric"] == metric].drop_duplicates("cell_id").set_index("cell_id")
        units = [u for u in rows["unit"].tolist() if not _is_missing(u) and str(u)]
        unit = str(units[0]) if units else str((declared.get(metric) or {}).get("unit", ""))
        stats = rows.reindex(cells["cell_id"])[["n", "max", "mean", "min", "median", "cv", "ci_low", "ci_high"]]
        stats["n"] = stats["n"].fillna(0).astype("int64")
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


def _labels(frame: pd.DataFrame, cells: pd.DataFrame) -> pd.Series:
    return frame["cell_id"].map(cells.set_index("cell_id")["label"]).astype(object)


def _failed(runs: pd.DataFrame, cells: pd.DataFrame) -> list[dict[str, Any]]:
    ok = is_ok(runs["status"]).to_numpy()
    bad = runs[~ok]
    if bad.empty:
        return []
    ok_ids = runs.loc[ok, "run_id"]
    table = pd.DataFrame({
        "run_id": bad["run_id"], "attempt": bad["attempt"], "host": bad["host"],
        "cell_id": bad["cell_id"], "label": _labels(bad, cells), "status": bad["status"],
        "reason": bad["reason"], "kind": _kind(bad["warmup"], bad["control"]),
        "recovered": bad["run_id"].isin(ok_ids),
    })
    return _records(table)


def _executed(runs: pd.DataFrame, cells: pd.DataFrame) -> list[dict[str, Any]]:
    if runs.empty:
        return []
    started = pd.to_datetime(runs["started_at"], utc=True, errors="coerce", format="ISO8601")
    table = pd.DataFrame({
        "started": started,
        "seq_num": pd.to_numeric(runs["seq"], errors="coerce"),
        "attempt_num": pd.to_numeric(runs["attempt"], errors="coerce"),
        "seq": runs["seq"], "host": runs["host"], "run_id": runs["run_id"], "attempt": runs["attempt"],
        "cell_id": runs["cell_id"], "label": _labels(runs, cells),
        "warmup": bool_column(runs["warmup"]), "control": bool_column(runs["control"]),
        "status": runs["status"], "started_at": runs["started_at"], "duration_s": runs["duration_s"],
    })
    # Runs without a start time (never started) go last, in plan order.
    table = table.sort_values(["started", "seq_num", "attempt_num"], kind="stable", na_position="last")
    return _records(table.drop(columns=["started", "seq_num", "attempt_num"]))


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if _is_missing(v) else v) for k, v in r.items()}
            for r in table.astype(object).to_dict("records")]


def _hosts(host_facts: dict[str, dict], plan: pd.DataFrame, runs: pd.DataFrame) -> dict[str, Any]:
    names = set(host_facts) | set(plan["host"].dropna().astype(str)) | set(runs["host"].dropna().astype(str))
    keys = sorted({str(k) for facts in host_facts.values() for k in (facts or {})})
    rows = []
    for host in sorted(names):
        facts = {str(k): v for k, v in (host_facts.get(host) or {}).items()}
        rows.append({"host": host, "facts": [facts.get(k) for k in keys]})
    return {"columns": keys, "rows": rows}


def _design(spec: Any) -> dict[str, Any]:
    order = spec.data.get("order", {})
    control = spec.control_cell()
    return {
        "strategy": order.get("strategy"),
        "seed": order.get("seed"),
        "replicates": spec.data.get("replicates"),
        "warmup": spec.data.get("warmup"),
        "control": control.label() if control else None,
        "control_every": order.get("control_every") if control else None,
    }


# ----------------------------------------------------------------- entry point

def report_context(spec: Any, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                   host_facts: dict[str, dict]) -> dict[str, Any]:
    """Everything the report templates show, as plain Python values.

    Args:
        spec: The loaded :class:`~benchmatrix.spec.Spec`.
        plan: Rows of ``plan.csv``.
        runs: Rows of ``runs.csv`` (may be empty).
        summary: Rows of ``summary.csv`` (may be empty).
        host_facts: Host name -> facts (any keys).

    Returns:
        The template context; see the templates for how each entry is shown.
    """
    base = ["seq", "host", "run_id", "cell_id", "replicate", "warmup", "control", "attempt"]
    plan = _with_columns(plan, base)
    runs = _with_columns(runs, [*base, "status", "reason", "started_at", "ended_at", "duration_s"])
    summary = _with_columns(summary, ["cell_id", "metric", "unit", "n", "mean", "median", "min", "max",
                                      "sd", "cv", "ci_low", "ci_high"])
    states = _run_states(plan, runs)
    cells = _cell_table(spec, plan, runs, summary, states)
    effective = effective_runs(runs)
    return {
        "name": spec.name,
        "description": spec.data.get("description") or "",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "spec_path": str(spec.path),
        "digest": spec.digest,
        "design": _design(spec),
        "factor_names": spec.factor_names,
        "progress": _progress(states),
        "effective_runs": int(len(effective)),
        "cells": [_row(r, spec.factor_names) for r in cells.to_dict("records")],
        "hosts": _hosts(host_facts, plan, runs),
        "metrics": _metric_tables(spec, summary, cells),
        "failed": _failed(runs, cells),
        "executed": _executed(runs, cells),
        "collapse_order_rows": COLLAPSE_ORDER_ROWS,
        "missing": MISSING,
    }


def _write_atomic(path: Path, text: str) -> None:
    # Readers (a browser, a CI artifact upload) must never see a half-written report.
    # os.open with mode 0o666 keeps the umask's permissions, unlike mkstemp's 0600.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def render_report(spec: Any, plan: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame,
                  host_facts: dict[str, dict], out_dir: Path) -> tuple[Path, Path]:
    """Render ``report.html`` and ``report.md`` into ``out_dir``.

    Both files are written atomically (temporary file in ``out_dir``, then
    ``os.replace``), so an existing report stays intact if rendering fails.

    Args:
        spec: The loaded :class:`~benchmatrix.spec.Spec`.
        plan: Rows of ``plan.csv``.
        runs: Rows of ``runs.csv`` (may be empty or lack optional columns).
        summary: Rows of ``summary.csv``, as :func:`benchmatrix.stats.summarize`
            returns them (may be empty).
        host_facts: Host name -> facts such as hostname, cpu_model, kernel.
        out_dir: Directory to write into; created if needed.

    Returns:
        The paths of ``report.html`` and ``report.md``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    context = report_context(spec, plan, runs, summary, host_facts)
    env = _environment()
    html = env.get_template("report.html.j2").render(context)
    markdown = env.get_template("report.md.j2").render(context)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    _write_atomic(html_path, html)
    _write_atomic(md_path, markdown)
    return html_path, md_path
