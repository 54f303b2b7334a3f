"""Writing files so that no reader sees half of one: atomic_write() and its parts.

A leaf: it imports nothing from benchmatrix but the batch runner's sync_filesystem (host/,
itself a leaf: one copy for the controller and the hosts), so every stage (plan, results,
report, campaigns, execute) writes its files the same way.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TypeVar

P = TypeVar("P", str, Path)


def create_beside(path: P) -> tuple[P, int]:
    """A new temporary file beside ``path`` (``.NAME.RANDOM.tmp``), opened for writing: (its
    path, of the type ``path`` is: a text path saves pathlib's work where a batch writes a
    file a run; fd).

    O_EXCL on a random name: never follows or reuses another writer's file. Mode 0o666
    is filtered by the umask exactly as open() does for any new file.
    """
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    return (Path(tmp) if isinstance(path, Path) else tmp), fd  # type: ignore[return-value]


def write_synced(fd: int, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8 with ``\\n`` line ends) to the new file ``fd``,
    sync it to disk and close it: the body of every atomic write."""
    fh = os.fdopen(fd, "wb") if isinstance(data, bytes) else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    with fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a synced temporary file and a rename.

    Readers (``bmx status``, a browser, a colleague's script) never see a half-written
    file, and a failed write (a full disk) leaves the previous version intact with no
    temporary file behind. The file gets the permissions of any new file under the
    user's umask (0644 under umask 022, 0640 under 027), so results are as readable by
    the team as the directory they sit in; ``tempfile.mkstemp`` would make every one
    0600. Text is written as UTF-8 with ``\\n`` line ends.

    Args:
        path: The file to create or replace; its directory is created if needed.
        data: The whole content, text or bytes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = create_beside(path)
    try:
        write_synced(fd, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sync_filesystem(path: Path) -> None:
    """Flush the file system holding ``path`` to disk (one call for a batch of records).

    The batch runner's own function (host/, one copy), imported here when first needed:
    importing the runner at start-up would cost every bmx process about 50 ms.
    """
    from benchmatrix.host.batch_runner import sync_filesystem as sync

    sync(path)


def user_cache_dir() -> Path:
    """The user's cache folder of benchmatrix: ``$XDG_CACHE_HOME/benchmatrix`` (default
    ``~/.cache/benchmatrix``); not created here.

    Raises:
        RuntimeError: no home directory to put it in.
    """
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchmatrix"
