#!/usr/bin/env python3
"""benchmatrix batch runner: executes one batch of runs on the host, in plan order.

Ansible copies this file to the host and starts it with a manifest (JSON). It must
run on any host with Python 3.8+, so it uses the standard library only and imports
nothing from benchmatrix.

Host layout under the manifest's ``workdir``::

    runs/results.jsonl           the result of every finished run, one JSON line each,
                                 appended when the run ends (the last line of a run wins)
    runs/RUN_ID.ATTEMPT.NAME     a run's files, NAME: stdout, stderr, counters.json
                                 (system counters, when the run collects them),
                                 usage.json (when it is measured), inputs/ (files the
                                 run used); flat, no directory a run: each created
                                 file costs (bench/README.md, issue 34)
    batches/BATCH.tar.gz         the batch's finished runs, for Ansible to fetch
    batches/BATCH.progress       one JSON line per run finished so far (run_id,
                                 attempt, outcome, exit_code, ended_at)
    runner.lock, runner.pid      one runner at a time per workdir
    workload.json                the workload in flight: its PID, its cgroup and marker
                                 (a runner that starts, and --stop, end what a runner
                                 killed outright left running there)

Every run is contained (see ``Containment``): in a cgroup v2 where the host has a
writable one (the runs of a batch take turns in one, each starting only once the run
before left nothing in it, the runner itself staying in it between runs; a run that
measures its peak memory gets its own), else
found through the runner's descendants (the runner is a child subreaper, so orphans
come back to it) and a marker variable in their environment.
After the workload's main process ends (or at its timeout, or an interrupt), every
process of the run still alive gets SIGTERM, then SIGKILL after ``kill_grace_s``; the
next run starts only when none is left. its result lists what had to be killed.

A run's result line is appended only after its outputs are complete, so a run without
one is unfinished (its files are overwritten when it is executed again). Runs that
finished are skipped, which makes re-executing an interrupted batch safe. A run costs
no fsync (an fsync is a few milliseconds, more than a short workload's own process
start): its result holds the sizes of stdout and stderr, and a run is taken as finished
only when its line parses and the sizes match, so a run that a host crash (power loss)
left incomplete on disk is executed again. The work directory's file system is synced
once per execution, before the archive is made. The archive names a run's files as a
run directory (runs/RUN_ID/ATTEMPT/result.json, stdout, ...); a work directory a runner
before the flat layout wrote (runs/RUN_ID/ATTEMPT/) is still read.

Optional keys of a run in the manifest, besides run_id, attempt, seq, timeout,
before_run, argv, env and cwd:

    collect      ["cpu", "disk"]: sample /proc/stat and /proc/diskstats before the
                 workload starts, every collect_interval_s (default 1) seconds while
                 it runs, and after it exits; the raw cumulative counters go to
                 counters.json (format: benchmatrix/workloads/counters.py). Also
                 "memory" (/proc/meminfo, /proc/vmstat), "pressure" (/proc/pressure/*
                 totals), "process" (getrusage of the runner's reaped children: the
                 run's CPU time, context switches and faults; its peak memory from
                 the run's cgroup's memory.peak, else the samples' VmHWM) and "perf"
                 (the command under perf stat, where the host has perf).
    inputs       {"NAME": "/path/on/host"}: files copied to the run's inputs/NAME
                 before the run (the job file or script it uses), so the
                 results keep exactly what ran.
    cpus         [0, 1, 3] (the CPU numbers; the controller expands CPU lists such as
                 "0-1,3"), or "all" for every CPU this runner may use: the CPUs the
                 workload may run on.
    pin_pidfiles ["/path/postmaster.pid"]: processes (first line of each file: a
                 PID) that are pinned, with every descendant and thread, to the same
                 CPUs before the run: a server the workload talks to.
    measure      true: time the command itself (a workload_command without declared
                 metrics): a small timer process forks it, waits for it and writes
                 usage.json: wall_s, user_s, system_s (CPU of the command and the
                 children it waited for) and max_rss_kib (peak resident memory of its
                 largest process); its result gets the same as ``usage``.

Optional keys of the manifest itself: ``containment`` ("auto": a cgroup where
possible, the default; "process_tree": never a cgroup), ``kill_grace_s`` (seconds
between SIGTERM and SIGKILL, default 5) and ``stop_after_s`` (a time slice: once this
many seconds have passed since the runner started, it starts no further run, archives
the runs it finished and reports the rest as ``deferred``; the controller takes the
slice's results in and starts the rest; 0 or absent: no limit) and ``collect_only``
(true: run nothing, take no lease, archive the manifest's runs that finished on the
host and report the others as ``deferred``: after a batch call that failed once its
runner had started, e.g. the runner killed on the host, the controller takes in what
it finished instead of failing it).

A run's ``cell_id`` (optional) lets the runner end its slice early, once per batch, when
its first runs over two or more cells all failed the same way (:class:`_Doom`): the
rest is reported as ``deferred`` with ``doomed: true`` in the summary. ``keep_going``
(true, or absent: the controller goes on after a doomed slice) makes that once per
batch; false: every time the batch is run again.

Optional keys of the manifest itself also include ``runner_digest`` (the SHA-256 the
controller expects of this file: another one exits with status 3, and the playbook
installs the current runner and starts it again) and ``knobs_digest`` (the same for
``knobs.py``, the knob backends installed beside this file: missing or different, exit 3).

Live knobs (see ``LiveKnobs``): a run may carry ``knobs``, the knob items of its cell
(``{factor, role, value, vars, cost}``, as the playbooks' ``bmx_knobs``); the manifest's
``knobs`` are the items of the batch's Ansible call (it set the costly ones and only
read those marked ``live``), ``knob_settings`` the
host's own role variables (what tasks/knobs.yml passes the module as ``settings``) and
``host`` its inventory name, ``knob_baseline_dir`` where each knob's value before its
first change is kept on the host before the runner writes it. Before a run whose items differ from the last applied
values the runner sets them with the backends of knobs.py, in-process (the module's
own code: read all, write what differs, read back), and writes the per-knob states
into the run's result (``knobs``); a knob that missed its value makes the run
``invalid`` (outcome) without running it. Only knobs of cost class ``none`` are ever
written here: a costlier knob (a reboot, a service restart) is set by Ansible before
the batch and only read back by the runner.

Ansible gives the manifest on stdin (``-``), so no file on the host ever holds it;
a MANIFEST.json given as a path is deleted once read (it may carry secrets in the
runs' environments). The work directory stays readable by its owner only. Before
its first run the runner deletes the archives earlier batches left in ``batches/``
(the controller fetched them before it started this batch).

Usage: batch_runner.py MANIFEST.json | -   (-: the manifest on stdin, as Ansible gives it)
       batch_runner.py --stop WORKDIR   (end the runner working there, and its workload)
"""

import errno
import fcntl
import gzip
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

RESULT_VERSION = 1
KILL_GRACE_S = 5.0
#: Exit status when the manifest names another runner (``runner_digest``) than this file.
STALE_RUNNER_RC = 3


class Interrupted(Exception):
    """The runner received SIGINT, SIGTERM or SIGHUP."""


_child = None  # the workload process in flight, if any
_sampler = None  # the counter sampler of the run in flight, if any


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _fsync_write(path, data):
    with open(path, "w") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _before_run(actions):
    """Run the before_run actions; returns (records, error or None)."""
    records = []
    for action in actions:
        t0 = time.monotonic()
        err = None
        output = None
        try:
            if action in ("sync", "drop_caches"):
                os.sync()
            if action == "drop_caches":
                with open("/proc/sys/vm/drop_caches", "w") as fh:
                    fh.write("3\n")
            elif action == "sleep_1":
                time.sleep(1.0)
            elif action == "fstrim":
                # Discard the unused blocks of every mounted filesystem that supports it;
                # its report (what was trimmed where) is recorded. 64: some were trimmed.
                proc = subprocess.run(["fstrim", "--all", "--verbose"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
                output = proc.stdout.strip()
                if proc.returncode not in (0, 64):
                    err = "fstrim exited %d: %s" % (proc.returncode, (output.splitlines() or [""])[-1])
            elif action not in ("sync",):
                err = "unknown action"
        except OSError as exc:
            err = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
        records.append({"action": action, "seconds": round(time.monotonic() - t0, 6), "error": err})
        if output is not None:
            records[-1]["output"] = output
        if err:
            return records, "before_run %s failed: %s" % (action, err)
    return records, None


# ---------------------------------------------------------------- run environment

def run_cpus(value):
    """The CPUs of a run's ``cpus``: "all" (or none given) or the explicit list of CPU
    numbers the controller expanded from the spec's CPU list (benchmatrix.workloads.cpulist)."""
    if value is None or value == "all":
        return sorted(os.sched_getaffinity(0))
    if (not isinstance(value, list) or not value
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value)):
        raise ValueError("%r is not \"all\" or a list of CPU numbers" % (value,))
    return sorted(set(value))


def _read_proc(path):
    """A small /proc file's bytes (os-level reads: twice as fast as open() over /proc)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _stat(pid):
    """(ppid, pgid, sid, state, starttime in ticks) of a process, or None when gone."""
    try:
        line = _read_proc("/proc/%s/stat" % pid)
    except OSError:
        return None
    fields = line[line.rfind(b")") + 2:].split()
    if len(fields) <= 19:
        return None
    return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode(), int(fields[19])


def _proc_table():
    """Every process from /proc: pid -> (ppid, pgid, sid, state, starttime in ticks)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(entry)
            if info is not None:
                table[int(entry)] = info
    return table


def _descendants(roots, table):
    """PIDs of ``roots`` and all their descendants in ``table``."""
    children = {}
    for pid, info in table.items():
        children.setdefault(info[0], []).append(pid)
    tree, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def _process_tree(root):
    """PIDs of ``root`` and all its descendants (from /proc)."""
    return sorted(_descendants([root], _proc_table()))


def _pin_tree(pidfile, cpus):
    """Pin every thread of the process named in ``pidfile`` and of its descendants."""
    with open(pidfile) as fh:
        root = int(fh.readline().strip())
    os.kill(root, 0)  # raises when the process is gone
    pinned = 0
    for pid in _process_tree(root):
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cpus)
                pinned += 1
            except ProcessLookupError:
                pass
    return pinned


def _prepare_run(run, base, result):
    """Copy the run's inputs (into ``base``.inputs/) and pin its server processes; returns an
    error or None."""
    inputs = run.get("inputs") or {}
    if inputs:
        shutil.rmtree(base + ".inputs", ignore_errors=True)  # an execution a crash cut short
        os.makedirs(base + ".inputs")
    for name, path in sorted(inputs.items()):
        if not name or name != os.path.basename(name) or name in (".", ".."):
            return "input name '%s' is not a plain file name" % name
        try:
            shutil.copyfile(path, os.path.join(base + ".inputs", name))
        except OSError as exc:
            return "cannot copy input %s: %s" % (path, exc.strerror or exc)
    if run.get("cpus") is None and not run.get("pin_pidfiles"):
        return None
    try:
        cpus = run_cpus(run.get("cpus"))
    except ValueError as exc:
        return "cpus: %s" % exc
    missing = sorted(set(cpus) - os.sched_getaffinity(0))
    if missing:
        return "cpus: CPU(s) %s not available to the runner (it may use %s)" % (
            ",".join(map(str, missing)), ",".join(map(str, sorted(os.sched_getaffinity(0)))))
    result["affinity"] = {"cpus": cpus, "pinned": {}}
    for pidfile in run.get("pin_pidfiles") or []:
        try:
            result["affinity"]["pinned"][pidfile] = _pin_tree(pidfile, cpus)
        except (OSError, ValueError) as exc:
            return "cannot pin the processes of %s to CPUs %s: %s" % (
                pidfile, ",".join(map(str, cpus)), getattr(exc, "strerror", None) or exc)
    return None


