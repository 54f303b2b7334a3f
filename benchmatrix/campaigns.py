"""Campaigns of one experiment: where they live and how a user names them.

An experiment's results directory ``results/NAME/`` holds its current campaign, laid
out as DESIGN.md describes. Earlier campaigns are kept beside it, each in
``results/NAME/campaigns/ID/`` with the same layout (plan.csv, runs.csv, runs/, ...),
so every function that reads a campaign takes its directory and works on either.
Each campaign directory has a ``campaign.json``: ``id`` (always), ``created_at``, and,
when known, ``label``, ``ended_at``, ``spec_digest``.

This module only finds and names campaigns; it never writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import BenchmatrixError

#: Folder under an experiment's results directory that keeps its earlier campaigns.
CAMPAIGNS_DIR = "campaigns"
#: The file naming a campaign, in every campaign directory.
CAMPAIGN_FILE = "campaign.json"


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
