"""The one-call batch module (bmx_batch, benchmatrix/host/batch_call.py, issue 34): run as
Ansible runs a WANT_JSON module (its arguments in a JSON file, one JSON object on
stdout), with the real batch runner and knob backends installed by the call itself, on a
scratch sysfs file for the knob."""

from __future__ import annotations

import base64
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

from benchmatrix.execute.prepare import RUNNER_KNOBS_PATH, RUNNER_PATH, runner_digest, runner_knobs_digest
from benchmatrix.host import batch_call, batch_runner, knobs

MODULE = Path(batch_call.__file__)
SOURCES = {"batch_runner.py": RUNNER_PATH.read_text(), "knobs.py": RUNNER_KNOBS_PATH.read_text()}
DIGESTS = {"batch_runner.py": runner_digest(), "knobs.py": runner_knobs_digest()}


def _call(tmp_path: Path, args: dict) -> dict:
    path = tmp_path / "args.json"
    path.write_text(json.dumps(args))
    res = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _args(tmp_path: Path, runs: list[dict], **extra) -> dict:
    workdir = tmp_path / "w"
    manifest = {"experiment": "t", "batch": "b1", "workdir": str(workdir),
                "archive": str(workdir / "batches" / "b1.tar.gz"), "runs": json.dumps(runs), "lease_seconds": 0,
                "runner_digest": DIGESTS["batch_runner.py"], "knobs_digest": DIGESTS["knobs.py"]}
    return {"workdir": str(workdir), "host": "h1", "manifest": manifest, "digests": DIGESTS, **extra}


def _run(run_id: str, code: str, **extra) -> dict:
    return {"run_id": run_id, "attempt": 1, "seq": 1, "timeout": 30, "before_run": [],
            "argv": [sys.executable, "-c", code], **extra}


