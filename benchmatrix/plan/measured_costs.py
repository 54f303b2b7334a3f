"""The orchestration's seconds as this experiment's earlier campaigns measured them.

``config.yaml``'s ``batch_overhead_seconds`` (one Ansible call) and ``cost_seconds``
(a restart, a reboot) are guesses; on a loaded host a batch cost about 20 s, not 3,
and a 24-run experiment estimated at 1 min took 5. Every earlier ``runs.csv`` of the
experiment (``results/NAME/runs.csv`` and ``campaigns/*/runs.csv``) holds when each
run started and ended on its host, which is enough to measure both:

- A batch's fixed cost is the host's time outside runs from the end of the last run
  before the batch to the end of the batch's last run: the Snakemake job, the
  Ansible call, fetching and unpacking the previous batch, and the runner's gaps
  between runs (``before_run`` actions, live knobs). Each host's first batch is left
  out (the time before it is the campaign's start, not a batch's), and so is a batch
  that waited more than :data:`MAX_GAP_S` (a campaign stopped and resumed later).
- A batch whose first run has a restart- or reboot-class knob setting other than the
  run before it also paid for that reconfiguration: the class costs the median of
  such batches less the per-batch cost.

Medians over every measured batch of every earlier campaign keep a slow outlier (a
retried Ansible call) from moving the estimate.

A campaign's fixed start and end (the plan job, preparing and restoring the hosts,
collect, the report, Snakemake's own start) come from campaign.json's ``passes``,
when each Snakemake pass of ``bmx run`` started and ended (:func:`campaign_overhead`);
so does its tail, the seconds from the last run's end to the pass's (restoring the
hosts, collect, the report): what ``bmx run``'s ETA still counts once every run is done.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from benchmatrix.layout import CAMPAIGN, RUNS, campaign_dirs
from benchmatrix.spec.load import COST_CLASSES, Spec

#: A wait longer than this between two runs is a pause (stopped, resumed later), not overhead.
MAX_GAP_S = 3600.0
#: The classes whose reconfiguration happens in the batch's Ansible call, where it can be timed.
MEASURED_CLASSES = ("restart", "reboot")
CONFIG_SOURCE = "batch_overhead_seconds in config/config.yaml"
CAMPAIGN_CONFIG_SOURCE = "campaign_overhead_seconds in config/config.yaml"


@dataclass(frozen=True)
class OrchestrationCosts:
    """Seconds a batch and a reconfiguration cost, and where the figures come from.

    Attributes:
        batch_s: Fixed seconds per batch.
        batch_source: Where ``batch_s`` comes from, for the user.
        class_seconds: Measured seconds of a reconfiguration per cost class (only the
            classes measured; the others keep their knobs' ``cost_seconds``).
        class_source: Where ``class_seconds`` come from ("" when empty).
        campaign_s: Fixed seconds of a campaign's start and end.
        campaign_source: Where ``campaign_s`` comes from.
        tail_s: Seconds of a pass after its last run (part of ``campaign_s``).
        tail_source: Where ``tail_s`` comes from.
    """

    batch_s: float
    batch_source: str
    class_seconds: dict[str, float] = field(default_factory=dict)
    class_source: str = ""
    campaign_s: float = 0.0
    campaign_source: str = ""
    tail_s: float = 0.0
    tail_source: str = ""


def orchestration_costs(spec: Spec, exp_dir: str | Path, batch_overhead_s: float,
                        campaign_overhead_s: float = 0.0) -> OrchestrationCosts:
    """The per-batch, per-reconfiguration and per-campaign seconds ``bmx plan`` and ``bmx check`` use.

    Measured figures win over ``config.yaml``'s: the shipped config sets
    ``batch_overhead_seconds`` itself, so an explicit value says nothing about the
    host, while earlier campaigns of this experiment timed it.

    Args:
        spec: The experiment (its knobs classify the reconfigurations).
        exp_dir: ``results/NAME`` of the experiment.
        batch_overhead_s: ``batch_overhead_seconds`` of config.yaml, the fallback.
        campaign_overhead_s: ``campaign_overhead_seconds`` of config.yaml, the fallback
            of :func:`campaign_overhead`.

    Returns:
        The measured figures where earlier campaigns had at least one batch after
        their first (a completed pass, for the campaign's), else config's.
    """
    tables = _runs_tables(exp_dir)
    samples: list[tuple[str | None, float]] = []
    campaigns = 0
    for rows in tables.values():
        found = list(batch_samples(spec, rows))
        campaigns += bool(found)
        samples += found
    plain = [s for cls, s in samples if cls is None]
    batch_s, source = batch_overhead_s, CONFIG_SOURCE
    if plain:
        batch_s = statistics.median(plain)
        source = f"median of {len(plain)} batch(es) in {campaigns} earlier campaign(s)"
    measured: dict[str, float] = {}
    notes = []
    for cls in MEASURED_CLASSES:
        with_cls = [s for c, s in samples if c == cls]
        if with_cls:
            measured[cls] = max(statistics.median(with_cls) - batch_s, 0.0)
            notes.append(f"{cls}: median of {len(with_cls)} reconfiguration(s) in {campaigns} earlier campaign(s)")
    fixed, fixed_source = _campaign_overhead(tables, batch_s, campaign_overhead_s)
    tail, tail_source = _per_campaign_median(tables, _pass_tail)
    if tail is None:
        tail, tail_source = campaign_overhead_s / 2, f"half of {CAMPAIGN_CONFIG_SOURCE}"
    return OrchestrationCosts(batch_s, source, measured, "; ".join(notes), fixed, fixed_source, tail, tail_source)


def campaign_overhead(exp_dir: str | Path, batch_s: float, default_s: float) -> tuple[float, str]:
    """Seconds a campaign costs beyond its hosts' work, and where the figure comes from.

    Each Snakemake pass that ``bmx run`` (or ``bmx rerun``) recorded in campaign.json's
    ``passes`` and that finished the workflow (``outcome`` ``ok``) is a sample: its
    wall time less the slowest host's time from the start of its first run in the pass
    to the end of its last, less one ``batch_s`` (that first batch's own cost, which
    the estimate counts per batch). The median over the experiment's campaigns
    (each campaign's median over its passes) is the figure.

    Args:
        exp_dir: ``results/NAME``; its campaign and every kept one are read.
        batch_s: The per-batch seconds the estimate uses.
        default_s: ``campaign_overhead_seconds`` of config.yaml, without a sample.
    """
    return _campaign_overhead(_runs_tables(exp_dir), batch_s, default_s)


def _campaign_overhead(tables: dict[Path, list[dict[str, str]]], batch_s: float,
                       default_s: float) -> tuple[float, str]:
    """:func:`campaign_overhead` of the campaigns' runs.csv rows, read once by the caller."""
    got, source = _per_campaign_median(tables, lambda window, rows: _pass_overhead(window, rows, batch_s))
    return (default_s, CAMPAIGN_CONFIG_SOURCE) if got is None else (got, source)


def _per_campaign_median(tables: dict[Path, list[dict[str, str]]],
                         measure: Callable[[tuple[float, float], list[dict[str, str]]], float | None],
                         ) -> tuple[float | None, str]:
    """The median over campaigns of each campaign's median ``measure`` of its completed
    passes, and where it comes from; None when no pass measured anything."""
    per_campaign = []
    for camp, rows in tables.items():
        found = [s for s in (measure(p, rows) for p in completed_passes(camp)) if s is not None]
        if found:
            per_campaign.append(statistics.median(found))
    if not per_campaign:
        return None, ""
    return statistics.median(per_campaign), f"median of {len(per_campaign)} earlier campaign(s)"


def completed_passes(camp: Path) -> list[tuple[float, float]]:
    """(start, end) of every completed pass in a campaign's campaign.json."""
    try:
        passes = json.loads((camp / CAMPAIGN).read_text()).get("passes")
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for p in passes if isinstance(passes, list) else []:
        if not isinstance(p, dict) or p.get("outcome") != "ok":
            continue
        start, end = _time(p.get("started_at")), _time(p.get("ended_at"))
        if start is not None and end is not None and end >= start:
            out.append((start, end))
    return out


def pass_spans(window: tuple[float, float], rows: list[dict[str, str]]) -> dict[str, list[float]]:
    """Each host's [first start, last end] of the runs that started in the pass."""
    start, end = window
    spans: dict[str, list[float]] = {}
    for row in rows:
        t0, t1 = _time(row.get("started_at")), _time(row.get("ended_at"))
        if t0 is None or t1 is None or not start <= t0 <= end:
            continue
        span = spans.setdefault(row.get("host") or "", [t0, t1])
        span[0], span[1] = min(span[0], t0), max(span[1], t1)
    return spans


def _pass_overhead(window: tuple[float, float], rows: list[dict[str, str]], batch_s: float) -> float | None:
    """One pass's fixed seconds (None when no run started in it)."""
    spans = pass_spans(window, rows)
    if not spans:
        return None
    return max(window[1] - window[0] - max(b - a for a, b in spans.values()) - batch_s, 0.0)


def _pass_tail(window: tuple[float, float], rows: list[dict[str, str]]) -> float | None:
    """One pass's seconds after its last run ended (None when no run started in it)."""
    spans = pass_spans(window, rows)
    if not spans:
        return None
    return max(window[1] - max(b for _, b in spans.values()), 0.0)


def _runs_tables(exp_dir: str | Path) -> dict[Path, list[dict[str, str]]]:
    """Each campaign directory (the current one, then the kept ones) -> its runs.csv rows
    (none without a readable table)."""
    return {camp: runs_rows(camp / RUNS) for camp in campaign_dirs(exp_dir)}


def runs_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a runs.csv; none when it cannot be read (an old table only loses its figures)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return []


def _time(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def batch_samples(spec: Spec, rows: Iterable[dict[str, str]]) -> Iterator[tuple[str | None, float]]:
    """(reconfiguration class or None, seconds outside runs) of each measurable batch of one campaign.

    Args:
        spec: The experiment; a knob whose column the table lacks is taken as unchanged.
        rows: runs.csv rows with ``host``, ``batch``, ``started_at`` and ``ended_at``.
            Re-run attempts (``attempt`` over 1) are left out: their batches ran in
            another ``bmx rerun`` or ``bmx run``, the wait before them is the user's.
    """
    timed: dict[str, list[tuple[float, float, dict[str, str]]]] = {}
    for row in rows:
        start, end = _time(row.get("started_at")), _time(row.get("ended_at"))
        if start is None or end is None or (row.get("attempt") or "1") != "1":
            continue
        timed.setdefault(row.get("host") or "", []).append((start, max(end, start), row))
    for runs in timed.values():
        runs.sort(key=lambda t: t[0])
        yield from _host_samples(spec, runs)


def _host_samples(spec: Spec, runs: list[tuple[float, float, dict[str, str]]]) -> Iterator[tuple[str | None, float]]:
    """:func:`batch_samples` of one host's runs, in the order they started."""
    current: list = []  # [class, seconds] of the batch being summed; [] before the first boundary
    for (_, prev_end, prev), (start, _, row) in zip(runs, runs[1:]):
        gap = max(start - prev_end, 0.0)
        if row.get("batch") != prev.get("batch"):
            if current:
                yield current[0], current[1]
            current = [_reconfiguration(spec, prev, row), gap]
        elif current:
            current[1] += gap
        if gap > MAX_GAP_S:
            current = []  # the host waited for the user, not for the orchestration
    if current:
        yield current[0], current[1]


def _reconfiguration(spec: Spec, prev: dict[str, str], row: dict[str, str]) -> str | None:
    """The most expensive measured class among the knobs that change from ``prev`` to ``row``."""
    changed = [k.cost_class for f, k in spec.knobs.items()
               if f in row and f in prev and row[f] != prev[f] and k.cost_class in MEASURED_CLASSES]
    return max(changed, key=COST_CLASSES.index) if changed else None
