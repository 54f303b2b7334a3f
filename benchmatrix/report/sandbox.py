"""User report templates rendered in a sandbox, in a child process with bounds.

A user template directory (``report.template_dir``, ``bmx report --templates``) is
whatever the spec's author put there; a plain Jinja2 environment ran
``os.popen`` through Python internals, included any file of the machine, and let a
template loop, allocate or print until the kernel stopped it. Here:

- :class:`ReportSandbox` is Jinja2's immutable sandbox: no attribute starting with
  ``_`` (no ``__class__``/``__globals__`` walk), no method that changes a value in
  place. Macros, ``include``, ``import`` and ``extends`` work, as the built-in
  templates need them.
- :class:`ConfinedLoader` loads a template only from a regular file inside the
  template directory, checked on the file it opened: an absolute name, ``..``, or
  a link that leads out of the directory is refused.
- :func:`render_bounded` renders in a forked child with ``RLIMIT_CPU`` and
  ``RLIMIT_AS`` set, and stops reading once the output passes its limit; the child
  gets the report context by the fork and sends back only text.

Every failure is a :class:`ReportTemplateError`: one line naming the template file
and line.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import select
import signal
import stat
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from benchmatrix.errors import BenchmatrixError

#: Largest template file the loader reads.
MAX_TEMPLATE_BYTES = 4 * 1024 * 1024
#: Frames of the pipe from the child: kind (one byte) and payload length.
_HEADER = struct.Struct("!cI")
#: Output is sent to the parent in pieces of about this size.
_PIECE = 256 * 1024
#: prctl(2): the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


class ReportTemplateError(BenchmatrixError):
    """A user report template failed or broke a bound; ``str()`` is one line
    ``FILE:LINE: message`` (``FILE: message`` when no line is known)."""

    def __init__(self, message: str):
        message = " ".join(str(message).split())
        # A template's text may carry terminal escapes: shown escaped, never raw.
        message = message.encode("unicode_escape").decode("ascii") if not message.isprintable() else message
        super().__init__(message if len(message) <= 500 else message[:500] + "...")


class ReportSandbox(ImmutableSandboxedEnvironment):
    """The environment of user report templates: Jinja2's immutable sandbox."""


