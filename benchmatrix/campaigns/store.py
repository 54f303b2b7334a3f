"""Campaigns of one experiment: where they live and how a user names them.

An experiment's results directory ``results/NAME/`` holds its current campaign, laid
out as docs/architecture.md describes. Earlier campaigns are kept beside it, each in
``results/NAME/campaigns/ID/`` with the same layout (plan.csv, runs.csv, runs/, ...),
so every function that reads a campaign takes its directory and works on either.
Each campaign directory has a ``campaign.json``: ``id`` (always), ``created_at``, and,
when known, ``label``, ``ended_at``, ``spec_digest``, ``hosts``.

It finds and names campaigns, and keeps them: :func:`start_campaign` decides, under the
experiment lock, whether ``bmx run`` continues the current campaign or moves it into
``campaigns/ID/`` and starts a new one (docs/campaigns.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmatrix import layout
from benchmatrix.errors import BenchmatrixError
from benchmatrix.names import name_problem, printable, shown
from benchmatrix.results.campaign import campaign_id, read_meta, update_meta

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec

#: Folder under an experiment's results directory that keeps its earlier campaigns;
#: the file naming a campaign, in every campaign directory; the spec a campaign was
#: planned with (its data as JSON), written by plan.
CAMPAIGNS_DIR, CAMPAIGN_FILE, SPEC_FILE = layout.CAMPAIGNS_DIR, layout.CAMPAIGN, layout.SPEC
#: Written before a campaign is moved into campaigns/ID/, removed after: a move cut
#: short by a crash is finished by the next start (:func:`finish_archive`).
ARCHIVE_MARKER = ".bmx_archiving.json"
#: Entries of results/NAME that belong to the experiment, not to its current campaign:
#: never moved (``compare/`` holds comparisons across campaigns).
KEPT_ENTRIES = frozenset({CAMPAIGNS_DIR, layout.LOCK, ARCHIVE_MARKER, "compare"})


@dataclass(frozen=True)
class Campaign:
    """One campaign of an experiment.

    Attributes:
        id: The campaign id (``campaign.json``'s ``id``).
        path: Its directory (``results/NAME`` for the current one).
        label: The user's label, "" when none was given.
        started_at: ISO 8601 UTC time the campaign was made, "" when unknown.
        ended_at: ISO 8601 UTC time it was completed, "" while open or unknown.
        current: True for the campaign in ``results/NAME`` itself.
        meta: Everything ``campaign.json`` holds.
    """

    id: str
    path: Path
    label: str = ""
    started_at: str = ""
    ended_at: str = ""
    current: bool = False
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The label when there is one, else the id: how tables and pages name it."""
        return self.label or self.id


def read_campaign(path: str | Path, current: bool = False) -> Campaign | None:
    """The campaign whose directory is ``path``, or None when it has no readable
    ``campaign.json`` with an id."""
    path = Path(path)
    try:
        meta = json.loads((path / CAMPAIGN_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not meta.get("id"):
        return None
    return Campaign(id=str(meta["id"]), path=path, label=str(meta.get("label") or ""),
                    started_at=str(meta.get("created_at") or ""), ended_at=str(meta.get("ended_at") or ""),
                    current=current, meta=meta)


def list_campaigns(exp_dir: str | Path) -> list[Campaign]:
    """Every campaign of an experiment, oldest first (the current one last).

    Args:
        exp_dir: The experiment's results directory, ``results/NAME``.
    """
    exp_dir = Path(exp_dir)
    found = []
    base = exp_dir / CAMPAIGNS_DIR
    if base.is_dir():
        for sub in base.iterdir():
            c = read_campaign(sub) if sub.is_dir() else None
            if c is not None:
                found.append(c)
    found.sort(key=lambda c: (c.started_at, c.id))
    current = read_campaign(exp_dir, current=True)
    if current is not None:
        found.append(current)
    return found


def find_campaign(exp_dir: str | Path, ref: str) -> Campaign:
    """The campaign a user names by id, unique id prefix, label, or directory.

    Raises:
        BenchmatrixError: no campaign or several match, with one line saying which exist.
    """
    as_path = Path(ref)
    if as_path.is_dir() and (as_path / CAMPAIGN_FILE).is_file():
        c = read_campaign(as_path, current=as_path.resolve() == Path(exp_dir).resolve())
        if c is not None:
            return c
    campaigns = list_campaigns(exp_dir)
    for test in (lambda c: c.id == ref, lambda c: c.label == ref, lambda c: c.id.startswith(ref)):
        hits = [c for c in campaigns if test(c)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise BenchmatrixError(f"{exp_dir}: {ref!r} names {len(hits)} campaigns "
                                   f"({', '.join(c.id for c in hits)}); use an id")
    known = ", ".join(f"{c.id}" + (f" ({c.label})" if c.label else "") for c in campaigns) or "none"
    raise BenchmatrixError(f"{exp_dir}: no campaign {ref!r}; campaigns: {known}")


# ---------------------------------------------------------------- keeping campaigns

def finish_archive(exp_dir: str | Path) -> str | None:
    """Finish a move into ``campaigns/ID/`` that a crash cut short.

    Returns:
        The id of the campaign whose move was finished, or None when none was pending.
    """
    exp_dir = Path(exp_dir)
    marker = exp_dir / ARCHIVE_MARKER
    try:
        todo = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        # The marker is written atomically, so a torn one cannot exist; an unreadable
        # one was edited by hand: refuse rather than guess where files belong.
        raise BenchmatrixError(f"{marker}: unreadable; move the campaign's files by hand and delete it") from None
    _move_entries(exp_dir, exp_dir / CAMPAIGNS_DIR / todo["id"])
    marker.unlink()
    return str(todo["id"])


def _move_entries(exp_dir: Path, dest: Path) -> None:
    """Rename every campaign entry of ``exp_dir`` into ``dest``; campaign.json last, so
    that a directory without it is never mistaken for a finished move."""
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(e.name for e in exp_dir.iterdir() if e.name not in KEPT_ENTRIES)
    names.sort(key=lambda n: n == CAMPAIGN_FILE)
    for name in names:
        if (dest / name).exists():
            raise BenchmatrixError(f"{dest / name}: already exists; cannot keep {exp_dir / name} there")
        os.rename(exp_dir / name, dest / name)


def archive_current(exp_dir: str | Path) -> Campaign:
    """Move the current campaign of ``results/NAME`` into ``results/NAME/campaigns/ID/``.

    Each entry is renamed (atomic per entry, same file system). A marker naming the
    destination is written first and removed last, so a crash in between leaves a
    state that :func:`finish_archive` completes. The caller holds the experiment lock.

    Raises:
        BenchmatrixError: there is no current campaign, or its destination is taken.
    """
    from benchmatrix.files import atomic_write

    exp_dir = Path(exp_dir)
    cur = read_campaign(exp_dir, current=True)
    if cur is None:
        raise BenchmatrixError(f"{exp_dir}: no current campaign to keep (no {CAMPAIGN_FILE})")
    dest = exp_dir / CAMPAIGNS_DIR / cur.id
    if (dest / CAMPAIGN_FILE).exists():
        raise BenchmatrixError(f"{dest}: a campaign {cur.id} is already kept there")
    atomic_write(exp_dir / ARCHIVE_MARKER, json.dumps({"id": cur.id}) + "\n")
    _move_entries(exp_dir, dest)
    (exp_dir / ARCHIVE_MARKER).unlink()
    return Campaign(cur.id, dest, cur.label, cur.started_at, cur.ended_at, False, cur.meta)


def is_complete(exp_dir: str | Path, factor_names: list[str]) -> bool:
    """True when the campaign has a plan and every planned run has a final state
    (ok or failed; none pending)."""
    from benchmatrix.results.status import campaign_status, exit_code

    exp_dir = Path(exp_dir)
    if not (exp_dir / layout.PLAN).is_file():
        return False
    return exit_code(campaign_status(exp_dir, factor_names)) != 3


def _has_records(exp_dir: Path) -> bool:
    runs = exp_dir / "runs"
    return runs.is_dir() and next(runs.glob("*/*/record.json"), None) is not None


#: Spec keys whose change changes what a run measures (dotted paths into the spec):
#: a complete campaign is kept and a new one started when one of them changes, and
#: ``bmx compare`` refuses campaigns that differ in one. ``workload.timeout`` and
#: ``workload.success`` only decide whether a run counts, so they are not among them;
#: factors, levels, excludes and replicates only add or drop runs. Of ``knobs`` only each
#: knob's role and vars count (its cost is an estimate for the planner).
MEASUREMENT_KEYS = ("workload.role", "workload.vars", "workload.metrics", "before_run", "collect", "warmup",
                    "knobs")


def dig(data: Any, dotted: str) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``; None where a step is missing."""
    cur = data
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def measured(spec_data: dict[str, Any] | None, key: str) -> Any:
    """The part of a measurement key (:data:`MEASUREMENT_KEYS`) that changes what runs measure."""
    value = dig(spec_data, key)
    if key == "knobs" and isinstance(value, dict):
        return {f: {"role": k.get("role"), "vars": k.get("vars") or {}} if isinstance(k, dict) else k
                for f, k in value.items()}
    return value


def measurement_of(spec_data: dict[str, Any] | None) -> str:
    """The spec's measurement keys as canonical JSON (equal text: same measurement)."""
    return json.dumps({k: measured(spec_data, k) for k in MEASUREMENT_KEYS}, sort_keys=True, default=str)


def _measurement_changed(exp_dir: Path, spec: Spec) -> bool:
    """True when the campaign's spec.json measures differently from ``spec``; False
    when unknown (a campaign planned before spec.json was kept)."""
    try:
        planned = json.loads((exp_dir / SPEC_FILE).read_text())
    except (OSError, ValueError):
        return False
    return measurement_of(planned) != measurement_of(spec.data)


#: Longest campaign label, in characters.
MAX_LABEL_CHARS = 100


def check_label(label: str) -> str:
    """``label`` without surrounding spaces, if it is a usable campaign label.

    A label names a campaign in ``bmx compare``, ``bmx campaigns`` and the published
    site, so it follows :func:`benchmatrix.names.name_problem` (``.``, ``..``, ``a/b``, a
    newline or a right-to-left override would be unusable or garble the tables).

    Raises:
        BenchmatrixError: one line naming the label (escaped) and what is wrong.
    """
    label = label.strip(" ")  # spaces typed around it; a tab or newline is refused below
    problem = name_problem(label, "label", MAX_LABEL_CHARS)
    if problem:
        raise BenchmatrixError(f"--campaign {shown(label, 40)}: {problem}")
    return label


def start_campaign(exp_dir: str | Path, spec: Spec, label: str | None = None) -> tuple[str, Campaign | None]:
    """Decide which campaign a ``bmx run`` (or ``bmx plan``) works on; keep the old one.

    * A move cut short by a crash is finished first.
    * No current campaign: a new one (with ``label``).
    * The current one is complete (no run pending) and ``label`` names a new campaign
      or the spec's measurement changed (:data:`MEASUREMENT_KEYS`: its results would
      not be of the edited workload): it is moved to ``campaigns/ID/`` and a new one
      starts.
    * The current one is complete and no new label: it continues. With the spec
      unchanged ``bmx run`` stays a no-op; a spec that only adds cells (a level, an
      exclude, replicates) runs just the new runs into it, as before.
    * The current one is not complete: it continues. With a new ``label`` it is
      refused, unless nothing has run yet (then it is simply relabelled).

    The caller holds the experiment lock.

    Args:
        exp_dir: ``results/NAME``.
        spec: The loaded spec (``digest``, ``factor_names``).
        label: ``--campaign LABEL``, or None.

    Returns:
        ``(what, kept)``: ``what`` is ``new``, ``continue`` or ``relabel``; ``kept`` the
        campaign just moved to ``campaigns/``, or None.

    Raises:
        BenchmatrixError: the label names an earlier campaign, or the current campaign
            is unfinished and another label was asked for.
    """
    exp_dir = Path(exp_dir)
    finish_archive(exp_dir)
    if label is not None:
        label = check_label(label)
        clash = [c for c in list_campaigns(exp_dir) if not c.current and (c.label == label or c.id == label)]
        if clash:
            raise BenchmatrixError(f"{exp_dir}: --campaign {label!r} names the earlier campaign {clash[0].id} "
                                   f"({clash[0].path}); choose another label")
    meta = read_meta(exp_dir)
    if not meta.get("id"):
        campaign_id(exp_dir, label=label, spec_digest=spec.digest)
        return "new", None
    same_label = label is None or label == meta.get("label") or label == meta.get("id")
    if not is_complete(exp_dir, spec.factor_names):
        if same_label:
            return "continue", None
        if not _has_records(exp_dir):
            update_meta(exp_dir, label=label)
            return "relabel", None
        raise BenchmatrixError(f"{exp_dir}: the current campaign {meta['id']}"
                               + (f" ({meta['label']})" if meta.get("label") else "")
                               + f" has runs pending; finish it with 'bmx run {spec.path}' (or 'bmx run "
                               f"{spec.path} --campaign {meta.get('label') or meta['id']}') before starting "
                               f"campaign {label!r}")
    if same_label and not _measurement_changed(exp_dir, spec):
        return "continue", None
    kept = archive_current(exp_dir)
    campaign_id(exp_dir, label=label, spec_digest=spec.digest)
    return "new", kept


def run_counts(path: str | Path, from_records: bool = True) -> dict[str, int]:
    """Measured runs of a campaign (warm-ups and control runs aside): planned, ok,
    failed (any final state but ok) and pending, as ``bmx status`` decides.

    Args:
        path: The campaign directory.
        from_records: Read every record (exact even after an interrupt); otherwise
            plan.csv and runs.csv only, which collect wrote at the campaign's end (fast:
            what a kept campaign, or a site of hundreds of them, uses).
    """
    import pandas as pd

    from benchmatrix.analyze.stats import bool_column
    from benchmatrix.layout import FAILED_STATES
    from benchmatrix.results.status import run_states

    path = Path(path)
    counts = {"planned": 0, "ok": 0, "failed": 0, "pending": 0}
    if not (path / layout.PLAN).is_file():
        return counts
    if from_records or not (path / layout.RUNS).is_file() or not (path / layout.RUNS).stat().st_size:
        for st in run_states(path):
            if not (st.run.warmup or st.run.control):
                counts["planned"] += 1
                counts["failed" if st.state in FAILED_STATES else "ok" if st.state == "ok" else "pending"] += 1
        return counts
    plan = pd.read_csv(path / layout.PLAN, usecols=["run_id", "attempt", "warmup", "control"], dtype=str)
    runs = pd.read_csv(path / layout.RUNS, usecols=["run_id", "attempt", "status"], dtype=str)
    plan = plan[~(bool_column(plan["warmup"]) | bool_column(plan["control"])).to_numpy()]
    runs = runs[runs["run_id"].isin(set(plan["run_id"]))]
    runs = runs.assign(attempt=pd.to_numeric(runs["attempt"], errors="coerce"))
    recorded = set(zip(runs["run_id"], runs["attempt"]))
    missing = {rid for rid, att in zip(plan["run_id"], pd.to_numeric(plan["attempt"], errors="coerce"))
               if (rid, att) not in recorded}
    ok = set(runs.loc[runs["status"].str.strip().str.lower() == "ok", "run_id"])
    newest = runs.sort_values("attempt", kind="stable").drop_duplicates("run_id", keep="last")
    interrupted = set(newest.loc[newest["status"] == "interrupted", "run_id"])
    for rid in plan["run_id"].drop_duplicates():
        counts["planned"] += 1
        counts["ok" if rid in ok else "pending" if rid in missing or rid in interrupted else "failed"] += 1
    return counts


def campaign_rows(exp_dir: str | Path) -> list[dict[str, Any]]:
    """One row per campaign for ``bmx campaigns`` (oldest first): id, label, started_at,
    ended_at, hosts, spec_digest, runs planned/ok/failed/pending, current, path.

    The current campaign's counts come from its records, a kept one's from its tables.
    """
    from benchmatrix.plan.design import read_plan

    out = []
    for c in list_campaigns(exp_dir):
        counts = run_counts(c.path, from_records=c.current)
        hosts = c.meta.get("hosts") or ([] if not (c.path / layout.PLAN).is_file()
                                        else sorted({r.host for r in read_plan(c.path / layout.PLAN)[0]}))
        out.append({"id": c.id, "label": c.label, "started_at": c.started_at, "ended_at": c.ended_at,
                    "hosts": list(hosts), "spec_digest": str(c.meta.get("spec_digest") or ""),
                    "runs": counts, "current": c.current, "path": str(c.path)})
    return out


def campaigns_table(rows: list[dict[str, Any]]) -> str:
    """The text table of ``bmx campaigns`` (``*`` marks the current campaign)."""
    if not rows:
        return "no campaign yet"
    head = ["", "id", "label", "started_at", "ended_at", "hosts", "runs", "ok", "failed", "pending"]
    # A label stored by an older version may hold a newline or a bidi override: escaped.
    body = [["*" if r["current"] else "", r["id"], printable(r["label"]) if r["label"] else "-",
             r["started_at"][:19] or "-", r["ended_at"][:19] or "-", ",".join(r["hosts"]) or "-",
             str(r["runs"]["planned"]), str(r["runs"]["ok"]), str(r["runs"]["failed"]),
             str(r["runs"]["pending"])] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in [head, *body])
