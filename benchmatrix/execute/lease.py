"""The controller's lease on a running batch: a thread renews it while the batch runs and keeps
what the runner reported finished for bmx status.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.errors import (
    BenchmatrixError,
)
from benchmatrix.execute import wave
from benchmatrix.execute.ansible import run_playbook
from benchmatrix.files import atomic_write
from benchmatrix.layout import exp_dir_of
from benchmatrix.results.campaign import campaign_id
from benchmatrix.results.records import iso
from benchmatrix.spec.config import project_config
from benchmatrix.spec.load import Spec

#: Renewal calls of one batch that may run at once: one that takes long (a busy
#: controller, a slow connection) does not hold back the next, which starts on time
#: beside it; more would only add Ansible processes to a controller already slow.
MAX_IN_FLIGHT = 2

#: Most seconds between two renewals: each also reads what the runner finished, and
#: ``bmx run`` prints a progress line every 20 s (supervise.TICK_SECONDS) that should
#: count runs finished on the host a moment ago, not a quarter lease (75 s) ago.
PROGRESS_READ_SECONDS = 20.0


#: Seconds from the runner's start to the first renewal (and progress read), at most: a
#: batch of 20-35 s ended before a first read one interval in brought any count.
FIRST_READ_SECONDS = 10.0


def first_renewal(lease_seconds: float) -> float:
    """Seconds from the runner's start to the first renewal: :data:`FIRST_READ_SECONDS`,
    or the :func:`renewal_interval` when that is shorter."""
    return min(renewal_interval(lease_seconds), FIRST_READ_SECONDS)


def renewal_interval(lease_seconds: float) -> float:
    """Seconds between renewals: a quarter lease, at most :data:`PROGRESS_READ_SECONDS`."""
    return min(lease_seconds / 4, PROGRESS_READ_SECONDS)


def renewal_timeout(seconds: float) -> int:
    """Seconds a renewal call may take (ansible-runner's timeout, whole seconds): one
    lease; a call older than that can no longer save it, the later ones take over."""
    return max(1, math.ceil(seconds))


def _in_thread(renew: Callable[[], None]) -> Callable[[], bool]:
    thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
    thread.start()
    return thread.is_alive


# shape: the renewal and its interval, then the waiting, clock and start it uses (tests give fakes)
def renew_on_time(renew: Callable[[], None], interval: float, stop: Any, *,
                  clock: Callable[[], float] = time.monotonic,
                  start: Callable[[Callable[[], None]], Callable[[], bool]] = _in_thread,
                  first: float | None = None, align: bool = False) -> int:
    """Start ``renew`` at ``t0 + first + k * interval`` (k = 0, 1, ...; ``first`` defaults
    to ``interval``) until ``stop`` is set.

    The due times are fixed on the monotonic clock as the loop starts, so neither a
    call's own duration nor a late wake-up shifts the later ones (waiting an interval
    after each call renewed every interval plus the call's time: calls of a few seconds
    on a busy controller let a 20 s lease run out). Each call runs beside the schedule
    (``start``: a thread; it returns whether the call still runs), so a slow or hung one
    does not delay the next; with :data:`MAX_IN_FLIGHT` calls running, a due time is
    skipped. A loop that wakes up late (a suspended controller) renews once at once, then
    at the next due time: no burst of the missed ones.

    Args:
        renew: One renewal; it handles its own errors.
        interval: Seconds between due times (a quarter lease).
        stop: Its ``wait(timeout)`` returns True once the batch ended (a ``threading.Event``).
        clock: The monotonic clock.
        start: Starts a call; returns a function that says whether it still runs.
        first: Seconds to the first due time (the first progress read comes sooner
            than the interval); None: one interval.
        align: After the first due time, the due times are the multiples of ``interval``
            on ``clock`` (the machine's monotonic clock: the same for every batch job), so
            the renewals of batches started seconds apart come together and ``bmx run``'s
            wave broker makes them one call; the next is at most an interval away.

    Returns:
        The number of calls started.
    """
    base = clock() + (interval if first is None else first) - interval  # due times: base + k * interval
    k = 1
    running: list[Callable[[], bool]] = []
    started = 0
    while not stop.wait(max(0.0, base + k * interval - clock())):
        running = [alive for alive in running if alive()]
        if len(running) < MAX_IN_FLIGHT:
            running.append(start(renew))
            started += 1
        if align:  # from the first due time on, onto the shared grid
            base, k, align = math.floor((base + k * interval) / interval) * interval, 0, False
        k = max(k + 1, math.floor((clock() - base) / interval) + 1)
    return started


@contextmanager
def lease(spec: Spec, project_dir: Path, host: str, batch: str) -> Iterator[threading.Event]:
    """Renew the controller's lease on the batch while it runs on ``host``.

    The batch runner stops before its next run once the lease is older than
    ``runner_lease_seconds``: when the whole controller is gone (machine lost, every
    process killed), nothing is left measuring on the host for hours. A renewal (a
    small playbook that also reads the runner's progress) is due every quarter lease,
    or every :data:`PROGRESS_READ_SECONDS` when that is shorter (:func:`renewal_interval`),
    on a fixed schedule whatever the calls take (:func:`renew_on_time`); a failed
    renewal is retried at the next due time. The
    runner takes the lease itself as it starts (the manifest's ``lease_seconds``), so
    the first renewal comes :func:`first_renewal` (10 s) after the runner's start, the
    next ones an interval apart: a batch shorter than that costs no second
    ansible-playbook at all (on many hosts at once, half the
    batches' Ansible processes, memory and CPU), and neither does a call's wait for a
    start slot nor the host's preparation in its first batch.

    Yields:
        The event to set when the runner starts (``run_playbook``'s ``on_started``);
        until it is set, nothing is renewed.
    """
    started = threading.Event()
    seconds = project_config(project_dir).runner_lease_seconds
    if not seconds:
        yield started
        return
    exp = exp_dir_of(project_dir, spec)
    stop = threading.Event()
    saved = threading.Lock()
    newest = [0.0]  # the start of the call whose progress was saved last

    interval = renewal_interval(seconds)

    def renew() -> None:
        began = time.monotonic()
        call = dict(project_dir=Path(project_dir) / "playbooks", inventory=spec.inventory_path(project_dir),
                    host=host, extravars={"bmx_host": host, "bmx_experiment": spec.name,
                                          "bmx_campaign": campaign_id(exp), "batch_runner_batch": batch,
                                          "batch_runner_lease_seconds": int(max(seconds, 1))},
                    log=layout.ansible_log(exp, f"lease-{batch}"), timeout=renewal_timeout(seconds))
        try:
            # Under bmx run, the renewals of the hosts whose batches run together are one call.
            # A renewal still waiting for others when the batch ends is withdrawn (stop).
            result = wave.renew(**call, max_wait=min(wave.RENEW_WINDOW_S, interval / 4), withdraw=stop) or \
                run_playbook("renew_lease.yml", **call)
            with saved:
                # The batch's own results may be in already; a slow call's older reading
                # never replaces a newer one.
                if not stop.is_set() and began > newest[0]:
                    newest[0] = began
                    save_progress(exp, batch, host, result.payload("bmx_progress"))
        except (BenchmatrixError, OSError):
            pass  # e.g. the batch's directory is not made yet: the next renewal comes soon

    def schedule() -> None:
        started.wait()  # also set as the batch ends, so a runner that never started frees the thread
        # Under bmx run, renewals on the shared grid reach the broker together: one call.
        renew_on_time(renew, interval, stop, first=first_renewal(seconds), align=bool(wave.broker_path()))

    thread = threading.Thread(target=schedule, name=f"lease-{batch}", daemon=True)
    thread.start()
    try:
        yield started
    finally:
        stop.set()
        started.set()


def save_progress(exp: Path, batch: str, host: str, slurped: dict[str, Any] | None) -> None:
    """Keep what the runner reported finished (``batches/BATCH.progress`` on the host) as
    ``results/NAME/batches/BATCH.progress.json``, for ``bmx status`` while the batch runs.

    The file goes when the batch's marker is written (its records are then in place).
    """
    import base64

    if not slurped or not slurped.get("content"):
        return
    finished = []
    for line in base64.b64decode(slurped["content"]).decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line the runner is still writing
        if isinstance(item, dict) and "run_id" in item:
            finished.append(item)
    atomic_write(layout.progress_path(exp, batch),
                 json.dumps({"batch": batch, "host": host, "read_at": iso(time.time()), "finished": finished}) + "\n")
