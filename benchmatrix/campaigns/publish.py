"""``bmx publish``: every experiment's campaigns as a static web site.

The site needs no server and fetches nothing: plain HTML files with relative links,
one inline stylesheet per page, plots as inline SVG, and a Content-Security-Policy
that forbids any request but the page's own images (``docs/publish.md``)::

    DIR/index.html                         experiments and their latest campaign
    DIR/NAME/index.html                    the experiment's campaigns, comparisons
    DIR/NAME/history.html                  means over campaigns, steps (>= 2 campaigns)
    DIR/NAME/history.csv, steps.csv        the history's data
    DIR/NAME/campaigns/ID/                 report.html, summary.csv, runs.csv, ...
    DIR/NAME/compare/X/                    copies of results/NAME/compare/X/

A campaign's page is its own ``report.html`` (self-contained), copied as it is. The
history of an experiment reads each campaign's ``summary.csv`` only: a cell's mean
and 95 % interval per metric and campaign, and the change-point test of
:mod:`benchmatrix.analyze.changepoint` on the series of campaign means (a step needs at
least :data:`benchmatrix.analyze.changepoint.MIN_CAMPAIGNS` campaigns).

The site is built in a temporary directory beside ``DIR`` and moved into place at
the end, so a failed publish leaves the previous site intact. ``DIR`` must be new,
empty, or a site an earlier ``bmx publish`` wrote (it holds :data:`SITE_MARKER`).
"""

from __future__ import annotations

import errno
import html
import json
import math
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmatrix import layout
from benchmatrix.analyze.campaign_model import PRIOR_DOF
from benchmatrix.analyze.changepoint import MIN_CAMPAIGNS, Change, detect_change_many
from benchmatrix.analyze.scale import LINEAR, LOG, declared_positive
from benchmatrix.analyze.stats import metric_direction
from benchmatrix.analyze.verdict import CHANGED, ROUNDING, judge
from benchmatrix.campaigns.compare import host_state_steps
from benchmatrix.campaigns.store import Campaign, list_campaigns
from benchmatrix.errors import BenchmatrixError
from benchmatrix.layout import State
from benchmatrix.report.plots import WIDTH, _clip_intervals, _pyplot, _set_limits, _svg, robust_limits, safe_file_stem
from benchmatrix.report.render import format_number
from benchmatrix.report.units import display_unit, pct_interval
from benchmatrix.results.status import decide
from benchmatrix.results.tables import metric_units, read_analysis
from benchmatrix.spec.load import DEFAULT_THRESHOLD, ReportSettings

#: File in a published site's root: ``bmx publish`` only ever replaces such a directory.
SITE_MARKER = ".benchmatrix-site"
#: The policy every page carries: nothing is fetched but the site's own images.
CSP = "default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'"
#: A campaign's files copied into the site (when present), in the order they are listed.
DOWNLOADS = (layout.SUMMARY, layout.RUNS, layout.RUNS_LONG, layout.COMPARISONS)
#: Cells drawn as lines in a history plot; beyond it, the cells with a step (largest first).
MAX_PLOT_CELLS = 8
#: Metrics that get a history plot each (in summary order).
MAX_PLOT_METRICS = 12
#: Largest history whose means are also shown as a cell x campaign table per metric.
MAX_TABLE_CELLS = 50
MAX_TABLE_CAMPAIGNS = 30
#: Rows of the all-series table on a history page; the rest are in steps.csv.
MAX_SERIES_ROWS = 5000
#: Change-point test false-alarm rate per series.
ALPHA = 0.05


@dataclass
class CampaignPage:
    """What the site shows of one campaign.

    Attributes:
        campaign: The campaign.
        slug: Its directory name in the site (``NAME/campaigns/SLUG/``).
        date: When it started (``YYYY-MM-DD HH:MM UTC``), "" when unknown.
        hosts: Its hosts, sorted.
        cells: Cells with a summary row (else with a run), None when unknown.
        runs_ok, runs_failed: Runs ok / failed by the one run-state rule
            (:func:`benchmatrix.results.status.decide`, as ``bmx status`` counts them).
        warnings: The warnings of its report, as collect kept them (analysis.json), None
            without them.
        files: Site-relative names of the files copied (report.html first).
        skipped: The campaign's files left out, with why (``(path, "a symbolic link")``).
        summary: Its summary.csv (empty when missing).
    """

    campaign: Campaign
    slug: str
    date: str = ""
    hosts: list[str] = field(default_factory=list)
    cells: int | None = None
    runs_ok: int | None = None
    runs_failed: int | None = None
    warnings: int | None = None
    files: list[str] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)


def _date(iso: str) -> str:
    try:
        ts = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if ts.tzinfo is not None:
        ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%d %H:%M UTC")


def _read_csv(path: Path, **kwargs: Any) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        return pd.DataFrame()
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (ValueError, pd.errors.ParserError) as exc:
        raise BenchmatrixError(f"{path}: not a readable CSV table: {str(exc).splitlines()[0]}") from None


class _Names:
    """How many names of each multiply-linked regular file lie under ``root``.

    A hard link is a second name of one file: a ``runs.csv`` linked to ``/etc/shadow``
    is a regular file inside the results by every other test. The file's link count
    says how many names it has; the names found under ``root`` say how many of them are
    there. The directory is walked once, and only when a file with several names is met
    (the project writes none).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._count: dict[tuple[int, int], int] | None = None

    def inside(self, st: os.stat_result) -> int:
        """How many of the names of the file ``st`` describes lie under the root."""
        if self._count is None:
            count: dict[tuple[int, int], int] = {}
            for top, _dirs, files in os.walk(self.root):  # links to directories are not followed
                for name in files:
                    try:
                        found = os.lstat(os.path.join(top, name))
                    except OSError:
                        continue
                    if found.st_nlink > 1 and stat.S_ISREG(found.st_mode):
                        key = (found.st_dev, found.st_ino)
                        count[key] = count.get(key, 0) + 1
            self._count = count
        return self._count.get((st.st_dev, st.st_ino), 0)


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symbolic link"}


def _why_not(st: os.stat_result, names: _Names) -> str:
    """Why the file ``st`` describes may not be published ("" when it may): it must be a
    regular file whose every name lies under the root of ``names``."""
    if not stat.S_ISREG(st.st_mode):
        return _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
    if st.st_nlink > 1 and names.inside(st) < st.st_nlink:
        return f"a hard link to a file with a name outside {names.root}"
    return ""


def _refusal(path: Path, root: Path, names: _Names | None = None) -> str:
    """Why ``path`` may not be published ("" when it may): it must be a regular file
    (no link, FIFO, device) whose real path lies inside ``root``, the experiment's
    results directory, and which has no other name outside it, so that a link planted
    among the results cannot copy a file of the machine (``runs.csv -> /etc/shadow``,
    symbolic or hard) into a public site. ``names``: the hard links under ``root``,
    shared by the calls of one publish."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    except OSError as exc:
        return exc.strerror or "unreadable"
    if not stat.S_ISREG(st.st_mode):
        return _why_not(st, names or _Names(root))
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if top not in real.parents:
        return f"outside {root} (through a linked directory)"
    return _why_not(st, names or _Names(root))


