"""restore_host calls Ansible only when there is something to put back: a knob's
baseline, or a workload whose finish.yml has work (the host's first batch reports
``workload_cleanup`` in facts.json: fio only with its loop file system).

No Ansible runs here: the project has no playbooks, so a restore that called
Ansible fails.
"""

from __future__ import annotations

import json

import pytest

from benchmatrix.errors import BenchmatrixError
from benchmatrix.execute.restore import restore_host
from benchmatrix.spec.load import load_spec

SPEC = """name: rs_t
hosts: nowhere
inventory: inv.yml
factors: {bs: [4k]}
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", size: 1m, runtime: 1, time_based: 1}
"""


def _setup(tmp_path, facts):
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    nowhere:\n      ansible_connection: local\n")
    (tmp_path / "s.yaml").write_text(SPEC)
    host_dir = tmp_path / "results" / "rs_t" / "hosts" / "nowhere"
    host_dir.mkdir(parents=True)
    if facts is not None:
        (host_dir / "facts.json").write_text(json.dumps(facts))
    return load_spec(tmp_path / "s.yaml"), host_dir


def test_nothing_to_undo_needs_no_ansible(tmp_path):
    spec, host_dir = _setup(tmp_path, {"hostname": "x", "workload_cleanup": False})
    done = restore_host(spec, tmp_path, "nowhere", host_dir / "restored.json")
    assert done["knobs"] == {} and json.loads((host_dir / "restored.json").read_text())["host"] == "nowhere"
    assert not (tmp_path / "results" / "rs_t" / "logs" / "ansible" / "restore-nowhere.log").exists()


@pytest.mark.parametrize("facts", [None, {"hostname": "x"}, {"hostname": "x", "workload_cleanup": True}])
def test_cleanup_or_unknown_cleanup_calls_the_finish_playbook(tmp_path, facts):
    # Facts of an older benchmatrix (no key) or none at all: clean up, as before.
    spec, host_dir = _setup(tmp_path, facts)
    with pytest.raises(BenchmatrixError):
        restore_host(spec, tmp_path, "nowhere", host_dir / "restored.json")


@pytest.mark.parametrize(("role", "directory_var", "cleanup_var"), [
    ("workload_fio", "workload_fio_directory", "workload_fio_loopfs_mb"),
    ("workload_sysbench", "", ""),
])
def test_preparation_names_the_descriptors_host_variables(tmp_path, role, directory_var, cleanup_var):
    """tasks/prepare.yml's workload path and ``workload_cleanup`` fact read the host
    variables the workload's descriptor names, which the first batch call passes as extra vars."""
    from benchmatrix.execute.prepare import preparation
    from benchmatrix.spec.load import load_spec

    _setup(tmp_path, None)
    if role != "workload_fio":
        (tmp_path / "s.yaml").write_text(SPEC.replace("workload_fio", role).replace(
            'rw: read, bs: "{{ bs }}", size: 1m, runtime: 1, time_based: 1', 'test: cpu, threads: 1'))
    seen = preparation(load_spec(tmp_path / "s.yaml"), tmp_path, "nowhere").extravars
    assert seen["bmx_prepare"] is True
    assert (seen["bmx_workload_directory_var"], seen["bmx_workload_cleanup_var"]) == (directory_var, cleanup_var)


KNOB_SPEC = SPEC + "knobs: {ra: {role: knob_read_ahead, cost: none}}\n"


def _touched(tmp_path, monkeypatch, baseline: bool, restored_after: bool) -> list[str]:
    """restore_touched_hosts on a plan whose one batch on 'nowhere' started (its log exists)."""
    from benchmatrix.execute import restore

    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    nowhere:\n      ansible_connection: local\n")
    (tmp_path / "s.yaml").write_text(KNOB_SPEC.replace("factors: {bs: [4k]}", "factors: {bs: [4k], ra: [0, 128]}"))
    exp = tmp_path / "results" / "rs_t"
    (exp / "hosts" / "nowhere").mkdir(parents=True)
    (exp / "plan.csv").write_text("seq,host,run_id,batch\n1,nowhere,r1,b0001\n")
    log = exp / "logs" / "batches" / "b0001.log"
    log.parent.mkdir(parents=True)
    log.write_text("started\n")
    if baseline:
        (exp / "hosts" / "nowhere" / "baseline.json").write_text(json.dumps(
            {"ra": {"role": "knob_read_ahead", "value": "128", "vars": {}, "cost": "none"}}))
    if restored_after:
        (exp / "hosts" / "nowhere" / "restored.json").write_text("{}")
    seen: list[str] = []
    monkeypatch.setattr(restore, "restore_quietly", lambda spec, proj, host: seen.append(host) or True)
    assert restore.restore_touched_hosts(load_spec(tmp_path / "s.yaml"), tmp_path) == seen
    return seen


@pytest.mark.parametrize("baseline", [True, False])
def test_a_failed_workflow_restores_a_host_whose_batch_started(tmp_path, monkeypatch, baseline):
    # Without baseline.json too: a controller killed in the host's first batch recorded
    # none, and the host keeps the value before the first change itself (issue 35, item 1).
    assert _touched(tmp_path, monkeypatch, baseline, restored_after=False) == ["nowhere"]


def test_a_host_restored_since_its_last_batch_is_not_restored_again(tmp_path, monkeypatch):
    assert _touched(tmp_path, monkeypatch, baseline=False, restored_after=True) == []
