"""Field-level differences between JSON-like values, written for people.

A nested value (dicts, lists, scalars, as in spec.json and record.json) is flattened
into its leaves, each named by a dotted path (``workload.vars.filename``,
``workload.argv.4``: list items by their index). Two values differ at the paths whose
leaves differ, and each such path is one line, ``path: a → b``, with both sides cut
to about 80 characters: a reader sees what changed, not two blobs to compare by eye.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

#: How a leaf that one side lacks is written.
ABSENT = "(absent)"
#: Characters a value is cut to.
LIMIT = 80
#: Cells named in a grouped line before "and N more".
_CELLS_SHOWN = 3

Path = tuple[str, ...]


def flatten(value: Any, prefix: Path = ()) -> dict[Path, Any]:
    """The leaves of ``value`` by path; an empty dict or list is a leaf of its own.

    Args:
        value: A JSON-like value.
        prefix: The path of ``value`` itself.

    Returns:
        Path (a tuple of keys and list indices as text) -> leaf, in the value's order.
    """
    if isinstance(value, dict) and value:
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (list, tuple)) and value:
        items = enumerate(value)
    else:
        return {prefix: value}
    out: dict[Path, Any] = {}
    for key, item in items:
        out.update(flatten(item, (*prefix, str(key))))
    return out


def short(text: str, limit: int = LIMIT) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _bare(value: Any) -> str:
    # Strings as they are: an argv item or a path reads best without quotes.
    return value if isinstance(value, str) else _json(value)


def differences(a: Any, b: Any, prefix: str = "", variants: bool = False) -> list[tuple[str, str, str]]:
    """The leaves at which ``a`` and ``b`` differ.

    Args:
        a: One value, or with ``variants`` a list of the values one side holds (the
            runs of a cell may hold several).
        b: The other side, alike.
        prefix: Dotted path put before every path.
        variants: Compare the sets of leaves each side has at a path: a path differs
            when those sets differ, and each side's distinct leaves are joined by
            `` | ``.

    Returns:
        ``(path, a, b)`` per differing leaf in the order the paths first appear,
        both sides as text (:data:`ABSENT` where a side lacks the leaf) cut to
        :data:`LIMIT` characters.
    """
    sides = [[flatten(v) for v in (side if variants else [side])] for side in (a, b)]
    paths = dict.fromkeys(p for side in sides for flat in side for p in flat)
    out = []
    for path in paths:
        leaves = [[flat[path] for flat in side if path in flat] for side in sides]
        absent = [len(side) > len(found) for side, found in zip(sides, leaves)]
        # Compared as JSON: 1 and "1", or null and false, differ.
        seen = [({_json(v) for v in found}, gap) for found, gap in zip(leaves, absent)]
        if seen[0] == seen[1]:
            continue
        texts = [_side_text(found, gap, _bare) for found, gap in zip(leaves, absent)]
        if texts[0] == texts[1]:  # they differ in type only: show it
            texts = [_side_text(found, gap, _json) for found, gap in zip(leaves, absent)]
        name = ".".join(p for p in (prefix, *path) if p)
        out.append((name, short(texts[0]), short(texts[1])))
    return out


def _side_text(found: list[Any], absent: bool, text: Callable[[Any], str]) -> str:
    return " | ".join(sorted({text(v) for v in found} | ({ABSENT} if absent else set())))


def without(value: Any, dropped: Callable[[str], bool]) -> Any:
    """``value`` without the dict keys ``dropped`` says yes to, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, dropped) for k, v in value.items() if not dropped(str(k))}
    if isinstance(value, list):
        return [without(v, dropped) for v in value]
    return value


def grouped(rows: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Differences (rows of provenance.csv) for reading: the same difference found in
    several cells of a host is one line naming them.

    Args:
        rows: Dicts with ``scope`` (``spec``, ``host`` or ``cell``), ``host``,
            ``cell_id``, ``what``, ``a`` and ``b``.

    Returns:
        ``{where, what, a, b}`` per line, in the order of the rows; ``where`` is
        ``spec``, the host, ``cell C on H`` or ``cells C1, C2, C3 and N more on H``.
    """
    lines: dict[tuple[str, ...], list[str]] = {}
    for d in rows:
        key = (d["scope"], str(d["host"]), str(d["what"]), str(d["a"]), str(d["b"]))
        lines.setdefault(key, []).append(str(d["cell_id"]))
    out = []
    for (scope, host, what, a, b), cells in lines.items():
        if scope == "spec":
            where = "spec"
        elif scope != "cell":
            where = host
        elif len(cells) == 1:
            where = f"cell {cells[0]} on {host}"
        else:
            more = len(cells) - _CELLS_SHOWN
            where = (f"cells {', '.join(cells[:_CELLS_SHOWN])}" + (f" and {more} more" if more > 0 else "")
                     + f" on {host}")
        out.append({"where": where, "what": what, "a": a, "b": b})
    return out