# ---------------------------------------------------------------- containment

RUN_TOKEN_ENV = "BMX_RUN_TOKEN"  # marks every process of a run (process_tree containment)
CGROUP_PREFIX = "benchmatrix-run-"
#: The cgroup the runner's runs take turns in (Containment's ``share``), None before the
#: first run and after one that left a survivor in it; removed when the runner ends.
_shared_cgroup = None
_PR_SET_CHILD_SUBREAPER = 36


_subreaper = False  # this process adopts its orphaned descendants (set by main)
#: The run cgroup the runner itself is in (None: its own, ``_own_cgroup_v2()``): it stays
#: in the shared one after a run's fork, so the next run starts without moving it in again.
_inside = None


def _step_home():
    """Move the runner back into its own cgroup (before a run's cgroup is killed or removed)."""
    global _inside
    if _inside is not None:
        _write_pid(os.path.join(_own_cgroup_v2(), "cgroup.procs"), os.getpid())
        _inside = None


def _remove_shared_cgroup():
    """Remove the runs' shared cgroup (at the runner's end; empty then, else it stays)."""
    global _shared_cgroup
    if _shared_cgroup:
        try:
            _step_home()
        except OSError:
            pass
        try:
            os.rmdir(_shared_cgroup)
        except OSError:
            pass  # a process still inside: the next runner's sweep removes it once empty
        _shared_cgroup = None


def _set_subreaper():
    """Make this process the reaper of its orphaned descendants (Linux 3.4+).

    A workload's child whose parent died (or that called setsid and was left behind)
    is then re-parented to the runner instead of init, so it stays among the runner's
    descendants, where the process_tree containment finds it.
    """
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        ok = False
    global _subreaper
    _subreaper = ok
    return ok


_NO_CGROUP = object()
_cgroup_home = _NO_CGROUP  # _own_cgroup_v2(), found once per runner


def _own_cgroup_v2():
    """The directory of this process's cgroup in the cgroup v2 hierarchy, or None
    (found once: the runner steps back into it after every run's fork)."""
    global _cgroup_home
    if _cgroup_home is _NO_CGROUP:
        _cgroup_home = _find_own_cgroup_v2()
    return _cgroup_home


def _find_own_cgroup_v2():
    try:
        with open("/proc/self/cgroup") as fh:
            path = next((ln.strip()[3:] for ln in fh if ln.startswith("0::")), None)
        with open("/proc/self/mountinfo") as fh:
            mounts = [ln.split() for ln in fh]
    except OSError:
        return None
    if path is None:
        return None
    for fields in mounts:
        sep = fields.index("-") if "-" in fields else -1
        if sep < 0 or sep + 1 >= len(fields) or fields[sep + 1] != "cgroup2":
            continue
        root, mount = fields[3], fields[4]
        if root != "/" and (path + "/").startswith(root.rstrip("/") + "/"):
            path = path[len(root.rstrip("/")):] or "/"
        elif root != "/":
            continue
        directory = os.path.join(mount, path.lstrip("/"))
        if os.path.isfile(os.path.join(directory, "cgroup.procs")):
            return directory.rstrip("/")
    return None


def _marked(token, pids):
    """Those of ``pids`` whose environment carries the run marker ``token``."""
    marker = ("%s=%s" % (RUN_TOKEN_ENV, token)).encode()
    found = set()
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue
    return found


def _command_of(pid):
    """A process's command line (or name), for the record of what was killed."""
    for name in ("cmdline", "comm"):
        try:
            with open("/proc/%d/%s" % (pid, name), "rb") as fh:
                text = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if text:
            return text[:200]
    return "?"


def _write_pid(path, pid):
    # os-level: no buffered text file around one short write (a cgroup move)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(pid).encode())
    finally:
        os.close(fd)


class Containment:
    """Everything one run started, found and ended.

    ``cgroup``: the workload is forked inside a cgroup v2 of the run's own (the runner
    steps into it for the fork and back out), so no descendant can leave it, not even
    by ``setsid`` or a double fork. With ``share``, the runner's runs take turns in one
    cgroup (:data:`_shared_cgroup`): a run starts in it only when it is empty, i.e. the
    run before left nothing behind, which saves a cgroup's creation and removal a run
    (about 0.1 ms); a run that left a survivor keeps that cgroup, and the next one gets a
    new one. The runner stays in the shared cgroup from its first run's fork on (moving a
    process between cgroups twice a run cost about 0.1 ms), and steps out (``_inside``)
    before anything there is killed, before it enters another run's cgroup and at its end:
    a member other than the runner is always the run's. ``process_tree`` (no writable cgroup v2, or the
    manifest asks for it): the run's processes are the runner's descendants started
    since the workload (main() makes the runner a subreaper, so orphans stay among
    them); a runner that is no subreaper also looks for the run's marker variable in
    every process's environment.
    """

    def __init__(self, mode="auto", grace_s=KILL_GRACE_S, share=False):
        self.grace_s = float(grace_s)
        self.token = "%d-%s" % (os.getpid(), os.urandom(8).hex())
        self.cgroup = None
        self.why_not_cgroup = None
        self.proc = None
        self.started_ticks = None
        if mode == "process_tree":
            self.why_not_cgroup = "the manifest asks for process_tree containment"
        else:
            self._make_cgroup(share)
        self.mode = "cgroup" if self.cgroup else "process_tree"

    def _make_cgroup(self, share):
        global _shared_cgroup
        home = _own_cgroup_v2()
        if home is None:
            self.why_not_cgroup = "no cgroup v2 hierarchy"
            return
        if share and _shared_cgroup:
            self.cgroup = _shared_cgroup
            return
        path = os.path.join(home, "%s%d-%s" % (CGROUP_PREFIX, os.getpid(), os.urandom(4).hex()))
        try:
            os.mkdir(path)
        except OSError as exc:
            self.why_not_cgroup = "cannot create a cgroup in %s: %s" % (home, exc.strerror or exc)
            return
        self.cgroup = path
        if share:
            _shared_cgroup = path

    def environment(self, env):
        """``env`` plus the run's marker variable."""
        env = dict(env)
        env[RUN_TOKEN_ENV] = self.token
        return env

    def spawn(self, start):
        """Call ``start()`` (which forks the workload) inside the run's containment."""
        global _inside
        if self.cgroup and _inside != self.cgroup:
            try:
                _step_home()
                _write_pid(os.path.join(self.cgroup, "cgroup.procs"), os.getpid())
                _inside = self.cgroup
            except OSError as exc:  # e.g. not delegated to this user: fall back
                self.why_not_cgroup = "cannot enter %s: %s" % (self.cgroup, exc.strerror or exc)
                self._remove_cgroup()
                self.mode = "process_tree"
        try:
            self.proc = start()
        finally:
            if self.cgroup and self.cgroup != _shared_cgroup:
                # Back out before anything else: the run's cgroup is killed whole later.
                # (The shared one keeps the runner: a run that leaves something behind
                # moves it out in end() first.)
                _step_home()
        if not self.cgroup:  # process_tree: the run's processes are those started since
            info = _stat(self.proc.pid)
            self.started_ticks = info[4] if info else 0
        return self.proc

    def members(self):
        """PIDs of the run's live processes (zombies excluded), never the runner's."""
        me = os.getpid()
        if self.cgroup:
            # Exited processes leave the cgroup at once (zombies are not listed).
            try:
                fd = os.open(os.path.join(self.cgroup, "cgroup.procs"), os.O_RDONLY)
                try:
                    data = b"".join(iter(lambda: os.read(fd, 65536), b""))
                finally:
                    os.close(fd)
            except OSError:
                return set()
            return {int(x) for x in data.split()} - {me}
        if self.proc is None:
            return set()  # nothing was started
        table = _proc_table()
        pids = {pid for pid in _descendants([me], table)
                if pid != me and table[pid][4] >= (self.started_ticks or 0)}
        if not _subreaper:
            # Orphans went to init: only the marker in their environment finds them.
            pids |= _marked(self.token, set(table) - pids - {me})
        return {p for p in pids if p != me and p in table and table[p][3] not in ("Z", "X")}

    def _signal(self, pids, sig):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _wait_gone(self, pids, seconds):
        """Wait up to ``seconds`` for ``pids`` to end; returns those still alive."""
        deadline = time.monotonic() + seconds
        while True:
            self._reap()
            alive = pids & self.members()
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.02)

    def _reap(self):
        """Collect the runner's exited children (orphans it adopted), not the workload."""
        if not _subreaper:
            return  # the runner's children are its own business (execute() called in-process)
        me = os.getpid()
        for pid, info in _proc_table().items():
            if info[0] == me and info[3] == "Z" and (self.proc is None or pid != self.proc.pid):
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def end(self):
        """SIGTERM every process of the run, SIGKILL what is left after the grace period.

        Returns ``(killed, survivors)``: killed is a list of {pid, command, signal}
        (the signal that ended it), survivors the processes that even SIGKILL did not
        end within 30 s (uninterruptible sleep).
        """
        killed, survivors, seen = [], [], {}
        pids = self.members()
        if not pids:  # the common case: the workload left nothing
            if self.proc is not None:
                self.proc.wait()
            self._remove_cgroup(keep_shared=True)
            return [], []
        if _inside == self.cgroup:
            _step_home()  # out of the cgroup that is swept (and killed whole) now
        for pid in pids:
            seen[pid] = _command_of(pid)
        if self.proc is not None and self.proc.poll() is None:
            try:  # the workload's own process group first, as before
                os.killpg(self.proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        self._signal(pids, signal.SIGTERM)
        # Processes forked while being signalled join the sweep on the next round.
        stubborn = self._wait_gone(pids, self.grace_s) if pids else set()
        for _ in range(100):
            late = self.members() - set(seen)
            for pid in late:
                seen[pid] = _command_of(pid)
            stubborn |= late
            if not stubborn:
                break
            if self.cgroup and os.path.exists(os.path.join(self.cgroup, "cgroup.kill")):
                try:
                    _write_pid(os.path.join(self.cgroup, "cgroup.kill"), 1)
                except OSError:
                    self._signal(stubborn, signal.SIGKILL)
            else:
                self._signal(stubborn, signal.SIGKILL)
            left = self._wait_gone(stubborn | self.members(), 30.0 if _ == 0 else 1.0)
            for pid in stubborn - left:
                killed.append({"pid": pid, "command": seen.get(pid, "?"), "signal": "SIGKILL"})
            stubborn = left
        survivors = sorted(stubborn)
        by_kill = {k["pid"] for k in killed}
        for pid in sorted(set(seen) - by_kill - set(survivors)):
            killed.append({"pid": pid, "command": seen[pid], "signal": "SIGTERM"})
        killed.sort(key=lambda k: k["pid"])
        if self.proc is not None:
            self.proc.wait()
        self._remove_cgroup(keep_shared=not survivors)
        return killed, [{"pid": p, "command": seen.get(p, "?")} for p in survivors]

    def _remove_cgroup(self, keep_shared=False):
        """Remove the run's cgroup; the shared one (empty) stays for the next run with
        ``keep_shared``, else it is given up (a survivor may hold it)."""
        global _shared_cgroup
        if self.cgroup and self.cgroup == _shared_cgroup:
            if keep_shared:
                self.cgroup = None
                return
            _shared_cgroup = None
        if self.cgroup:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass  # a survivor is still inside: the cgroup stays with it
            self.cgroup = None


#: A measured run's (``measure``) raw file: the command's wall time, user and system CPU
#: and peak resident memory, as its timer (``_TIMER``) wrote them.
USAGE_FILE = "usage.json"

#: The timer of a measured run: the runner's Python (-S -I: no site, no PYTHON* variables)
#: forks the command, waits for it with wait4 and writes USAGE_FILE, then exits as the
#: command did (its status, or its signal). Why not the runner's own wait4: a child's peak
#: memory counts the pages its parent's fork carried until the exec, about 17 MiB of the
#: runner's and 6 MiB of this small process's (GNU time's: 1 MiB). It ignores the signals
#: that end a run until the command is gone (the sweep signals both); the command gets
#: them back at their defaults.
_TIMER = """import json, os, signal, sys, time
path, argv = sys.argv[1], sys.argv[2:]
ends = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
for s in ends:
    signal.signal(s, signal.SIG_IGN)
r, w = os.pipe()
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        for s in ends:
            signal.signal(s, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(w, (exc.strerror or str(exc)).encode())
    finally:
        os._exit(127)
os.close(w)
err = os.read(r, 1000).decode(errors="replace")
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - t0
doc = {"error": err} if err else {"wall_s": round(wall, 6), "user_s": round(ru.ru_utime, 6),
                                  "system_s": round(ru.ru_stime, 6), "max_rss_kib": ru.ru_maxrss}
with open(path, "w") as fh:
    json.dump(doc, fh)
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)
os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
"""

_timer_pid = None  # the timer of the measured run in flight, if any (not the workload's own process)


def _timed(argv, usage):
    """``argv`` run under the timer, which writes ``usage`` (a path); ``argv`` itself without one."""
    if not usage:
        return argv
    return [sys.executable or "python3", "-S", "-I", "-c", _TIMER, usage] + list(argv)


def _take_usage(path, run, result):
    """What the timer measured (USAGE_FILE) into ``result["usage"]``; a command it could not
    start fails to start, as without the timer. Nothing when the timer was ended before it wrote."""
    try:
        with open(path) as fh:
            usage = json.load(fh)
    except (OSError, ValueError):
        return
    if isinstance(usage, dict) and usage.get("error"):
        os.unlink(path)
        result["outcome"], result["exit_code"] = "start_failed", None
        result["error"] = "cannot start %s: %s" % (run["argv"][0], usage["error"])
    elif isinstance(usage, dict):
        result["usage"] = usage


_devnull_fd = None


def _devnull():
    """/dev/null for the workloads' stdin, opened once (Popen's DEVNULL opens it for each run)."""
    global _devnull_fd
    if _devnull_fd is None:
        _devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull_fd


#: How a run's stdout and stderr are opened: raw descriptors (a buffered file costs an
#: fstat, an ioctl and a seek more each, and the runner never writes to them itself), and
#: new files (:func:`_open_outputs`).
_OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _open_outputs(base):
    """A run's stdout and stderr (``base``: runs/RUN_ID.ATTEMPT), as new files: what an
    earlier execution left (one a crash cut short) is removed first, never written through,
    because the controller's own host takes a finished run's files in as links (issue 34)."""
    try:
        return _new_outputs(base)
    except FileExistsError:
        _remove_run_files(base, inputs=False)  # _prepare_run made the inputs anew
        return _new_outputs(base)


def _new_outputs(base):
    out = os.open(base + ".stdout", _OUTPUT_FLAGS, 0o666)
    try:
        return out, os.open(base + ".stderr", _OUTPUT_FLAGS, 0o666)
    except BaseException:
        os.close(out)
        raise


def _start_workload(run, out, errf, env, containment, usage=None):
    """Start the counters, then the workload (on the run's CPUs, in its own session and
    containment; under the timer when ``usage``, the path it writes, is given)."""
    global _sampler, _timer_pid
    kinds = [k for k in (run.get("collect") or []) if k in COUNTER_SOURCES]
    if kinds:
        _sampler = _Sampler(kinds, float(run.get("collect_interval_s") or 1.0))
        _sampler.start()
    affinity = run.get("cpus")
    saved = None
    if affinity is not None:
        # The child inherits the affinity of the thread that forks it: set it on this
        # thread for the fork only (no preexec_fn, which is unsafe with threads).
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, run_cpus(affinity))
    try:
        argv = _sampler.wrap(run["argv"], env) if _sampler is not None else run["argv"]
        proc = containment.spawn(lambda: subprocess.Popen(
            _timed(argv, usage), stdin=_devnull(), stdout=out, stderr=errf,
            cwd=run.get("cwd") or None, env=containment.environment(env), start_new_session=True))
        _timer_pid = proc.pid if usage else None
        if _sampler is not None:
            _sampler.watch(proc.pid, containment.cgroup)
        return proc
    finally:
        if saved is not None:
            os.sched_setaffinity(0, saved)


