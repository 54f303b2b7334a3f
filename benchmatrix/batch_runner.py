#!/usr/bin/env python3
"""benchmatrix batch runner: executes one batch of runs on the host, in plan order.

Ansible copies this file to the host and starts it with a manifest (JSON). It must
run on any host with Python 3.8+, so it uses the standard library only and imports
nothing from benchmatrix.

Host layout under the manifest's ``workdir``::

    runs/RUN_ID/ATTEMPT/         a finished run: stdout, stderr, result.json, and
                                 counters.json (system counters, when the run
                                 collects them), inputs/ (files the run used)
    runs/RUN_ID/ATTEMPT.partial/ the run in flight (removed if it does not finish)
    batches/BATCH.tar.gz         the batch's finished runs, for Ansible to fetch
    runner.lock, runner.pid      one runner at a time per workdir

A run's directory is renamed into place only after its result.json is written and
synced, so a run either exists completely or not at all. Runs that already exist
are skipped, which makes re-executing an interrupted batch safe.

Optional keys of a run in the manifest, besides run_id, attempt, seq, timeout,
before_run, argv, env and cwd:

    collect      ["cpu", "disk"]: sample /proc/stat and /proc/diskstats before the
                 workload starts, every collect_interval_s (default 1) seconds while
                 it runs, and after it exits; the raw cumulative counters go to
                 counters.json (format: benchmatrix/parsers/counters.py).
    inputs       {"NAME": "/path/on/host"}: files copied to inputs/NAME of the run
                 directory before the run (the job file or script it uses), so the
                 results keep exactly what ran.
    cpus         "0-1,3" (or a list of CPU numbers, or "all" for every CPU this
                 runner may use): the CPUs the workload may run on.
    pin_pidfiles ["/path/postmaster.pid"]: processes (first line of each file: a
                 PID) that are pinned, with every descendant and thread, to the same
                 CPUs before the run: a server the workload talks to.

Usage: batch_runner.py MANIFEST.json
       batch_runner.py --stop WORKDIR   (end the runner working there, and its workload)
"""

import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

RESULT_VERSION = 1
KILL_GRACE_S = 5.0


class Interrupted(Exception):
    """The runner received SIGINT, SIGTERM or SIGHUP."""


