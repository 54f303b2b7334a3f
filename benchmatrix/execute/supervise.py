"""Supervision of the Snakemake that executes a campaign for ``bmx run`` and ``bmx rerun``.

:func:`execute` starts Snakemake in its own process group, holding the experiment
lock it was given, forwards Ctrl-C (and SIGTERM) to it as one SIGINT, prints
progress with an ETA from its stream, stops the campaign cleanly on a full disk,
repeats the pass while interrupted runs became a new re-run round, and maps the
outcome to bmx's exit status (0, 1 for failed runs or jobs, 130 after an interrupt).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmatrix import layout
from benchmatrix.errors import BenchmatrixError
from benchmatrix.names import printable

if TYPE_CHECKING:
    from benchmatrix.spec.load import Spec


def _spec_arg(spec: str, proj: Path) -> str:
    """The spec path as Snakemake's rules see it (relative to the project when inside it)."""
    p = Path(spec).resolve()
    try:
        return str(p.relative_to(proj))
    except ValueError:
        return str(p)


_PROGRESS = re.compile(r"^(\d+) of (\d+) steps \((\d+)%\) done")
_ERROR_RULE = re.compile(r"^Error in rule (\w+):")
_LOG_LINE = re.compile(r"^\s+log: (\S+)")


def _snakemake_child_setup() -> None:
    """In the Snakemake child, before exec: take SIGINT by default again.

    A bmx started with SIGINT ignored (``nohup bmx run ... &``, a non-interactive
    shell's background job) would hand that on, and Snakemake could then never be
    stopped by the SIGINT that bmx forwards or that the workflow sends its own
    group when bmx dies (benchmatrix.execute.snakefile.die_with_bmx). That watcher replaces
    PR_SET_PDEATHSIG, which only signalled Snakemake itself: Snakemake then waited
    for its in-flight batch job, whose runner went on measuring.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def fmt_hms(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def say(text: str, file: Any = None, flush: bool = False) -> None:
    """Print one line of ``bmx run``/``rerun`` with control and bidirectional characters
    escaped (``\\x1b``, ``\\u202e``): reasons quote tools' output and paths, and raw they
    would run as terminal commands or reorder the line."""
    print(printable(text), file=file if file is not None else sys.stdout, flush=flush)


def job_failed_line(rule: str, msg: str, log_file: str) -> str:
    """``bmx: job RULE failed: MSG (log: FILE)``, escaped as :func:`say` prints."""
    return printable(f"bmx: job {rule} failed: {msg} (log: {log_file})")


def done_lines(status: dict[str, Any], elapsed_s: float, spec_arg: str) -> tuple[list[str], list[str]]:
    """What ``bmx run`` prints when its passes end: (the summary for stdout, the failed
    runs and how to retry them for stderr), escaped as :func:`say` prints.

    Args:
        status: :func:`benchmatrix.results.status.campaign_status` of the experiment.
        elapsed_s: Seconds since bmx run started.
        spec_arg: The spec as the user named it.
    """
    t = status["totals"]
    bad = sum(t[k] for k in ("failed", "timeout", "unreachable", "invalid"))
    out = [f"bmx: done in {fmt_hms(elapsed_s)}: {t['ok']} of {t['planned']} runs ok, {bad} failed, "
           f"{t['pending']} pending"]
    from benchmatrix.results.status import group_failures

    # A reason shared by many runs (a missing program fails every run alike) is said once.
    err = []
    for g in group_failures(status["failed"])[:10]:
        f, n = g["first"], g["count"]
        who = f"{n} runs, first {f['run_id']}" if n > 1 else f["run_id"]
        err.append(f"bmx: {f['status']}: {who} (attempt {f['attempt']}): {f['reason']}")
    if bad:
        err.append(f"bmx: details with 'bmx status {spec_arg}'; retry with 'bmx rerun {spec_arg} --failed'")
    return [printable(x) for x in out], [printable(x) for x in err]


def _disk_hint(exp: Path) -> str:
    """What to say about a job that left no message: often a full disk ate its log."""
    import shutil

    try:
        free = shutil.disk_usage(exp).free
    except OSError:
        return "no message"
    if free < 4 << 20:
        return f"no message; only {free / 2**20:.1f} MiB free on the file system of {exp}"
    return "no message"


def _last_error_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if ln.startswith("benchmatrix:"):
            return ln
    return lines[-1] if lines else ""


def _collected_early(exp: Path) -> bool:
    """runs.csv exists although a batch of plan.csv has not finished.

    ``bmx report`` after an interrupt writes runs.csv; Snakemake does not re-create a
    missing intermediate file (a batch marker) of an up-to-date output, so the next
    ``bmx run`` would see nothing to do and leave the rest of the campaign pending.
    """
    from benchmatrix.plan.design import batches

    if not (exp / layout.RUNS).is_file() or not (exp / layout.PLAN).is_file():
        return False
    order, _ = batches(exp / layout.PLAN)
    return any(not (exp / layout.BATCHES_DIR / f"{b}.done").is_file() for b in order)


def _plan_outdated(exp: Path, spec_path: Path) -> bool:
    """plan.csv is older than the spec or reruns.csv.

    Snakemake re-plans when the plan rule's params (the digest of the spec and of
    reruns.csv) change, but it knows them only for a plan.csv it wrote itself: after
    ``bmx plan`` (which writes plan.csv without Snakemake) a ``bmx rerun`` or an edited
    spec was never planned, and the next ``bmx run`` ran nothing new.
    """
    try:
        planned = (exp / layout.PLAN).stat().st_mtime_ns
    except OSError:
        return False
    for path in (spec_path, exp / layout.RERUNS):
        try:
            if path.stat().st_mtime_ns > planned:
                return True
        except OSError:
            pass
    return False


#: How the reason of a doomed campaign's stop starts (:class:`DoomWatch`).
DOOMED = "doomed: "

#: Seconds between the progress lines printed while Snakemake runs (it prints one itself
#: only when a job ends, and one batch may take many minutes): on a fixed schedule, well
#: inside the 30 s the README promises even on a loaded controller.
TICK_SECONDS = 20.0
#: Seconds between looks, between two ticks, for runs finished since the last line
#: (:func:`progress_poll`: local files only).
POLL_SECONDS = 2.0

#: What ``bmx run`` says Snakemake is doing when no run is left to count, per rule.
PHASES = {"plan": "planning", "run_batch": "fetching the last results", "restore_host": "restoring the hosts",
          "collect": "collecting the results and writing the report"}
_JOB_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):")
_JOB_END = re.compile(r"^Finished jobid: \d+ \(Rule: (\w+)\)|^Error in rule (\w+):")


class RunProgress:
    """Progress counted in runs, not Snakemake jobs: plan.csv's attempts against the
    records written and the runs the hosts' runners reported finished, an ETA and, once
    no run is left to count, what Snakemake is doing.

    The ETA (:func:`benchmatrix.plan.wall_time.seconds_left`) prices the runs left at
    each host's own pace in this pass, before that at the estimates of earlier
    campaigns, plus the batches not started and the campaign's tail; without a model
    (or a run's time unknown) it falls back on the rate at which this pass finishes
    runs, and before its first run there is none.
    """

    def __init__(self, exp: Path, t0: float, spec: Spec | None = None, model: Any = None,
                 index: RecordIndex | None = None):
        self.exp = exp
        self.index = index or RecordIndex(exp)  # the records written so far, looked at incrementally
        self.t0 = t0  # bmx run's start: elapsed counts from it
        self.start = time.monotonic()  # this pass's start: the rate counts from it
        self.spec, self.model = spec, model
        self.before = self.records()  # written by earlier passes and campaigns' resumes
        self._planned: tuple[float, list[Any]] | None = None  # (plan.csv's mtime, its runs)
        self.on_hosts: set[tuple[str, int]] = set()  # finished on the hosts, as last read
        self.pace: dict[str, float] = {}  # host -> seconds a run in this pass
        self.jobs_running: dict[str, int] = {}
        self.jobs_seen = False
        self.said_phase = ""
        # (runs finished, ETA, when): with nothing new known, the ETA counts down from it.
        self._eta_base: tuple[int, float, float] | None = None
        self.said_finished: int | None = None  # runs finished in the last line said

    def job_started(self, rule: str) -> None:
        """Snakemake started a job of ``rule``."""
        self.jobs_seen = True
        self.jobs_running[rule] = self.jobs_running.get(rule, 0) + 1

    def job_ended(self, rule: str) -> None:
        """A job of ``rule`` finished or failed."""
        self.jobs_running[rule] = max(self.jobs_running.get(rule, 0) - 1, 0)

    def recorded(self) -> set[tuple[str, int]]:
        """(run id, attempt) of the run records written so far."""
        return set(self.index.look())

    def records(self) -> int:
        """The run records written so far."""
        return len(self.recorded())

    def plan_runs(self) -> list[Any] | None:
        """plan.csv's runs (read again only when the plan changed), None before a plan."""
        from benchmatrix.plan.design import read_plan

        path = self.exp / layout.PLAN
        try:
            mtime = path.stat().st_mtime
            if self._planned is None or self._planned[0] != mtime:
                self._planned = (mtime, read_plan(path)[0])
        except (OSError, ValueError, IndexError, StopIteration):
            return None
        return self._planned[1]

    def planned(self) -> int | None:
        """plan.csv's attempts, None before a plan."""
        runs = self.plan_runs()
        return None if runs is None else len(runs)

    def phase(self, all_done: bool) -> str:
        """What Snakemake is doing, said when no run is left to count ("" while batches run)."""
        rules = [rule for rule, n in self.jobs_running.items() if n > 0]
        if "run_batch" in rules and not all_done:
            return ""
        names = [text for rule, text in PHASES.items() if rule in rules]
        if names:
            return " and ".join(names)
        return "" if self.jobs_seen else "starting"

    def phase_line(self, now: float) -> str | None:
        """The line to print as a job starts: when no run is left to count, the new phase
        is said at once (restoring, collecting, the report), not at the next tick; None
        when the phase said last has not changed, or runs are still being counted."""
        runs = self.plan_runs()
        finished = self.recorded() | self.on_hosts
        all_done = runs is not None and all((r.run_id, r.attempt) in finished for r in runs)
        phase = self.phase(all_done)
        if not phase or phase == self.said_phase:
            return None
        self.said_phase = phase
        return self.line(now)

    def line(self, now: float, jobs: tuple[int, int] | None = None) -> str:
        """``bmx: R/P runs done[, M more finished on the hosts][, J/K jobs], elapsed E[, ETA T][; PHASE]``."""
        recorded = self.recorded()
        on_hosts = self.on_hosts - recorded
        runs = self.plan_runs()
        planned = len(runs) if runs is not None else None
        done = f"{len(recorded)}/{planned} runs done" if planned else f"{len(recorded)} run records"
        parts = [done]
        if on_hosts:
            parts.append(f"{len(on_hosts)} more finished on the hosts")
        if jobs:
            parts.append(f"{jobs[0]}/{jobs[1]} jobs")
        parts.append(f"elapsed {fmt_hms(now - self.t0)}")
        finished = recorded | on_hosts
        left = [r for r in runs if (r.run_id, r.attempt) not in finished] if runs is not None else None
        eta = None
        if left:
            eta = self._eta_left(runs, left, finished)
            if eta is None:
                eta = self.eta(now, len(finished), planned)
        if eta is not None:
            parts.append(f"ETA {fmt_hms(self._counted_down(eta, len(finished), now))}")
        self.said_finished = len(finished)
        phase = self.phase(runs is not None and not left)
        return "bmx: " + ", ".join(parts) + (f"; {phase}" if phase else "")

    def _counted_down(self, eta: float, finished: int, now: float) -> float:
        """``eta`` while a run finished since the last one priced; else that one less the
        time since (the same estimate said again and again read as a clock that stopped)."""
        base = self._eta_base
        if base is not None and base[0] == finished:
            return max(base[1] - (now - base[2]), 0.0)
        self._eta_base = (finished, eta, now)
        return eta

    def _eta_left(self, runs: list[Any], left: list[Any], finished: set[tuple[str, int]]) -> float | None:
        """Seconds left by the model (None without one, or a run's time unknown)."""
        if self.model is None or self.spec is None:
            return None
        from benchmatrix.plan.wall_time import seconds_left

        started = {r.batch for r in runs if (r.run_id, r.attempt) in finished}
        return seconds_left(self.spec, left, self.model, self.pace, started)

    def eta(self, now: float, finished: int, planned: int | None) -> float | None:
        """Seconds left at the rate at which this pass finishes runs; None before its
        first run (the jobs' rate said "3 s" at every start: the plan job is quick)."""
        elapsed = now - self.start
        new = finished - self.before
        if planned and new > 0 and elapsed > 0:
            return max(planned - finished, 0) * elapsed / new
        return None


def progress_tick(progress: RunProgress, now: float) -> str:
    """The line printed every :data:`TICK_SECONDS`, changed or not.

    Reads the runs the hosts' runners reported finished (``batches/BATCH.progress.json``,
    read with each lease renewal) and learns each host's pace from them.
    """
    _read_hosts(progress)
    return progress.line(now)


def progress_poll(progress: RunProgress, now: float) -> str | None:
    """The line to print between two ticks (every :data:`POLL_SECONDS`), or None: only
    when more runs are finished (on the hosts or recorded) than the last line said, so
    a short batch's count shows when its lease renewal brings it, not a tick later."""
    _read_hosts(progress)
    finished = progress.recorded() | progress.on_hosts
    if progress.said_finished is None or len(finished) <= progress.said_finished:
        return None
    return progress.line(now)


def _read_hosts(progress: RunProgress) -> None:
    """The runs the hosts' runners reported finished, and each host's pace from them."""
    from benchmatrix.plan.wall_time import pace_of
    from benchmatrix.results.status import host_progress

    items = host_progress(progress.exp)
    progress.on_hosts = {(str(i["run_id"]), int(i["attempt"])) for i in items}
    progress.pace.update(pace_of((str(i.get("host")), str(i.get("ended_at"))) for i in items))


#: The flag of ``bmx run`` and ``bmx rerun`` that goes on with a doomed campaign.
KEEP_GOING_FLAG = "--keep-going-on-failures"


class DoomWatch:
    """Watches the attempts a pass finishes for a doomed campaign
    (:func:`benchmatrix.results.status.doomed_reason`): the records written since the
    pass started, each read once."""

    def __init__(self, exp: Path, index: RecordIndex | None = None):
        self.index = index or RecordIndex(exp)
        self.before = set(self._paths())
        self.seen: dict[Path, dict[str, Any]] = {}
        self.cleared = False  # an ok attempt was seen: the pass is not doomed, never read again

    def _paths(self) -> list[Path]:
        return list(self.index.look().values())

    def reason(self) -> str | None:
        """The reason that dooms the pass so far, or None."""
        import json

        from benchmatrix.results.status import doomed_reason

        if self.cleared:
            return None
        for path in self._paths():
            if path in self.before or path in self.seen:
                continue
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being written: read with the next look
            if isinstance(rec, dict):
                self.seen[path] = {k: rec.get(k) for k in ("cell_id", "status", "reason")}
        if any(a["status"] == "ok" for a in self.seen.values()):
            self.cleared = True
            return None
        return doomed_reason(sorted(self.seen.values(), key=lambda a: str(a["cell_id"])))

    def line(self, reason: str, spec_arg: str) -> str:
        """The one line ``bmx run`` prints when it stops a doomed campaign."""
        from benchmatrix.results.status import group_failures

        failed = [a for a in self.seen.values() if a["status"] != "interrupted"]
        cells = len({a["cell_id"] for a in failed})
        n = group_failures(failed)[0]["count"] if failed else 0
        return (f"bmx: the first {n} runs ({cells} cells) all failed the same way: {reason}; campaign stopped, "
                f"finished runs kept; fix it and resume with 'bmx run {spec_arg}', or go on anyway with "
                f"'bmx run {spec_arg} {KEEP_GOING_FLAG}'")


def record_paths(exp: Path) -> dict[tuple[str, int], Path]:
    """(run id, attempt) -> ``runs/RUN/ATTEMPT/record.json`` of every run record written so
    far, in one look (:class:`RecordIndex` for looks again and again): os.scandir, not a
    pathlib glob, which took 86 ms for 1600 runs on a slow 2-core controller against 30 ms."""
    return RecordIndex(exp).look()


#: A run directory listed less than this long after its mtime is listed once more, at the
#: first look after this long: an mtime moves in coarse ticks (a few ms), so an attempt
#: added in the tick of a listing leaves the mtime that listing saw ("racy git"). Not at
#: every look in between: a batch's records come all at once, and 1600 new run
#: directories listed at each of the many looks of the next seconds were most of the cost.
RACY_NS = 2_000_000_000


@dataclass
class _RunEntry:
    """What a :class:`RecordIndex` knows of one run directory."""

    mtime_ns: int
    listed_ns: int  # when it was listed (the wall clock, as mtimes are)
    found: dict[int, Path]  # attempt -> its record
    waiting: dict[int, str]  # attempt -> where its record will be (its directory exists)


class RecordIndex:
    """:func:`record_paths`, looked at again and again (``bmx run``'s progress line, its
    doomed-pass watch): a run directory is listed again only when its mtime changed (an
    attempt added or removed) or its last listing was too close to that mtime
    (:data:`RACY_NS`); an attempt seen without its record is looked at by its record's
    path alone. A look costs a listing of ``runs/`` and a stat per run, not a listing
    per run (1600 runs: about 1 CPU-s of bmx run's in a 16-host campaign). Thread-safe.
    The mtimes are compared with this machine's clock: on a network file system whose
    server's clock is behind, an attempt added in the tick of a listing may be seen
    only with the next change of its run's directory (the progress line counts it late).

    Args:
        exp: The experiment's directory.
        clock: The wall clock in ns (the tests' own).
    """

    def __init__(self, exp: Path, clock: Callable[[], int] = time.time_ns):
        self.runs_dir = os.path.join(exp, layout.RUNS_DIR)
        self.clock = clock
        self._runs: dict[str, _RunEntry] = {}
        self._lock = threading.Lock()

    def look(self) -> dict[tuple[str, int], Path]:
        """(run id, attempt) -> ``runs/RUN/ATTEMPT/record.json`` of every run record written so far."""
        with self._lock:
            now = self.clock()
            runs: dict[str, _RunEntry] = {}
            try:
                listing = os.scandir(self.runs_dir)
            except OSError:
                self._runs = {}
                return {}
            with listing:
                for run in listing:
                    try:
                        if not run.is_dir():
                            continue
                        mtime = run.stat().st_mtime_ns
                    except OSError:
                        continue  # removed meanwhile (a re-run's clean-up)
                    entry = self._runs.get(run.name)
                    if entry is None or entry.mtime_ns != mtime or (
                            entry.listed_ns - mtime < RACY_NS <= now - mtime):
                        entry = self._list(run.path, mtime, now)
                    else:
                        for attempt, record in list(entry.waiting.items()):
                            if os.path.isfile(record):
                                entry.found[attempt] = Path(record)
                                del entry.waiting[attempt]
                    if entry is not None:
                        runs[run.name] = entry
            self._runs = runs
            return {(name, attempt): record for name, entry in runs.items() for attempt, record in entry.found.items()}

    @staticmethod
    def _list(path: str, mtime: int, now: int) -> _RunEntry | None:
        entry = _RunEntry(mtime_ns=mtime, listed_ns=now, found={}, waiting={})
        try:
            attempts = os.scandir(path)
        except OSError:
            return None  # removed meanwhile
        with attempts:
            for attempt in attempts:
                if not attempt.name.isdigit():
                    continue
                record = os.path.join(attempt.path, layout.RECORD)
                if os.path.isfile(record):
                    entry.found[int(attempt.name)] = Path(record)
                else:
                    entry.waiting[int(attempt.name)] = record
        return entry


#: Seconds between looks for a doomed pass while no run of it was ok: a batch runner ends
#: its slice after its first runs failed alike, and the next slice starts within seconds.
DOOM_POLL_SECONDS = 1.0


def _doom_poll(watch: DoomWatch, look: Any, stop: threading.Event) -> None:
    # Ends with the pass, or once a run was ok (the pass cannot be doomed any more).
    while not stop.wait(DOOM_POLL_SECONDS) and not watch.cleared:
        look()


def _ticker(progress: RunProgress, stop: threading.Event, look: Any = None) -> None:
    from benchmatrix.execute.lease import renew_on_time

    lock = threading.Lock()  # one line at a time, from one reading of the hosts' progress

    def tick() -> None:
        try:
            with lock:
                say(progress_tick(progress, time.monotonic()), flush=True)
        except (OSError, ValueError):
            pass  # progress is a courtesy
        if look is not None:
            look()

    def poll() -> None:
        while not stop.wait(POLL_SECONDS):
            try:
                with lock:
                    line = progress_poll(progress, time.monotonic())
                    if line is not None:
                        say(line, flush=True)
            except (OSError, ValueError):
                pass

    threading.Thread(target=poll, name="bmx-progress-poll", daemon=True).start()

    def inline(call: Any) -> Any:
        call()
        return lambda: False

    # The lease's fixed schedule: a slow tick (a loaded controller) does not shift the later ones.
    renew_on_time(tick, TICK_SECONDS, stop, start=inline)


def _wall_model(spec: Spec, proj: Path, exp: Path) -> Any:
    """The ETA's model of the experiment (:func:`benchmatrix.plan.wall_time.wall_model`),
    None when its tables cannot be read: an estimate never stops a campaign."""
    from benchmatrix.errors import BenchmatrixError
    from benchmatrix.plan.wall_time import wall_model
    from benchmatrix.spec.config import project_config

    try:
        return wall_model(spec, exp, project_config(proj))
    except (OSError, ValueError, csv.Error, BenchmatrixError):
        return None


# shape: one Snakemake process: its signal handler and output loop fill the same failed/stopped lists
def _snakemake_pass(args: argparse.Namespace, spec: Spec, proj: Path, exp: Path, lock: Any,
                    t0: float) -> tuple[int, bool, list[tuple[str, str, str]], str]:
    """One Snakemake invocation.

    Returns:
        (exit status, interrupted, failed jobs as (rule, log, the job's last
        ``benchmatrix:`` line seen on the stream), why bmx stopped the campaign itself
        ("" when it did not: a full disk makes it stop cleanly rather than fail on; a
        doomed campaign, :class:`DoomWatch`, too: then the reason starts with
        :data:`DOOMED`)).
    """
    from benchmatrix.errors import describe_os_error
    from benchmatrix.execute.lock import LOCK_FD_ENV, note_child
    from benchmatrix.results.status import KEEP_GOING_ENV

    target = f"results/{spec.name}/report.html"
    # The target comes first: --config takes every following word as a KEY=VALUE.
    # Batch jobs wait on their hosts, not on this machine's CPUs: allow one job per
    # parallel host even on a small controller.
    slots = args.hosts_parallel or len(args.hosts)
    # snakemake.api in a process of its own: the snakemake command's options and output
    # without its command line's cost (execute/snakemake_run.py).
    cmd = [sys.executable, "-m", "benchmatrix.execute.snakemake_run", target, "--snakefile", str(proj / "Snakefile"),
           "--directory", str(proj), "--cores", str(max(args.cores, slots)), "--nolock",
           "--resources", f"host_slots={slots}",
           *(["--forcerun", "collect"] if _collected_early(exp) else []),
           *(["--forcerun", "plan"] if _plan_outdated(exp, Path(args.spec)) else []),
           "--config", f"spec={_spec_arg(args.spec, proj)}"]
    if args.batch_max_runs:
        cmd.append(f"batch_max_runs={args.batch_max_runs}")
    log_path = exp / layout.LOGS_DIR / "snakemake.log"
    failed: list[tuple[str, str, str]] = []
    pending_rule = None
    interrupted: list[int] = []
    stopped: list[str] = []  # why bmx stopped Snakemake itself (a full disk)
    last_msg = ""
    from benchmatrix.execute.wave import SOCKET_ENV, WaveBroker

    # The known hosts' batch calls that start together go as one Ansible call (wave.py).
    with open(log_path, "a") as log, WaveBroker(proj) as broker:
        # Snakemake runs in its own process group so that one Ctrl-C reaches it, its
        # jobs and the batch runners exactly once, forwarded by the handler below.
        # The workflow knows the inherited lock by BMX_LOCK_FD (it takes the lock itself
        # otherwise), and watches BMX_PARENT_PID: when bmx dies, it interrupts itself.
        env = {**os.environ, LOCK_FD_ENV: str(lock.fileno()), "BMX_PARENT_PID": str(os.getpid()),
               SOCKET_ENV: broker.path}
        env.pop(KEEP_GOING_ENV, None)
        if getattr(args, "keep_going_on_failures", False):
            env[KEEP_GOING_ENV] = "1"  # the batch jobs go on after a doomed slice too
        proc = subprocess.Popen(cmd, cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True, env=env,
                                pass_fds=(lock.fileno(),), preexec_fn=_snakemake_child_setup)
        note_child(lock, proc.pid)

        def forward(signum: int, frame: Any) -> None:
            if not interrupted:
                interrupted.append(signum)
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

        def stop(reason: str, line: str = "") -> None:
            # Like Ctrl-C: each batch job stops its runner and restores its host.
            if not stopped and not interrupted:
                stopped.append(reason)
                say(line or f"bmx: {reason}; stopping the campaign", file=sys.stderr, flush=True)
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

        index = RecordIndex(exp)  # one incremental look at the records for the watch and the progress line
        watch = None if getattr(args, "keep_going_on_failures", False) else DoomWatch(exp, index)
        looking = threading.Lock()  # the ticker's thread and the stream's loop both look

        def look() -> None:
            if watch is None or stopped or interrupted:
                return
            with looking:
                try:
                    reason = watch.reason()
                except OSError:
                    return  # looked at again with the next job or tick
                if reason is not None:
                    stop(DOOMED + reason, watch.line(reason, args.spec))

        old = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        logging = True
        ticking = threading.Event()
        progress = RunProgress(exp, t0, spec, _wall_model(spec, proj, exp), index)
        threading.Thread(target=_ticker, args=(progress, ticking, look), name="bmx-progress", daemon=True).start()
        if watch is not None:
            threading.Thread(target=_doom_poll, args=(watch, look, ticking), name="bmx-doomed", daemon=True).start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if logging:
                    try:
                        log.write(line)
                        log.flush()
                    except OSError as exc:  # keep reading: a blocked pipe would hang Snakemake
                        logging = False
                        stop(describe_os_error(exc, log_path))
                if line.startswith("benchmatrix:"):
                    last_msg = line.strip()
                m = _JOB_START.match(line)
                if m:
                    progress.job_started(m.group(1))
                    if m.group(1) == "run_batch":
                        broker.expect()
                    said = None if interrupted else progress.phase_line(time.monotonic())
                    if said:
                        say(said, flush=True)
                m = _JOB_END.match(line)
                if m:
                    progress.job_ended(m.group(1) or m.group(2))
                m = _PROGRESS.match(line)
                if m and not interrupted:
                    jobs = (int(m.group(1)), int(m.group(2)))
                    say(progress.line(time.monotonic(), jobs), flush=True)
                    look()  # a job ended: its runs' records are in
                m = _ERROR_RULE.match(line)
                if m:
                    pending_rule = m.group(1)
                    look()  # a doomed batch job ends with an error: its runs' records are in
                m = _LOG_LINE.match(line)
                if m and pending_rule:
                    msg = _last_error_line(proj / m.group(1)) or last_msg
                    failed.append((pending_rule, m.group(1), msg))
                    pending_rule = None
                    if "No space left on device" in msg:
                        stop(msg.removeprefix("benchmatrix: "))
            rc = proc.wait()
        finally:
            ticking.set()
            for sig, handler in old.items():
                signal.signal(sig, handler)
            try:
                log.close()
            except OSError:
                pass  # a full disk: the reason is already printed
    return rc, bool(interrupted), failed, stopped[0] if stopped else ""


def _recorded_pass(args: argparse.Namespace, spec: Spec, proj: Path, exp: Path, lock: Any,
                   t0: float) -> tuple[int, bool, list[tuple[str, str, str]], str]:
    """:func:`_snakemake_pass`, its start and end recorded in campaign.json's ``passes``
    (the estimates' measure of a campaign's fixed start and end). Recording is a
    courtesy: a file system that refuses it does not stop the campaign."""
    from benchmatrix.results.campaign import end_pass, start_pass

    try:
        index = start_pass(exp)
    except OSError:
        index = None
    outcome = "interrupted"
    try:
        rc, interrupted, failed, stopped = _snakemake_pass(args, spec, proj, exp, lock, t0)
        outcome = "interrupted" if interrupted or stopped else "ok" if rc == 0 else "failed"
    finally:
        try:
            end_pass(exp, index, outcome)
        except OSError:
            pass
    return rc, interrupted, failed, stopped


def _gate_comparison(spec: Spec, exp: Path, settings: Any, against: str) -> Any:
    """The current campaign (B) compared with campaign ``against`` (A's id) at the
    sequential level of ``settings``: what the gate decides on and says at its end.

    Raises:
        NotComparable: A is gone, or the two campaigns cannot be compared.
    """
    from benchmatrix.campaigns.compare import NotComparable, compare_campaigns
    from benchmatrix.campaigns.store import find_campaign, read_campaign

    try:
        a = find_campaign(exp, against)
    except BenchmatrixError as exc:
        raise NotComparable(f"--against: {exc}") from None
    b = read_campaign(exp, current=True)
    result = compare_campaigns(a, b, alpha=settings.level(spec.report.alpha))
    if result.refused:
        why = "the measurement differs" if result.measurement else "no cell was measured on the same host in both"
        raise NotComparable(f"{exp}: campaign {b.name} cannot be compared with {a.name}: {why}; see "
                            f"'bmx compare {a.id} {b.id} --spec {spec.path}'")
    return result


def _next_round(spec: Spec, exp: Path, settings: Any, elapsed_s: float, against: str | None = None) -> bool:
    """Judge the comparisons after a pass and append the next adaptive round; say what
    was decided. With ``against`` (the gate) the comparisons are B's cells against that
    campaign. Returns True when a round was added (another pass runs it)."""
    from collections import Counter

    import pandas as pd

    from benchmatrix.analyze.adaptive import REASON, judge_gate, judge_round
    from benchmatrix.plan.design import earlier_run_seconds
    from benchmatrix.plan.reruns import append_round, replicate_counts, round_requests
    from benchmatrix.plan.wall_time import round_overhead
    from benchmatrix.results.campaign import update_meta
    from benchmatrix.results.tables import read_analysis

    earlier = earlier_run_seconds(exp / layout.RUNS)
    # The budget is wall time: besides its runs a round costs a pass and a look, as this
    # run's own rounds took them (counting the runs alone, budget: 8m took 11 minutes).
    now = time.time()
    elapsed_s += round_overhead(exp, now - elapsed_s, now)
    per_run_s = earlier[0] if earlier else None
    if against:
        result = _gate_comparison(spec, exp, settings, against)
        judged = judge_gate(result.table, settings, result.family, elapsed_s, per_run_s)
    else:
        runs = pd.read_csv(exp / layout.RUNS) if (exp / layout.RUNS).is_file() else pd.DataFrame()
        units = dict(read_analysis(exp).get("units") or {})
        judged = judge_round(spec, runs, settings, units, elapsed_s, per_run_s)
    rnd = 0
    if judged.extend:
        plan = pd.read_csv(exp / layout.PLAN, dtype=str)
        rnd = append_round(exp, round_requests(judged.extend, replicate_counts(plan)), REASON)
    reasons = Counter(judged.comparisons["reason"]) if len(judged.comparisons) else Counter()
    said = ", ".join(f"{v} {k}" for k, v in sorted(reasons.items()))
    if against:
        said = f"against {against}: {said or 'no comparison'}"
    if rnd:
        runs = len(judged.extend)
        say(f"bmx: look {judged.look}: {said or 'no comparison'}; round {rnd} adds runs to {runs} cell(s) "
            f"(replicates until decided)", flush=True)
        return True
    if reasons.get("budget"):
        update_meta(exp, until_decided_stop="budget")
    say(f"bmx: look {judged.look}: {said or 'no comparison'}; replicates until decided: stopped", flush=True)
    for reason in STOP_ADVICE:
        advice = "" if against else max_advice_line(spec, judged.comparisons, reason)
        if advice:
            say(advice, flush=True)
    return False


#: What stopped a comparison undecided: the words bmx run says, and what to raise.
STOP_ADVICE = {"max": ("stopped at max undecided", "raise replicates max in the spec"),
               "budget": ("stopped by the time budget undecided", "raise replicates budget in the spec, or --budget,")}


def max_advice_line(spec: Spec, rows: Any, reason: str = "max") -> str:
    """What ``bmx run`` says of the comparisons an until-decided campaign left undecided
    at ``max`` (or when its time budget was spent): about how many runs a cell each would
    need (:func:`benchmatrix.analyze.adaptive.runs_at_max`); "" when none stopped so.

    Args:
        spec: The experiment (``report.compare``'s ``by`` factors, the thresholds).
        rows: :func:`benchmatrix.analyze.adaptive.judge_round`'s comparisons.
        reason: ``max`` or ``budget`` (:data:`STOP_ADVICE`).

    Returns:
        The line, or "".
    """
    from benchmatrix.analyze.adaptive import runs_at_max

    if not len(rows) or "reason" not in rows.columns:
        return ""
    by = list(spec.report.compare.by) if spec.report.compare is not None else []
    head, raise_what = STOP_ADVICE[reason]
    said = []
    for row in rows[rows["reason"] == reason].to_dict("records"):
        where = ", ".join(f"{f}={row[f]}" for f in by if f in row)
        n = runs_at_max(row, spec.report.threshold_for(str(row["metric"])))
        need = f"about {n} runs a cell" if n is not None else "an unknown number of runs"
        said.append(f"{row['metric']} {row['level']} vs {row['baseline']}{' at ' + where if where else ''} "
                    f"would need {need}")
    if not said:
        return ""
    more = f"; and {len(said) - 3} more" if len(said) > 3 else ""
    return f"bmx: {head}: {'; '.join(said[:3])}{more} (at this estimate; {raise_what} to go on)"


def execute(args: argparse.Namespace, spec: Spec, proj: Path, exp: Path, lock: Any) -> int:
    """Run the workflow until no new re-run round appears; print the outcome."""
    from benchmatrix.analyze.adaptive import settings_of
    from benchmatrix.execute.hosts import resolve_hosts
    from benchmatrix.execute.scratch import sweep
    from benchmatrix.plan.reruns import reruns_digest
    from benchmatrix.results.campaign import read_meta
    from benchmatrix.results.status import campaign_status, exit_code

    log_path = exp / layout.LOGS_DIR / "snakemake.log"
    sweep()  # what a controller killed outright left in the temporary directory
    args.hosts = resolve_hosts(spec.inventory_path(proj), spec.hosts)
    say(f"bmx: running {spec.name} ({len(spec.cells)} cells) on {len(args.hosts)} host(s); log {log_path}",
        flush=True)
    t0 = time.monotonic()
    meta = read_meta(exp)
    adaptive = settings_of(spec, meta)
    # The gate (bmx run --until-decided --against A): kept with the campaign, so that
    # resuming an interrupted gate goes on deciding against the same A.
    against = str(meta["against"]) if adaptive and meta.get("against") else None
    # Adaptive replication: after each pass the comparisons are judged and the cells of
    # the undecided ones get a round of new replicates (at most one pass per look).
    for _look in range(adaptive.looks if adaptive else 1):
        # Interrupted runs found while executing become a re-run round (their next
        # attempt): one more pass executes them. Bounded, in case runs keep ending that way.
        for _ in range(3):
            before = reruns_digest(exp)
            rc, interrupted, failed, stopped = _recorded_pass(args, spec, proj, exp, lock, t0)
            if stopped.startswith(DOOMED):
                return 1  # its one line is said; the batch jobs' interrupts say nothing more
            if stopped:
                for rule, log_file, msg in failed:
                    if stopped not in msg:  # the reason itself was printed when bmx stopped
                        print(job_failed_line(rule, msg, log_file), file=sys.stderr)
                say(f"bmx: stopped; every finished run is kept (on its host until fetched). "
                    f"Free some space, then resume with: bmx run {args.spec}", file=sys.stderr)
                return 1
            if interrupted:
                say(f"bmx: interrupted; every finished run is kept. Resume with: bmx run {args.spec}",
                    file=sys.stderr)
                return 130
            if rc != 0 or reruns_digest(exp) == before:
                break
            print("bmx: resuming the runs that an interrupt cut short", flush=True)
        if rc != 0 or adaptive is None or not _next_round(spec, exp, adaptive, time.monotonic() - t0, against):
            break
    if rc != 0:
        for rule, log_file, msg in failed:
            print(job_failed_line(rule, msg or _disk_hint(exp), log_file), file=sys.stderr)
        if not failed:
            say(f"bmx: snakemake failed (exit {rc}); see {log_path}", file=sys.stderr)
        return 1
    status = campaign_status(exp, spec.factor_names)
    t = status["totals"]
    bad = sum(t[k] for k in ("failed", "timeout", "unreachable", "invalid"))
    out, err = done_lines(status, time.monotonic() - t0, args.spec)
    print("\n".join(out))
    for line in err:
        print(line, file=sys.stderr)
    from benchmatrix.report.terminal import print_findings

    print_findings(exp, sys.stdout, getattr(args, "color", "auto"))
    code = exit_code(status) if bad else 0
    if against:
        # The gate's answer is its exit status, as bmx compare's: 1 when a verdict is worse.
        return _gate_end(args, spec, exp, adaptive, against) or code
    return code


def _gate_end(args: argparse.Namespace, spec: Spec, exp: Path, settings: Any, against: str) -> int:
    """Print the gate's verdicts (B against A at the sequential level) as ``bmx compare``
    does, keep them on ``args.gate`` for ``bmx run --json``; returns compare's exit code."""
    from benchmatrix.campaigns.compare import show_comparison
    from benchmatrix.report.terminal import compare_records

    result = _gate_comparison(spec, exp, settings, against)
    level = settings.level(spec.report.alpha)
    say(f"bmx: gate: {result.b.name} against {result.a.name}, judged at {settings.level_words(spec.report.alpha)}",
        flush=True)
    code = show_comparison(result, color=getattr(args, "color", "auto"))
    args.gate = {"against": result.a.id, "b": result.b.id, "level": level, "exit_code": code,
                 "counts": result.counts(), "rows": compare_records(result.table, result.factor_names)}
    return code
