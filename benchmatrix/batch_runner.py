#!/usr/bin/env python3
"""benchmatrix batch runner: executes one batch of runs on the host, in plan order.

Ansible copies this file to the host and starts it with a manifest (JSON). It must
run on any host with Python 3.8+, so it uses the standard library only and imports
nothing from benchmatrix.

Host layout under the manifest's ``workdir``::

    runs/RUN_ID/ATTEMPT/         a finished run: stdout, stderr, result.json
    runs/RUN_ID/ATTEMPT.partial/ the run in flight (removed if it does not finish)
    batches/BATCH.tar.gz         the batch's finished runs, for Ansible to fetch
    runner.lock, runner.pid      one runner at a time per workdir

A run's directory is renamed into place only after its result.json is written and
synced, so a run either exists completely or not at all. Runs that already exist
are skipped, which makes re-executing an interrupted batch safe.

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
import time

RESULT_VERSION = 1
KILL_GRACE_S = 5.0


class Interrupted(Exception):
    """The runner received SIGINT, SIGTERM or SIGHUP."""


_child = None  # the workload process in flight, if any


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
        try:
            if action in ("sync", "drop_caches"):
                os.sync()
            if action == "drop_caches":
                with open("/proc/sys/vm/drop_caches", "w") as fh:
                    fh.write("3\n")
            elif action == "sleep_1":
                time.sleep(1.0)
            elif action not in ("sync",):
                err = "unknown action"
        except OSError as exc:
            err = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
        records.append({"action": action, "seconds": round(time.monotonic() - t0, 6), "error": err})
        if err:
            return records, "before_run %s failed: %s" % (action, err)
    return records, None


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
        "exit_code": None, "outcome": None, "error": None,
    }
    try:
        result["before_run"], err = _before_run(run.get("before_run", []))
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
                _child = subprocess.Popen(run["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=errf,
                                          cwd=run.get("cwd") or None, env=env, start_new_session=True)
            except OSError as exc:
                result["outcome"] = "start_failed"
                result["error"] = "cannot start %s: %s" % (run["argv"][0], exc.strerror or exc)
            else:
                result["pid"] = _child.pid
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
        result["ended_at"] = time.time()
        result["duration_s"] = round(time.monotonic() - t0, 6)
        out.close()
        errf.close()
        _fsync_write(os.path.join(partial, "result.json"), json.dumps(result, indent=1))
        os.rename(partial, final)
        return result
    except BaseException:
        if _child is not None:
            _kill_group(_child)
            _child = None
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
        for run in manifest["runs"]:
            done = os.path.join(workdir, "runs", run["run_id"], str(run["attempt"]), "result.json")
            if os.path.isfile(done):
                summary["skipped"].append(run["run_id"])
                continue
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