def _stop_counters(keep=False):
    """Halt the sampler; unless ``keep`` (its document is written next), drop perf's output."""
    global _sampler
    sampler, _sampler = _sampler, None
    if sampler is not None:
        sampler.halt()
        if not keep:
            sampler._perf()
    return sampler


def _finish_counters(base, result):
    """Stop the sampler (one last sample) and write ``base``.counters.json."""
    sampler = _stop_counters(keep=True)
    if sampler is None:
        return
    _fsync_write(base + ".counters.json", json.dumps(sampler.document()))
    result["counters"] = {"file": "counters.json", "samples": len(sampler.samples),
                          "errors": sampler.errors[:5]}


CPU_FIELDS = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
DISK_FIELDS = ["reads", "reads_merged", "sectors_read", "read_ms", "writes", "writes_merged",
               "sectors_written", "write_ms", "in_flight", "io_ms", "weighted_io_ms"]


def _block_devices():
    """Whole block devices with a size: name -> {"virtual": bool}."""
    devices = {}
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return devices
    for name in names:
        try:
            with open("/sys/block/%s/size" % name) as fh:
                if int(fh.read().strip() or 0) <= 0:
                    continue
        except (OSError, ValueError):
            continue
        real = os.path.realpath("/sys/block/%s" % name)
        devices[name.replace("!", "/")] = {"virtual": "/devices/virtual/" in real}
    return devices


def _read_cpu():
    with open("/proc/stat") as fh:
        for line in fh:
            if line.startswith("cpu "):
                values = [int(v) for v in line.split()[1:]]
                return (values + [0] * len(CPU_FIELDS))[:len(CPU_FIELDS)]
    raise OSError("no cpu line in /proc/stat")


def _read_disks(devices):
    out = {}
    with open("/proc/diskstats") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 3 + len(DISK_FIELDS) and parts[2] in devices:
                out[parts[2]] = [int(v) for v in parts[3:3 + len(DISK_FIELDS)]]
    return out


#: What ``collect`` may name; a name this runner does not know is left out.
COUNTER_SOURCES = ("cpu", "disk", "memory", "pressure", "process", "perf")
#: /proc/meminfo lines the ``memory`` source keeps (kB), where the kernel has them.
MEMINFO_FIELDS = ["MemFree", "MemAvailable", "Cached", "Dirty", "Writeback"]
#: /proc/vmstat counters the ``memory`` source keeps, where the kernel has them, beside
#: every counter whose name says read-ahead (their names change between kernels).
VMSTAT_FIELDS = ["pgpgin", "pgpgout", "pgfault", "pgmajfault", "pswpin", "pswpout", "workingset_refault_file"]
#: The ``pressure`` source: /proc/pressure/RESOURCE's some and full totals (µs).
PSI_RESOURCES = ["cpu", "io", "memory"]
#: The ``process`` source: the runner's reaped children (the run's processes) from
#: getrusage, cumulative.
PROCESS_FIELDS = ["user_s", "system_s", "voluntary_switches", "involuntary_switches", "major_faults",
                  "minor_faults"]
#: Hardware events the ``perf`` source asks ``perf stat`` for.
PERF_EVENTS = ["cycles", "instructions", "cache-misses"]


def _memory_fields():
    """The meminfo and vmstat names this kernel has, in the order samples keep them."""
    meminfo = {line.split(b":")[0].decode() for line in _read_proc("/proc/meminfo").splitlines()}
    vmstat = [line.split()[0].decode() for line in _read_proc("/proc/vmstat").splitlines() if line.strip()]
    return ([f for f in MEMINFO_FIELDS if f in meminfo] + [f for f in VMSTAT_FIELDS if f in vmstat]
            + [f for f in vmstat if "readahead" in f and f not in VMSTAT_FIELDS])


def _read_memory(fields):
    values = {}
    for path in ("/proc/meminfo", "/proc/vmstat"):
        for line in _read_proc(path).splitlines():
            parts = line.split()
            if len(parts) >= 2:
                values[parts[0].rstrip(b":").decode()] = int(parts[1])
    return [values.get(f, 0) for f in fields]


def _pressure_fields():
    """``RESOURCE_some`` / ``RESOURCE_full`` for the /proc/pressure files this kernel has."""
    fields = []
    for res in PSI_RESOURCES:
        try:
            text = _read_proc("/proc/pressure/%s" % res)
        except OSError:
            continue
        fields += ["%s_%s" % (res, line.split()[0].decode()) for line in text.splitlines() if line.strip()]
    return fields


def _read_pressure(fields):
    values = {}
    for res in sorted({f.rsplit("_", 1)[0] for f in fields}):
        for line in _read_proc("/proc/pressure/%s" % res).splitlines():
            parts = line.split()
            if parts and parts[-1].startswith(b"total="):
                values["%s_%s" % (res, parts[0].decode())] = int(parts[-1][6:])
    return [values.get(f, 0) for f in fields]


def _read_process():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [round(ru.ru_utime, 6), round(ru.ru_stime, 6), ru.ru_nvcsw, ru.ru_nivcsw, ru.ru_majflt, ru.ru_minflt]


def _peak_kib(pids):
    """The largest VmHWM (peak resident set, KiB) of ``pids`` and their children, 0 when none."""
    best = 0
    for pid in pids:
        try:
            for line in _read_proc("/proc/%d/status" % pid).splitlines():
                if line.startswith(b"VmHWM:"):
                    best = max(best, int(line.split()[1]))
            kids = _read_proc("/proc/%d/task/%d/children" % (pid, pid)).split()
        except (OSError, ValueError):
            continue
        if kids and pids[0] == pid:
            best = max(best, _peak_kib([int(k) for k in kids]))
    return best


_perf_refusals = {}  # perf's path -> why perf stat refuses to count on this host ("" when it counts)


