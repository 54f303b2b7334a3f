"""The contract at the Ansible boundary: each playbook the controller calls during a
campaign (run_batch.yml with the host's preparation, renew_lease.yml, collect_batch.yml,
stop_batch.yml, restore_host.yml) runs once for real through ansible-runner and once
through the fake Ansible port (tests/fake_ansible.py) with the same arguments, as
benchmatrix/execute/batch.py, lease.py and restore.py pass them. Both answer with
payloads valid against RESULT_SCHEMAS (run_playbook checks the real ones), and the
fake's have the same keys and shapes as the real ones: the tests that run on the fake
port see what a real campaign's controller sees. check_host.yml: tests/e2e/test_check.py.
"""

from __future__ import annotations

import base64
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from fake_ansible import run_playbook as fake_run_playbook

from benchmatrix.execute.ansible import run_playbook
from benchmatrix.execute.prepare import RUNNER_PATH, runner_digest, runner_knobs_digest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def calls(tmp_path: Path, name: str, call: Any) -> dict[str, Any]:
    """The campaign's playbook calls through ``call`` (real or fake), on a host working
    under ``tmp_path/name``; returns each call's payloads and the batch's archive members."""
    inventory = tmp_path / f"{name}.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n"
                         f"      batch_runner_root: {tmp_path / name}\n")
    staging = tmp_path / f"{name}-staging"
    staging.mkdir()
    common = {"bmx_host": "localhost", "bmx_experiment": "contract", "bmx_campaign": "c1"}
    runner = {**common, "batch_runner_source": str(RUNNER_PATH), "batch_runner_digest": runner_digest(),
              "batch_runner_knobs_digest": runner_knobs_digest(), "batch_runner_batch": "localhost-b0001",
              "batch_runner_fetch_dir": str(staging)}
    runs = [{"run_id": f"r{i}", "attempt": 1, "seq": i, "cell_id": "c", "timeout": 30, "before_run": [],
             "vars": {"argv": [sys.executable, "-c", f"print('v = {i}')"]}, "factors": {"x": str(i)},
             "collect": {}} for i in (1, 2)]

    def play(playbook: str, extravars: dict[str, Any], data: dict[str, Any] | None = None) -> dict[str, Any]:
        result = call(playbook, project_dir=ROOT / "playbooks", inventory=inventory, host="localhost",
                      extravars=extravars, data=data, log=tmp_path / f"{name}-{playbook}.log")
        return result.payloads.get("localhost", {})  # stop_batch.yml publishes nothing

    out = {"run_batch.yml": play(
        "run_batch.yml",
        {**runner, "bmx_prepare": True, "bmx_install_always": True, "bmx_workload_directory_var": "",
         "bmx_workload_version_var": "workload_command_version", "bmx_workload_cleanup_var": "",
         "bmx_workload_role": "workload_command", "batch_runner_lease_seconds": 300, "bmx_allow_reboot": False,
         "batch_runner_stop_after_s": 300, "batch_runner_timeout": 180},
        {"bmx_runs": json.dumps(runs), "bmx_knobs": [], "bmx_cached_fingerprint": "", "bmx_cached_state_files": []})}
    with tarfile.open(out["run_batch.yml"]["bmx_archive"]["path"]) as tar:
        out["archive"] = sorted(tar.getnames())
    out["renew_lease.yml"] = play("renew_lease.yml", {**common, "batch_runner_batch": "localhost-b0001",
                                                      "batch_runner_lease_seconds": 40})
    out["collect_batch.yml"] = play("collect_batch.yml", {**runner, "batch_runner_timeout": 120},
                                    {"bmx_runs": json.dumps([{"run_id": "r1", "attempt": 1}])})
    out["stop_batch.yml"] = play("stop_batch.yml", common)
    out["restore_host.yml"] = play("restore_host.yml", {**common, "bmx_workload_role": "workload_command",
                                                        "bmx_allow_reboot": False}, {"bmx_knobs": []})
    return out


def shape(value: Any) -> Any:
    """A payload's keys and value types, not its values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    return type(value).__name__


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract")
    return calls(tmp, "real", run_playbook), calls(tmp, "fake", fake_run_playbook)


def test_each_playbook_publishes_the_same_payloads_real_and_fake(both):
    real, fake = both
    for playbook in ("run_batch.yml", "renew_lease.yml", "collect_batch.yml", "stop_batch.yml", "restore_host.yml"):
        assert sorted(fake[playbook]) == sorted(real[playbook]), playbook
    facts_real, facts_fake = real["run_batch.yml"]["bmx_facts"], fake["run_batch.yml"]["bmx_facts"]
    assert sorted(facts_fake["facts"]) == sorted(facts_real["facts"]), "the fake's facts have the real keys"
    for playbook in ("run_batch.yml", "collect_batch.yml"):
        assert shape(fake[playbook]["bmx_archive"]) == shape(real[playbook]["bmx_archive"])
        assert fake[playbook]["bmx_archive"]["in_place"] is real[playbook]["bmx_archive"]["in_place"] is True
    assert fake["run_batch.yml"]["bmx_knobs"] == real["run_batch.yml"]["bmx_knobs"] == {}
    assert fake["restore_host.yml"] == real["restore_host.yml"] == {"bmx_knobs": {}}


def test_the_runner_leaves_the_same_archive_and_progress_real_and_fake(both):
    real, fake = both
    assert fake["archive"] == real["archive"] and any(n.endswith("r2/1/stdout") for n in real["archive"])
    progress = [base64.b64decode(side["renew_lease.yml"]["bmx_progress"]["content"]).decode().splitlines()
                for side in (real, fake)]
    assert [sorted(json.loads(line)) for line in progress[0]] == [sorted(json.loads(line)) for line in progress[1]]
    assert len(progress[0]) == 2
