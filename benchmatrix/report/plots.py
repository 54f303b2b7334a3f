"""The report's plots (matplotlib, SVG).

Each plot answers one question of the seeds:

* ``lines_METRIC``: the metric against a numeric factor, one line per level of
  another factor, with the 95 % confidence band of each cell's mean (the HT charts:
  throughput against users, one line per setting). The other factors get one panel
  per combination.
* ``latency``: throughput beside latency percentiles for every cell, so a
  throughput gain that costs latency cannot hide ("lies, damned lies, and
  statistics").
* ``order``: every run in execution order coloured by cell; warm-ups hollow,
  control runs black. Drift and order effects show up as slopes or steps.
* ``control``: the control cell over time, with the detected level shift.
* ``moved_with_N``: the N-th finding's metric against the counter that moved most
  with it, one point per run of its two cells (docs/report.md "What moved with it").

Plots are SVG with text kept as text (small, searchable, crisp). Point clouds larger
than ``RASTER_POINTS`` are rasterized inside the SVG so a million-run campaign stays
a small file and renders in a second.
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from benchmatrix.analyze.stats import bool_column, execution_order, is_ok, metric_direction

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Point clouds above this size are drawn as an embedded raster.
RASTER_POINTS = 3000
#: Caps that keep plots legible; beyond them a plot is left out with a note.
MAX_PANELS = 6
MAX_LINES = 10
MAX_CELLS_BARS = 40
MAX_LEGEND_CELLS = 12
MAX_METRICS = 4
#: Figure width in inches: about 420 CSS pixels, so a 390 px phone shows a plot at
#: nearly its natural size and its 9 pt text stays readable; panels go one per row.
WIDTH = 4.4


@dataclass
class Plot:
    """One rendered plot.

    Attributes:
        name: File stem (``plots/NAME.svg`` next to report.md).
        title: Heading.
        caption: What to look for.
        svg: The SVG document.
    """

    name: str
    title: str
    caption: str
    svg: str


@dataclass(frozen=True)
class PlotJob:
    """One call of a plot function of this module, named so that another process can make it
    (:class:`benchmatrix.report.plot_worker.PlotWorker`).

    Attributes:
        function: A key of :data:`JOBS`.
        args: Its arguments; a function that leaves notes gets a fresh list after them.
    """

    function: str
    args: tuple[Any, ...]


def draw(job: PlotJob) -> tuple[list[Plot], list[str]]:
    """Make one :class:`PlotJob`: the plots it drew (none, one or several) and the notes it left."""
    function, takes_notes = JOBS[job.function]
    notes: list[str] = []
    got = function(*job.args, notes) if takes_notes else function(*job.args)
    return ([] if got is None else [got] if isinstance(got, Plot) else list(got)), notes


def safe_file_stem(name: str) -> str:
    """``name`` as a file stem that stays inside its directory.

    Metric names reach file names (``plots/lines_METRIC.svg``) and may come from a
    workload's output: anything but letters, digits, ``_``, ``-`` and ``.`` becomes
    ``_``, a leading dot is dropped, and a name that had to change (or is too long)
    gets a short hash of the original, so two metrics never share a file.
    """
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    if stem == name and len(stem) <= 100:
        return stem
    return f"{stem[:90]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


#: matplotlib settings of every plot.
_RC = {
    "svg.fonttype": "none",          # text stays text: smaller files, the page's font
    "svg.hashsalt": "benchmatrix",   # stable element ids: the same data gives the same file
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
}


def _matplotlib():
    # Imported on first use (about 0.4 s): a report without plots never pays it.
    import matplotlib

    matplotlib.rcParams.update(_RC)
    return matplotlib


def _pyplot():
    """pyplot with the report's settings (for callers that manage pyplot figures)."""
    matplotlib = _matplotlib()
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any):
    """``pyplot.subplots`` without pyplot: a :class:`~matplotlib.figure.Figure` of its
    own, outside pyplot's registry of open figures and GUI backends; it draws the
    same SVG and is freed like any object."""
    _matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    if fig.canvas.manager is not None:  # a pyplot figure: pyplot holds it until closed
        _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _numeric_levels(levels: list[Any]) -> bool:
    return len(levels) >= 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels)


