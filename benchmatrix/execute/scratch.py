"""The scratch directories bmx's processes make under the system's temporary directory
(``bmx run``'s wave broker, a wave's and a batch job's ansible-runner data): each is named
after the process that made it, so that a later ``bmx run`` removes those whose process
is gone.

A process removes its own on the way out; one killed outright (SIGKILL, the OOM killer, a
crashed controller) cannot, and ansible-runner's data of a wave holds the batch's events
(its archive of raw outputs among them), about 1 MB a call.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from benchmatrix.execute.lock import pid_alive

#: The kinds of scratch directory (``bmx-KIND-PID-XXXXXXXX``).
KINDS = ("broker", "wave", "ansible")
_NAME = re.compile(r"bmx-(?:%s)-(\d+)-[A-Za-z0-9_]+" % "|".join(KINDS))


def scratch_dir(kind: str) -> Path:
    """A new private (0700) directory under the temporary directory, named after this
    process: ``bmx-KIND-PID-XXXXXXXX``."""
    if kind not in KINDS:
        raise ValueError(f"unknown scratch kind {kind}")
    return Path(tempfile.mkdtemp(prefix=f"bmx-{kind}-{os.getpid()}-"))


def sweep(directory: str | Path | None = None) -> list[Path]:
    """Remove the scratch directories (:func:`scratch_dir`) of processes that are gone,
    this user's only; returns those removed. A directory whose PID now belongs to
    another process is left (it is removed once that one is gone too)."""
    base = Path(directory or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        m = _NAME.fullmatch(entry.name)
        if m is None:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        if not pid_alive(int(m.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed
