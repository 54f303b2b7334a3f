#!/usr/bin/python
"""One batch in one module call (playbooks/run_known_batch.yml).

Runs on the host, standard library only (a WANT_JSON module, like bmx_knob): Ansible
runs it as playbooks/library/bmx_batch.py, a symbolic link to this file. In one call it

1. installs the batch runner and its knob backends (``sources``: the host's first batch
   of a campaign) or checks the installed copies by digest (``digests``); a missing or
   stale copy is reported (``bmx_call.missing``) before anything else, and the controller
   calls again with the sources;
2. on a host new to the controller (``describe``: its first batch, after the workload
   tool's install), reports its facts (knobs.new_host_facts: the fingerprint, the
   workload path's device, the state and the host's description, read here, no fact
   gathering) and the role variables it holds as ``bmx_facts`` and ``bmx_role_vars``;
   on a known host's first batch of the campaign (``fingerprint`` given), probes the host
   (knobs.probe) and, when its fingerprint is the one the controller cached, reports
   its state as ``bmx_facts``; another one is reported (``bmx_call.stale``) before anything
   changes; on every host, a role variable that does not hold the value the controller
   built the commands with (``role_vars`` against ``expect_vars``) is reported
   (``bmx_call.stale``) before anything changes: the controller then takes the full
   path (run_batch.yml);
3. sets and verifies the batch's knobs (knobs.apply, the bmx_knob module's own code);
4. when every knob it set reached its value, creates the workload's directories and
   files, and runs the batch runner on the manifest (on its stdin);
5. returns the archive of the runs, base64, when it is at most ``archive_max_bytes``
   (else its path: the controller fetches it), and the knob states.

With ``renew`` it only renews the controller's lease on a running batch and returns the
batch's progress (renew_lease.yml, :func:`renew`).

Its results are in ``bmx_payloads`` ({key: payload}, the keys of the controller's
RESULT_SCHEMAS), which the controller reads from the module's result.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

DOCUMENTATION = r"""
module: bmx_batch
short_description: Run one benchmatrix batch in one call, or renew the lease on a running one
description:
  - Installs or checks the batch runner, probes a known host, sets and verifies the knobs, runs the batch runner
    and returns its archive (benchmatrix/host/batch_call.py).
options:
  workdir:
    description: The campaign's work directory on the host.
    type: str
    required: true
  manifest:
    description: The batch runner's manifest, runs with their argv (a batch).
    type: dict
  renew:
    description: A lease renewal instead of a batch, {batch, seconds}; returns the batch's progress.
    type: dict
"""

RUNNER, KNOBS = "batch_runner.py", "knobs.py"
#: The runner's exit status for a stale copy (batch_runner.STALE_RUNNER_RC).
STALE_RUNNER_RC = 3
#: Archives above this many bytes stay on the host for a fetch (base64 in the result
#: travels through Ansible's events).
ARCHIVE_MAX_BYTES = 8 << 20
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CallError(Exception):
    """A failure of the call, in one line."""


def _digest(path):
    """SHA-256 of a file, "" when there is none (what the runner's own check compares)."""
    return hashlib.sha256(open(path, "rb").read()).hexdigest() if os.path.isfile(path) else ""


def install(workdir, sources):
    """Write each {name: text} into ``workdir`` (owner only), each renamed into place."""
    old = os.umask(0o077)
    try:
        os.makedirs(os.path.join(workdir, "batches"), mode=0o700, exist_ok=True)
        os.chmod(os.path.join(workdir, "batches"), 0o700)
        for name, text in sources.items():
            tmp = os.path.join(workdir, "." + name + ".new")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o755)
            os.replace(tmp, os.path.join(workdir, name))
    finally:
        os.umask(old)


def stale(workdir, digests):
    """Why the installed runner or knob backends are not the controller's, or ''."""
    for name in (RUNNER, KNOBS):
        want = (digests or {}).get(name)
        if want and _digest(os.path.join(workdir, name)) != want:
            return "%s in %s is missing or differs from the controller's" % (name, workdir)
    return ""


def load_knobs(workdir):
    """The knob backends installed beside the runner, as a module."""
    spec = importlib.util.spec_from_file_location("bmx_installed_knobs", os.path.join(workdir, KNOBS))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_files(dirs, files):
    for path in dirs or []:
        os.makedirs(path, mode=0o755, exist_ok=True)
    for item in files or []:
        tmp = item["path"] + ".bmx-new"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(item["content"])
        os.chmod(tmp, 0o644)
        os.replace(tmp, item["path"])


def _with_host_env(runs, host_env):
    """Each run's environment on top of the host's (``host_env``: the role's env variable)."""
    if not host_env:
        return runs
    if not isinstance(host_env, dict):
        raise CallError("the host's workload environment must be a mapping")
    bad = [str(k) for k in host_env if not _ENV.match(str(k))]
    if bad:
        raise CallError("the host's workload environment: %s is not an environment variable name" % bad[0][:60])
    base = {str(k): ("true" if v is True else "false" if v is False else str(v)) for k, v in host_env.items()}
    return [dict(run, env=dict(base, **(run.get("env") or {}))) for run in runs]


def _runner_failure(host, rc, stderr):
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    how = "was killed by signal %d" % -rc if rc < 0 else "exited %d" % rc
    return "the batch runner on %s %s%s" % (host, how, ": " + lines[-1] if lines else "")