def _label(unit: str) -> str:
    return f" ({unit})" if unit else ""


def _in_display_unit(values: Any, unit: str) -> tuple[float, str]:
    """The factor and unit a metric's values are drawn in (MiB/s rather than KiB/s,
    ms rather than µs): the report's tables use the same rule."""
    from benchmatrix.report.units import display_unit

    arr = pd.to_numeric(pd.Series(np.asarray(values, dtype=object).ravel()), errors="coerce").abs()
    return display_unit(unit, arr.median())[::-1]


def _plain_axis(axis) -> None:
    """Tick labels as plain numbers: no ``1e6`` offset or exponent above the axis."""
    from matplotlib.ticker import ScalarFormatter

    fmt = axis.get_major_formatter()
    if isinstance(fmt, ScalarFormatter):
        fmt.set_useOffset(False)
        fmt.set_scientific(False)


def _tick_text(value: float, pos: Any = None) -> str:
    """A tick label in the axis' (display) unit: 0.1, 2.5, 500, 1,500; no exponent."""
    if value == 0:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _readable_x(axis, decades: float | None = None) -> None:
    """Few x tick labels, as plain numbers, none on the minor ticks: the labels of a
    narrow (phone-width) plot never run together. ``decades``: the axis is logarithmic
    over that many powers of ten (labels at 1, 10, 100; also 3, 30 over less than two),
    else linear (at most six labels on round steps)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    if decades is None:
        axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if decades >= 2 else (1.0, 3.0), numticks=6))
    axis.set_major_formatter(FuncFormatter(_tick_text))
    axis.set_minor_formatter(NullFormatter())


#: An interval end farther from the means than this many times their spread (the
#: range of the means, or the lower quartile of the intervals' half widths when wider)
#: is clipped.
CLIP_SPREADS = 1.5


def robust_limits(means: Any, lows: Any, highs: Any) -> tuple[float, float]:
    """The value axis' range: every mean and every interval end, except ends farther
    than :data:`CLIP_SPREADS` spreads beyond the means (one cell's wide interval would
    otherwise flatten every other series to a line).

    Args:
        means: The drawn means.
        lows: The intervals' low ends (NaN where unknown).
        highs: The intervals' high ends.

    Returns:
        ``(low, high)``: draw the intervals clipped to it (:func:`_clip_intervals`).
    """
    m = np.asarray(means, dtype="float64")
    lo, hi = np.asarray(lows, dtype="float64"), np.asarray(highs, dtype="float64")
    m = m[np.isfinite(m)]
    if not m.size:
        return float("nan"), float("nan")
    half = np.abs(hi - lo)[np.isfinite(hi - lo)] / 2
    # The lower quartile of the half widths: robust even when a few intervals are wild.
    spread = max(float(m.max() - m.min()), float(np.percentile(half, 25)) if half.size else 0.0,
                 abs(float(np.median(m))) * 0.01, 1e-12)
    floor, ceiling = m.min() - CLIP_SPREADS * spread, m.max() + CLIP_SPREADS * spread
    ends = np.concatenate([m, lo[np.isfinite(lo)], hi[np.isfinite(hi)]])
    return float(max(ends.min(), floor)), float(min(ends.max(), ceiling))


# shape: an axis, the intervals' positions and ends, the limits, the colour and the orientation of one plot call
def _clip_intervals(ax, pos: Any, lows: Any, highs: Any, limits: tuple[float, float], color: Any,
                    horizontal: bool = False) -> int:
    """Mark the interval ends beyond ``limits`` with an arrow at the axis' edge; returns
    how many were clipped (the caption says so)."""
    lo_lim, hi_lim = limits
    pos = np.asarray(pos, dtype="float64")
    lows, highs = np.asarray(lows, dtype="float64"), np.asarray(highs, dtype="float64")
    over, under = np.isfinite(highs) & (highs > hi_lim), np.isfinite(lows) & (lows < lo_lim)
    for mask, edge, marker in ((over, hi_lim, ">" if horizontal else "^"), (under, lo_lim, "<" if horizontal else "v")):
        if mask.any():
            xy = (np.full(mask.sum(), edge), pos[mask]) if horizontal else (pos[mask], np.full(mask.sum(), edge))
            ax.plot(*xy, marker=marker, ls="", ms=6, color=color, clip_on=False)
    return int(over.sum() + under.sum())


def _set_limits(ax, limits: tuple[float, float], horizontal: bool = False) -> None:
    lo, hi = limits
    if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
        pad = (hi - lo) * 0.05
        (ax.set_xlim if horizontal else ax.set_ylim)(lo - pad, hi + pad)


# shape: picks the axis, line and panel factors, then draws each metric; split, drawing needs all of them
def factor_lines(spec: Spec, summary: pd.DataFrame, metrics: list[str], units: dict[str, str],
                 notes: list[str]) -> list[Plot]:
    """Metric against a numeric factor, one line per level of another factor."""
    factors = spec.levels
    numeric = [f for f, lv in factors.items() if _numeric_levels(lv)]
    if not numeric or summary.empty:
        return []
    # A line between two levels claims a trend no one measured: those get dots with intervals.
    compared = spec.report.compare.factor if spec.report.compare else None
    # The x axis: the numeric factor with the most levels, not the compared one if possible.
    numeric.sort(key=lambda f: (f == compared, -len(factors[f])))
    x = numeric[0]
    dots = len(factors[x]) < 3
    others = [f for f in factors if f != x]
    line = compared if compared in others else None
    if line is None and others:
        line = min(others, key=lambda f: len(factors[f]))
    panel_factors = [f for f in others if f != line]
    if line is not None and len(factors[line]) > MAX_LINES:
        notes.append(f"no line plot: {line} has more than {MAX_LINES} levels")
        return []
    if panel_factors:
        combos = summary[panel_factors].drop_duplicates()
        rank = [{str(v): i for i, v in enumerate(factors[f])} for f in panel_factors]
        keys = [tuple(r.get(str(v), len(r)) for r, v in zip(rank, row))
                for row in combos.itertuples(index=False)]
        combos = combos.iloc[sorted(range(len(combos)), key=keys.__getitem__)]
    else:
        combos = pd.DataFrame(index=[0])
    if len(combos) > MAX_PANELS:
        notes.append(f"line plots show the first {MAX_PANELS} of {len(combos)} combinations of "
                     f"{', '.join(panel_factors)}")
        combos = combos.iloc[:MAX_PANELS]
    out = []
    for metric in metrics[:MAX_METRICS]:
        rows = summary[summary["metric"] == metric]
        if rows.empty:
            continue
        n = len(combos)
        factor, unit = _in_display_unit(rows["mean"], units.get(metric, ""))
        limits = robust_limits(*(pd.to_numeric(rows[c], errors="coerce") * factor
                                 for c in ("mean", "ci_low", "ci_high")))
        clipped = 0
        fig, axes = _subplots(n, 1, figsize=(WIDTH, 2.6 * n), squeeze=False, sharey=True)
        for ax, (_, combo) in zip(axes.flat, combos.iterrows()):
            part = rows
            for f in panel_factors:
                part = part[part[f].astype(str) == str(combo[f])]
            groups = part.groupby(part[line].astype(str), sort=False) if line else [("", part)]
            order = {str(v): i for i, v in enumerate(factors.get(line, []))} if line else {}
            ordered_groups = sorted(groups, key=lambda t: order.get(t[0], len(order)))
            for i, (level, g) in enumerate(ordered_groups):
                g = g.assign(_x=pd.to_numeric(g[x], errors="coerce")).sort_values("_x")
                lab = f"{line}={level}" if line else metric
                mean = pd.to_numeric(g["mean"], errors="coerce") * factor
                raw_lo = pd.to_numeric(g["ci_low"], errors="coerce") * factor
                raw_hi = pd.to_numeric(g["ci_high"], errors="coerce") * factor
                # Drawn to the axis' edge at most; the ends beyond it get an arrow.
                lo, hi = raw_lo.clip(lower=limits[0]), raw_hi.clip(upper=limits[1])
                if dots:
                    # The x levels as categories, each line's dots side by side.
                    pos = g["_x"].map({v: k for k, v in enumerate(sorted(factors[x]))}).to_numpy(dtype=float)
                    pos = pos + (i - (len(ordered_groups) - 1) / 2) * 0.12
                    # The interval as it is (of a skewed metric it may lie beside the mean).
                    (handle,) = ax.plot(pos, mean, "o", ms=4, label=lab)
                    known = (np.isfinite(lo) & np.isfinite(hi)).to_numpy()
                    ax.vlines(pos[known], lo[known], hi[known], color=handle.get_color(), linewidth=1)
                    clipped += _clip_intervals(ax, pos, raw_lo, raw_hi, limits, handle.get_color())
                    continue
                (handle,) = ax.plot(g["_x"], mean, marker="o", ms=4, label=lab)
                ax.fill_between(g["_x"], lo, hi, alpha=0.2, color=handle.get_color(), linewidth=0)
                clipped += _clip_intervals(ax, g["_x"], raw_lo, raw_hi, limits, handle.get_color())
            if dots:
                ax.set_xticks(range(len(factors[x])), [str(v) for v in sorted(factors[x])])
                ax.set_xlim(-0.6, len(factors[x]) - 0.4)
            ax.set_title(", ".join(f"{f}={combo[f]}" for f in panel_factors) or metric)
            ax.set_xlabel(x)
            if not dots and min(factors[x]) > 0 and max(factors[x]) / min(factors[x]) >= 16:
                ax.set_xscale("log", base=2)
            ax.legend(loc="best")
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel(metric + _label(unit))
            _plain_axis(ax.yaxis)
            _set_limits(ax, limits)
        fig.tight_layout()
        what = "interval" if dots else "confidence band"
        per = f"; one {'colour' if dots else 'line'} per {line} level" if line else ""
        beyond = (f" {clipped} interval end(s) reach beyond the axis: clipped, marked ▲/▼ (summary.csv has "
                  f"their values)." if clipped else "")
        out.append(Plot(safe_file_stem(f"{'dots' if dots else 'lines'}_{metric}"), f"{metric} against {x}",
                        f"Mean of each cell with its 95% {what}{per}.{beyond}", _svg(fig)))
    return out


def _direction_of(metric: str) -> str:
    return metric.split("_", 1)[0] if "_" in metric else ""


def latency_beside_throughput(spec: Spec, summary: pd.DataFrame, metrics: list[str], units: dict[str, str],
                              labels: dict[str, str], notes: list[str]) -> list[Plot]:
    """Throughput and latency percentiles of every cell, side by side."""
    if summary.empty:
        return []
    declared = spec.declared_metrics
    present = list(dict.fromkeys(summary["metric"]))
    throughput = next((m for m in metrics if metric_direction(m, declared) == "higher"), None)
    if throughput is None:
        return []
    prefix = f"{_direction_of(throughput)}_clat_"
    latency = [m for m in present if m.startswith(prefix) and m.endswith("_us") and "max" not in m]
    if not latency:
        latency = [m for m in metrics if metric_direction(m, declared) == "lower"]
    if not latency:
        return []
    rank = {"mean": 0, "p50": 1, "p95": 2, "p99": 3, "p99_9": 4}
    latency.sort(key=lambda m: rank.get(m[len(prefix):-3], 9))
    latency = latency[:5]
    present = set(summary["cell_id"])
    # Matrix order (the labels' order), then any cell the spec does not know.
    cells = [c for c in labels if c in present] + [c for c in dict.fromkeys(summary["cell_id"]) if c not in labels]
    if len(cells) > MAX_CELLS_BARS:
        notes.append(f"no latency-beside-throughput plot: {len(cells)} cells (more than {MAX_CELLS_BARS})")
        return []
    idx = summary.set_index(["metric", "cell_id"])
    y = np.arange(len(cells))
    fig, (left, right) = _subplots(2, 1, figsize=(WIDTH, 2 * (0.3 * len(cells) + 1.2)), sharey=True)
    tp = idx.loc[throughput].reindex(cells) if throughput in idx.index.get_level_values(0) else None
    clipped = 0
    if tp is not None:
        tp_factor, tp_unit = _in_display_unit(tp["mean"], units.get(throughput, ""))
        mean = tp["mean"].to_numpy(dtype="float64") * tp_factor
        low = tp["ci_low"].to_numpy(dtype="float64") * tp_factor
        high = tp["ci_high"].to_numpy(dtype="float64") * tp_factor
        left.barh(y, mean, color="#4c78a8", alpha=0.85)
        # The interval as it is, not as error bars around the bar's end: of a skewed
        # metric it is the geometric mean's and may lie beside the arithmetic mean.
        known = np.isfinite(low) & np.isfinite(high)
        # The bars start at 0; a wild interval end is clipped to the axis and marked.
        limits = robust_limits(mean, low, high)
        limits = (min(0.0, limits[0]), limits[1])
        left.hlines(y[known], np.maximum(low, limits[0])[known], np.minimum(high, limits[1])[known],
                    color="black", linewidth=1)
        clipped = _clip_intervals(left, y, low, high, limits, "black", horizontal=True)
        _set_limits(left, limits, horizontal=True)
    left.set_xlabel(throughput + _label(tp_unit if tp is not None else units.get(throughput, "")))
    _readable_x(left.xaxis)
    # The levels alone, the factors' names once on the axis: the bars keep the narrow figure's width.
    short = [re.sub(r"(^|\s)[^\s=]+=", r"\1", labels.get(c, c)).replace(" ", " · ") for c in cells]
    left.set_yticks(y, short)
    left.set_ylabel(" · ".join(spec.factor_names), fontsize=8)
    left.invert_yaxis()
    right.tick_params(labelleft=True)
    lat_factor, unit = _in_display_unit(summary.loc[summary["metric"].isin(latency), "mean"],
                                        units.get(latency[0], ""))
    for m in latency:
        lat = idx.loc[m].reindex(cells) if m in idx.index.get_level_values(0) else None
        if lat is None:
            continue
        right.plot(lat["mean"].to_numpy(dtype="float64") * lat_factor, y, marker="o", ms=4, ls="",
                   label=m[len(prefix):-3] if m.startswith(prefix) else m)
    right.set_xlabel("latency" + _label(unit))
    values = summary.loc[summary["metric"].isin(latency), "mean"].astype("float64")
    if len(values) and values.min() > 0 and values.max() / values.min() > 20:
        right.set_xscale("log")
        _readable_x(right.xaxis, float(np.log10(values.max() / values.min())))
    else:
        _readable_x(right.xaxis)
    right.legend(loc="best", title="percentile" if latency[0].startswith(prefix) else None)
    fig.tight_layout()
    return [Plot("latency", f"{throughput} beside latency",
                 "Throughput (mean with 95% CI) and latency percentiles of every cell: a throughput gain that "
                 "costs tail latency shows here."
                 + (f" {clipped} interval end(s) reach beyond the axis: clipped, marked ◀/▶ (summary.csv has "
                    f"their values)." if clipped else ""), _svg(fig))]


def _ordered(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.iloc[execution_order(runs)]


def run_order(runs: pd.DataFrame, metrics: list[str], units: dict[str, str], labels: dict[str, str]) -> list[Plot]:
    """Every successful run in execution order, coloured by cell."""
    if runs.empty:
        return []
    ok = runs.loc[is_ok(runs["status"]).to_numpy()]
    shown = [m for m in metrics if m in ok.columns][:2]
    if ok.empty or not shown:
        return []
    ordered = _ordered(ok)
    pos = np.arange(len(ordered))
    warm = bool_column(ordered["warmup"]).to_numpy()
    ctl = bool_column(ordered["control"]).to_numpy()
    codes, cells = pd.factorize(ordered["cell_id"])
    fig, axes = _subplots(len(shown), 1, figsize=(WIDTH, 2.6 * len(shown)), squeeze=False, sharex=True)
    raster = len(ordered) > RASTER_POINTS
    cmap = _matplotlib().colormaps["tab20"]
    ms = 3 if len(ordered) < 2000 else 1.5
    for ax, metric in zip(axes[:, 0], shown):
        y = pd.to_numeric(ordered[metric], errors="coerce").to_numpy(dtype="float64")
        factor, unit = _in_display_unit(y, units.get(metric, ""))
        y = y * factor
        measured = ~warm & ~ctl
        for code in range(len(cells)):
            sel = measured & (codes == code)
            if sel.any():
                ax.plot(pos[sel], y[sel], ls="", marker="o", ms=ms, color=cmap(code % 20),
                        label=labels.get(cells[code], cells[code]) if len(cells) <= MAX_LEGEND_CELLS else None,
                        rasterized=raster)
        if warm.any():
            ax.plot(pos[warm], y[warm], ls="", marker="o", ms=ms + 1, mfc="none", color="#888888",
                    label="warm-up", rasterized=raster)
        if ctl.any():
            ax.plot(pos[ctl], y[ctl], ls="", marker="x", ms=ms + 2, color="black", label="control",
                    rasterized=raster)
        ax.set_ylabel(metric + _label(unit))
        _plain_axis(ax.yaxis)
    axes[-1, 0].set_xlabel("run in execution order")
    handles, names = axes[0, 0].get_legend_handles_labels()
    if handles:
        # Below the panels, not beside them: the figure keeps its narrow width.
        fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=7)
    fig.tight_layout()
    colour = ("coloured by cell" if len(cells) <= MAX_LEGEND_CELLS
              else f"coloured by cell ({len(cells)} cells, colours repeat)")
    return [Plot("order", "every run in execution order",
                 f"Successful runs {colour}; hollow grey: warm-up, black x: control runs. A slope or step "
                 "that crosses cells is drift or an order effect, not a factor's effect.", _svg(fig))]


def control_over_time(drift_table: pd.DataFrame, metrics: list[str],
                      units: dict[str, str], control_runs: pd.DataFrame) -> list[Plot]:
    """The control cell's runs over time per host, with any detected shift or trend."""
    if control_runs.empty:
        return []
    shown = [m for m in metrics if m in control_runs.columns][:MAX_METRICS]
    if not shown:
        return []
    hosts = sorted(control_runs["host"].astype(str).unique()) if "host" in control_runs.columns else [""]
    fig, axes = _subplots(len(shown), 1, figsize=(WIDTH, 2.4 * len(shown)), squeeze=False)
    raster = len(control_runs) > RASTER_POINTS
    flagged = drift_table.set_index(["host", "metric"]) if len(drift_table) else None
    for ax, metric in zip(axes[:, 0], shown):
        factor, unit = _in_display_unit(control_runs[metric], units.get(metric, ""))
        for host in hosts:
            part = control_runs[control_runs["host"].astype(str) == host] if host else control_runs
            y = pd.to_numeric(part[metric], errors="coerce").to_numpy(dtype="float64") * factor
            x = np.arange(len(y))
            (h,) = ax.plot(x, y, marker="o", ms=3, lw=0.8, label=host or None, rasterized=raster)
            row = flagged.loc[(host, metric)] if flagged is not None and (host, metric) in flagged.index else None
            if row is not None and bool(row.get("shift_flagged", False)):
                k = int(row["shift_after"])
                ax.axvline(k - 0.5, color="#b42318", ls="--", lw=1)
                ax.hlines([np.nanmedian(y[:k]), np.nanmedian(y[k:])], [0, k], [k - 1, len(y) - 1],
                          colors="#b42318", lw=1.5)
            if row is not None and bool(row.get("trend_flagged", False)):
                fit = np.polyfit(x[np.isfinite(y)], y[np.isfinite(y)], 1)
                ax.plot(x, np.polyval(fit, x), color="#b42318", lw=1, ls=":")
        ax.set_ylabel(metric + _label(unit))
        _plain_axis(ax.yaxis)
        if len(hosts) > 1:
            ax.legend(loc="best")
    axes[-1, 0].set_xlabel("control run (execution order)")
    fig.tight_layout()
    return [Plot("control", "control cell over time",
                 "The same configuration measured throughout the campaign; it should be flat. Red dashed: a "
                 "detected level shift (medians before and after); red dotted: a detected trend.", _svg(fig))]


