"""Typed errors of benchmatrix.

Every error a user can cause derives from :class:`BenchmatrixError`; the CLI prints
its one-line ``str()`` and exits with the error's ``exit_code`` instead of a traceback.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


class BenchmatrixError(Exception):
    """Base class of every error benchmatrix raises on purpose."""

    exit_code = 1


class SpecError(BenchmatrixError):
    """One problem in an experiment spec, located at ``FILE:LINE``.

    Attributes:
        path: The spec file.
        line: 1-based line of the offending key (0 when unknown).
        message: What is wrong, in one line.
    """

    exit_code = 2

    def __init__(self, path: str, line: int, message: str):
        self.path = str(path)
        self.line = line
        # One line, whatever the spec put into it (a key with a newline, a huge value).
        message = message.encode("unicode_escape").decode("ascii") if not message.isprintable() else message
        self.message = message if len(message) <= 400 else message[:400] + "..."
        super().__init__(f"{self.path}:{line}: {message}")


class SpecErrors(BenchmatrixError):
    """All problems found in one spec; ``str()`` gives one line per problem."""

    exit_code = 2

    def __init__(self, errors: list[SpecError]):
        self.errors = sorted(errors, key=lambda e: (e.line, e.message))
        super().__init__("\n".join(str(e) for e in self.errors))


class PlanError(BenchmatrixError):
    """The plan cannot be made (for example: the host pattern matches no host)."""

    exit_code = 2


class LockError(BenchmatrixError):
    """Another ``bmx`` process is already running this experiment."""

    exit_code = 4


class AnsibleError(BenchmatrixError):
    """An Ansible call did not succeed.

    Attributes:
        host: The host concerned (empty when the failure is not host specific).
        task: The name of the failing task, when one is known.
        log: Path of the full Ansible output.
        payloads: The result payloads the playbook published before it failed
            ({host: {key: payload}}; run_playbook fills it, best effort): the knob
            states of a batch whose runner then failed, whose baselines the restore needs.
    """

    def __init__(self, message: str, host: str = "", task: str = "", log: str = ""):
        self.host = host
        self.task = task
        self.log = log
        self.payloads: dict = {}
        where = f"host {host}: " if host else ""
        what = f"task '{task}' failed: " if task else ""
        tail = f" (log: {log})" if log else ""
        super().__init__(f"{where}{what}{message}{tail}")


class HostUnreachableError(AnsibleError):
    """Ansible could not connect to the host."""


class PlaybookFailedError(AnsibleError):
    """A task failed on the host or the playbook could not run."""


class ResultChannelError(AnsibleError):
    """A playbook's result payload (``set_stats`` data, docs/contracts.md) is missing,
    malformed or unknown: the playbook and the controller disagree about what it returns."""


class ParseError(BenchmatrixError):
    """A workload's raw output cannot be turned into metrics."""


class WorkloadVarsError(BenchmatrixError):
    """A run's workload variables cannot become a command (argv, job file, script, CPU list).

    Raised by the argv builders of :mod:`benchmatrix.workloads`; the roles' filter plugins
    turn it into Ansible's filter error, so the batch fails naming the role and the run.
    """


class Interrupted(BenchmatrixError):
    """SIGINT or SIGTERM stopped the work; finished results are kept.

    ``payloads``: as :class:`AnsibleError`'s, for an interrupted playbook call.
    """

    exit_code = 130

    def __init__(self, *args: object):
        super().__init__(*args)
        self.payloads: dict = {}


def describe_os_error(exc: OSError, where: Path | None = None) -> str:
    """One line for an OSError: the path, the reason, and the free space when full.

    Args:
        where: The directory to name when the error carries no file name (a failed
            write() names none).
    """
    reason = exc.strerror or str(exc)
    msg = f"{exc.filename}: {reason}" if exc.filename else f"writing under {where}: {reason}" if where else reason
    path = exc.filename or (str(where) if where else "")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        probe = Path(path or ".").resolve()
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            usage = shutil.disk_usage(probe)
            msg += (f" ({usage.free / 2**20:.1f} MiB free of {usage.total / 2**20:.1f} MiB "
                    f"on the file system of {probe})")
        except OSError:
            pass
    return msg