_child = None  # the workload process in flight, if any
_sampler = None  # the counter sampler of the run in flight, if any


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _kill_group(proc):
    """End the workload and every process it started (its own session)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


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

def parse_cpus(spec):
    """A CPU list ("0-2,5", [0, 1], "all") -> a sorted list of CPU numbers."""
    allowed = sorted(os.sched_getaffinity(0))
    if spec is None or spec == "all":
        return allowed
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = [spec]
    if isinstance(spec, (list, tuple)):
        cpus = set()
        for item in spec:
            cpus.update(parse_cpus(str(item)) if not isinstance(item, int) else [item])
        return sorted(cpus)
    cpus = set()
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError("'%s' is not a CPU list (e.g. 0-1,3)" % spec)
        if first < 0 or last < first:
            raise ValueError("'%s' is not a CPU list (e.g. 0-1,3)" % spec)
        cpus.update(range(first, last + 1))
    if not cpus:
        raise ValueError("'%s' names no CPU" % spec)
    return sorted(cpus)


def _process_tree(root):
    """PIDs of ``root`` and all its descendants (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


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


def _prepare_run(run, partial, result):
    """Copy the run's inputs and pin its server processes; returns an error or None."""
    inputs = run.get("inputs") or {}
    if inputs:
        os.makedirs(os.path.join(partial, "inputs"))
    for name, path in sorted(inputs.items()):
        if not name or name != os.path.basename(name) or name in (".", ".."):
            return "input name '%s' is not a plain file name" % name
        try:
            shutil.copyfile(path, os.path.join(partial, "inputs", name))
        except OSError as exc:
            return "cannot copy input %s: %s" % (path, exc.strerror or exc)
    if run.get("cpus") is None and not run.get("pin_pidfiles"):
        return None
    try:
        cpus = parse_cpus(run.get("cpus"))
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


def _start_workload(run, out, errf, env):
    """Start the counters, then the workload (on the run's CPUs, in its own session)."""
    global _sampler
    kinds = [k for k in (run.get("collect") or []) if k in ("cpu", "disk")]
    if kinds:
        _sampler = _Sampler(kinds, float(run.get("collect_interval_s") or 1.0))
        _sampler.start()
    affinity = run.get("cpus")
    saved = None
    if affinity is not None:
        # The child inherits the affinity of the thread that forks it: set it on this
        # thread for the fork only (no preexec_fn, which is unsafe with threads).
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, parse_cpus(affinity))
    try:
        return subprocess.Popen(run["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=errf,
                                cwd=run.get("cwd") or None, env=env, start_new_session=True)
    finally:
        if saved is not None:
            os.sched_setaffinity(0, saved)


def _stop_counters():
    global _sampler
    sampler, _sampler = _sampler, None
    if sampler is not None:
        sampler.halt()
    return sampler


def _finish_counters(partial, result):
    """Stop the sampler (one last sample) and write counters.json."""
    sampler = _stop_counters()
    if sampler is None:
        return
    _fsync_write(os.path.join(partial, "counters.json"), json.dumps(sampler.document()))
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


class _Sampler(threading.Thread):
    """Samples /proc counters every ``interval`` seconds until halted."""

    def __init__(self, kinds, interval):
        threading.Thread.__init__(self, name="bmx-counters", daemon=True)
        self.kinds = kinds
        self.interval = max(interval, 0.05)
        self.devices = _block_devices() if "disk" in kinds else {}
        self.samples = []
        self.errors = []
        self._halt = threading.Event()
        self._t0 = time.monotonic()
        self.sample()

    def sample(self):
        entry = {"t": round(time.monotonic() - self._t0, 6)}
        try:
            if "cpu" in self.kinds:
                entry["cpu"] = _read_cpu()
            if "disk" in self.kinds:
                entry["disk"] = _read_disks(self.devices)
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

    def document(self):
        return {"version": 1, "collect": self.kinds, "interval_s": self.interval,
                "cpu_fields": CPU_FIELDS, "disk_fields": DISK_FIELDS, "devices": self.devices,
                "errors": self.errors, "samples": self.samples}


def execute(run, workdir):
    """Execute one run; returns its result dict. Raises Interrupted."""
    global _child
    final = os.path.join(workdir, "runs", run["run_id"], str(run["attempt"]))
    partial = final + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    result = {
        "version": RESULT_VERSION, "run_id": run["run_id"], "attempt": run["attempt"],
        "seq": run.get("seq"), "argv": run["argv"], "hostname": socket.gethostname(),
        "exit_code": None, "outcome": None, "error": None, "started_at": None,
    }
    t0 = time.monotonic()
    try:
        result["before_run"], err = _before_run(run.get("before_run", []))
        err = err or _prepare_run(run, partial, result)
        out = open(os.path.join(partial, "stdout"), "wb")
        errf = open(os.path.join(partial, "stderr"), "wb")
        timeout = run.get("timeout")
        result["started_at"] = time.time()
        t0 = time.monotonic()
        if err:
            result["outcome"], result["error"] = "before_run_failed", err
        else:
            try:
                env = dict(os.environ)
                env.update(run.get("env") or {})
                _child = _start_workload(run, out, errf, env)
            except OSError as exc:
                result["outcome"] = "start_failed"
                result["error"] = "cannot start %s: %s" % (run["argv"][0], exc.strerror or exc)
            else:
                result["pid"] = _child.pid
                if "affinity" in result:
                    try:  # the CPUs the workload really got, read back from the process
                        result["affinity_applied"] = sorted(os.sched_getaffinity(_child.pid))
                    except OSError:
                        pass
                # Lets --stop end the workload even if this runner is killed outright.
                _fsync_write(os.path.join(workdir, "workload.pid"), str(_child.pid))
                try:
                    result["exit_code"] = _child.wait(timeout=timeout)
                    result["outcome"] = "exited"
                except subprocess.TimeoutExpired:
                    _kill_group(_child)
                    result["exit_code"] = _child.returncode
                    result["outcome"] = "timeout"
                    result["error"] = "killed after the %gs timeout" % timeout
                _child = None
        _finish_counters(partial, result)
        result["ended_at"] = time.time()
        result["duration_s"] = round(time.monotonic() - t0, 6)
        out.close()
        errf.close()
        _fsync_write(os.path.join(partial, "result.json"), json.dumps(result, indent=1))
        os.rename(partial, final)
        return result
    except Interrupted as exc:
        if _child is not None:
            _kill_group(_child)
            result["exit_code"] = _child.returncode
            _child = None
        if result.get("started_at") is None:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        # The workload had started: keep the attempt, marked interrupted, so the
        # controller records it and plans its next attempt (it is never a measurement).
        _finish_counters(partial, result)
        result["outcome"] = "interrupted"
        result["error"] = "interrupted by %s after %.1fs" % (exc, time.monotonic() - t0)
        result["ended_at"] = time.time()
        result["duration_s"] = round(time.monotonic() - t0, 6)
        _fsync_write(os.path.join(partial, "result.json"), json.dumps(result, indent=1))
        os.rename(partial, final)
        raise
    except BaseException:
        if _child is not None:
            _kill_group(_child)
            _child = None
        _stop_counters()
        shutil.rmtree(partial, ignore_errors=True)
        raise


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


def _archive(manifest, workdir):
    path = manifest["archive"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        for run in manifest["runs"]:
            rel = os.path.join("runs", run["run_id"], str(run["attempt"]))
            if os.path.isfile(os.path.join(workdir, rel, "result.json")):
                tar.add(os.path.join(workdir, rel), arcname=rel)
    os.replace(tmp, path)
    return path


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


def stop(workdir, wait_s=30.0):
    """End the runner working in ``workdir`` (SIGTERM, then SIGKILL) and its workload."""
    if _lock_is_free(workdir):
        return {"stopped": False}
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
        wpid = _read_pid(os.path.join(workdir, "workload.pid"))
        if wpid:
            try:
                os.killpg(wpid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return {"stopped": True, "pid": pid, "forced": forced}


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
        with open(path) as fh:
            seconds = float(fh.read().split()[0])
        age = time.time() - os.path.getmtime(path)
    except (OSError, ValueError, IndexError):
        return False
    return seconds > 0 and age > seconds


def main(argv):
    if len(argv) == 3 and argv[1] == "--stop":
        sys.stdout.write(json.dumps(stop(argv[2])) + "\n")
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: batch_runner.py MANIFEST.json | --stop WORKDIR\n")
        return 2
    with open(argv[1]) as fh:
        manifest = json.load(fh)
    workdir = manifest["workdir"]
    os.makedirs(os.path.join(workdir, "runs"), exist_ok=True)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    summary = {"batch": manifest["batch"], "executed": [], "skipped": [], "interrupted": None}
    try:
        lock = _acquire_lock(workdir)
        _lease_expired(workdir, manifest["batch"], restart=True)
        for run in manifest["runs"]:
            done = os.path.join(workdir, "runs", run["run_id"], str(run["attempt"]), "result.json")
            if os.path.isfile(done):
                summary["skipped"].append(run["run_id"])
                continue
            if _lease_expired(workdir, manifest["batch"]):
                summary["interrupted"] = "the controller stopped renewing its lease: stopped before the next run"
                sys.stdout.write(json.dumps(summary) + "\n")
                return 130
            execute(run, workdir)
            summary["executed"].append(run["run_id"])
        summary["archive"] = _archive(manifest, workdir)
        lock.close()
    except Interrupted as exc:
        summary["interrupted"] = str(exc)
        sys.stdout.write(json.dumps(summary) + "\n")
        return 130
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
