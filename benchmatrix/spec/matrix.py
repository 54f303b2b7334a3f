"""Matrix expansion: factors -> cells (cross product, zip groups, exclude, include).

A cell's ``cell_id`` is derived only from its canonical factor values, so it does
not depend on key order in the YAML nor on which other cells exist: results stay
attached to their cell when the matrix is extended.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmatrix.layout import cell_label

Level = str | int | float | bool


def canonical_level(level: Level) -> Level:
    """The level as it enters a cell id: a whole float becomes the int it equals.

    ``4096`` and ``4096.0`` are one level (validation refuses listing both), so they
    must be one cell; ints, strings, booleans and fractional floats are unchanged,
    hence so are the ids of every cell that has no whole-float level.
    """
    if isinstance(level, float) and level.is_integer():
        return int(level)
    return level


def level_key(level: Any) -> tuple[str, Any]:
    """A hashable key under which equal levels (see :func:`_same_level`) collide.

    ``1`` and ``1.0`` share a key (Python hashes equal numbers alike); ``True`` and
    ``1`` do not, nor do ``4`` and ``"4"``.
    """
    if isinstance(level, bool):
        return ("bool", level)
    if isinstance(level, (int, float)):
        return ("number", level)
    return (type(level).__name__, level)


def as_declared(factors: Mapping[str, Sequence[Level]], values: Mapping[str, Level],
                declared: Mapping[str, Mapping[tuple[str, Any], Level]] | None = None) -> dict[str, Level]:
    """``values`` in factor order, each replaced by the declared level it equals, if any.

    An ``include`` entry or ``order.control`` may write ``4096.0`` for the level
    ``4096``; the cell then carries the declared ``4096``, so plan.csv, knob settings
    and whole plots see one level, not two spellings of it.

    Args:
        factors: Factor name -> declared levels.
        values: Factor name -> a value, for every factor.
        declared: :func:`declared_levels` of ``factors``, when the caller maps many entries.
    """
    declared = declared if declared is not None else declared_levels(factors)
    return {name: declared[name].get(level_key(values[name]), values[name]) for name in factors}


def declared_levels(factors: Mapping[str, Sequence[Level]]) -> dict[str, dict[tuple[str, Any], Level]]:
    """Factor name -> (:func:`level_key` -> declared level), for :func:`as_declared`."""
    return {name: {level_key(level): level for level in levels} for name, levels in factors.items()}


def cell_id_of(factors: Mapping[str, Level]) -> str:
    """Stable id of the cell with these factor values (``c`` + 10 hex digits)."""
    canonical = json.dumps({k: canonical_level(v) for k, v in factors.items()}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=True)
    return "c" + hashlib.sha256(canonical.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Cell:
    """One combination of factor levels.

    Attributes:
        cell_id: Stable id (see :func:`cell_id_of`).
        factors: Factor name -> level, in the spec's factor order.
        included: True when the cell comes from ``include`` rather than the matrix.
    """

    cell_id: str
    factors: dict[str, Level] = field(hash=False, compare=False)
    included: bool = False

    def label(self) -> str:
        """Short human label, e.g. ``rw=read bs=4k`` (:func:`benchmatrix.layout.cell_label`)."""
        return cell_label(self.factors.items())


def _same_level(a: Any, b: Any) -> bool:
    # YAML gives 1 and True different types; a bool level must not match 1.
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def matches(factors: Mapping[str, Level], entry: Mapping[str, Any]) -> bool:
    """True when ``factors`` matches every key of an exclude entry.

    A list value in the entry means "any of these levels".
    """
    for key, want in entry.items():
        have = factors.get(key)
        options = want if isinstance(want, list) else [want]
        if not any(_same_level(have, w) for w in options):
            return False
    return True


def expand(factors: Mapping[str, Sequence[Level]],
           zip_groups: Sequence[Sequence[str]] = (),
           exclude: Sequence[Mapping[str, Any]] = (),
           include: Sequence[Mapping[str, Level]] = ()) -> list[Cell]:
    """Expand a factor matrix into cells, in matrix order then includes.

    Args:
        factors: Factor name -> levels; declaration order sets the matrix order
            (the first factor varies slowest).
        zip_groups: Groups of factor names paired by index instead of crossed.
            Callers validate that members exist and have equal lengths.
        exclude: Entries; a cell matching every key of one entry is dropped.
        include: Extra cells, each naming every factor; duplicates of existing
            cells are ignored.

    Returns:
        The cells, each with its stable id.
    """
    names = list(factors)
    zipped = {name: gi for gi, group in enumerate(zip_groups) for name in group}
    # Dimensions in declaration order; a zip group sits where its first member is.
    dims: list[list[dict[str, Level]]] = []
    seen_groups: set[int] = set()
    for name in names:
        if name in zipped:
            gi = zipped[name]
            if gi in seen_groups:
                continue
            seen_groups.add(gi)
            group = zip_groups[gi]
            dims.append([{m: factors[m][i] for m in group} for i in range(len(factors[group[0]]))])
        else:
            dims.append([{name: level} for level in factors[name]])
    cells: list[Cell] = []
    ids: set[str] = set()
    for combo in itertools.product(*dims):
        merged: dict[str, Level] = {}
        for part in combo:
            merged.update(part)
        ordered = {n: merged[n] for n in names}
        if any(matches(ordered, e) for e in exclude):
            continue
        cid = cell_id_of(ordered)
        if cid not in ids:
            ids.add(cid)
            cells.append(Cell(cid, ordered))
    declared = declared_levels(factors)
    for entry in include:
        ordered = as_declared(factors, entry, declared)
        cid = cell_id_of(ordered)
        if cid not in ids:
            ids.add(cid)
            cells.append(Cell(cid, ordered, included=True))
    return cells
