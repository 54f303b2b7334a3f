"""Snapshot tests of terminal output: the text with what differs between machines
masked, compared with ``tests/e2e/snapshots/NAME.txt``.

``BMX_UPDATE_SNAPSHOTS=1`` rewrites the files instead of comparing (then read the diff).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "e2e" / "snapshots"


def shape(text: str, wide: bool = False) -> str:
    """``text`` with paths, campaign ids and durations masked; ``wide``: runs of spaces
    and dashes shortened too (columns whose width follows masked numbers)."""
    text = re.sub(r"/\S*/project/", "PROJECT/", text)
    text = re.sub(r"\b[0-9a-f]{12}\b", "ID", text)
    text = re.sub(r"\bin \d+:\d\d:\d\d", "in H:MM:SS", text)
    if wide:
        text = re.sub(r" {2,}", "  ", re.sub(r"-{2,}", "--", text))
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def matches_snapshot(name: str, text: str, wide: bool = False) -> bool:
    """Whether ``text``, shaped, equals the snapshot ``NAME``."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("BMX_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(shape(text, wide))
    return shape(text, wide) == path.read_text()