def campaign_page(campaign: Campaign, slug: str, root: Path | None = None,
                  names: _Names | None = None) -> CampaignPage:
    """Read what the index shows of one campaign from its directory (no copying).

    Args:
        campaign: The campaign.
        slug: Its directory name in the site.
        root: The experiment's results directory (default: the campaign's own): only
            regular files inside it are read and listed for copying; the others are
            in :attr:`CampaignPage.skipped`.
        names: The hard links under ``root`` (one walk shared by an experiment's pages).
    """
    path = campaign.path
    root = root or path
    names = names or _Names(root)
    page = CampaignPage(campaign, slug, date=_date(campaign.started_at) if campaign.started_at else "")
    for name in (layout.REPORT_HTML, *DOWNLOADS):
        why = _refusal(path / name, root, names)
        if not why:
            page.files.append(name)
        elif why != "gone":
            page.skipped.append((path / name, why))
    usable = set(page.files)
    page.summary = (_read_csv(path / layout.SUMMARY, dtype={"cell_id": str}) if layout.SUMMARY in usable
                    else pd.DataFrame())
    runs = (_read_csv(path / layout.RUNS, dtype={"run_id": str, "cell_id": str, "host": str, "status": str},
                      usecols=lambda c: c in {"run_id", "cell_id", "host", "attempt", "status"})
            if layout.RUNS in usable else pd.DataFrame())
    if not page.date:
        # A campaign made before campaign.json had created_at: its files' age.
        stamps = [(path / n).stat().st_mtime for n in (layout.SUMMARY, layout.RUNS) if n in usable]
        if stamps:
            page.date = datetime.fromtimestamp(min(stamps), tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    if "cell_id" in page.summary.columns:
        page.cells = int(page.summary["cell_id"].nunique())
    elif "cell_id" in runs.columns:
        page.cells = int(runs["cell_id"].nunique())
    if {"run_id", "status"} <= set(runs.columns):
        # The one run-state rule, as `bmx status` counts: plan.csv (when readable) knows the
        # re-runs still waiting; an ok run stays ok after a failed re-run.
        plan = (_read_csv(path / layout.PLAN, dtype={"run_id": str}, usecols=lambda c: c in {"run_id", "attempt"})
                if not _refusal(path / layout.PLAN, root, names) else pd.DataFrame())
        if "attempt" not in runs.columns:
            runs = runs.assign(attempt=1)
        states = decide(plan if {"run_id", "attempt"} <= set(plan.columns) else None, runs)["state"]
        page.runs_ok, page.runs_failed = int((states == State.OK).sum()), int((states == State.FAILED).sum())
    if "host" in runs.columns:
        page.hosts = sorted(runs["host"].dropna().astype(str).unique())
    elif (path / "hosts").is_dir():
        page.hosts = sorted(p.name for p in (path / "hosts").iterdir() if p.is_dir())
    if not _refusal(path / layout.ANALYSIS, root, names):
        checks = read_analysis(path).get("checks")
        if isinstance(checks, dict):
            page.warnings = sum(1 for w in checks.get("warnings") or []
                                if isinstance(w, dict) and w.get("severity") == "warning")
    return page


def experiment_campaigns(exp_dir: Path) -> list[Campaign]:
    """The experiment's campaigns, oldest first; a results directory from before
    campaigns were kept (no campaign.json) counts as one campaign named ``current``."""
    found = list_campaigns(exp_dir)
    if not any(c.current for c in found) and any((exp_dir / n).is_file() for n in (layout.SUMMARY, layout.RUNS)):
        found.append(Campaign(id="current", path=exp_dir, current=True))
    return found


def _slugs(campaigns: list[Campaign]) -> list[str]:
    slugs, seen = [], set()
    for c in campaigns:
        slug = safe_file_stem(c.id) or "campaign"
        while slug in seen:  # two campaigns with one id (a copied directory): keep both
            slug += "_"
        seen.add(slug)
        slugs.append(slug)
    return slugs


# ------------------------------------------------------------------ history

@dataclass
class History:
    """One experiment's history across campaigns.

    Attributes:
        long: One row per campaign, cell and metric (the history.csv table).
        steps: One row per cell and metric: the change-point verdict (steps.csv).
        plots: ``{"metric", "title", "caption", "svg"}`` per plotted metric.
        tables: Per metric, every cell's mean and 95 % interval in each campaign
            (``{"metric", "unit", "campaigns", "rows": [{"cell", "values"}]}``, a
            value ``(mean, ci_low, ci_high)`` or None); empty when there are more
            than :data:`MAX_TABLE_CELLS` cells or :data:`MAX_TABLE_CAMPAIGNS` campaigns.
    """

    long: pd.DataFrame
    steps: pd.DataFrame
    plots: list[dict[str, Any]]
    tables: list[dict[str, Any]] = field(default_factory=list)


def _cell_labels(long: pd.DataFrame, stats_cols: set[str]) -> pd.Series:
    """:func:`benchmatrix.layout.cell_label` per cell id, from the newest campaign naming it."""
    factors = [c for c in long.columns if c not in stats_cols]
    newest = long.drop_duplicates("cell_id", keep="last").set_index("cell_id")
    if not factors:
        return pd.Series(newest.index, index=newest.index)
    return pd.Series([layout.cell_label(zip(factors, vals)) for vals in newest[factors].itertuples(index=False)],
                     index=newest.index)


def experiment_history(exp_dir: Path) -> tuple[list[CampaignPage], History | None]:
    """The experiment's campaigns and their history as ``bmx history`` shows it (no plots)."""
    campaigns = experiment_campaigns(exp_dir)
    names = _Names(exp_dir)
    pages = [campaign_page(c, s, exp_dir, names) for c, s in zip(campaigns, _slugs(campaigns))]
    return pages, build_history(pages, plots=False)


def history_metrics(pages: list[CampaignPage]) -> tuple[list[str] | None, dict[str, Any], ReportSettings]:
    """The metrics whose history is tested for steps, the declared metrics and the report
    settings (``report.campaign_sd``: the prior of the tests), from the newest campaign's
    spec.json: ``report.primary``, else ``report.metrics``; None (every metric) when it
    names neither or has no spec.json."""
    for page in reversed(pages):
        if _refusal(page.campaign.path / layout.SPEC, page.campaign.path):
            continue  # missing, or not a regular file inside the campaign: never followed
        try:
            spec = json.loads((page.campaign.path / layout.SPEC).read_text())
        except (OSError, ValueError):
            continue
        report = spec.get("report") or {}
        declared = (spec.get("workload") or {}).get("metrics") or {}
        named = report.get("primary") or report.get("metrics")
        return ([str(m) for m in named] if named else None), (declared if isinstance(declared, dict) else {}), \
            ReportSettings.of(report if isinstance(report, dict) else None)
    return None, {}, ReportSettings()


# shape: one vectorized pass: masks, steps and verdicts index the same rows; split, they'd pass ten arrays
def build_history(pages: list[CampaignPage], alpha: float = ALPHA, threshold: float = DEFAULT_THRESHOLD,
                  plots: bool = True) -> History | None:
    """Campaign means per cell and metric over the campaigns, with the step and slide tests.

    Only the report's metrics are tested (``report.primary``, else ``report.metrics`` of
    the newest campaign's spec; every metric when it names none). A positive metric's
    series is tested on the log of its campaign means (a step is a ratio). A series whose
    runs never vary (every campaign's sd at rounding level) is ``constant`` and not
    tested. :func:`benchmatrix.analyze.changepoint.detect_change` tests each series for a
    step (max over splits) and a slide (the trend over the campaigns) on the campaign
    means with their runs' noise and the campaign variance's prior (``report.campaign_sd``
    of the newest campaign's spec, worth :data:`benchmatrix.analyze.campaign_model.PRIOR_DOF`
    degrees of freedom) pooled with the history's own scatter; Holm's adjustment runs
    across every tested series of the page, so an unchanged experiment shows any step or
    slide at most ``alpha`` of the time; the verdict engine
    (:func:`benchmatrix.analyze.verdict.judge`) turns them into verdicts.

    Args:
        pages: The experiment's campaigns, oldest first.
        alpha: The page's false-alarm rate (Holm across its series).
        threshold: The practical threshold (a fraction): a step's interval inside it
            is ``equivalent``.
        plots: Draw the plots (the calibration tests need only the tables).

    Returns:
        None when fewer than two campaigns have a summary.
    """
    frames = []
    # "#name" and "#pos" (the campaign's place in time) cannot clash with a factor: no factor name has a "#".
    for k, page in enumerate(pages):
        s = page.summary
        if s.empty or not {"cell_id", "metric", "mean"} <= set(s.columns):
            continue
        frames.append(s.assign(campaign=page.campaign.id, started_at=page.campaign.started_at,
                               **{"#name": page.campaign.name, "#pos": k}))
    if len(frames) < 2:
        return None
    long = pd.concat(frames, ignore_index=True, sort=False)
    for col in ("unit", "n", "ci_low", "ci_high", "sd"):
        if col not in long.columns:
            long[col] = np.nan
    long["unit"] = long["unit"].fillna("").astype(str)
    stat_cols = {"cell_id", "metric", "unit", "n", "mean", "median", "min", "max", "sd", "cv", "ci_low",
                 "ci_high", "ci_method", "campaign", "#name", "started_at", "#pos"}
    labels = _cell_labels(long, stat_cols)
    # One pivot for the means and each campaign's run spread (the tests' noise of a mean).
    wide = long.assign(sd=pd.to_numeric(long["sd"], errors="coerce"), n=pd.to_numeric(long["n"], errors="coerce"))
    wide = wide.pivot_table(index=["metric", "cell_id"], columns="#pos", values=["mean", "sd", "n"],
                            aggfunc="last")
    means = wide["mean"].dropna(how="all").dropna(axis=1, how="all")
    # The summaries' order (cells by their factors' levels, metrics as declared), not the ids' sort order.
    keys = long[["metric", "cell_id"]]
    order = keys.assign(m=pd.factorize(keys["metric"])[0], c=pd.factorize(keys["cell_id"])[0])
    order = order.drop_duplicates(["metric", "cell_id"]).sort_values(["m", "c"], kind="stable")
    means = means.reindex(pd.MultiIndex.from_frame(order[["metric", "cell_id"]]))
    positions = list(means.columns)
    pos_name = {k: pages[k].campaign.name for k in positions}
    # The one unit rule, newest campaign last: a campaign that names a unit overrides the ones before.
    units = pd.Series(metric_units(None, *[p.summary for p in pages]), dtype=object)
    wanted, declared, settings = history_metrics(pages)
    metric_of = means.index.get_level_values("metric").to_numpy()
    in_report = np.ones(len(means), dtype=bool) if wanted is None else np.isin(metric_of, wanted)
    x = means.to_numpy(dtype="float64")
    finite = np.isfinite(x)
    positive = np.array([declared_positive(m, declared, units.get(m, "")) for m in metric_of], dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        positive &= np.where(finite, x > 0, True).all(axis=1)
        y = np.where(positive[:, None], np.log(np.where(finite & (x > 0), x, 1.0)), x)
    y = np.where(finite, y, np.nan)
    spread = long.assign(rel=(long["sd"].abs() / long["mean"].abs()).where(long["mean"] != 0))
    rel_sd = spread.groupby(["metric", "cell_id"], sort=False)["rel"].max().reindex(means.index)
    # No sd at all (summaries of single runs) says nothing about variation: not constant.
    constant = rel_sd.to_numpy(dtype="float64") <= ROUNDING
    count = finite.sum(axis=1)
    testable = in_report & ~constant & (count >= MIN_CAMPAIGNS)
    # Each campaign mean's noise from its runs (SE², on the tested scale) and the prior
    # campaign variance (report.campaign_sd, relative to the level on the linear scale).
    held = set(wide.columns.get_level_values(0))  # a column without any value is not in the pivot
    grid = {col: (wide[col] if col in held else pd.DataFrame(index=wide.index))
            .reindex(index=means.index, columns=positions).to_numpy(dtype="float64") for col in ("sd", "n")}
    with np.errstate(invalid="ignore", divide="ignore"):
        se2 = np.where(positive[:, None], (grid["sd"] / x) ** 2, grid["sd"] ** 2) / grid["n"]
        level = np.nanmean(np.where(finite, np.abs(x), np.nan), axis=1)
    s0 = np.array([settings.campaign_sd_for(m) for m in metric_of], dtype="float64")
    prior_var = np.where(positive, s0 * s0, (s0 * level) ** 2)
    # Every tested series' step and slide (p-values, split, size) over the campaigns it
    # has: one pass per number of campaigns, not one per series.
    steps_at: list[Change | None] = [None] * len(x)
    for k_all in np.unique(count[testable]):
        rows = np.flatnonzero(testable & (count == k_all))
        pick = finite[rows]
        found = detect_change_many(y[rows][pick].reshape(len(rows), -1), se2[rows][pick].reshape(len(rows), -1),
                                   prior_var[rows], PRIOR_DOF, alpha)
        for row, change in zip(rows, found):
            steps_at[row] = change
    p_value = np.array([s.p_value if s else np.nan for s in steps_at], dtype="float64")
    # The engine: Holm across the page's series, intervals, verdicts in the metric's direction.
    judged = pd.DataFrame({
        "metric": metric_of, "better": [metric_direction(m, declared) for m in metric_of],
        "mean_level": [s.after if s else np.nan for s in steps_at],
        "mean_baseline": [s.before if s else np.nan for s in steps_at],
        "df": [s.df if s else np.nan for s in steps_at],
        "_est": [s.difference if s else np.nan for s in steps_at],
        "_se2": [s.var_after + s.var_before - 2 * s.cov if s else np.nan for s in steps_at],
        "_va": [s.var_after if s else np.nan for s in steps_at],
        "_vb": [s.var_before if s else np.nan for s in steps_at],
        "_cov": [s.cov if s else 0.0 for s in steps_at], "_constant": constant,
        "_scale": np.where(positive, LOG, LINEAR), "_p": p_value})
    judge(judged, set(judged.loc[testable, "metric"]), alpha, threshold)
    verdicts = judged["verdict"].to_numpy(dtype=object)
    verdicts[~in_report] = "not_tested"
    verdicts[in_report & constant] = "constant"
    verdicts[in_report & ~constant & (count < MIN_CAMPAIGNS)] = "insufficient_data"
    detected = testable & judged["verdict"].isin(list(CHANGED)).to_numpy()
    rows = []
    for row, (metric, cell) in enumerate(means.index):
        present = [positions[j] for j in np.flatnonzero(finite[row])]
        step = steps_at[row]
        rec: dict[str, Any] = {
            "cell_id": cell, "cell": labels.get(cell, cell), "metric": metric, "unit": units.get(metric, ""),
            "campaigns": int(count[row]), "first_mean": x[row][finite[row]][0] if count[row] else np.nan,
            "last_mean": x[row][finite[row]][-1] if count[row] else np.nan, "tested": bool(testable[row]),
            "detected": bool(detected[row]), "p_value": p_value[row], "p_adjusted": judged["p_value"].iloc[row],
            "verdict": verdicts[row], "scale": "log" if positive[row] else "linear", "step_campaign": "",
            "before": np.nan, "after": np.nan, "relative_pct": np.nan, "relative_low_pct": np.nan,
            "relative_high_pct": np.nan, "kind": "", "p_step": np.nan, "p_slide": np.nan,
            "slide_pct": np.nan, "slide_low_pct": np.nan, "slide_high_pct": np.nan}
        if step is not None and step.index is not None:
            rec.update(kind=step.kind if detected[row] else "", p_step=step.p_step, p_slide=step.p_slide,
                       **_slide_pct(step, bool(positive[row])),
                       step_campaign=pos_name[present[step.index]] if step.kind == "step" else "",
                       before=float(np.exp(step.before)) if positive[row] else step.before,
                       after=float(np.exp(step.after)) if positive[row] else step.after,
                       relative_pct=judged["rel_diff_pct"].iloc[row],
                       relative_low_pct=judged["ci_low_adj_pct"].iloc[row],
                       relative_high_pct=judged["ci_high_adj_pct"].iloc[row])
        rows.append(rec)
    steps = pd.DataFrame(rows)
    plots_out = ([_history_plot(long, steps, metric, positions, [pos_name[k] for k in positions], means.loc[metric],
                                [pages[k].campaign.started_at for k in positions])
                  for metric in list(dict.fromkeys(steps.loc[steps["verdict"] != "not_tested", "metric"]))
                  [:MAX_PLOT_METRICS]] if plots else [])
    keep = ["campaign", "#name", "started_at", "cell_id",
            *[c for c in long.columns if c not in stat_cols], "metric", "unit", "n", "mean", "ci_low", "ci_high"]
    long = long[keep].rename(columns={"#name": "campaign_label"})
    return History(long, steps, plots_out, _mean_tables(long, steps, [pos_name[k] for k in positions]))


def _slide_pct(change: Change, positive: bool) -> dict[str, float]:
    """The trend per campaign in percent of the level (the trend line's first value on the
    linear scale) with its 95 % interval: ``slide_pct``, ``slide_low_pct``, ``slide_high_pct``."""
    ends = np.array([change.slope, change.slope_low, change.slope_high])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        pct = np.expm1(ends) * 100 if positive else ends / abs(change.before) * 100
    return dict(zip(("slide_pct", "slide_low_pct", "slide_high_pct"), (float(v) for v in pct)))


def _in_display_unit(step: dict[str, Any]) -> dict[str, Any]:
    """A step row with ``before`` and ``after`` in the unit that reads best (steps.csv keeps them raw)."""
    unit, factor = display_unit(step.get("unit"), max(abs(step.get("before") or 0), abs(step.get("after") or 0)))
    return {**step, "unit": unit, "before": step.get("before") * factor, "after": step.get("after") * factor}


def _mean_tables(long: pd.DataFrame, steps: pd.DataFrame, campaign_names: list[str]) -> list[dict[str, Any]]:
    """Each metric's means with intervals, cells by campaigns (small histories only)."""
    n_cells = steps.groupby("metric")["cell_id"].nunique().max()
    if len(campaign_names) > MAX_TABLE_CAMPAIGNS or n_cells > MAX_TABLE_CELLS:
        return []
    ids = long["campaign"].drop_duplicates().tolist()
    tables = []
    for metric, mine in steps.groupby("metric", sort=False):
        sub = long[long["metric"] == metric].set_index(["cell_id", "campaign"])
        # Shown in the unit that reads best (MiB/s, ms); history.csv keeps the raw values.
        unit, factor = display_unit(mine["unit"].iloc[0], pd.to_numeric(sub["mean"], errors="coerce").abs().median())
        rows = []
        for cell, label in zip(mine["cell_id"], mine["cell"]):
            values = []
            for cid in ids:
                if (cell, cid) in sub.index:
                    r = sub.loc[(cell, cid)]
                    r = r.iloc[-1] if isinstance(r, pd.DataFrame) else r
                    values.append((r["mean"] * factor, r["ci_low"] * factor, r["ci_high"] * factor))
                else:
                    values.append(None)
            rows.append({"cell": label, "values": values})
        tables.append({"metric": metric, "unit": unit, "campaigns": campaign_names, "rows": rows})
    return tables


def _campaign_times(started: list[str]) -> np.ndarray | None:
    """The campaigns' start times as matplotlib dates, or None when one is unknown
    (the plot then places campaigns evenly, in order)."""
    from matplotlib import dates

    try:
        stamps = [datetime.fromisoformat(str(t).replace("Z", "+00:00")) for t in started]
    except ValueError:
        return None
    if len(stamps) != len(started) or len({s for s in stamps}) < len(stamps):
        return None
    return np.asarray(dates.date2num(stamps), dtype="float64")


# shape: the frames build_history already computed, for one metric: long, steps, means, positions, names, start times
def _history_plot(long: pd.DataFrame, steps: pd.DataFrame, metric: str, positions: list[int],
                  campaign_names: list[str], means: pd.DataFrame, started: list[str] | None = None) -> dict[str, Any]:
    """One metric over time: each shown cell's mean and 95 % interval relative to its
    first campaign at the campaign's start time, and the band all cells span (10-90 %)."""
    plt = _pyplot()
    k_all = len(campaign_names)
    times = _campaign_times(started or [])
    xs = times if times is not None else np.arange(k_all, dtype="float64")
    rel = means.to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.array([r[np.isfinite(r)][0] if np.isfinite(r).any() else np.nan for r in rel])
        rel_pct = (rel / first[:, None] - 1) * 100
    mine = steps[(steps["metric"] == metric) & (steps["verdict"] != "not_tested")]
    if len(mine) <= MAX_PLOT_CELLS:
        shown = list(mine["cell_id"])
        caption = "Every cell's campaign means relative to its first campaign, with 95 % intervals."
    else:
        stepped = mine[mine["detected"]].assign(size=lambda t: t["relative_pct"].abs())
        shown = list(stepped.sort_values("size", ascending=False)["cell_id"][:MAX_PLOT_CELLS])
        caption = (f"{len(mine)} cells: the grey band spans the middle 80 % of their campaign means relative "
                   f"to each cell's first campaign; lines: the {len(shown)} cell(s) with the largest step"
                   f" (of {int(mine['detected'].sum())} with a step), with 95 % intervals.")
    fig, ax = plt.subplots(figsize=(WIDTH, 3.2))
    if len(mine) > MAX_PLOT_CELLS:
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a campaign without any finite value
                lo, mid, hi = np.nanpercentile(rel_pct, [10, 50, 90], axis=0)
        ax.fill_between(xs, lo, hi, color="0.85", label="10–90 % of cells")
        ax.plot(xs, mid, color="0.5", lw=1, label="median cell")
    sub = long[long["metric"] == metric]
    cell_index = {c: i for i, c in enumerate(means.index)}
    label_of = dict(zip(mine["cell_id"], mine["cell"]))
    # Campaigns are placed by their position, not their label: two campaigns may share a label.
    pos = {k: i for i, k in enumerate(positions)}
    lines = []
    for cell in shown:
        rows = sub[sub["cell_id"] == cell]
        base = first[cell_index[cell]]
        lines.append((cell, xs[rows["#pos"].map(pos).to_numpy(dtype="int64")],
                      *[(pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype="float64") / base - 1) * 100
                        for c in ("mean", "ci_low", "ci_high")]))
    # One wide interval (a campaign of two runs, a metric near 0) would flatten every
    # other line: the axis spans the means and the ordinary intervals, the rest is clipped.
    drawn = [np.concatenate([part[k] for part in lines]) if lines else np.array([]) for k in (2, 3, 4)]
    limits = robust_limits(np.concatenate([drawn[0], [0.0]]), drawn[1], drawn[2])
    clipped = 0
    for cell, cx, y, lo, hi in lines:
        text = label_of.get(cell, cell)
        (handle,) = ax.plot(cx, y, marker="o", ms=3, lw=1, label=text if len(text) <= 60 else text[:57] + "…")
        # Each interval as it is: of a skewed metric it may lie beside the mean (error
        # bars around the mean would mirror it).
        known = np.isfinite(lo) & np.isfinite(hi)
        ax.vlines(cx[known], np.maximum(lo[known], limits[0]), np.minimum(hi[known], limits[1]),
                  color=handle.get_color(), lw=1)
        clipped += _clip_intervals(ax, cx, lo, hi, limits, handle.get_color())
    if lines:
        _set_limits(ax, limits)
    if clipped:
        caption += (f" {clipped} interval end(s) reach beyond the axis: clipped, marked ▲/▼ (history.csv has "
                    f"their values).")
    ax.axhline(0, color="0.3", lw=0.6)
    unit = str(sub["unit"].iloc[0]) if len(sub) else ""
    ax.set_ylabel(f"{metric}: % vs first campaign")
    step_every = max(1, math.ceil(k_all / 20))
    if times is not None:
        from matplotlib import dates

        # Time on the x axis: campaigns weeks apart are drawn weeks apart.
        ax.xaxis.set_major_locator(dates.AutoDateLocator(minticks=3, maxticks=8, interval_multiples=False))
        ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
        ax.set_xlabel("campaign start (UTC)")
    else:
        ax.set_xticks(xs[::step_every])
        ax.set_xticklabels([n if len(n) <= 16 else n[:15] + "…" for n in campaign_names[::step_every]],
                           rotation=45, ha="right")
        ax.set_xlabel("campaign (oldest first)")
    if ax.get_legend_handles_labels()[0]:
        # Below the axes, not beside them: the plot keeps the page's full width on a phone.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=2, frameon=False)
    svg = _svg(fig)
    # The RDF block names external vocabularies by URL; the page needs none of it.
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r'<svg \1', svg, count=1)
    return {"metric": metric, "title": f"{metric}{f' ({unit})' if unit else ''}", "caption": caption, "svg": svg,
            "clipped": clipped}


