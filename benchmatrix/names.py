"""One rule for every name a user gives: experiments, factors, metrics, roles, campaign labels.

A name becomes a directory (``results/NAME/``), a CSV column, part of a file name and
a cell of a printed table. So, whatever stricter pattern a kind of name adds (an
experiment name is ``[A-Za-z0-9][A-Za-z0-9_-]*``), every name must be text that stays
one harmless token everywhere:

- not empty and at most a bounded number of characters;
- printable: no control character (a trailing newline made ``results/NAME⏎/`` and a
  ``val⏎`` column), no format character, in particular none of the bidirectional
  overrides and isolates that make a terminal show text in another order than it is;
- no path separator (``/``, ``\\``) and no leading dot (``.``, ``..``, hidden files);
- no leading or trailing white space.

:func:`name_problem` says what is wrong in one line, showing the name escaped
(``'x\\n'``), so the message itself cannot be garbled by the name.
"""

from __future__ import annotations

from typing import Any

#: Characters that reorder displayed text (Unicode's bidirectional controls). They are
#: not printable (category Cf) and so refused anyway; named here for the message.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Default longest name, in characters.
MAX_NAME_CHARS = 64


def shown(name: Any, limit: int = 80) -> str:
    """``name`` quoted with every unprintable character escaped, cut to about ``limit`` characters."""
    text = str(name)
    if len(text) > limit:
        return escaped(text[:limit]) + f"... ({len(text)} characters)"
    return escaped(text)


def printable(text: str) -> str:
    """``text`` with control, format and other unprintable characters escaped (``x\\n``,
    ``\\u202eabc``); printable letters of any script stay as they are. For names shown
    in tables, which must stay one line in the order they are stored."""
    return "".join(ch if ch.isprintable() and ch not in BIDI_CONTROLS else repr(ch)[1:-1] for ch in text)


def escaped(text: str) -> str:
    """``text`` as :func:`printable` makes it, in single quotes (quotes and backslashes escaped)."""
    return "'" + printable(text.replace("\\", "\\\\").replace("'", "\\'")) + "'"


def name_problem(name: Any, what: str, max_chars: int = MAX_NAME_CHARS) -> str | None:
    """Why ``name`` cannot be a name of kind ``what``, or None when it can.

    Args:
        name: The name as the user gave it.
        what: Its kind, for the message (``"experiment name"``, ``"--campaign"``).
        max_chars: Its longest allowed length.

    Returns:
        A one-line reason (``invalid WHAT 'NAME': why``, the name escaped), or None.
    """
    if not isinstance(name, str):
        return f"{what} {name!r} is not text"
    if not name:
        return f"{what} is empty"
    label = f"invalid {what} {shown(name)}:"
    if len(name) > max_chars:
        return f"{label} longer than {max_chars} characters"
    for ch in name:
        if ch in BIDI_CONTROLS:
            return f"{label} holds the bidirectional control character U+{ord(ch):04X}"
        if not ch.isprintable():
            return f"{label} holds the unprintable character U+{ord(ch):04X}"
    if "/" in name or "\\" in name:
        return f"{label} holds a path separator ('/' or '\\')"
    if name.startswith("."):
        return f"{label} starts with a dot"
    if name != name.strip():
        return f"{label} starts or ends with white space"
    return None
