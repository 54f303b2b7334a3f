"""The report's plots drawn in a second process while collect computes the tables.

matplotlib's import (about 0.4 s) and the drawing (about 0.15 s a figure) were most of the
collect job's time on a small campaign, after the tables (issue 34, item 4: "plots drawn off
the critical path"). The collect job starts a :class:`PlotWorker` once pandas is imported: a
forked process that imports matplotlib while its parent reads the records and computes the
tables; the report then hands it the plot jobs (:class:`benchmatrix.report.plots.PlotJob`)
and builds the rest of its context while they are drawn. The plots are the same bytes as
drawn in the job's own process (the same functions on the same values; SVG ids are salted,
not random). A worker that cannot start or dies leaves the drawing to the job's own process:
the report never depends on it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from benchmatrix.report import plots

#: Set to ``0`` to draw every plot in the job's own process (a debugger, a profile).
WORKER_ENV = "BMX_PLOT_WORKER"
#: Above this many runs the plots are drawn in the job's own process: sending the runs
#: to the worker would cost more than matplotlib's import saves.
MAX_WORKER_RUNS = 50_000

#: A plan.csv above this size starts no worker: its rows (about 150-300 bytes each) are
#: beyond :data:`MAX_WORKER_RUNS`; known before the records are read.
MAX_PLAN_BYTES = MAX_WORKER_RUNS * 150

#: prctl(2): the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1

#: What :meth:`PlotWorker.submit` and :func:`in_process` return: called, the drawn plots
#: and notes of each job, in the jobs' order.
Drawing = Callable[[], list[tuple[list[plots.Plot], list[str]]]]


def _ready(parent: int) -> None:
    """The worker's initializer: it ends with the job, and matplotlib is imported and set up."""
    # A job killed outright (SIGKILL) would leave its worker waiting on the task queue for
    # ever: the kernel ends it with its parent instead. Ctrl-C is the job's to handle; the
    # job then stops the worker (no second traceback in its log).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # no prctl: the job's normal end still stops the worker
    if os.getppid() != parent:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One small plot drawn while the job computes the tables: the first figure's one-time
    # costs (the SVG backend's import, the font's load, the text layout caches) are paid
    # here rather than by the report's first plot.
    fig, ax = plots._subplots(figsize=(1, 1))  # also sets the report's rcParams
    ax.plot([0, 1], [0, 1], marker="o", label="x")
    ax.set_title("x")
    ax.legend(loc="best")
    plots._svg(fig)


def _draw_split(jobs: Sequence[plots.PlotJob]) -> list[tuple[list[plots.Plot], list[str]]]:
    """``jobs`` drawn by this worker and a fork of it, every other job each (the worker's one task).

    The fork shares the worker's imported matplotlib (no second import); the two draw on
    the controller's two cores while the job waits. A fork that fails or dies leaves its
    jobs to this process.
    """
    mine, theirs = list(jobs[0::2]), list(jobs[1::2])
    pid = -1
    if theirs:
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
        if pid == 0:  # the fork: draw its share, send it, leave without the worker's cleanup
            os.close(read)
            code = 1
            try:
                with os.fdopen(write, "wb") as out:
                    pickle.dump([plots.draw(job) for job in theirs], out)
                code = 0
            finally:
                os._exit(code)
        if pid > 0:
            os.close(write)
    drawn = [plots.draw(job) for job in mine]
    other: list[tuple[list[plots.Plot], list[str]]] | None = None
    if pid > 0:
        with os.fdopen(read, "rb") as got:
            data = got.read()
        _, status = os.waitpid(pid, 0)
        if status == 0:
            other = pickle.loads(data)  # noqa: S301 (our own fork's bytes)
    if other is None:
        other = [plots.draw(job) for job in theirs]
    out: list[tuple[list[plots.Plot], list[str]]] = [None] * len(jobs)  # type: ignore[list-item]
    out[0::2], out[1::2] = drawn, other
    return out


def in_process(jobs: Sequence[plots.PlotJob]) -> Drawing:
    """The jobs drawn here when the result is asked for (no worker)."""
    return lambda: [plots.draw(job) for job in jobs]


class PlotWorker:
    """One forked process that has imported matplotlib, drawing :class:`~benchmatrix.report.plots.PlotJob`.

    :meth:`start` returns None where a worker is not worth it or not possible (no
    ``fork``, ``BMX_PLOT_WORKER=0``, a single CPU, a large plan); :meth:`close` stops it.
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork"), initializer=_ready,
            initargs=(os.getpid(),))
        # A fork-context pool forks its worker at the first submit: now, before the tables.
        self._pool.submit(int)

    @classmethod
    def start(cls, plan_bytes: int = 0) -> PlotWorker | None:
        """A running worker, or None (drawing stays in this process).

        Args:
            plan_bytes: The size of the campaign's plan.csv: one larger than
                :data:`MAX_PLAN_BYTES` holds more runs than a worker is for (no import for nothing).
        """
        if os.environ.get(WORKER_ENV, "1") == "0" or (os.cpu_count() or 1) < 2 or plan_bytes > MAX_PLAN_BYTES:
            return None
        if "fork" not in multiprocessing.get_all_start_methods():
            return None
        try:
            return cls()
        except OSError:  # no process to spare (a limit on processes, no memory): draw here
            return None

    def submit(self, jobs: Sequence[plots.PlotJob], runs: int = 0) -> Drawing:
        """Hand ``jobs`` to the worker; the returned callable waits for them.

        Args:
            jobs: The plot jobs, in the report's order.
            runs: How many runs the campaign has: above :data:`MAX_WORKER_RUNS` the jobs
                are drawn here (their arguments would be copied to the worker).
        """
        if self._pool is None or runs > MAX_WORKER_RUNS or not jobs:
            self.close()
            return in_process(jobs)
        try:
            future: Future[Any] = self._pool.submit(_draw_split, list(jobs))
        except (BrokenProcessPool, RuntimeError):
            self.close()
            return in_process(jobs)

        def wait() -> list[tuple[list[plots.Plot], list[str]]]:
            try:
                return future.result()
            except Exception:  # noqa: BLE001 (drawn again here: a drawing error is raised from here then)
                # The worker died (killed, out of memory), a value did not pickle, or a plot
                # function failed: the same jobs, drawn in this process.
                return in_process(jobs)()
            finally:
                self.close()

        return wait

    def close(self) -> None:
        """Stop the worker (idempotent); a job still queued is cancelled."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