# ------------------------------------------------------------------ rendering

def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("benchmatrix.report", "templates/site"),
                             undefined=jinja2.StrictUndefined, autoescape=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["num"] = format_number
    env.filters["p"] = lambda v: "–" if v is None or math.isnan(v) else ("< 0.001" if v < 0.001 else f"{v:.3f}")
    env.filters["count"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["pct"] = lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:+.1f} %"
    env.filters["pct_interval"] = pct_interval
    env.globals["csp"] = CSP
    return env


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _site_files(site: Path) -> list[str]:
    """Every name under ``site`` but directories (files, links, ...), relative, sorted."""
    found = []
    for top, dirs, files in os.walk(site):  # links to directories are listed, not followed
        rel = Path(top).relative_to(site)
        found += [(rel / n).as_posix() for n in files]
        found += [(rel / n).as_posix() for n in dirs if os.path.islink(os.path.join(top, n))]
    return sorted(found)


def _written_before(site: Path) -> set[str] | None:
    """The files an earlier ``bmx publish`` listed in ``site``'s marker; None for a marker
    of a version that listed none (its whole directory counts as written by it)."""
    try:
        listed = json.loads((site / SITE_MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    return {str(f) for f in listed} if isinstance(listed, list) else None


def _check_target(to: Path, results: Path, replace: bool) -> list[str]:
    """Refuse a ``to`` the site may not replace; returns the files in it that no
    earlier publish wrote (only with ``replace``: they are deleted with the old site)."""
    foreign: list[str] = []
    if to.exists():
        if not to.is_dir():
            raise BenchmatrixError(f"{to}: exists and is not a directory; choose another --to")
        if any(to.iterdir()) and not (to / SITE_MARKER).is_file():
            raise BenchmatrixError(f"{to}: not empty and not a site bmx publish wrote; choose an empty or new --to")
        written = _written_before(to) if (to / SITE_MARKER).is_file() else None
        if written is not None:
            foreign = [f for f in _site_files(to) if f not in written and f != SITE_MARKER]
        elif (to / SITE_MARKER).is_file() and not replace:
            # A marker of a bmx publish from before the file list: its files cannot be told
            # from ones a user added, and the new site drops what it does not have.
            held = [f for f in _site_files(to) if f != SITE_MARKER]
            if held:
                raise BenchmatrixError(f"{to}: a site of an older bmx publish that does not list its files "
                                       f"({len(held)} file(s)); publish with --replace to replace it as a whole")
        if foreign and not replace:
            shown = ", ".join(foreign[:5]) + (f", ... ({len(foreign)} in all)" if len(foreign) > 5 else "")
            raise BenchmatrixError(f"{to}: holds {len(foreign)} file(s) bmx publish did not write ({shown}); "
                                   "move them away, or publish with --replace to delete them with the old site")
    to_r, res_r = to.resolve(), results.resolve()
    if to_r == res_r or res_r in to_r.parents or to_r in res_r.parents:
        raise BenchmatrixError(f"{to}: the site must lie outside the results directory {results}")
    return foreign


def publish(results: str | Path, to: str | Path, replace: bool = False,
            say: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write the static site of every experiment under ``results`` into ``to``.

    Only regular files that lie inside an experiment's results directory are copied;
    links, FIFOs, devices, files reached through a linked directory and files with a
    hard link outside the directory are skipped (``say`` names each). A copy keeps its
    source's permission bits under the umask (never more readable than its source). A
    ``to`` that is a symbolic link is followed: the site replaces the directory it
    points to, the link stays; the new site directory keeps the owner, group and mode
    of the one it replaces.

    Args:
        results: The results directory (``results/``): one directory per experiment.
        to: The site directory; replaced as a whole when it holds an earlier site.
        replace: Also delete files in ``to`` that no earlier publish wrote, and replace a
            site whose marker lists no files (without it either stops the publish).
        say: Called with one line per file left out (``skipped PATH (why): ...``) and
            one for the files ``replace`` deleted (``removed N file(s) ...``), and one when
            the site directory's owner could not be kept (not root).

    Returns:
        Counts: ``experiments``, ``campaigns``, ``steps`` (cell-metric series with a step).

    Raises:
        BenchmatrixError: no results directory, no campaign in it, an unusable ``to``
            (one holding files bmx publish did not write, without ``replace``), an
            unreadable summary.csv or runs.csv (the message names the file).
    """
    results, to = Path(results), Path(to)
    if not results.is_dir():
        raise BenchmatrixError(f"{results}: no results directory; run 'bmx run SPEC' first or pass --results")
    if to.is_symlink():
        # Replacing the link itself would leave its target stale and the renamed link behind.
        to = Path(os.path.realpath(to))
    foreign = _check_target(to, results, replace)
    experiments = []
    for exp_dir in sorted(p for p in results.iterdir()
                          if p.is_dir() and not p.name.startswith(".") and not (p / SITE_MARKER).exists()):
        campaigns = experiment_campaigns(exp_dir)
        if campaigns:
            experiments.append((exp_dir, campaigns))
    if not experiments:
        raise BenchmatrixError(f"{results}: no experiment with a campaign (results/NAME/campaign.json or "
                               "summary.csv); run 'bmx run SPEC' first")
    say = say or (lambda line: None)
    to.parent.mkdir(parents=True, exist_ok=True)
    build = to.parent / f".{to.name}.{uuid.uuid4().hex[:8]}.tmp"
    build.mkdir()
    try:
        skipped: list[tuple[Path, str]] = []
        counts = _build(experiments, build, skipped)
        files = _site_files(build)
        (build / SITE_MARKER).write_text(json.dumps({
            "written_by": "bmx publish; the whole directory is replaced on the next one",
            "files": files}, indent=0) + "\n", encoding="utf-8")
        unlisted = []
        if to.is_dir() and (to / SITE_MARKER).is_file() and _written_before(to) is None:
            # A site from before markers listed their files: what goes is at least named.
            unlisted = [f for f in _site_files(to) if f not in files and f != SITE_MARKER]
        old = None
        if to.exists():
            _keep_owner(build, to, os.stat(to), say)
            old = to.parent / f".{to.name}.{uuid.uuid4().hex[:8]}.old"
            os.replace(to, old)
        os.replace(build, to)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    for path, why in skipped:
        say(f"skipped {path} ({why}): only regular files inside the experiment's results are published")
    if foreign:
        say(f"removed {len(foreign)} file(s) bmx publish did not write: {', '.join(foreign)}")
    if unlisted:
        say(f"removed {len(unlisted)} file(s) of the earlier site that the new one does not have: "
            f"{', '.join(unlisted)}")
    return counts


def _keep_owner(build: Path, to: Path, was: os.stat_result, say: Callable[[str], None]) -> None:
    """Give the new site directory ``build`` the owner, group and mode of ``to``, the one
    it replaces (``was``: its stat): a web root shared as ``nobody:nogroup 2775`` stays so. Under a
    set-group-ID directory, what the site holds gets the directory's group too, as it
    would have had it been made there."""
    try:
        os.chown(build, was.st_uid, was.st_gid)
    except PermissionError:
        # Only root gives a directory another owner: keep the group where we may.
        say(f"{to}: owned by uid {os.geteuid()} now (was {was.st_uid}): "
            "only root can keep another user's directory")
        try:
            os.chown(build, -1, was.st_gid)
        except PermissionError:
            pass
    if was.st_mode & stat.S_ISGID:
        for top, dirs, files in os.walk(build):
            for name in dirs + files:
                path = os.path.join(top, name)
                try:
                    os.chown(path, -1, was.st_gid, follow_symlinks=False)
                    if name in dirs:
                        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_ISGID)
                except PermissionError:
                    pass
    # After the chown, which may clear the set-group-ID bit.
    os.chmod(build, stat.S_IMODE(was.st_mode))


_HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)
_DOCTYPE = re.compile(r"\A\s*<!DOCTYPE[^>]*>", re.IGNORECASE)


def with_csp(page: str) -> str:
    """``page`` (HTML) with the site's :data:`CSP` as the first element of its head.

    A copied report or comparison page is self-contained, but whatever it holds must
    not fetch anything once published either; a second policy can only narrow one the
    page already has (a browser enforces both).
    """
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP)}">'
    head = _HEAD.search(page)
    if head:
        return page[:head.end()] + "\n" + meta + page[head.end():]
    doctype = _DOCTYPE.search(page)
    at = doctype.end() if doctype else 0
    return page[:at] + "\n<head>" + meta + "</head>\n" + page[at:]


def _copy(src: Path, dst: Path, names: _Names) -> None:
    """Copy ``src`` (checked by :func:`_refusal`) to the new file ``dst``, an HTML page
    with the site's CSP.

    The file checked is the file copied: it is opened without following a link (and
    without waiting on a FIFO) and checked again on the open descriptor. The copy gets
    the source's permission bits as far as the umask lets it (``0600`` stays ``0600``):
    a file is never published more widely than it was readable.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "now a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise BenchmatrixError(f"{src}: changed while it was published ({why}); publish again") from None
    with os.fdopen(fd, "rb") as fin:
        st = os.fstat(fd)
        why = _why_not(st, names)
        if why:
            raise BenchmatrixError(f"{src}: changed while it was published (now {why}); publish again")
        # O_EXCL: the site is built in a new directory, so a name already there is not ours.
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, stat.S_IMODE(st.st_mode) & 0o666)
        with os.fdopen(out, "wb") as fout:
            if dst.suffix == ".html":
                fout.write(with_csp(fin.read().decode("utf-8", errors="replace")).encode("utf-8"))
            else:
                # A copy, not a hard link: editing the published file must never change the results.
                shutil.copyfileobj(fin, fout)


def _copy_tree(src: Path, dst: Path, root: Path, skipped: list[tuple[Path, str]], names: _Names) -> None:
    """Copy the publishable files under ``src`` (see :func:`_refusal`) to ``dst``."""
    for top, dirs, files in os.walk(src):
        here = Path(top)
        for name in sorted(dirs):
            if os.path.islink(here / name):
                skipped.append((here / name, "a symbolic link"))
        for name in sorted(files):
            why = _refusal(here / name, root, names)
            if why:
                skipped.append((here / name, why))
            else:
                _copy(here / name, dst / here.relative_to(src) / name, names)


#: The index's headline: this many experiments (latest campaign newest first), each
#: with its latest campaign's first findings.
HEADLINE_EXPERIMENTS = 5
HEADLINE_FINDINGS = 3


def latest_findings(path: Path, root: Path, names: _Names) -> dict[str, Any] | None:
    """What the index's headline shows of a campaign's ``findings.json`` (the report's
    findings, largest effect first): ``configured``, ``total`` comparisons, ``decided``
    (their count) and ``sentences``; None without a readable one (no report yet)."""
    if _refusal(path / layout.FINDINGS, root, names):
        return None
    try:
        digest = json.loads((path / layout.FINDINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(digest, dict):
        return None
    found = [f for f in digest.get("findings") or [] if isinstance(f, dict) and f.get("sentence")]
    total = digest.get("total")
    return {"configured": bool(digest.get("configured")), "total": total if isinstance(total, int) else 0,
            "decided": len(found), "sentences": [str(f["sentence"]) for f in found]}


def _build(experiments: list[tuple[Path, list[Campaign]]], site: Path,
           skipped: list[tuple[Path, str]]) -> dict[str, int]:
    env = _environment()
    index_rows = []
    n_campaigns = n_steps = 0
    for exp_dir, campaigns in experiments:
        name = exp_dir.name
        slug = safe_file_stem(name)
        names = _Names(exp_dir)
        pages = [campaign_page(c, s, exp_dir, names) for c, s in zip(campaigns, _slugs(campaigns))]
        for page in pages:
            skipped += page.skipped
            for f in page.files:
                _copy(page.campaign.path / f, site / slug / "campaigns" / page.slug / f, names)
        compares = []
        cdir = exp_dir / "compare"
        if cdir.is_dir() and not cdir.is_symlink():
            for sub in sorted(cdir.iterdir()):
                if sub.is_symlink():  # links are left out: one could point anywhere on this machine
                    skipped.append((sub, "a symbolic link"))
                    continue
                if _refusal(sub / "compare.html", exp_dir, names):
                    continue
                cslug = safe_file_stem(sub.name)
                _copy_tree(sub, site / slug / "compare" / cslug, exp_dir, skipped, names)
                compares.append({"name": sub.name, "href": f"compare/{cslug}/compare.html",
                                 "csv": f"compare/{cslug}/compare.csv" if (sub / "compare.csv").is_file() else ""})
        history = build_history(pages)
        steps_shown: list[dict[str, Any]] = []
        if history is not None:
            history.long.to_csv(site / slug / "history.csv", index=False)
            history.steps.to_csv(site / slug / "steps.csv", index=False)
            found = history.steps[history.steps["detected"]]
            # Largest effect first: the step a reader should look at.
            found = found.assign(size=-found["relative_pct"].abs()).sort_values(["size", "p_adjusted"],
                                                                                kind="stable")
            steps_shown = [_in_display_unit(r) for r in found.to_dict("records")]
            n_steps += len(found)
            series = history.steps.head(MAX_SERIES_ROWS).to_dict("records")
            _write(site / slug / "history.html", env.get_template("history.html.j2").render(
                host_changes=host_state_steps([p.campaign for p in pages]),
                name=name, campaigns=[p.campaign for p in pages], steps=steps_shown, series=series,
                series_total=len(history.steps), tested=int(history.steps["tested"].sum()), plots=history.plots,
                tables=history.tables, max_cells=MAX_TABLE_CELLS, max_campaigns=MAX_TABLE_CAMPAIGNS,
                alpha=ALPHA, min_campaigns=MIN_CAMPAIGNS))
        latest = pages[-1]
        findings = latest_findings(latest.campaign.path, exp_dir, names)
        _write(site / slug / "index.html", env.get_template("experiment.html.j2").render(
            name=name, pages=list(reversed(pages)), compares=compares, history=history is not None,
            steps=len(steps_shown)))
        index_rows.append({"name": name, "dir": slug, "href": f"{slug}/index.html", "campaigns": len(pages),
                           "latest": latest,
                           "history": f"{slug}/history.html" if history is not None else "",
                           "steps": len(steps_shown), "compares": len(compares), "findings": findings,
                           "started": latest.campaign.started_at or latest.date})
        n_campaigns += len(pages)
    # The headline: the experiments whose latest campaign is newest first.
    headline = sorted(index_rows, key=lambda r: str(r["started"]), reverse=True)[:HEADLINE_EXPERIMENTS]
    _write(site / "index.html", env.get_template("index.html.j2").render(
        experiments=index_rows, headline=headline, top=HEADLINE_FINDINGS,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")))
    return {"experiments": len(experiments), "campaigns": n_campaigns, "steps": n_steps}


__all__ = ["CSP", "SITE_MARKER", "CampaignPage", "History", "build_history", "campaign_page",
           "experiment_campaigns", "publish", "with_csp"]
