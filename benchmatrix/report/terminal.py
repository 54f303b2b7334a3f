"""What ``bmx run``, ``bmx report``, ``bmx compare`` and ``bmx history`` print.

Everything here reads files the pipeline already wrote (``findings.json`` beside the
report, compare.csv's table, the history's steps) and only lays them out: plain
text, verdicts coloured on a terminal (:func:`use_color`), or one JSON document per
command (docs/contracts.md lists their keys).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from benchmatrix import layout
from benchmatrix.names import printable
from benchmatrix.report.units import display_unit, format_number, pct_interval, quantity

#: Findings and warnings printed after a run or a report; the report has them all.
FINDINGS_SHOWN = 10
WARNINGS_SHOWN = 5
#: Counters that moved with a finding, printed on the line under it.
MOVED_SHOWN = 3
#: Without a comparison, or with none decided: the cells shown per metric, the metrics
#: shown, and the heading that says why.
NUMBERS_SHOWN = 10
NUMBER_METRICS_SHOWN = 4
NO_COMPARISON = "numbers (no comparison configured: report.compare in the spec compares a factor's levels)"
UNDECIDED = "numbers (no comparison decided, more runs would: each cell's mean)"
#: Longest line of a warning on the terminal (the report has the whole text).
WARNING_WIDTH = 160

#: ANSI colours (SGR codes) of the verdicts.
_COLORS = {"worse": "31", "better": "32", "higher": "36", "lower": "36", "inconclusive": "33",
           "insufficient_data": "2", "warning": "33"}


def use_color(stream: IO[str], choice: str = "auto") -> bool:
    """Whether to colour ``stream``: ``always``/``never`` as given; ``auto`` only on a
    terminal, and never when ``NO_COLOR`` is set to anything (no-color.org) or
    ``TERM`` is ``dumb``."""
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, key: str, color: bool) -> str:
    """``text`` in the colour of ``key`` (a verdict or ``warning``) when ``color``."""
    code = _COLORS.get(key)
    return f"\033[{code}m{text}\033[0m" if color and code else text


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: Iterable[int] = (),
               keys: Sequence[str] | None = None, color: bool = False) -> str:
    """Columns aligned with two spaces between them; ``right`` are right-aligned
    column indexes; ``keys`` colours each row's last cell by its verdict.

    Control and bidirectional characters in a cell (a level, a host, a campaign) are
    shown escaped (``\\x1b``, ``\\u202e``): raw, they would run as terminal commands or
    reorder the line.
    """
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in r] for r in rows]
    right = set(right)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str], key: str | None = None) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        if key is not None:  # the last column, unpadded: the colour codes stay off the line's end
            out[-1] = paint(cells[-1], key, color)
        return "  ".join(out).rstrip()

    body = [line(r, keys[i] if keys else None) for i, r in enumerate(rows)]
    return "\n".join([line(headers), line(["-" * w for w in widths]), *body])


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _pct(value: Any) -> str:
    return f"{value:+.1f}%" if _finite(value) else layout.MISSING


def _interval(low: Any, high: Any) -> str:
    # The one rule of benchmatrix.report.units: an end past its limits prints as "unbounded".
    return pct_interval(low, high, suffix="")


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return printable(text if len(text) <= WARNING_WIDTH else text[:WARNING_WIDTH - 1] + "…")


# ---------------------------------------------------------------- run and report

def read_findings(exp: str | Path) -> dict[str, Any] | None:
    """The report's findings and warnings (``findings.json``), or None before a report."""
    try:
        return json.loads((Path(exp) / layout.FINDINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def findings_text(digest: dict[str, Any], color: bool = False) -> str:
    """The findings (largest effects first, with their intervals), the worst warnings
    one line each, and the report's paths."""
    lines = []
    found = digest["findings"]
    counts = digest["counts"]
    if not digest["configured"]:
        lines += numbers_lines(digest.get("numbers") or [])
    elif found:
        lines.append(f"findings ({len(found)} of {digest['total']} comparisons decided, largest effects first):")
        for f in found[:FINDINGS_SHOWN]:
            lines.append(f"  {paint(printable(f['sentence']), f['verdict'], color)}")
            # The top counters of the same runs that moved with it (findings.json's moved_with).
            moved = [printable(str(m.get("text") or m.get("counter"))) for m in (f.get("moved_with") or [])]
            if moved:
                lines.append("    moved with it: " + ", ".join(moved[:MOVED_SHOWN]))
        if len(found) > FINDINGS_SHOWN:
            lines.append(f"  ... {len(found) - FINDINGS_SHOWN} more in the report")
    else:
        lines.append(f"findings: no difference decided among {digest['total']} comparisons")
    rest = [f"{n} {v.replace('_', ' ')}" for v, n in counts.items()
            if n and v not in ("better", "worse", "higher", "lower")]
    if rest:
        lines.append("  also: " + ", ".join(rest))
    if digest["configured"] and not found:
        # Nothing decided is still an answer a user reads in figures (issue 38's trial).
        lines += numbers_lines(digest.get("numbers") or [], UNDECIDED)
    warnings = digest["warnings"]
    if warnings:
        lines.append(f"warnings ({len(warnings)}):")
        lines += [f"  {paint(printable(w['check']), 'warning', color)}: {_one_line(w['title'] + ': ' + w['message'])}"
                  for w in warnings[:WARNINGS_SHOWN]]
        if len(warnings) > WARNINGS_SHOWN:
            lines.append(f"  ... {len(warnings) - WARNINGS_SHOWN} more in the report")
    lines += [f"report: {printable(digest['report']['html'])}", f"report: {printable(digest['report']['md'])}"]
    return "\n".join(lines)


def numbers_lines(numbers: list[dict[str, Any]], head: str = NO_COMPARISON) -> list[str]:
    """Without a comparison, or with none decided: each metric's cells, best first, with
    the mean and its 95 % interval in the unit shown (``findings.json``'s ``numbers``), at
    most :data:`NUMBERS_SHOWN` cells of :data:`NUMBER_METRICS_SHOWN` metrics.

    Args:
        numbers: ``findings.json``'s ``numbers``.
        head: the heading line, saying why the numbers are shown.

    Returns:
        The lines to print.
    """
    if not any(m["cells"] for m in numbers):
        return [f"{head}: no measured values yet"]
    lines = [f"{head}:"]
    shown = [m for m in numbers if m["cells"]]
    for m in shown[:NUMBER_METRICS_SHOWN]:
        unit = m["unit"]
        order = {"higher": "higher is better, best first", "lower": "lower is better, best first"}.get(
            m["better"], "direction unknown, matrix order")
        lines.append(f"  {printable(m['metric'])} ({order}):")

        def value(x: Any, unit: str = unit) -> str:
            return f"{format_number(x)} {unit}".strip() if _finite(x) else layout.MISSING

        rows = [[c["cell"], str(c["n"]), value(c["mean"]),
                 (f"[{format_number(c['ci_low'])} – {format_number(c['ci_high'])}] {unit}".strip()
                  if _finite(c["ci_low"]) and _finite(c["ci_high"]) else layout.MISSING)]
                for c in m["cells"][:NUMBERS_SHOWN]]
        table = text_table(["cell", "n", "mean", "95 % interval"], rows, right=(1, 2))
        lines += ["    " + ln for ln in table.splitlines()]
        if len(m["cells"]) > NUMBERS_SHOWN:
            lines.append(f"    … and {len(m['cells']) - NUMBERS_SHOWN} more cells in the report")
    if len(shown) > NUMBER_METRICS_SHOWN:
        lines.append(f"  … and {len(shown) - NUMBER_METRICS_SHOWN} more metrics in the report")
    return lines


def print_findings(exp: str | Path, stream: IO[str], color: str = "auto") -> None:
    """Print :func:`findings_text` of the experiment's last report (or just its paths)."""
    digest = read_findings(exp)
    if digest is None:
        print(f"report: {Path(exp) / layout.REPORT_HTML}\nreport: {Path(exp) / layout.REPORT_MD}", file=stream)
        return
    print(findings_text(digest, use_color(stream, color)), file=stream)


# ---------------------------------------------------------------- compare

def compare_records(table: Any, factor_names: list[str]) -> list[dict[str, Any]]:
    """Every row of compare.csv as JSON-ready dicts (NaN as null), largest effect first."""
    import pandas as pd

    if table is None or not len(table):
        return []
    order = table["rel_diff_pct"].abs().fillna(-1).sort_values(ascending=False, kind="stable").index
    rows = table.loc[order].astype(object).where(pd.notna(table.loc[order]), None)
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows.to_dict("records")]


def compare_table(records: list[dict[str, Any]], factor_names: list[str], color: bool = False,
                  limit: int | None = None) -> str:
    """compare.csv as a table sorted by effect: metric, cell, host, A and B in human
    units, the change with its Holm-adjusted interval, the verdict."""
    columns = [f"factor_{f}" if f in ("host", "metric", "unit", "cell_id") else f for f in factor_names]
    shown = records if limit is None else records[:limit]
    # One unit per metric, so A and B and the rows of a metric read side by side.
    typical: dict[str, list[float]] = {}
    for r in records:
        typical.setdefault(str(r["metric"]), []).extend(abs(v) for v in (r["mean_a"], r["mean_b"]) if _finite(v))
    unit_of = {m: display_unit(next((str(r.get("unit") or "") for r in records if str(r["metric"]) == m), ""),
                               sorted(v)[len(v) // 2] if v else None) for m, v in typical.items()}

    def value(x: Any, metric: str) -> str:
        shown_unit, factor = unit_of[metric]
        return f"{format_number(x * factor)} {shown_unit}".strip() if _finite(x) else layout.MISSING

    rows = []
    for r in shown:
        cell = layout.cell_label((f, r.get(c)) for f, c in zip(factor_names, columns))
        rows.append([str(r["metric"]), cell or str(r["cell_id"]), str(r["host"]),
                     value(r["mean_a"], str(r["metric"])), value(r["mean_b"], str(r["metric"])),
                     _pct(r["rel_diff_pct"]), _interval(r["ci_low_adj_pct"], r["ci_high_adj_pct"]),
                     str(r["verdict"]).replace("_", " ")])
    text = text_table(["metric", "cell", "host", "A", "B", "change", "interval", "verdict"], rows,
                      right=(3, 4, 5), keys=[str(r["verdict"]) for r in shown], color=color)
    if limit is not None and len(records) > limit:
        text += f"\n... {len(records) - limit} more rows in compare.csv (--json prints every row)"
    return text


def compare_page_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """compare.html's and compare.md's rows (a Jinja filter): largest effect first, the
    means in human units (one unit per metric, as :func:`compare_table` shows them, in
    ``mean_a_text`` and ``mean_b_text``), the interval by the unbounded rule
    (:func:`benchmatrix.report.units.pct_interval`) in ``ci``."""
    typical: dict[str, list[float]] = {}
    for r in rows:
        typical.setdefault(str(r["metric"]), []).extend(abs(r[k]) for k in ("mean_a", "mean_b") if _finite(r.get(k)))
    unit_of = {m: display_unit(next((str(r.get("unit") or "") for r in rows if str(r["metric"]) == m), ""),
                               sorted(v)[len(v) // 2] if v else None) for m, v in typical.items()}
    out = []
    for r in rows:
        shown, factor = unit_of[str(r["metric"])]
        adjusted = r.get("verdict") != "descriptive"
        low, high = ((r.get("ci_low_adj_pct"), r.get("ci_high_adj_pct")) if adjusted
                     else (r.get("ci_low_pct"), r.get("ci_high_pct")))
        out.append({**r, "unit_shown": shown,
                    **{f"{k}_text": format_number(r[k] * factor) if _finite(r.get(k)) else layout.MISSING
                       for k in ("mean_a", "mean_b")},
                    "ci": pct_interval(low, high, suffix="") if _finite(r.get("rel_diff_pct")) else layout.MISSING})
    out.sort(key=lambda r: -abs(r["rel_diff_pct"]) if _finite(r.get("rel_diff_pct")) else 1.0)
    return out


# ---------------------------------------------------------------- history

def history_text(campaigns: list[str], steps: list[dict[str, Any]], color: bool = False) -> str:
    """The history's steps and slides (steps.csv rows of
    :func:`benchmatrix.campaigns.publish.build_history`): the detected ones as a table, largest
    first (a slide's "from campaign" says ``slide -20.0% a campaign``), then the other series
    counted by verdict."""
    lines = [f"history: {len(campaigns)} campaigns, oldest first: {printable(', '.join(campaigns))}"]
    if not steps:
        return "\n".join([*lines, "no steps: the history needs two or more campaigns with a summary"])
    found = [s for s in steps if s.get("detected")]
    found.sort(key=lambda s: -abs(s["relative_pct"]) if _finite(s.get("relative_pct")) else 0)
    if found:
        rows = [[str(s["metric"]), str(s["cell"]),
                 f"slide {_pct(s.get('slide_pct'))} a campaign" if s.get("kind") == "slide"
                 else str(s["step_campaign"]),
                 quantity(s["before"], s.get("unit")), quantity(s["after"], s.get("unit")),
                 _pct(s["relative_pct"]), _interval(s["relative_low_pct"], s["relative_high_pct"]),
                 str(s["verdict"]).replace("_", " ")] for s in found]
        lines.append(f"steps ({len(found)}, largest first):")
        lines.append(text_table(["metric", "cell", "from campaign", "before", "after", "change", "interval",
                                 "verdict"], rows, right=(3, 4, 5), keys=[str(s["verdict"]) for s in found],
                                color=color))
    else:
        lines.append("steps: none detected")
    counts: dict[str, int] = {}
    for s in steps:
        if not s.get("detected"):
            counts[str(s["verdict"])] = counts.get(str(s["verdict"]), 0) + 1
    if counts:
        lines.append("other series: " + ", ".join(f"{n} {v.replace('_', ' ')}" for v, n in sorted(counts.items())))
    return "\n".join(lines)
