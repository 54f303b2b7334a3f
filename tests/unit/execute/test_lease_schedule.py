"""Lease renewals on time (issue 35, item 7): they came every quarter lease *plus* the
renewal call's own time, so on a busy controller (calls of several seconds) a 20 s lease
ran out and the runner stopped a live campaign. The schedule is fixed against the
monotonic clock, and a call that takes long does not hold back the next one.

The schedule is driven by a fake clock (no sleeps measured, no wall-clock asserts); the
last test runs the real lease thread with a renewal that does not return."""

from __future__ import annotations

import threading
import time

import pytest
from test_lease_clock import lease_project

from benchmatrix.execute import lease as lease_mod

Q = 5.0  # a quarter of a 20 s lease


class FakeTime:
    """A monotonic clock, a stop event whose wait advances it (waking up ``late``
    seconds after its timeout, as a loaded machine does), and renewal calls that
    take ``seconds`` each, started beside the schedule."""

    def __init__(self, until: float, seconds: float, late: float = 0.0):
        self.now = 0.0
        self.until = until
        self.seconds = seconds
        self.late = late
        self.starts: list[float] = []
        self.most_in_flight = 0
        self._ends: list[float] = []
        self.jump_at: tuple[float, float] | None = None  # (when, how far): a suspended controller

    def clock(self) -> float:
        return self.now

    def wait(self, timeout: float) -> bool:
        if self.now + timeout >= self.until:
            self.now = self.until
            return True
        self.now += timeout + self.late
        if self.jump_at and self.now >= self.jump_at[0]:
            self.now += self.jump_at[1]
            self.jump_at = None
        return False

    def start(self, renew):
        renew()
        began = self.now
        self.starts.append(began)
        self._ends.append(began + self.seconds)
        self.most_in_flight = max(self.most_in_flight, sum(end > self.now for end in self._ends))
        return lambda: self.now < began + self.seconds


def _run(fake: FakeTime, first: float | None = None) -> int:
    stop = type("Stop", (), {"wait": staticmethod(fake.wait)})()
    return lease_mod.renew_on_time(lambda: None, Q, stop, clock=fake.clock, start=fake.start, first=first)


@pytest.mark.parametrize("seconds", [0.1, 3.0, 4.9])
def test_renewals_keep_the_schedule_whatever_a_call_takes(seconds):
    fake = FakeTime(until=100 * Q + 1, seconds=seconds, late=0.05)
    assert _run(fake) == 100
    # Each start is at its due time, at most one late wake-up after it: nothing adds up.
    for k, began in enumerate(fake.starts, start=1):
        assert k * Q <= began <= k * Q + 0.05 + 1e-9, (k, began)


def test_the_first_renewal_may_come_sooner_then_the_interval_holds():
    """The first progress read comes before a whole interval (lease.first_renewal); the
    same two-in-flight bound covers it and the later ones."""
    fake = FakeTime(until=4.5 * Q + 1, seconds=1.5 * Q)
    assert _run(fake, first=Q / 2) == 5
    assert fake.starts == [Q / 2 + k * Q for k in range(5)]
    assert fake.most_in_flight == 2


def test_a_call_longer_than_the_interval_does_not_hold_back_the_next():
    """Calls of 1.5 quarter leases (a loaded controller): the next renewal starts on
    time beside the one still running; never more than two at once."""
    fake = FakeTime(until=40 * Q + 1, seconds=1.5 * Q)
    assert _run(fake) == 40
    assert fake.starts == [k * Q for k in range(1, 41)]
    assert fake.most_in_flight == 2


def test_calls_that_hang_are_never_more_than_two():
    fake = FakeTime(until=40 * Q + 1, seconds=4 * Q)  # each runs until its timeout (the lease)
    started = _run(fake)
    assert fake.most_in_flight == 2
    # A renewal is due every quarter lease; with two in flight the due time is skipped,
    # so each call that ends is followed by a new one at the next due time.
    assert started >= 40 // 3
    assert all(abs(s / Q - round(s / Q)) < 1e-9 for s in fake.starts), fake.starts


def test_a_late_loop_renews_at_once_then_keeps_the_schedule():
    """The controller was suspended for 3.5 quarter leases: one renewal as it wakes,
    not a burst of the missed ones, then the grid again."""
    fake = FakeTime(until=12 * Q + 1, seconds=0.5)
    fake.jump_at = (2 * Q, 3.5 * Q)
    _run(fake)
    assert fake.starts == [Q, 5.5 * Q, 6 * Q, 7 * Q, 8 * Q, 9 * Q, 10 * Q, 11 * Q, 12 * Q]


def test_a_renewal_call_may_take_up_to_a_lease():
    """A call older than a lease can no longer save it: the next ones take over."""
    assert lease_mod.renewal_timeout(20) == 20
    assert lease_mod.renewal_timeout(300) == 300
    assert lease_mod.renewal_timeout(0.2) == 1  # ansible-runner counts whole seconds


def test_a_renewal_that_does_not_return_does_not_stop_the_next(tmp_path, monkeypatch):
    """The real lease thread: the first renewal call hangs (a stalled SSH connection);
    the next due renewal is made beside it instead of waiting for it."""
    spec = lease_project(tmp_path)  # a renewal due every 0.05 s
    calls: list[int] = []
    release = threading.Event()

    def renewal(playbook, **kwargs):
        calls.append(kwargs["timeout"])
        if len(calls) == 1:
            release.wait(60)  # hangs until the test ends
        raise lease_mod.BenchmatrixError("no host here")

    monkeypatch.setattr(lease_mod, "run_playbook", renewal)
    try:
        with lease_mod.lease(spec, tmp_path, "h1", "h1-b0001-aa") as runner_started:
            runner_started.set()
            deadline = time.monotonic() + 30  # a bound on the test, not a measurement
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(calls) >= 2, "the hung renewal held back the next one"
    finally:
        release.set()
    assert calls[0] == 1


def test_aligned_renewals_of_batches_started_apart_coincide_after_the_first():
    """Under bmx run the renewals reaching the wave broker together are one call: batches whose
    runners started seconds apart renew, after their first renewal, at the same multiples
    of the interval on the machine's monotonic clock (one call a period, not one per
    start), never more than an interval apart."""
    starts = []
    for t0 in (0.0, 1.3, 3.7):
        fake = FakeTime(until=20 * Q + 1, seconds=0.1)
        fake.now = t0
        stop = type("Stop", (), {"wait": staticmethod(fake.wait)})()
        lease_mod.renew_on_time(lambda: None, Q, stop, clock=fake.clock, start=fake.start, first=Q / 2,
                                align=True)
        assert fake.starts[0] == t0 + Q / 2, "the first progress read is not delayed"
        gaps = [b - a for a, b in zip(fake.starts, fake.starts[1:])]
        assert all(0 < g <= Q + 1e-9 for g in gaps), gaps
        starts.append(fake.starts[1:])
    later = [set(round(s, 6) for s in ss if s > 2 * Q) for ss in starts]
    assert later[0] == later[1] == later[2] and all(round(s / Q, 6).is_integer() for s in later[0])