# shape: the module's arguments as one dict, each step in the order the host needs
def call(p):
    """The call's result: ``bmx_payloads`` (``bmx_call`` with ``missing`` or ``stale`` when
    it ran nothing for that reason), or failed with ``msg``."""
    workdir, host = p["workdir"], p.get("host") or "this host"
    if p.get("sources"):
        install(workdir, p["sources"])
    else:
        why = stale(workdir, p.get("digests"))
        if why:
            return {"changed": False, "bmx_payloads": {"bmx_call": {"missing": why}}}
    knobs = load_knobs(workdir)
    payloads = {}
    expect, actual = p.get("expect_vars") or {}, p.get("role_vars") or {}
    changed_vars = sorted(k for k in expect if expect[k] != actual.get(k))
    if changed_vars:
        return {"changed": False, "bmx_payloads": {"bmx_call": {"stale": "host variable %s changed" % changed_vars[0]}}}
    if p.get("describe"):
        # A host new to the controller: its facts, and the role variables it was found to
        # hold (those the commands were built with), for the controller's host cache.
        payloads["bmx_facts"] = knobs.new_host_facts(p.get("probe_path") or "/", host, str(p.get("tool_version") or ""))
        payloads["bmx_role_vars"] = actual
    elif p.get("fingerprint") is not None:
        probed = knobs.probe(p.get("probe_path") or "/", p.get("state_files") or [])
        if not probed["fingerprint"] or probed["fingerprint"] != p["fingerprint"]:
            return {"changed": False, "bmx_payloads": {"bmx_call": {"stale": "the host's fingerprint changed"}}}
        payloads["bmx_facts"] = {"gathered": False, "fingerprint": probed["fingerprint"], "state_files": [],
                                 "facts": probed["state"]}
    items, settings = p.get("knobs") or [], p.get("knob_settings") or {}
    run_settings = {}
    if items:
        try:
            states = knobs.apply(items, settings, host, False, "apply", False, None, 0,
                                 str(p.get("baseline_dir") or ""))
        except knobs.KnobError as exc:
            return {"failed": True, "msg": str(exc), "bmx_payloads": payloads}
        for factor in [k["factor"] for k in items]:
            run_settings.update(states[factor].pop("run_settings"))
        payloads["bmx_knobs"] = states
        if any(not s["ok"] and not s.get("live") for s in states.values()):
            return {"changed": any(s["changed"] for s in states.values()), "bmx_payloads": payloads}
    else:
        payloads["bmx_knobs"] = {}
    _write_files(p.get("dirs"), p.get("files"))
    manifest = dict(p["manifest"], run_settings=run_settings, knobs=items, knob_settings=settings, host=host)
    if p.get("in_place"):
        manifest["direct"] = True  # the controller is this machine: it reads the runs' files itself
    runs = manifest.get("runs") or []
    manifest["runs"] = _with_host_env(json.loads(runs) if isinstance(runs, str) else runs, p.get("host_env"))
    proc = subprocess.run([sys.executable, os.path.join(workdir, RUNNER), "-"], input=json.dumps(manifest),
                          capture_output=True, text=True, check=False)
    if proc.returncode == STALE_RUNNER_RC:
        return {"changed": False, "bmx_payloads": {"bmx_call": {"missing": "the installed runner is stale"}}}
    if proc.returncode != 0:
        return {"failed": True, "msg": _runner_failure(host, proc.returncode, proc.stderr), "rc": proc.returncode,
                "bmx_payloads": payloads}
    if p.get("in_place"):
        # No archive: the controller links (or copies) the finished runs' files from the work directory.
        payloads["bmx_archive"] = {"in_place": True, "direct": True, "path": workdir}
        return {"changed": True, "bmx_payloads": payloads}
    archive = manifest["archive"]
    size = os.path.getsize(archive)
    payloads["bmx_archive"] = {"in_place": False, "path": archive}
    if size <= int(p.get("archive_max_bytes") or ARCHIVE_MAX_BYTES):
        with open(archive, "rb") as fh:
            payloads["bmx_archive"]["content"] = base64.b64encode(fh.read()).decode("ascii")
    else:
        payloads["bmx_archive"]["remote"] = True  # too large for the result: the controller fetches it
    return {"changed": True, "bmx_payloads": payloads}


def renew(workdir, batch, seconds):
    """A lease renewal (renew_lease.yml, ``renew``): rewrite the controller's lease on the
    running batch (``batches/BATCH.lease``, "SECONDS TIMESTAMP", renamed into place: its
    change time is the renewal) and return what the runner finished so far (the
    ``.progress`` file, base64; "" before the first run ends) as ``bmx_progress``."""
    batches = os.path.join(workdir, "batches")
    if not os.path.isdir(batches):  # the batch's directory is gone (or not made yet): no lease to renew
        return {"failed": True, "msg": "Destination directory %s does not exist" % batches}
    lease = os.path.join(batches, batch + ".lease")
    with open(lease + ".new", "w", encoding="utf-8") as fh:
        fh.write("%d %s\n" % (int(seconds), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    os.replace(lease + ".new", lease)
    try:
        with open(os.path.join(batches, batch + ".progress"), "rb") as fh:
            content = base64.b64encode(fh.read()).decode("ascii")
    except OSError:
        content = ""
    return {"changed": True, "bmx_payloads": {"bmx_progress": {"content": content}}}


def main():
    """Entry point: a WANT_JSON module (the path of a JSON file of arguments; one JSON object on stdout)."""
    p = {}
    try:
        with open(sys.argv[1], encoding="utf-8") as fh:
            p = json.load(fh)
        if p.get("renew"):
            out = renew(p["workdir"], str(p["renew"]["batch"]), p["renew"]["seconds"])
        else:
            out = call(p)
    except CallError as exc:
        out = {"failed": True, "msg": "bmx_batch on %s: %s" % (p.get("host") or "this host", exc)}
    except (OSError, ValueError, KeyError) as exc:
        out = {"failed": True, "msg": "bmx_batch on %s: %s: %s" % (p.get("host") or "this host",
                                                                    type(exc).__name__, exc)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