def _perf_refusal(perf, path):
    """Why ``perf stat`` exits before it starts a command here (perf_event_paranoid, a
    seccomp profile), or "": asked once per runner, so a perf that cannot count never
    fails a run."""
    if perf not in _perf_refusals:
        probe = shutil.which("true", path=path) or "/bin/true"
        try:
            done = subprocess.run([perf, "stat", "-x", ",", "-e", ",".join(PERF_EVENTS), "--", probe],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=30)
            lines = [ln.strip() for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
            _perf_refusals[perf] = "" if done.returncode == 0 else (
                lines[0][:200] if lines else "perf stat exited with status %d" % done.returncode)
        except (OSError, subprocess.SubprocessError) as exc:
            _perf_refusals[perf] = str(exc)[:200]
    return _perf_refusals[perf]


class _Sampler(threading.Thread):
    """Samples /proc counters every ``interval`` seconds until halted."""

    def __init__(self, kinds, interval):
        threading.Thread.__init__(self, name="bmx-counters", daemon=True)
        self.kinds = kinds
        self.interval = max(interval, 0.05)
        self.devices = _block_devices() if "disk" in kinds else {}
        self.samples = []
        self.errors = []
        self.notes = []
        self.memory_fields = self._fields("memory", _memory_fields)
        self.pressure_fields = self._fields("pressure", _pressure_fields)
        if "pressure" in kinds and not self.pressure_fields:
            self.notes.append("pressure: no /proc/pressure on this host (a kernel without PSI, or psi=0)")
        self.pid = None
        self.cgroup = None
        self.peak_kib = 0
        self.peak_from = None
        self.perf_file = None
        self._halt = threading.Event()
        self._t0 = time.monotonic()
        self.sample()

    def _fields(self, kind, find):
        if kind not in self.kinds:
            return []
        try:
            return find()
        except (OSError, ValueError) as exc:
            self.errors.append("%s: %s" % (kind, exc))
            return []

    def wrap(self, argv, env):
        """``argv`` under ``perf stat`` when the run collects ``perf`` and the host has perf
        (else a note says why not); a command perf would not find runs unwrapped and fails
        to start as it would without perf."""
        if "perf" not in self.kinds:
            return argv
        path = env.get("PATH", os.defpath)
        perf = shutil.which("perf", path=path)
        if perf is None:
            self.notes.append("perf: hardware counters skipped, perf not found on the host's PATH")
            return argv
        if shutil.which(argv[0], path=path) is None:
            return argv
        refused = _perf_refusal(perf, path)
        if refused:
            self.notes.append("perf: hardware counters skipped (perf stat cannot count here: %s)" % refused)
            return argv
        fd, self.perf_file = tempfile.mkstemp(prefix="bmx-perf-", suffix=".csv")
        os.close(fd)
        return [perf, "stat", "-x", ",", "-o", self.perf_file, "-e", ",".join(PERF_EVENTS), "--"] + list(argv)

    def watch(self, pid, cgroup):
        """The workload's process and cgroup, whose peak memory the ``process`` source reads."""
        self.pid, self.cgroup = pid, cgroup

    def before_end(self):
        """The run's cgroup's peak memory, read before the sweep removes the cgroup."""
        if "process" not in self.kinds or not self.cgroup:
            return
        try:
            peak = int(_read_proc(os.path.join(self.cgroup, "memory.peak")).strip()) // 1024
        except (OSError, ValueError):
            return  # no memory controller here: the samples' VmHWM stands
        self.peak_kib, self.peak_from = peak, "cgroup"

    def sample(self):
        entry = {"t": round(time.monotonic() - self._t0, 6)}
        try:
            if "cpu" in self.kinds:
                entry["cpu"] = _read_cpu()
            if "disk" in self.kinds:
                entry["disk"] = _read_disks(self.devices)
            if self.memory_fields:
                entry["memory"] = _read_memory(self.memory_fields)
            if self.pressure_fields:
                entry["pressure"] = _read_pressure(self.pressure_fields)
            if "process" in self.kinds:
                entry["process"] = _read_process()
                if self.pid is not None and self.peak_from != "cgroup":
                    peak = _peak_kib([self.pid])
                    if peak > self.peak_kib:
                        self.peak_kib, self.peak_from = peak, "VmHWM"
        except (OSError, ValueError) as exc:
            self.errors.append("%.1fs: %s" % (entry["t"], exc))
            return
        self.samples.append(entry)

    def run(self):
        while not self._halt.wait(self.interval):
            self.sample()

    def halt(self):
        self._halt.set()
        if self.is_alive():
            self.join()
        self.sample()

    def _perf(self):
        """What perf stat wrote (its CSV text), read once and the file removed; None without."""
        if not self.perf_file:
            return None
        try:
            with open(self.perf_file) as fh:
                return fh.read()
        except OSError as exc:
            return "# %s" % exc
        finally:
            try:
                os.unlink(self.perf_file)
            except OSError:
                pass
            self.perf_file = None

    def document(self):
        doc = {"version": 1, "collect": self.kinds, "interval_s": self.interval,
               "cpu_fields": CPU_FIELDS, "disk_fields": DISK_FIELDS, "devices": self.devices,
               "errors": self.errors, "notes": self.notes, "samples": self.samples}
        if self.memory_fields:
            doc["memory_fields"] = self.memory_fields
        if self.pressure_fields:
            doc["pressure_fields"] = self.pressure_fields
        if "process" in self.kinds:
            doc["process_fields"] = PROCESS_FIELDS
            if self.peak_from:
                doc["process_peak"] = {"kib": self.peak_kib, "from": self.peak_from}
        perf = self._perf()
        if perf is not None:
            doc["perf"] = {"events": PERF_EVENTS, "output": perf}
        return doc


def _killed_text(killed, survivors):
    """A short phrase for the reason: what the sweep had to do, or ''."""
    parts = []
    forced = [k for k in killed if k["signal"] == "SIGKILL"]
    if forced:
        parts.append("%d process(es) ignored SIGTERM and got SIGKILL (%s)" % (
            len(forced), ", ".join(k["command"].split(" ")[0] for k in forced[:3])))
    if survivors:
        parts.append("%d process(es) survived SIGKILL: %s" % (
            len(survivors), ", ".join("%d %s" % (p["pid"], p["command"]) for p in survivors[:3])))
    return "; ".join(parts)


def _wait(proc, timeout):
    """``proc.wait(timeout)``, woken the moment the workload exits.

    Popen.wait with a timeout polls, sleeping 0.5 ms doubling up to 50 ms between
    polls: a run's end was seen up to 50 ms late (its duration_s that much too long,
    and a millisecond more for the shortest runs). A pidfd (Linux 5.3, Python 3.9)
    wakes the runner at once; without one, Popen.wait as before.

    Raises:
        subprocess.TimeoutExpired: the workload still runs after ``timeout`` seconds.
    """
    if not timeout or not hasattr(os, "pidfd_open"):
        return proc.wait(timeout=timeout)
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # an older kernel, or the process is gone already
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(min(max(deadline - time.monotonic(), 0), 86400) * 1000):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _end_run(containment, result, after):
    """End whatever the run left running; record it in ``result``."""
    global _child, _timer_pid
    if _sampler is not None:
        _sampler.before_end()  # the run's cgroup goes with the sweep: its peak memory first
    killed, survivors = containment.end()
    # The timer is no process of the workload's: what the sweep ended of the run is.
    killed = [k for k in killed if k["pid"] != _timer_pid]
    _timer_pid = None
    for k in killed:
        k["after"] = after
    result["killed"] = killed
    if survivors:
        result["survivors"] = survivors
    if _child is not None:
        result["exit_code"] = _child.returncode
    _child = None
    return killed, survivors


_workload_files = {}  # workdir -> [fd of its workload.json, bytes written so far]


def _write_workload_files(workdir, containment):
    """Let --stop end the workload even if this runner is killed outright.

    workload.json is opened once per runner and overwritten in place (padded with
    spaces, which JSON ignores): one write per run, no new file, no fsync (only a
    live host reads it; a crash ends the workload anyway).
    """
    data = json.dumps({"pid": _child.pid, "cgroup": containment.cgroup, "token": containment.token}).encode()
    entry = _workload_files.get(workdir)
    if entry is None:
        fd = os.open(os.path.join(workdir, "workload.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        entry = _workload_files[workdir] = [fd, 0]
    os.pwrite(entry[0], data.ljust(entry[1]), 0)
    entry[1] = max(entry[1], len(data))


_hostname = None


# ---------------------------------------------------------------- host environment

#: The host's CPU frequency, memory and kernel settings that make runs noisy or not
#: (what pyperf's metadata and ``pyperf system show`` read), under a root a test may move.
HOST_ROOT = "/"


def _read_text(*parts):
    try:
        with open(os.path.join(HOST_ROOT, *parts)) as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def load_average():
    """The 1-minute load average, or None."""
    if HOST_ROOT == "/":  # twice a run: getloadavg(3) reads the same file without a Python file object
        try:
            return round(os.getloadavg()[0], 2)
        except OSError:
            return None
    text = _read_text("proc", "loadavg")
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def host_environment():
    """The settings that make a host noisy, as one flat dict of text and numbers.

    ``governor`` (every CPU's cpufreq governor, distinct values joined by ``,``; None
    without cpufreq), ``turbo`` (``on``/``off``: intel_pstate's no_turbo or cpufreq's
    boost; None when neither exists), ``thp`` (transparent huge pages' selected mode),
    ``cmdline`` (the kernel command line), ``mitigations`` (how many CPU
    vulnerabilities are mitigated / reported vulnerable, and the kernel's
    ``mitigations=`` when given), ``numa_nodes`` and ``numa`` (each node's CPU list),
    ``cpus`` (online CPUs) and ``load_1m``.
    """
    cpu = ("sys", "devices", "system", "cpu")
    governors = set()
    try:
        names = sorted(n for n in os.listdir(os.path.join(HOST_ROOT, *cpu)) if n[3:].isdigit() and n.startswith("cpu"))
    except OSError:
        names = []
    for name in names:
        g = _read_text(*cpu, name, "cpufreq", "scaling_governor")
        if g:
            governors.add(g)
    no_turbo = _read_text(*cpu, "intel_pstate", "no_turbo")
    boost = _read_text(*cpu, "cpufreq", "boost")
    turbo = ("off" if no_turbo == "1" else "on") if no_turbo in ("0", "1") else \
        ("on" if boost == "1" else "off") if boost in ("0", "1") else None
    thp = _read_text("sys", "kernel", "mm", "transparent_hugepage", "enabled")
    if thp and "[" in thp:
        thp = thp[thp.index("[") + 1:thp.index("]")] if "]" in thp else thp
    cmdline = _read_text("proc", "cmdline")
    vulns = os.path.join(HOST_ROOT, *cpu, "vulnerabilities")
    counts = {"mitigated": 0, "vulnerable": 0, "unaffected": 0}
    try:
        for name in sorted(os.listdir(vulns)):
            state = (_read_text(*cpu, "vulnerabilities", name) or "").lower()
            key = "unaffected" if state.startswith("not affected") else \
                "vulnerable" if state.startswith("vulnerable") else "mitigated"
            counts[key] += 1
    except OSError:
        counts = None
    given = [w.split("=", 1)[1] for w in (cmdline or "").split() if w.startswith("mitigations=")]
    mitigations = None
    if counts is not None:
        mitigations = "%d mitigated, %d vulnerable" % (counts["mitigated"], counts["vulnerable"])
        if given:
            mitigations += ", mitigations=" + given[-1]
    numa = {}
    node_dir = os.path.join(HOST_ROOT, "sys", "devices", "system", "node")
    try:
        for name in sorted(os.listdir(node_dir)):
            if name.startswith("node") and name[4:].isdigit():
                numa[name] = _read_text("sys", "devices", "system", "node", name, "cpulist") or ""
    except OSError:
        pass
    online = _read_text(*cpu, "online")
    return {"governor": ",".join(sorted(governors)) or None, "turbo": turbo, "thp": thp, "cmdline": cmdline,
            "mitigations": mitigations, "numa_nodes": len(numa) or None,
            "numa": " ".join("%s:%s" % kv for kv in sorted(numa.items())) or None,
            "cpus": _count_cpus(online) or os.cpu_count(), "load_1m": load_average()}


def _count_cpus(cpulist):
    """How many CPUs a kernel CPU list ("0-3,8") names; None when it does not parse."""
    try:
        total = 0
        for part in (cpulist or "").split(","):
            lo, _, hi = part.partition("-")
            total += int(hi or lo) - int(lo) + 1
        return total or None
    except ValueError:
        return None


_HOST_ENV = None  # the batch's, read once when it starts


def _host_name():
    global _hostname
    if _hostname is None:
        _hostname = socket.gethostname()
    return _hostname


#: The runs' results on the host, one JSON line each in the order they finished.
RESULTS_INDEX = "results.jsonl"
#: The files of a run on the host (``runs/RUN_ID.ATTEMPT.NAME``), as the archive names them.
RUN_FILES = ("stdout", "stderr", "counters.json", "usage.json")


def _run_base(workdir, run_id, attempt):
    """The prefix of a run's files on the host: ``runs/RUN_ID.ATTEMPT``."""
    return os.path.join(workdir, "runs", "%s.%s" % (run_id, attempt))


def run_file(workdir, run_id, attempt, name):
    """Where a run's file ``name`` (one of RUN_FILES, or "inputs": the directory of its
    inputs) is on the host: ``runs/RUN_ID.ATTEMPT.NAME``."""
    return _run_base(workdir, run_id, attempt) + "." + name


def old_run_dir(workdir, run_id, attempt):
    """A run's directory in the layout of runners before the flat one (runs/RUN_ID/ATTEMPT),
    still read: a campaign whose host got a newer runner mid-campaign."""
    return os.path.join(workdir, "runs", run_id, str(attempt))


def _key(run):
    return run["run_id"], str(run["attempt"])


#: The start of a result line as :func:`_index_result` writes it: the run's key without
#: parsing the whole line (a campaign's index holds every run of it, a batch wants a few).
_INDEX_KEY = re.compile(rb'\{"version": -?\d+, "run_id": ("(?:[^"\\]|\\.)*"), "attempt": (-?\d+)[,}]')


def read_results(workdir, wanted=None):
    """The runs in ``workdir``'s results index: (run_id, str(attempt)) -> (the result's line
    (bytes), the result), the last complete line of each run; ``wanted``: only these keys.

    A line a crash cut short does not parse and is left out (its run is executed again,
    and a later line is appended for it). The output sizes are not checked here
    (:func:`finished_runs` does).
    """
    try:
        with open(os.path.join(workdir, "runs", RESULTS_INDEX), "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    lines = {}
    for line in data.split(b"\n"):
        if not line:
            continue
        match = _INDEX_KEY.match(line) if wanted is not None else None
        if match is not None:  # a line of another run is skipped unparsed
            try:
                if (json.loads(match.group(1)), match.group(2).decode()) not in wanted:
                    continue
            except ValueError:
                continue
        try:
            result = json.loads(line)
            key = (result["run_id"], str(result["attempt"]))
        except (ValueError, KeyError, TypeError):
            continue
        if wanted is None or key in wanted:
            lines[key] = (line, result)
    return lines


def read_result(workdir, run_id, attempt):
    """The result of one run on the host (its last line in the index, else its result.json in
    the layout before), or None."""
    key = (run_id, str(attempt))
    found = read_results(workdir, {key}).get(key)
    if found is not None:
        return found[1]
    try:
        with open(os.path.join(old_run_dir(workdir, run_id, attempt), "result.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _sizes_match(sizes, path_of):
    """Whether the run's outputs have the ``sizes`` its result records (``path_of(name)``)."""
    try:
        return all(os.path.getsize(path_of(name)) == size for name, size in sizes.items())
    except (OSError, TypeError, AttributeError):
        return False


def finished_runs(workdir, runs):
    """The runs among ``runs`` that finished in ``workdir``: (run_id, str(attempt)) -> (the
    result's line in the index (bytes), the result), or None for a finished run of the
    layout before.

    A run is finished when its result parses and its stdout and stderr have the sizes it
    records. Runs are written without an fsync each, so after a host crash (power loss) a
    run may have a short output file or a cut line: not finished, executed again.
    """
    found = read_results(workdir, {_key(run) for run in runs})
    done = {}
    for run in runs:
        key = _key(run)
        if key in found:
            base = _run_base(workdir, run["run_id"], run["attempt"])
            if _sizes_match(found[key][1].get("output_bytes") or {}, lambda name, base=base: base + "." + name):
                done[key] = found[key]
        elif finished(old_run_dir(workdir, run["run_id"], run["attempt"])):
            done[key] = None
    return done


def finished(run_dir):
    """Whether ``run_dir`` (the layout before the flat one: runs/RUN_ID/ATTEMPT/) holds a
    complete run: its result.json parses and its stdout and stderr have the sizes it records.
    (A result.json from a runner before output_bytes has no sizes to check.)
    """
    try:
        with open(os.path.join(run_dir, "result.json")) as fh:
            result = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(result, dict):
        return False
    return _sizes_match(result.get("output_bytes") or {}, lambda name: os.path.join(run_dir, name))


_last_line = {}  # workdir -> the result line execute appended last there


_index_fds = {}  # workdir -> its results index, held open by main() for the batch


def _open_index(workdir):
    """The results index of ``workdir``, opened for appending, a line a crash cut short
    ended first (so that the next line parses): a file descriptor."""
    fd = os.open(os.path.join(workdir, "runs", RESULTS_INDEX), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end and os.pread(fd, 1, end - 1) != b"\n":
            os.write(fd, b"\n")
    except OSError:
        os.close(fd)
        raise
    return fd


def _hold_index(workdir):
    """Keep ``workdir``'s results index open until :func:`_release_index` (main(), for its
    batch: each run's line is then one write, not an open, a seek, a read and a close)."""
    _index_fds[workdir] = _open_index(workdir)


def _release_index(workdir):
    fd = _index_fds.pop(workdir, None)
    if fd is not None:
        os.close(fd)


def _index_result(workdir, result, out, errf):
    """Append the run's result line to the index, with the sizes of its stdout and stderr
    (see :func:`finished_runs`); returns the line. One write, no fsync."""
    result["output_bytes"] = {"stdout": os.fstat(out).st_size if out is not None else 0,
                              "stderr": os.fstat(errf).st_size if errf is not None else 0}
    line = json.dumps(result).encode()  # one line: the C encoder
    held = _index_fds.get(workdir)
    fd = _open_index(workdir) if held is None else held
    try:
        written = os.write(fd, line + b"\n")
    except OSError:
        if held is not None:
            _release_index(workdir)  # reopened by the next line, which heals what this one left
        raise
    finally:
        if held is None:
            os.close(fd)
    if written != len(line) + 1 and held is not None:
        _release_index(workdir)  # a short write (a full disk): the next line heals it
    _last_line[workdir] = line
    return line


def _index_line(workdir):
    """The result line :func:`execute` appended last in ``workdir``."""
    return _last_line.pop(workdir)


def _remove_run_files(base, inputs=True):
    """Delete what an unfinished execution of a run left (``base``: runs/RUN_ID.ATTEMPT),
    its inputs directory too unless ``inputs`` is false."""
    for name in RUN_FILES:
        try:
            os.unlink(base + "." + name)
        except OSError:
            pass
    if inputs:
        shutil.rmtree(base + ".inputs", ignore_errors=True)


# shape: one run's lifecycle in one try: before_run, contained workload, end, finalize; cleanup needs every handle
def execute(run, workdir, containment="auto", grace_s=KILL_GRACE_S, knobs=None, share_cgroup=False, environ=None):
    """Execute one run; returns its result dict. Raises Interrupted.

    Args:
        run: The run's manifest entry.
        workdir: The runner's work directory.
        containment: "auto" (a cgroup v2 of the run's own where possible) or
            "process_tree" (see :class:`Containment`).
        grace_s: Seconds between SIGTERM and SIGKILL for the run's processes.
        knobs: What :meth:`LiveKnobs.prepare` says of the run's knobs: ``states``
            (recorded as the result's ``knobs``) and ``error`` (a knob missed its
            value: the run is ``invalid``, nothing of it runs); None when the runner
            set none.
        share_cgroup: Run in the cgroup the runner's runs take turns in (Containment's
            ``share``: the runner's own loop), unless the run measures its peak memory
            (``collect: [process]``: a cgroup's memory.peak counts from its creation).
        environ: The environment the run's own ``env`` is added to (main() reads the
            runner's once); None: ``os.environ``.
    """
    global _child
    base = _run_base(workdir, run["run_id"], run["attempt"])
    if workdir not in _index_fds:  # main() holds the index in runs/: made; a caller of execute alone
        os.makedirs(os.path.dirname(base), mode=0o700, exist_ok=True)
    result = {
        "version": RESULT_VERSION, "run_id": run["run_id"], "attempt": run["attempt"],
        "seq": run.get("seq"), "argv": run["argv"], "hostname": _host_name(),
        "exit_code": None, "outcome": None, "error": None, "started_at": None,
        # The load before the run (its before_run steps included) and after it: a busy host shows.
        "host_env": _HOST_ENV, "load_before": load_average(),
    }
    knobs = knobs or {}
    if knobs.get("states"):
        result["knobs"] = knobs["states"]
    t0 = time.monotonic()
    cont = None
    out = errf = None
    refused = knobs.get("error")
    usage = base + "." + USAGE_FILE if run.get("measure") else None
    try:
        if refused:  # the host is not in the run's setting: nothing of the run runs
            result["before_run"], err = [], None
        else:
            result["before_run"], err = _before_run(run.get("before_run", []))
            err = err or _prepare_run(run, base, result)
        out, errf = _open_outputs(base)
        timeout = run.get("timeout")
        result["started_at"] = None if refused else time.time()
        t0 = time.monotonic()
        if refused:
            result["outcome"], result["error"] = "invalid", refused
        elif err:
            result["outcome"], result["error"] = "before_run_failed", err
        else:
            share = share_cgroup and "process" not in (run.get("collect") or [])
            cont = Containment(containment, grace_s, share=share)
            try:
                env = dict(os.environ if environ is None else environ)
                env.update(run.get("env") or {})
                _child = _start_workload(run, out, errf, env, cont, usage)
            except OSError as exc:
                result["outcome"] = "start_failed"
                result["error"] = "cannot start %s: %s" % (run["argv"][0], exc.strerror or exc)
                cont.end()
            else:
                result["pid"] = _child.pid
                result["containment"] = cont.mode
                if cont.why_not_cgroup and containment != "process_tree":
                    result["containment_note"] = cont.why_not_cgroup
                if "affinity" in result:
                    try:  # the CPUs the workload really got, read back from the process
                        result["affinity_applied"] = sorted(os.sched_getaffinity(_child.pid))
                    except OSError:
                        pass
                _write_workload_files(workdir, cont)
                try:
                    result["exit_code"] = _wait(_child, timeout)
                    result["outcome"] = "exited"
                    # Whatever the workload left running ends now, before the next run.
                    _end_run(cont, result, "exit")
                except subprocess.TimeoutExpired:
                    killed, survivors = _end_run(cont, result, "timeout")
                    result["outcome"] = "timeout"
                    result["error"] = "killed after the %gs timeout" % timeout
                    extra = _killed_text(killed, survivors)
                    if extra:
                        result["error"] += "; " + extra
                if usage:
                    _take_usage(usage, run, result)
            cont = None
        _finish_counters(base, result)
        result["ended_at"] = time.time()
        result["duration_s"] = round(time.monotonic() - t0, 6)
        result["load_after"] = load_average()
        _index_result(workdir, result, out, errf)
        _close(out, errf)
        return result
    except Interrupted as exc:
        if cont is not None:
            _end_run(cont, result, "interrupt")
        if result.get("started_at") is None:
            _close(out, errf)
            _remove_run_files(base)
            raise
        # The workload had started: keep the attempt, marked interrupted, so the
        # controller records it and plans its next attempt (it is never a measurement).
        _finish_counters(base, result)
        result["outcome"] = "interrupted"
        result["error"] = "interrupted by %s after %.1fs" % (exc, time.monotonic() - t0)
        result["ended_at"] = time.time()
        result["duration_s"] = round(time.monotonic() - t0, 6)
        _index_result(workdir, result, out, errf)
        _close(out, errf)
        raise
    except BaseException:
        if cont is not None:
            _end_run(cont, result, "error")
        _stop_counters()
        _close(out, errf)
        _remove_run_files(base)
        raise


def _close(*fds):
    """Close a run's output descriptors (None: not opened)."""
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _acquire_lock(workdir):
    """Hold the workdir's lock, ending a runner left over from an interrupted batch."""
    fh = open(os.path.join(workdir, "runner.lock"), "a+")
    deadline = time.monotonic() + 30
    signalled = False
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if not signalled:
            try:
                with open(os.path.join(workdir, "runner.pid")) as pf:
                    os.kill(int(pf.read().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
            signalled = True
        if time.monotonic() > deadline:
            raise SystemExit("benchmatrix batch runner: another runner holds %s" % fh.name)
        time.sleep(0.1)
    _fsync_write(os.path.join(workdir, "runner.pid"), str(os.getpid()))
    return fh


def sync_filesystem(path):
    """Flush the file system holding ``path`` to disk: syncfs(2), else sync(2).

    Once per execution, before the archive: the runs themselves are written without
    an fsync each (:func:`finished` tells a complete run from one a crash cut short).
    The controller's benchmatrix.files uses it too (one copy; the runner imports
    nothing from benchmatrix, it runs on hosts without it).
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


def _archive(manifest, workdir, done):
    """``batches/BATCH.tar.gz``: the manifest's runs in ``done`` (:func:`finished_runs`), in
    order, each as ``runs/RUN_ID/ATTEMPT/NAME`` members (result.json: its index line)."""
    path = manifest["archive"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    sync_filesystem(workdir)
    with gzip.GzipFile(tmp, "wb", compresslevel=1) as out:
        for run in manifest["runs"]:
            key = _key(run)
            if key not in done:
                continue
            rel = "runs/%s/%s" % key
            if done[key] is None:  # a run of the layout before
                _add_tree(out, old_run_dir(workdir, run["run_id"], run["attempt"]), rel)
            else:
                _add_run(out, _run_base(workdir, run["run_id"], run["attempt"]), rel, *done[key])
        out.write(bytes(2 * _BLOCK))  # the end-of-archive marker: two zero blocks
    os.replace(tmp, path)
    return path


#: A tar block; members and their headers are padded to whole blocks.
_BLOCK = 512


def _add_tree(out, top, arcname):
    """Write the regular files of a run's directory to ``out`` as tar members (GNU format,
    which tarfile reads). No directory members: the controller takes file contents only.
    Headers are packed here rather than by tarfile.addfile, which cost about 0.2 ms a run
    more for short runs (TarInfo copies, field encoders; bench/README.md)."""
    for name in sorted(os.listdir(top)):
        path = os.path.join(top, name)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            _add_tree(out, path, arcname + "/" + name)
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as fh:
                out.write(_tar_header(arcname + "/" + name, st))
                _copy(fh, out, st.st_size, path)
            out.write(bytes(-st.st_size % _BLOCK))  # to a whole block


def _add_run(out, base, arcname, line, result):
    """Write a run's files (flat layout: ``base``.NAME) to ``out`` as the members a run
    directory held: its result ``line`` as result.json, its outputs, and the files its
    ``result`` says it has."""
    names = ["stderr", "stdout"]
    if result.get("counters"):
        names.append("counters.json")
    if result.get("usage"):
        names.append("usage.json")
    stdout = os.lstat(base + ".stdout")
    # result.json: the line, with its stdout's owner, mode and time
    out.write(_tar_header(arcname + "/result.json", _Stat(stdout, len(line))))
    out.write(line + bytes(-len(line) % _BLOCK))
    if os.path.isdir(base + ".inputs"):
        _add_tree(out, base + ".inputs", arcname + "/inputs")
    for name in sorted(names):
        path = base + "." + name
        st = stdout if name == "stdout" else os.lstat(path)
        with open(path, "rb") as fh:
            out.write(_tar_header(arcname + "/" + name, st))
            _copy(fh, out, st.st_size, path)
        out.write(bytes(-st.st_size % _BLOCK))  # to a whole block


class _Stat:
    """``st`` with another size (a member made from bytes, not a file)."""

    def __init__(self, st, size):
        self.st_mode, self.st_uid, self.st_gid, self.st_mtime = st.st_mode, st.st_uid, st.st_gid, st.st_mtime
        self.st_size = size


def _copy(src, dst, size, path):
    """Copy the first ``size`` bytes of ``src`` (``path``) to ``dst``, the size its member
    header promised: what a process that survived its run appends later is left out, as
    tarfile did; a file that shrank is an error (tarfile's too)."""
    while size:
        chunk = src.read(min(size, 1 << 20))
        if not chunk:
            raise OSError(errno.EIO, "%s shrank while it was archived" % path)
        dst.write(chunk)
        size -= len(chunk)


#: Numeric fields of a tar header that fit octal: (width, largest value).
_OCTAL_MAX = {8: 8 ** 7 - 1, 12: 8 ** 11 - 1}


def _tar_header(name, st):
    """The member header of a regular file (``os.lstat``'s ``st``), GNU format.

    The usual member (an ASCII name under 100 bytes, octal sizes and ids) is packed
    here; any other goes through tarfile.TarInfo.tobuf (long names, huge sizes).
    """
    mode, uid, gid, size, mtime = st.st_mode & 0o7777, st.st_uid, st.st_gid, st.st_size, int(st.st_mtime)
    encoded = name.encode("ascii", "ignore")
    if (len(encoded) != len(name) or len(encoded) >= 100 or uid > _OCTAL_MAX[8] or gid > _OCTAL_MAX[8]
            or size > _OCTAL_MAX[12] or not 0 <= mtime <= _OCTAL_MAX[12]):
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.uid, info.gid, info.size, info.mtime = tarfile.REGTYPE, mode, uid, gid, size, mtime
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    head = b"".join((
        encoded.ljust(100, b"\0"), b"%07o\0" % mode, b"%07o\0" % uid, b"%07o\0" % gid,
        b"%011o\0" % size, b"%011o\0" % mtime, b" " * 8, tarfile.REGTYPE, bytes(100),
        tarfile.GNU_MAGIC, bytes(32 + 32 + 8 + 8 + 155 + 12)))
    # The checksum: the sum of the header's bytes with its own field read as spaces.
    return head[:148] + b"%06o\0 " % sum(head) + head[156:]


class ArchiveError(Exception):
    """A batch archive that is not a whole tar archive (a bad header checksum, cut short)."""


def _tar_number(field):
    """A numeric header field: octal digits, or GNU's base-256 for large values."""
    if field[0] in (0x80, 0xFF):
        n = int.from_bytes(field[1:], "big")
        return n - (1 << (8 * len(field) - 8)) if field[0] == 0xFF else n
    digits = field.split(b"\0", 1)[0].strip()
    try:
        return int(digits, 8) if digits else 0
    except ValueError:
        raise ArchiveError("a member header's field %r is not a number" % bytes(field)) from None


def _pax_fields(data):
    """The records of a pax extended header: ``LENGTH KEY=VALUE\\n`` each."""
    fields, pos = {}, 0
    try:
        while pos < len(data):
            space = data.index(b" ", pos)
            length = int(data[pos:space])
            if length <= space - pos:
                raise ValueError("a record shorter than its own length field")
            key, _, value = data[space + 1:pos + length - 1].partition(b"=")
            fields[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
            pos += length
    except ValueError as exc:  # no space, a length that is no number, or one that cannot be
        raise ArchiveError("a pax header's records do not parse: %s" % exc) from None
    return fields


def read_archive(fileobj):
    """The members of a tar stream (``fileobj``, already decompressed), in order.

    The controller's reader of the batch archives :func:`_archive` writes (issue 34: about
    0.1 ms a run less than tarfile's): yields ``(name, regular, data)`` for each member,
    ``data`` a function returning its next chunk (b"" at the end) that is only valid until
    the next member. It reads what tarfile writes too: GNU long names, pax headers (their
    path and size), ustar prefixes, base-256 numbers.

    Raises:
        ArchiveError: A header whose checksum does not hold, or a stream cut short.
    """
    long_name, pax = None, {}
    while True:
        head = fileobj.read(_BLOCK)
        if len(head) < _BLOCK or not any(head):
            if head and any(head):
                raise ArchiveError("the archive is cut short")
            return  # the end-of-archive marker (or none: a stream that just ends)
        rest = head[:148] + head[156:]
        unsigned = sum(rest) + 8 * 32  # the checksum field itself counts as spaces
        checksum = _tar_number(head[148:156])
        # Old writers summed signed bytes: accepted too, as tarfile does (counted only then).
        if checksum != unsigned and checksum != unsigned - 256 * sum(b >= 128 for b in rest):
            raise ArchiveError("a member header's checksum does not hold")
        kind, size = head[156:157], _tar_number(head[124:136])
        name = head[:100].split(b"\0", 1)[0]
        if head[257:263] == b"ustar\0" and head[345] != 0:
            name = head[345:500].split(b"\0", 1)[0] + b"/" + name
        name = name.decode("utf-8", "surrogateescape")
        if kind in (b"L", b"x", b"g", b"K"):  # a header for the next member
            data = _read_exactly(fileobj, size + (-size % _BLOCK))[:size]
            if kind == b"L":
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif kind == b"x":
                pax = _pax_fields(data)
            continue
        name = pax.get("path") or long_name or name
        if "size" in pax:
            if not pax["size"].isdigit():
                raise ArchiveError("a pax header's size %r is not a number" % pax["size"])
            size = int(pax["size"])
        long_name, pax = None, {}
        if kind in (b"1", b"2", b"3", b"4", b"5", b"6"):  # links, devices, directories, fifos: no data
            size = 0
        left = [size]

        def chunk(n=1 << 20, left=left):
            data = fileobj.read(min(n, left[0]))
            if left[0] and not data:
                raise ArchiveError("the archive is cut short")
            left[0] -= len(data)
            return data

        # An old-style regular file whose name ends in "/" is a directory (as tarfile reads it).
        regular = kind in (b"0", b"\0", b"7") and not name.endswith("/")
        yield (name if regular else name.rstrip("/")), regular, chunk
        while left[0]:
            chunk()
        _read_exactly(fileobj, -size % _BLOCK)


def _read_exactly(fileobj, n):
    data = fileobj.read(n)
    if len(data) != n:
        raise ArchiveError("the archive is cut short")
    return data


#: A slice whose first runs all failed alike ends early (bmx run's doomed campaign, the
#: rule of benchmatrix.results.status.doomed_reason on the runner's own view of a run):
#: this many failed runs ...
DOOMED_RUNS = 5
#: ... over this many cells (the manifest entries' ``cell_id``), none exited 0, one way of failing.
DOOMED_CELLS = 2
# Words holding a digit (numbers, ids, pids): what differs between runs failing alike.
_RUN_SPECIFIC = re.compile(r"[0-9A-Za-z_]*[0-9][0-9A-Za-z_]*")


class _Doom:
    """Whether the slice should end here because its first runs all failed the same way.

    Ending the slice early hands the failed runs' records to the controller at once,
    which stops the campaign (or goes on, with --keep-going-on-failures, in a next slice).
    It happens once per batch while the controller goes on (``keep_going``: ``bmx run
    --keep-going-on-failures``; ``batches/BATCH.doomed`` marks it), so such a campaign
    pays one extra slice per batch at most. Without it, the controller stopped the
    campaign, and a batch run again unfixed ends early again.
    """

    def __init__(self, workdir, batch, keep_going=True):
        self.marker = os.path.join(workdir, "batches", batch + ".doomed")
        self.off = keep_going and os.path.exists(self.marker)
        self.ways, self.cells, self.failed = set(), set(), 0

    def note(self, run, result):
        """Count one finished run; True when the slice should end after it."""
        outcome = result.get("outcome")
        if self.off or outcome == "interrupted":
            return False
        if outcome == "exited" and result.get("exit_code") == 0:
            self.off = True  # a run that works: the campaign is not doomed
            return False
        self.failed += 1
        self.cells.add(str(run.get("cell_id")))
        self.ways.add((outcome, result.get("exit_code"), _RUN_SPECIFIC.sub("#", str(result.get("error") or ""))))
        if len(self.ways) > 1:
            self.off = True
            return False
        if self.failed < DOOMED_RUNS or len(self.cells) < DOOMED_CELLS:
            return False
        self.off = True
        try:
            open(self.marker, "w").close()
        except OSError:
            pass  # then a next slice may end early once more
        return True


class _Progress:
    """``batches/BATCH.progress``: one JSON line appended per finished run (no fsync).

    The controller reads it while the batch runs (with each lease renewal), so
    ``bmx status`` sees the runs a long batch has finished before their results come
    back. The file stays open for the whole batch: one write per run.
    """

    def __init__(self, workdir, batch):
        try:
            self.fh = open(os.path.join(workdir, "batches", batch + ".progress"), "a")
        except OSError:
            self.fh = None  # progress is a courtesy: the results themselves are in runs/

    def note(self, result):
        if self.fh is None:
            return
        line = json.dumps({"run_id": result["run_id"], "attempt": result["attempt"],
                           "outcome": result.get("outcome"), "exit_code": result.get("exit_code"),
                           "ended_at": result.get("ended_at")})
        try:
            self.fh.write(line + "\n")
            self.fh.flush()
        except OSError:
            pass

    def close(self):
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass


def _remove_old_archives(workdir, batch, keep=None):
    """Delete the archives (manifests, progress files) earlier batches left in ``batches/``.

    The controller has fetched an earlier batch's archive before it starts the next
    batch on this host (a host's batches run one after the other), so the runner
    clears them itself instead of a module call per batch. ``keep`` (this batch's own
    archive, from an interrupted execution) is rebuilt at the end anyway; the batch's
    own progress file goes on.
    """
    directory = os.path.join(workdir, "batches")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if path != keep and name != batch + ".progress" and name.endswith(
                (".tar.gz", ".tar.gz.tmp", ".json", ".progress")):
            try:
                os.unlink(path)
            except OSError:
                pass


def _file_digest(path):
    """SHA-256 of a file ("" when it cannot be read)."""
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return ""


def _own_digest():
    """SHA-256 of this file: the controller names the runner it expects."""
    return _file_digest(os.path.abspath(__file__))


def _stale(manifest):
    """Why the installed runner is not the one the controller expects, or ''."""
    want = manifest.get("runner_digest")
    if want and want != _own_digest():
        # The controller's benchmatrix changed since the host's first batch call installed this copy.
        return "installed copy differs from the controller's"
    want = manifest.get("knobs_digest")
    if want and want != _file_digest(_knobs_path()):
        return "its knob backends %s are missing or differ from the controller's" % _knobs_path()
    return ""


def _lock_is_free(workdir):
    try:
        fh = open(os.path.join(workdir, "runner.lock"), "a+")
    except OSError:
        return True
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        fh.close()


def _read_pid(path):
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _workload_pid(workdir):
    """The PID of the workload in flight (workload.json; workload.pid from an older runner)."""
    try:
        with open(os.path.join(workdir, "workload.json")) as fh:
            pid = json.load(fh).get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool):
            return pid
    except (OSError, ValueError, AttributeError):
        pass
    return _read_pid(os.path.join(workdir, "workload.pid"))


def _kill_leftover_workload(workdir):
    """SIGKILL every process of the last workload that is still alive; returns how many.

    Reads workload.json (the run's cgroup and marker), never a bare PID, so a reused
    PID is never hit.
    """
    try:
        with open(os.path.join(workdir, "workload.json")) as fh:
            info = json.load(fh)
    except (OSError, ValueError):
        return 0
    pids = set()
    cgroup = info.get("cgroup")
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as fh:
                pids.update(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            pass
    pids |= _marked(info.get("token"), _proc_table())
    pids.discard(os.getpid())
    killed = len(pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    # Gone before the caller goes on: the next run must not share the host with them.
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = set(p for p in pids if (_stat(p) or (0, 0, 0, "X"))[3] not in ("Z", "X"))
        if pids:
            time.sleep(0.02)
    if cgroup:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.rmdir(cgroup)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
    return killed


def _remove_stale_run_cgroups(workdir):
    """Remove the empty run cgroups (``benchmatrix-run-PID-ID``) whose runner is dead,
    under this runner's cgroup and the one workload.json names; returns how many.

    A runner killed outright leaves the cgroup of its run in flight. A cgroup of a live
    PID (another runner's run) is left alone, and one with a process in it cannot be
    removed (rmdir fails), so nothing in use is touched.
    """
    homes = set([_own_cgroup_v2()])
    try:
        with open(os.path.join(workdir, "workload.json")) as fh:
            homes.add(os.path.dirname(json.load(fh).get("cgroup") or ""))
    except (OSError, ValueError, AttributeError):
        pass
    removed = 0
    for home in homes - set([None, ""]):
        try:
            names = os.listdir(home)
        except OSError:
            continue
        for name in names:
            if not name.startswith(CGROUP_PREFIX):
                continue
            try:
                owner = int(name[len(CGROUP_PREFIX):].split("-", 1)[0])
            except ValueError:
                continue
            if owner == os.getpid() or os.path.exists("/proc/%d" % owner):
                continue
            try:
                os.rmdir(os.path.join(home, name))
                removed += 1
            except OSError:
                pass  # a process is still inside
    return removed


def stop(workdir, wait_s=30.0):
    """End the runner working in ``workdir`` (SIGTERM, then SIGKILL) and its workload."""
    if _lock_is_free(workdir):
        # No runner, but a runner killed outright may have left its workload running.
        killed = _kill_leftover_workload(workdir)
        _remove_stale_run_cgroups(workdir)
        return {"stopped": False, "killed": killed}
    pid = _read_pid(os.path.join(workdir, "runner.pid"))
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not _lock_is_free(workdir):
        time.sleep(0.1)
    forced = not _lock_is_free(workdir)
    if forced and pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wpid = _workload_pid(workdir)
        if wpid:
            try:
                os.killpg(wpid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    killed = _kill_leftover_workload(workdir)
    _remove_stale_run_cgroups(workdir)
    return {"stopped": True, "pid": pid, "forced": forced, "killed": killed}


def _owner_only(workdir):
    """Close a work directory made by an older benchmatrix (0755) to other users."""
    try:
        if os.stat(workdir).st_mode & 0o077:
            os.chmod(workdir, 0o700)
    except OSError:
        pass  # not ours to change: the directories Ansible makes are 0700 anyway


def _take_lease(workdir, batch, seconds):
    """Write the controller's lease on the batch as the runner starts (the manifest's
    ``lease_seconds``; 0 or absent: no lease), so the controller's first renewal is due
    only a quarter lease later: a short batch costs no renewal call at all."""
    if not seconds:
        return
    with open(os.path.join(workdir, "batches", batch + ".lease"), "w") as fh:
        fh.write("%d %s\n" % (int(seconds), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))


def _lease_expired(workdir, batch, restart=False):
    """Whether the controller's lease on the batch ran out (the controller is gone).

    The controller rewrites ``batches/BATCH.lease`` ("SECONDS TIMESTAMP") while the
    batch runs; without the file there is no lease (an older controller). ``restart``
    (at the runner's start) dates a lease left by an earlier execution of the batch
    from now.
    """
    path = os.path.join(workdir, "batches", batch + ".lease")
    try:
        if restart:
            os.utime(path)
        st = os.stat(path)
        seen = _lease_read.get(path)
        if seen is not None and seen[0] == st.st_mtime_ns:
            seconds = seen[1]  # checked before each run: read again only once renewed
        else:
            with open(path) as fh:
                seconds = float(fh.read().split()[0])
            _lease_read[path] = (st.st_mtime_ns, seconds)
        age = time.time() - st.st_mtime
    except (OSError, ValueError, IndexError):
        return False
    return seconds > 0 and age > seconds


_lease_read = {}  # lease path -> (its mtime_ns, its seconds) when last read


# ---------------------------------------------------------------- live knobs

#: The knob backends (benchmatrix/host/knobs.py, Ansible's bmx_knob module), installed
#: beside this file by the batch_runner role.
KNOBS_FILE = "knobs.py"
_knobs_module = None


def _knobs_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), KNOBS_FILE)


def _knob_backends():
    """knobs.py beside this file, imported once (a path import: the standard library
    only, as on the host); None when it is not installed."""
    global _knobs_module
    if _knobs_module is None:
        path = _knobs_path()
        if not os.path.isfile(path):
            return None
        import importlib.util

        spec = importlib.util.spec_from_file_location("bmx_knob_backends", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _knobs_module = module
    return _knobs_module


class KnobRefused(Exception):
    """A run's knobs cannot be set by the runner; the message says why, in one line."""


def _knob_values(items):
    """{factor: value as text} of knob items (how the backends compare values)."""
    return {k["factor"]: str(k.get("value")) for k in items or []}


def knob_miss(states):
    """The reason of a run whose knobs did not all reach their value, as the controller
    words it for a batch (benchmatrix.execute.batch): '' when every knob is ``ok``."""
    return "; ".join("knob %s: intended %r, actual %r" % (f, k["intended"], k["actual"])
                     for f, k in states.items() if not k.get("ok"))


class LiveKnobs:
    """The knobs of a batch's runs, set by the runner between runs (issue 23).

    Ansible sets the costly knobs of the batch's first run before the runner starts (the
    manifest's ``knobs``; reboots and service restarts stay there) and only reads the
    cost-none ones (items marked ``live``, for their baselines). Before each run
    whose items differ from the last applied values, :meth:`prepare` calls the
    backends' ``apply`` in-process, as the bmx_knob module does: every knob of cost
    class ``none`` is read, written where it differs and read back; every costlier
    knob is only read (``mode: read``): it must still hold the value Ansible set, and
    one whose value changes inside the batch is refused before anything is written.
    """

    def __init__(self, manifest):
        self.settings = manifest.get("knob_settings") or {}
        self.host = manifest.get("host") or _host_name()
        #: Where each knob's value before its first change is kept on the host, before
        #: the runner writes it (knobs.keep_baseline): the next campaign finds it even
        #: when the controller died before it recorded the baseline.
        self.baseline_dir = manifest.get("knob_baseline_dir") or ""
        #: What Ansible set: the only values a costlier knob may have in this batch (the
        #: ``live`` items it only read: the runner sets them, from the first run on).
        self.fixed = _knob_values([k for k in manifest.get("knobs") or [] if not k.get("live")])
        #: The values the host holds as far as the runner knows (None: unknown, set them again).
        self.values = dict(self.fixed)
        #: The states of the runner's last apply (None before its first one) and their run settings.
        self.states = None
        self.run_settings = {}

    def prepare(self, run):
        """(the run to execute, what its result records of its knobs, for :func:`execute`).

        The second item is None while the runs are in Ansible's setting (the controller
        records the batch call's states for them), else ``{"states": {FACTOR: state}}``
        (``changed`` true only for what this run's apply changed), with ``error`` when a
        knob was refused or missed its value (the run is then invalid).
        """
        items = run.get("knobs")
        if not items:
            return run, None
        values = _knob_values(items)
        if values == self.values:
            if self.states is None:
                return run, None
            states = dict((f, dict(s, changed=False)) for f, s in self.states.items())
            return dict(run, **self.run_settings), {"states": states}
        self.values, self.states = None, None  # unknown until the apply succeeds
        try:
            states, run_settings = self._apply(items)
        except KnobRefused as exc:
            return run, {"error": str(exc)}
        miss = knob_miss(states)
        if miss:
            return run, {"states": states, "error": miss}
        self.values, self.states, self.run_settings = values, states, run_settings
        return dict(run, **run_settings), {"states": states}

    def _apply(self, items):
        """Set the live knobs and read back all of ``items``: (states, merged run settings)."""
        for k in items:
            cost = k.get("cost") or "none"
            if cost != "none" and self.fixed.get(k["factor"]) != str(k.get("value")):
                raise KnobRefused(
                    "knob %s (%s, cost %s) changes inside batch to %r: the batch runner sets only knobs of cost "
                    "none; re-plan (bmx plan)" % (k["factor"], k.get("role"), cost, str(k.get("value"))))
        module = _knob_backends()
        if module is None:
            raise KnobRefused("the knob backends (%s) are not installed beside the batch runner on %s"
                              % (_knobs_path(), self.host))
        live = [k for k in items if (k.get("cost") or "none") == "none"]
        fixed = [k for k in items if (k.get("cost") or "none") != "none"]
        # A live knob never restarts a service between runs, whatever the host's own
        # *_allow_restart says: a change that needs one is refused (its runs invalid).
        no_restart = dict(self.settings, **{k["role"] + "_allow_restart": False for k in live})
        try:
            found = (module.apply(fixed, self.settings, self.host, mode="read", baseline_dir=self.baseline_dir)
                     if fixed else {})
            for state in found.values():
                state["changed"] = False  # read only: Ansible set it
            found.update(module.apply(live, no_restart, self.host, baseline_dir=self.baseline_dir) if live else {})
        except module.KnobError as exc:
            raise KnobRefused(str(exc)) from None
        except OSError as exc:
            raise KnobRefused("bmx_knob on %s: %s" % (self.host, exc)) from None
        except Exception as exc:  # noqa: BLE001 - a backend's surprise fails its run, not the batch
            raise KnobRefused("bmx_knob on %s: %s: %s" % (self.host, type(exc).__name__, exc)) from None
        states, run_settings = {}, {}
        for k in items:
            state = found[k["factor"]]
            run_settings.update(state.pop("run_settings", None) or {})
            states[k["factor"]] = state
        return states, run_settings


def manifest_runs(manifest):
    """The manifest's runs, each with the batch's ``run_settings`` on top of its own.

    Ansible hands them on as the JSON text the workload role made (one string, so it
    never walks the runs); a list is taken as it is.
    """
    runs = manifest.get("runs") or []
    if isinstance(runs, str):
        runs = json.loads(runs)
    settings = manifest.get("run_settings") or {}
    return [dict(run, **settings) for run in runs] if settings else runs


def _collect(manifest, workdir, summary, lock):
    """``collect_only``: archive the manifest's runs that finished here, run none.

    A run cut short (no complete result line) is left to the batch's next execution,
    which runs it again; the controller records it from the failed call.
    """
    done = finished_runs(workdir, manifest["runs"])
    summary["skipped"] = [run["run_id"] for run in manifest["runs"] if _key(run) in done]
    summary["deferred"] = [run["run_id"] for run in manifest["runs"] if _key(run) not in done]
    summary["archive"] = _archive(manifest, workdir, done)
    lock.close()
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


# shape: the runner's entry: arguments, manifest, workdir, signals, run loop, in the order the host needs
def main(argv):
    global _HOST_ENV
    if len(argv) == 2 and argv[1] == "--host-env":
        # bmx check asks the host the same questions a batch records.
        sys.stdout.write(json.dumps(host_environment()) + "\n")
        return 0
    if len(argv) == 3 and argv[1] == "--stop":
        sys.stdout.write(json.dumps(stop(argv[2])) + "\n")
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: batch_runner.py MANIFEST.json | - | --stop WORKDIR\n")
        return 2
    if argv[1] == "-":
        # Ansible passes the manifest on stdin: one module call, and no file on the host
        # ever holds the runs' environments (secrets).
        manifest = json.load(sys.stdin)
    else:
        with open(argv[1]) as fh:
            manifest = json.load(fh)
        # The manifest may carry secrets (the runs' environments): no copy stays on the host.
        os.unlink(argv[1])
    stale = _stale(manifest)
    if stale:
        # The playbook installs the current runner and knobs.py and starts it again.
        sys.stderr.write("benchmatrix batch runner: stale runner (%s)\n" % stale)
        return STALE_RUNNER_RC
    manifest["runs"] = manifest_runs(manifest)
    workdir = manifest["workdir"]
    # Owner only: the runs' raw outputs may show their environments; an older
    # benchmatrix made the workdir 0755, closed here.
    os.makedirs(os.path.join(workdir, "runs"), mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(workdir, "batches"), mode=0o700, exist_ok=True)
    _owner_only(workdir)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    # Orphans of a run come back to the runner, which finds, ends and reaps them.
    _set_subreaper()
    containment = manifest.get("containment") or "auto"
    if containment not in ("auto", "process_tree"):
        sys.stderr.write("benchmatrix batch runner: %s: containment must be auto or process_tree, not %r\n"
                         % (argv[1], containment))
        return 2
    grace_s = float(manifest.get("kill_grace_s", KILL_GRACE_S))
    stop_after_s = float(manifest.get("stop_after_s") or 0)
    collect_only = str(manifest.get("collect_only")).lower() == "true"  # JSON true, or Ansible's text
    started = time.monotonic()
    _HOST_ENV = host_environment()
    summary = {"batch": manifest["batch"], "executed": [], "skipped": [], "interrupted": None}
    progress = None
    try:
        lock = _acquire_lock(workdir)
        # A runner killed outright (SIGKILL, OOM) left its workload running and its run's
        # cgroup behind; holding the lock, no live runner of this workdir owns them.
        _kill_leftover_workload(workdir)
        _remove_stale_run_cgroups(workdir)
        _remove_old_archives(workdir, manifest["batch"], manifest.get("archive"))
        if collect_only:
            return _collect(manifest, workdir, summary, lock)
        _lease_expired(workdir, manifest["batch"], restart=True)
        _take_lease(workdir, manifest["batch"], manifest.get("lease_seconds"))
        progress = _Progress(workdir, manifest["batch"])
        # Absent (an older controller): the marker holds, as it always did.
        doom = _Doom(workdir, manifest["batch"], str(manifest.get("keep_going", True)).lower() == "true")
        live = LiveKnobs(manifest)
        environ = dict(os.environ)  # once: os.environ decodes every variable each time it is read
        runs = manifest["runs"]
        done = finished_runs(workdir, runs)  # by an earlier execution of the batch
        _hold_index(workdir)
        for i, run in enumerate(runs):
            if _key(run) in done:
                summary["skipped"].append(run["run_id"])
                continue
            if stop_after_s and summary["executed"] and time.monotonic() - started >= stop_after_s:
                # The time slice is over: the controller takes these results in and
                # starts the rest, so no result waits on the host for long.
                summary["deferred"] = [r["run_id"] for r in runs[i:]]
                break
            if _lease_expired(workdir, manifest["batch"]):
                summary["interrupted"] = "the controller stopped renewing its lease: stopped before the next run"
                sys.stdout.write(json.dumps(summary) + "\n")
                return 130
            run, knobs = live.prepare(run)
            result = execute(run, workdir, containment, grace_s, knobs, share_cgroup=True, environ=environ)
            done[_key(run)] = (_index_line(workdir), result)
            summary["executed"].append(run["run_id"])
            progress.note(result)
            if doom.note(run, result) and i + 1 < len(runs):
                summary["deferred"] = [r["run_id"] for r in runs[i + 1:]]
                summary["doomed"] = True
                break
        if manifest.get("direct"):
            # The controller is this machine (a host reached with the local connection): it
            # takes the runs' files from here (links, or copies), so no archive is packed (issue 34).
            sync_filesystem(workdir)
            summary["archive"] = None
        else:
            summary["archive"] = _archive(manifest, workdir, done)
        lock.close()
    except Interrupted as exc:
        summary["interrupted"] = str(exc)
        sys.stdout.write(json.dumps(summary) + "\n")
        return 130
    finally:
        _release_index(workdir)
        _remove_shared_cgroup()
        if progress is not None:
            progress.close()
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
