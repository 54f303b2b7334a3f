"""The fake Ansible port (tests/fake_ansible.py) does what the playbooks do on a local host
and answers as ``run_playbook`` does: payloads valid against ``RESULT_SCHEMAS``, the same
errors. Called here directly (no Snakemake); the e2e tests of the controller call it
through ``BMX_PLAYBOOK_PORT`` from bmx's batch jobs, and tests/e2e/test_fake_port_contract.py
compares its payloads with real Ansible's.
"""

from __future__ import annotations

import base64
import json
import tarfile

import pytest
from fake_ansible import PORT, port_env, run_playbook

from benchmatrix.errors import AnsibleError, PlaybookFailedError
from benchmatrix.execute import ansible
from benchmatrix.execute.prepare import runner_digest, runner_knobs_digest


@pytest.fixture
def host(tmp_path):
    """A local inventory whose host works under ``tmp_path/hostwork``."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         f"      batch_runner_root: {tmp_path / 'hostwork'}\n")
    return inventory


def call(tmp_path, inventory, playbook, runs=(), **extravars):
    """``playbook`` through the port as batch.py calls it; returns the result."""
    manifest = [{"run_id": f"r{i}", "attempt": 1, "seq": i, "cell_id": "c1", "timeout": 30, "before_run": [],
                 "vars": {"argv": argv}, "factors": {}, "collect": {}} for i, argv in enumerate(runs, 1)]
    return run_playbook(playbook, project_dir=tmp_path, inventory=inventory, host="localhost",
                        extravars={"bmx_host": "localhost", "bmx_experiment": "e", "bmx_campaign": "c",
                                   "bmx_workload_role": "workload_command", "batch_runner_batch": "b1",
                                   "batch_runner_digest": runner_digest(),
                                   "batch_runner_knobs_digest": runner_knobs_digest(), **extravars},
                        data={"bmx_runs": json.dumps(manifest), "bmx_knobs": []}, log=tmp_path / "call.log")


def test_a_batch_runs_on_the_runner_and_publishes_valid_payloads(tmp_path, host):
    started = []
    result = run_playbook(
        "run_batch.yml", project_dir=tmp_path, inventory=host, host="localhost", log=tmp_path / "a.log",
        extravars={"bmx_host": "localhost", "bmx_experiment": "e", "bmx_campaign": "c", "bmx_prepare": True,
                   "bmx_workload_role": "workload_command", "batch_runner_batch": "b1"},
        data={"bmx_runs": json.dumps([{"run_id": "r1", "attempt": 1, "seq": 1, "cell_id": "c1", "timeout": 30,
                                       "before_run": [], "vars": {"argv": ["echo", "v = 7"]}, "factors": {},
                                       "collect": {}}]), "bmx_knobs": []},
        on_started=lambda: started.append(True))
    assert started == [True]
    assert result.payload("bmx_knobs") == {} and result.payload("bmx_facts")["gathered"] is True
    archive = result.payload("bmx_archive")
    assert archive["in_place"] and archive["path"] == str(tmp_path / "hostwork" / "e-c" / "batches" / "b1.tar.gz")
    with tarfile.open(archive["path"]) as tar:
        names = tar.getnames()
        out = tar.extractfile(next(n for n in names if n.endswith("r1/1/stdout"))).read().decode()
    assert out == "v = 7\n"
    assert (tmp_path / "hostwork" / "e-c" / "batch_runner.py").is_file(), "installed as the role installs it"
    assert "run_batch.yml on localhost" in (tmp_path / "a.log").read_text()


def test_a_runner_that_fails_is_a_failed_task_and_a_bad_argv_names_the_run(tmp_path, host):
    # The runner refuses a manifest whose digest is not its own: rc 3, a failed task.
    with pytest.raises(PlaybookFailedError) as info:
        call(tmp_path, host, "run_batch.yml", [["true"]], batch_runner_digest="not-this-runner")
    assert info.value.host == "localhost" and info.value.task == "Run the batch"
    assert info.value.payloads == {"localhost": {"bmx_knobs": {}}}, "published before the failure, as Ansible's"
    with pytest.raises(PlaybookFailedError, match="run r1: vars.argv must be a non-empty list"):
        call(tmp_path, host, "run_batch.yml", [[]])


def test_lease_progress_collect_stop_and_restore(tmp_path, host):
    call(tmp_path, host, "run_batch.yml", [["true"], ["true"]])
    batches = tmp_path / "hostwork" / "e-c" / "batches"
    progress = call(tmp_path, host, "renew_lease.yml", batch_runner_lease_seconds=40).payload("bmx_progress")
    assert (batches / "b1.lease").read_text().startswith("40 ")
    text = base64.b64decode(progress["content"]).decode()
    assert text.count("\n") == 2, "a line per finished run"
    collected = run_playbook("collect_batch.yml", project_dir=tmp_path, inventory=host, host="localhost",
                             extravars={"bmx_host": "localhost", "bmx_experiment": "e", "bmx_campaign": "c",
                                        "batch_runner_batch": "b1"},
                             data={"bmx_runs": json.dumps([{"run_id": "r1", "attempt": 1}])}, log=tmp_path / "c.log")
    with tarfile.open(collected.payload("bmx_archive")["path"]) as tar:
        assert any(n.endswith("r1/1/result.json") for n in tar.getnames())
    call(tmp_path, host, "stop_batch.yml")  # no runner in flight: nothing to stop, no error
    assert call(tmp_path, host, "restore_host.yml").payload("bmx_knobs") == {}


def test_what_runs_only_for_real_is_refused(tmp_path, host):
    with pytest.raises(AssertionError, match="knobs run for real only"):
        run_playbook("restore_host.yml", project_dir=tmp_path, inventory=host, host="localhost",
                     extravars={"bmx_host": "localhost"}, log=tmp_path / "r.log",
                     data={"bmx_knobs": [{"factor": "f", "role": "knob_sysfs", "value": "1"}]})
    for playbook in ("check_host.yml", "anything.yml"):
        with pytest.raises(AssertionError, match="runs for real only"):
            call(tmp_path, host, playbook)
    with pytest.raises(AssertionError, match="workload_fio runs for real only"):
        call(tmp_path, host, "run_batch.yml", [["true"]], bmx_workload_role="workload_fio")
    ssh = tmp_path / "ssh.yml"
    ssh.write_text("all:\n  hosts:\n    h1:\n      ansible_host: 198.51.100.7\n      ansible_connection: ssh\n")
    with pytest.raises(AnsibleError, match="local hosts only"):
        run_playbook("renew_lease.yml", project_dir=tmp_path, inventory=ssh, host="h1", extravars={},
                     log=tmp_path / "s.log")


def test_run_playbook_calls_the_port_the_environment_names(tmp_path, host, monkeypatch):
    for key, value in port_env().items():
        monkeypatch.setenv(key, value)
    assert ansible.run_playbook("restore_host.yml", project_dir=tmp_path, inventory=host, host="localhost",
                                extravars={}, log=tmp_path / "p.log").payload("bmx_knobs") == {}
    assert "fake Ansible port" in (tmp_path / "p.log").read_text()
    monkeypatch.setenv(ansible.PORT_ENV, PORT.replace("run_playbook", "no_such_function"))
    with pytest.raises(AnsibleError, match="BMX_PLAYBOOK_PORT='fake_ansible:no_such_function'") as info:
        ansible.run_playbook("restore_host.yml", project_dir=tmp_path, inventory=host, host="localhost",
                             extravars={}, log=tmp_path / "p.log")
    assert "\n" not in str(info.value)