# shape: one finding's plot: its name and words, then the two columns and their runs
def metric_against_counter(name: str, title: str, metric: str, counter: str, units: dict[str, str],
                           runs: pd.DataFrame, sides: dict[str, str]) -> Plot | None:
    """One finding's metric against a counter that moved with it, one point per run.

    Args:
        name: The plot's file stem (``moved_with_1``).
        title: Its heading (the finding's sentence).
        metric: The finding's metric (the y axis).
        counter: The counter (the x axis).
        units: Metric -> unit.
        runs: The runs of the finding's two cells with a ``side`` column (``baseline``
            or ``level``), as :func:`benchmatrix.analyze.explain.finding_runs` gives them.
        sides: ``side`` -> its legend label (``read_ahead_kb=0``).

    Returns:
        The plot, or None when no run has both values.
    """
    if metric not in runs.columns or counter not in runs.columns or "side" not in runs.columns:
        return None
    x = pd.to_numeric(runs[counter], errors="coerce").to_numpy(dtype="float64")
    y = pd.to_numeric(runs[metric], errors="coerce").to_numpy(dtype="float64")
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return None
    xf, xunit = _in_display_unit(x[ok], units.get(counter, ""))
    yf, yunit = _in_display_unit(y[ok], units.get(metric, ""))
    fig, ax = _subplots(figsize=(WIDTH, 2.8))
    side = runs["side"].astype(str).to_numpy()
    for key, colour, marker in (("baseline", "#1f77b4", "o"), ("level", "#ff7f0e", "s")):
        sel = ok & (side == key)
        if sel.any():
            ax.plot(x[sel] * xf, y[sel] * yf, ls="", marker=marker, ms=4, color=colour,
                    label=sides.get(key, key), rasterized=int(sel.sum()) > RASTER_POINTS)
    ax.set_xlabel(counter + _label(xunit))
    ax.set_ylabel(metric + _label(yunit))
    _plain_axis(ax.xaxis)
    _plain_axis(ax.yaxis)
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    return Plot(name, title, f"Each point is one run of the two cells: {metric} against {counter}, the counter "
                "that moved most with this finding. Two clouds apart on both axes: the counter moved with the "
                "metric; a line inside each cloud: it also follows the metric run by run. It moved with the "
                "finding; that alone does not make it the cause.", _svg(fig))



#: The plot functions a :class:`PlotJob` names: (function, whether it takes a notes list).
JOBS: dict[str, tuple[Any, bool]] = {
    "control_over_time": (control_over_time, False),
    "factor_lines": (factor_lines, True),
    "latency_beside_throughput": (latency_beside_throughput, True),
    "run_order": (run_order, False),
    "metric_against_counter": (metric_against_counter, False),
}