class ConfinedLoader(jinja2.BaseLoader):
    """Templates from one directory, never from outside it.

    A name is looked up below the directory (``a/b.j2``); a name that is absolute or
    has an empty, ``.`` or ``..`` part is refused, and so is a file that, once opened,
    lies outside the directory (a link out of it) or is no regular file. Refusals are
    :class:`jinja2.sandbox.SecurityError`, which a :class:`jinja2.ChoiceLoader` does not
    pass over to its next loader; a name with no file here is ``TemplateNotFound``.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        pieces = template.split("/")
        if template.startswith("/") or "\\" in template or "\0" in template or \
                any(p in ("", ".", "..") for p in pieces):
            raise jinja2.sandbox.SecurityError(f"template name {template!r} leaves the template directory "
                                               f"{self.root} (absolute, '.' or '..')")
        path = self.root.joinpath(*pieces)
        try:
            # O_NONBLOCK: a FIFO must not hang the render; it is refused below.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise jinja2.TemplateNotFound(template) from None
        except OSError as exc:
            raise jinja2.sandbox.SecurityError(f"template {template!r} cannot be read: {exc.strerror}") from None
        try:
            # The file actually opened, whatever links led to it.
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if not real.is_relative_to(self.root):
                raise jinja2.sandbox.SecurityError(f"template {template!r} is a link out of the template "
                                                   f"directory {self.root}")
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise jinja2.sandbox.SecurityError(f"template {template!r} is not a regular file")
            if info.st_size > MAX_TEMPLATE_BYTES:
                raise jinja2.sandbox.SecurityError(f"template {template!r} is larger than {MAX_TEMPLATE_BYTES} bytes")
            with os.fdopen(os.dup(fd), "rb") as file:
                data = file.read(MAX_TEMPLATE_BYTES + 1)
        finally:
            os.close(fd)
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError:
            raise jinja2.sandbox.SecurityError(f"template {template!r} is not UTF-8 text") from None
        mtime = info.st_mtime_ns

        def uptodate() -> bool:
            try:
                return os.stat(path).st_mtime_ns == mtime
            except OSError:
                return False

        return source, str(path), uptodate


class _CpuExceeded(Exception):
    pass


class _OutputExceeded(Exception):
    pass


def _location(exc: BaseException, fallback: str) -> str:
    """``FILE:LINE`` of the innermost template frame of ``exc`` (Jinja2 rewrites its
    traceback so that template code has the template's file and line), else ``fallback``."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.lineno:
        return f"{exc.filename or exc.name or fallback}:{exc.lineno}"
    where = fallback
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.endswith(".py") and not name.startswith("<") and tb.tb_lineno is not None:
            where = f"{name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _bound_broken(exc: BaseException) -> BaseException:
    """The bound behind ``exc``, if any: Jinja2's traceback rewriting may itself fail on
    a frame that a signal interrupted (its line is None) and hide the first error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (_CpuExceeded, MemoryError, RecursionError, _OutputExceeded)):
            return seen
        seen = seen.__context__
    return exc


def _message(exc: BaseException, cpu_seconds: float, memory_mb: int, output_mb: int) -> str:
    if isinstance(exc, _CpuExceeded):
        return f"the template takes more than {cpu_seconds:g} s of CPU time to render"
    if isinstance(exc, MemoryError):
        return f"the template needs more than {memory_mb} MB of memory to render"
    if isinstance(exc, _OutputExceeded):
        return f"the rendered output is larger than {output_mb} MB"
    if isinstance(exc, RecursionError):
        return ("the template nests too deeply (recursion: a macro or include that calls itself, or "
                "brackets and blocks nested hundreds deep)")
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return f"template syntax error: {exc.message}"
    if isinstance(exc, jinja2.TemplateNotFound):
        return f"template {exc.name!r} not found"
    if isinstance(exc, jinja2.sandbox.SecurityError):
        return f"refused by the template sandbox: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _detach(parent: int, keep: int) -> None:
    """Make the child end with its parent and hold none of its files.

    The caller may hold the experiment's lock (an open file with ``flock``): a child
    left running with a copy of it after its parent was killed would keep the next
    ``bmx run`` out until its CPU time was spent.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # no prctl: the parent's kill on its deadline still ends the child
    if os.getppid() != parent:
        os._exit(1)
    os.closerange(3, keep)
    os.closerange(max(keep + 1, 3), os.sysconf("SC_OPEN_MAX"))
    # The standard streams of the caller may be its log; the child writes only to ``keep``.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != keep:
            os.dup2(null, fd)
    if null not in (0, 1, 2, keep):
        os.close(null)


def _shown(env: jinja2.Environment, name: str) -> str:
    """How an error names the template ``name`` before it is loaded: its path in the
    user directory when it is there."""
    loaders = getattr(env.loader, "loaders", [env.loader])
    for loader in loaders:
        if isinstance(loader, ConfinedLoader) and os.path.lexists(loader.root / name):
            return str(loader.root / name)
    return name


def _send(fd: int, kind: bytes, payload: bytes) -> None:
    data = _HEADER.pack(kind, len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


def _lower(kind: int, soft: int, hard: int) -> None:
    """Set a resource limit, never above the one the process already has."""
    _, current = resource.getrlimit(kind)
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
        soft = min(soft, hard)
    resource.setrlimit(kind, (soft, hard))


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


# shape: the environment, what to render and the three bounds, as render_bounded takes them
def _child(fd: int, env: jinja2.Environment, names: dict[str, str], context: dict[str, Any],
           cpu_seconds: float, memory_mb: int, output_mb: int) -> None:
    """Render ``names`` (output name -> template name) and send the texts to ``fd``."""
    current = _shown(env, next(iter(names.values()), ""))
    try:
        def over_time(signum: int, frame: Any) -> None:
            raise _CpuExceeded

        signal.signal(signal.SIGXCPU, over_time)
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        soft = math.ceil(spent + cpu_seconds)
        # The soft limit raises in Python; the hard one ends a C call that never returns.
        _lower(resource.RLIMIT_CPU, soft, soft + 1)
        limit = _vm_bytes() + memory_mb * 1024 * 1024
        _lower(resource.RLIMIT_AS, limit, limit)
        left = output_mb * 1024 * 1024
        for out, name in names.items():
            current = _shown(env, name)
            template = env.get_template(name)
            current = template.filename or name
            _send(fd, b"F", out.encode())
            pieces: list[str] = []
            size = 0
            for chunk in template.generate(context):
                pieces.append(chunk)
                size += len(chunk)
                if size >= _PIECE:
                    data = "".join(pieces).encode()
                    pieces, size = [], 0
                    left -= len(data)
                    if left < 0:
                        raise _OutputExceeded
                    _send(fd, b"C", data)
            data = "".join(pieces).encode()
            left -= len(data)
            if left < 0:
                raise _OutputExceeded
            _send(fd, b"C", data)
        _send(fd, b"D", b"")
    except BaseException as exc:  # noqa: BLE001 (any failure of the child becomes the parent's one line)
        # Under the memory limit a failure may have left little room: the traceback
        # holds the frames (and values) that filled it; only the text is kept.
        where = _location(exc, str(current))
        text = f"{where}: {_message(_bound_broken(exc), cpu_seconds, memory_mb, output_mb)}"
        exc.__traceback__ = None
        del exc
        _send(fd, b"E", text.encode("utf-8", "replace"))


# shape: the environment, what to render, the context and the three bounds, each named
def render_bounded(env: jinja2.Environment, names: dict[str, str], context: dict[str, Any], *,
                   cpu_seconds: float, memory_mb: int, output_mb: int) -> dict[str, str]:
    """Render templates in a forked child bounded in CPU time, memory and output.

    Args:
        env: The environment (a :class:`ReportSandbox` for user templates).
        names: Output name -> template name, rendered in this order.
        context: The template context (the child gets it by the fork).
        cpu_seconds: CPU seconds the child may spend, compiling included.
        memory_mb: Memory the child may add to what it starts with (address space).
        output_mb: The most megabytes (UTF-8) of all outputs together.

    Returns:
        Output name -> rendered text.

    Raises:
        ReportTemplateError: a template failed or broke a bound (one line).
    """
    parent = os.getpid()
    try:
        read_fd, write_fd = os.pipe()
    except OSError as exc:  # out of file descriptors
        raise ReportTemplateError(f"cannot start the render of the report templates: {exc.strerror}") from None
    try:
        pid = os.fork()
    except OSError as exc:  # out of processes
        os.close(read_fd)
        os.close(write_fd)
        raise ReportTemplateError(f"cannot start the render of the report templates: {exc.strerror}") from None
    if pid == 0:  # the child: never returns into the caller
        try:
            _detach(parent, write_fd)
            _child(write_fd, env, names, context, cpu_seconds, memory_mb, output_mb)
        finally:
            os._exit(0)
    os.close(write_fd)
    first = _shown(env, next(iter(names.values()), ""))
    # Wall time: CPU time plus room for a machine busy with other work.
    deadline = time.monotonic() + 3 * cpu_seconds + 10
    limit = output_mb * 1024 * 1024 + 64 * 1024 + _HEADER.size * (len(names) + 2) * 2
    buffer = bytearray()
    error = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                error = f"{first}: the template takes more than {3 * cpu_seconds + 10:g} s to render"
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if not ready:
                continue
            data = os.read(read_fd, 1024 * 1024)
            if not data:
                break
            buffer += data
            if len(buffer) > limit:
                error = f"{first}: the rendered output is larger than {output_mb} MB"
                break
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # an interrupt of the caller ends the render too
        raise
    finally:
        os.close(read_fd)
        if error is not None:
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    texts, done, current = _frames(bytes(buffer))
    if error is None and isinstance(done, str):
        error = done
    if error is None and done is not True:
        error = _died(_shown(env, names[current]) if current in names else first, status, usage, cpu_seconds,
                      memory_mb)
    if error is not None:
        raise ReportTemplateError(error)
    return texts


def _frames(data: bytes) -> tuple[dict[str, str], bool | str, str]:
    """The child's frames: the texts, True when it finished (its error text when it
    failed, False when it stopped short), and the output it was rendering last."""
    texts: dict[str, list[bytes]] = {}
    current = ""
    at = 0
    while at + _HEADER.size <= len(data):
        kind, size = _HEADER.unpack_from(data, at)
        payload = data[at + _HEADER.size:at + _HEADER.size + size]
        at += _HEADER.size + size
        if kind == b"F":
            current = payload.decode()
            texts[current] = []
        elif kind == b"C":
            texts[current].append(payload)
        elif kind == b"D":
            return {k: b"".join(v).decode() for k, v in texts.items()}, True, current
        elif kind == b"E":
            return {}, payload.decode("utf-8", "replace"), current
    return {}, False, current


def _died(where: str, status: int, usage: Any, cpu_seconds: float, memory_mb: int) -> str:
    """Why a child ended without a word: a bound the kernel enforced, or a crash."""
    spent = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL) and spent >= cpu_seconds:
            return f"{where}: the template takes more than {cpu_seconds:g} s of CPU time to render"
        if sig == signal.SIGKILL:
            return f"{where}: the render was killed (more than {memory_mb} MB of memory?)"
        return f"{where}: the render ended with signal {signal.Signals(sig).name}"
    return f"{where}: the render ended early (exit status {os.waitstatus_to_exitcode(status)})"