def _members(payload: dict) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(payload["content"]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_one_call_installs_sets_the_knob_writes_the_files_runs_and_returns_the_archive(tmp_path):
    knob_file = tmp_path / "sys" / "ra"
    knob_file.parent.mkdir()
    knob_file.write_text("a\n")
    item = {"factor": "ra", "role": "knob_sysfs", "value": "b", "cost": "restart",
            "vars": {"knob_sysfs_path": str(knob_file), "knob_sysfs_root": str(knob_file.parent)}}
    job = tmp_path / "scratch" / "jobs" / "job.txt"
    show = f"import os; print(open({str(knob_file)!r}).read().strip(), os.environ['TOKEN'], os.environ['OWN'], " \
           f"open({str(job)!r}).read())"
    runs = [_run("r1", show, env={"OWN": "mine"}), _run("r2", show, env={"OWN": "mine", "TOKEN": "run-wins"})]
    # Not installed yet: the call says so and changes nothing.
    out = _call(tmp_path, _args(tmp_path, runs, knobs=[item]))
    assert out["bmx_payloads"] == {"bmx_call": {"missing": f"batch_runner.py in {tmp_path / 'w'} is missing or "
                                                           "differs from the controller's"}}
    assert knob_file.read_text() == "a\n" and not (tmp_path / "w" / "runs").exists()
    out = _call(tmp_path, _args(tmp_path, runs, knobs=[item], sources=SOURCES, host_env={"TOKEN": "host"},
                                baseline_dir=str(tmp_path / "baselines"),
                                dirs=[str(job.parent)], files=[{"path": str(job), "content": "job text"}]))
    assert "failed" not in out, out
    workdir = tmp_path / "w"
    assert [stat.S_IMODE(p.stat().st_mode) for p in (workdir, workdir / "batches", workdir / "batch_runner.py")] \
        == [0o700, 0o700, 0o755]
    payloads = out["bmx_payloads"]
    state = payloads["bmx_knobs"]["ra"]
    assert state == {**state, "intended": "b", "actual": "b", "changed": True, "baseline": "a", "ok": True}
    assert "run_settings" not in state
    files = _members(payloads["bmx_archive"])
    # The knob was set before the runs; the host's environment lies under each run's own.
    assert files["runs/r1/1/stdout"].decode().split() == ["b", "host", "mine", "job", "text"]
    assert files["runs/r2/1/stdout"].decode().split() == ["b", "run-wins", "mine", "job", "text"]
    assert payloads["bmx_archive"]["in_place"] is False and "remote" not in payloads["bmx_archive"]
    # The same call again finds the installed copies by digest and skips the finished runs.
    again = _call(tmp_path, _args(tmp_path, runs, knobs=[item]))
    assert again["bmx_payloads"]["bmx_knobs"]["ra"]["changed"] is False
    assert json.loads(_members(again["bmx_payloads"]["bmx_archive"])["runs/r1/1/result.json"])["outcome"] == "exited"


def test_a_changed_host_or_role_variable_runs_nothing(tmp_path):
    runs = [_run("r1", "print(1)")]
    probed = knobs.probe(str(tmp_path), [])
    assert probed["fingerprint"].startswith("boot_id ") and f"workload_path {tmp_path} " in probed["fingerprint"]
    out = _call(tmp_path, _args(tmp_path, runs, sources=SOURCES, fingerprint=probed["fingerprint"] + "x",
                                probe_path=str(tmp_path)))
    assert out["bmx_payloads"] == {"bmx_call": {"stale": "the host's fingerprint changed"}}
    out = _call(tmp_path, _args(tmp_path, runs, expect_vars={"workload_fio_directory": "/a"},
                                role_vars={"workload_fio_directory": "/b"}))
    assert out["bmx_payloads"] == {"bmx_call": {"stale": "host variable workload_fio_directory changed"}}
    assert not (tmp_path / "w" / "runs").exists()
    # The same fingerprint: the host's state comes back as its facts, and the runs run.
    out = _call(tmp_path, _args(tmp_path, runs, fingerprint=probed["fingerprint"], probe_path=str(tmp_path),
                                state_files=["/sys/devices/system/cpu/online"]))
    facts = out["bmx_payloads"]["bmx_facts"]
    assert facts["gathered"] is False and facts["fingerprint"] == probed["fingerprint"]
    assert set(facts["facts"]) == {"online_cpus", "smt", "read_ahead_kb", "io_scheduler"}
    assert facts["facts"]["online_cpus"] != "unknown" or not os.path.exists("/sys/devices/system/cpu/online")


def test_a_large_archive_stays_on_the_host_and_a_failed_runner_fails_the_call(tmp_path):
    out = _call(tmp_path, _args(tmp_path, [_run("r1", "print('x' * 5000)")], sources=SOURCES,
                                archive_max_bytes=10))
    archive = out["bmx_payloads"]["bmx_archive"]
    assert archive["remote"] is True and "content" not in archive and Path(archive["path"]).is_file()
    args = _args(tmp_path, [_run("r2", "print(2)")])
    args["manifest"]["containment"] = "bogus"
    out = _call(tmp_path, args)
    assert out["failed"] is True
    assert out["msg"].startswith("the batch runner on h1 exited 2: benchmatrix batch runner: ")
    assert "containment must be auto or process_tree" in out["msg"]


def test_host_state_reads_the_state_lines_as_tasks_prepare_did():
    lines = ["/sys/devices/system/cpu/online:0-3", "/sys/devices/system/cpu/smt/control:on",
             "/sys/devices/system/cpu/smt/active:1", "/sys/block/sda/queue/read_ahead_kb:128",
             "/sys/block/sda/queue/scheduler:none [mq-deadline] kyber"]
    assert knobs.host_state(lines) == {"online_cpus": "0-3", "smt": "on (active 1)", "read_ahead_kb": "128",
                                       "io_scheduler": "mq-deadline"}
    assert knobs.host_state([]) == {"online_cpus": "unknown", "smt": "absent", "read_ahead_kb": "unknown",
                                    "io_scheduler": "unknown"}


def test_a_new_host_is_described_and_a_wrong_guess_of_its_role_variables_runs_nothing(tmp_path):
    runs = [_run("r1", "print(1)")]
    # Built with another host's role variables that this host does not hold: nothing runs,
    # and the host is not described (the controller takes run_batch.yml, which does that).
    out = _call(tmp_path, _args(tmp_path, runs, sources=SOURCES, describe=True, probe_path=str(tmp_path),
                                expect_vars={"workload_fio_directory": "/a"},
                                role_vars={"workload_fio_directory": "/b"}))
    assert out["bmx_payloads"] == {"bmx_call": {"stale": "host variable workload_fio_directory changed"}}
    assert not (tmp_path / "w" / "runs").exists()
    # The guess holds: the facts (fingerprint, the workload path's device, the state and
    # the host's description) and the role variables come back beside the runs' archive.
    out = _call(tmp_path, _args(tmp_path, runs, sources=SOURCES, describe=True, probe_path=str(tmp_path),
                                tool_version="tool 1.0",
                                expect_vars={"workload_fio_directory": "/a"},
                                role_vars={"workload_fio_directory": "/a"}))
    payloads = out["bmx_payloads"]
    facts = payloads["bmx_facts"]
    assert facts["gathered"] is True and facts["fingerprint"] == knobs.probe(str(tmp_path), [])["fingerprint"]
    assert {k: facts["facts"][k] for k in knobs.system_metadata()} == knobs.system_metadata()
    assert facts["facts"]["tool_version"] == "tool 1.0" and facts["facts"]["workload_path"] == str(tmp_path)
    found = knobs.host_facts(str(tmp_path), [], "h1")
    assert facts["facts"]["filesystem"] == found["device"].get("fstype", "")
    assert facts["facts"]["mount_point"] == found["device"].get("target", "")
    assert facts["state_files"] == found["state_files"]
    assert {"online_cpus", "smt", "read_ahead_kb", "io_scheduler"} <= set(facts["facts"])
    assert payloads["bmx_role_vars"] == {"workload_fio_directory": "/a"}
    assert "r1" in str(_members(payloads["bmx_archive"]))


#: /proc/cpuinfo of a 2-socket x86 host with hyperthreading (2 sockets x 2 cores x 2
#: threads), and of an aarch64 host, whose lines name no model (setup's "processor" list
#: then holds the processor numbers).
X86 = "".join(f"processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\nphysical id\t: {n // 4}\n"
              f"siblings\t: 4\ncore id\t\t: {n % 2}\ncpu cores\t: 2\nflags\t\t: fpu vme\n\n" for n in range(8))
ARM = "".join(f"processor\t: {n}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\n"
              for n in range(4))


def test_the_cpu_is_counted_as_ansibles_setup_counts_it():
    assert knobs.cpu_description(X86, "x86_64") == {"cpu_model": "Xeon X", "cpu_count": 8, "sockets": 2, "cores": 2,
                                                    "threads_per_core": 2}
    assert knobs.cpu_description(ARM, "aarch64") == {"cpu_model": "2", "cpu_count": 4, "sockets": 4, "cores": 1,
                                                     "threads_per_core": 1}
    assert knobs.cpu_description("", "x86_64")["cpu_model"] == "unknown"


def test_a_renewal_rewrites_the_lease_and_returns_the_progress(tmp_path):
    workdir = tmp_path / "w"
    args = {"workdir": str(workdir), "renew": {"batch": "b1", "seconds": "40"}}
    # No batch directory (the batch's work directory is gone): the renewal fails, as the copy did.
    out = _call(tmp_path, args)
    assert out["failed"] is True and out["msg"] == f"Destination directory {workdir / 'batches'} does not exist"
    (workdir / "batches").mkdir(parents=True)
    lease = workdir / "batches" / "b1.lease"
    lease.write_text("40 2000-01-01T00:00:00Z\n")
    os.utime(lease, (0, 0))
    out = _call(tmp_path, args)
    assert out == {"changed": True, "bmx_payloads": {"bmx_progress": {"content": ""}}}
    seconds, stamp = lease.read_text().split()
    assert seconds == "40" and stamp != "2000-01-01T00:00:00Z" and lease.stat().st_mtime > 1e9
    (workdir / "batches" / "b1.progress").write_text('{"run_id": "r1"}\n')
    out = _call(tmp_path, args)
    assert base64.b64decode(out["bmx_payloads"]["bmx_progress"]["content"]) == b'{"run_id": "r1"}\n'
    assert sorted(p.name for p in (workdir / "batches").iterdir()) == ["b1.lease", "b1.progress"]


def test_on_the_controller_itself_the_call_packs_no_archive(tmp_path):
    """in_place (a local-connection host, no become): the controller copies the runs'
    files from the work directory (issue 34), so the runner packs no archive."""
    out = _call(tmp_path, _args(tmp_path, [_run("r1", "print('one')")], sources=SOURCES, in_place=True))
    workdir = tmp_path / "w"
    assert out["bmx_payloads"]["bmx_archive"] == {"in_place": True, "direct": True, "path": str(workdir)}
    assert not (workdir / "batches" / "b1.tar.gz").exists()
    assert Path(batch_runner.run_file(str(workdir), "r1", 1, "stdout")).read_text() == "one\n"
