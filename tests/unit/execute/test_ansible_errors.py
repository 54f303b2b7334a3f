"""A missing or broken role says why (issue 13.4): Ansible's own reason reaches the user.

Real ansible-runner against localhost with a throw-away project: a playbook that
includes a role by name, as run_batch.yml does for knobs and workloads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmatrix.errors import PlaybookFailedError
from benchmatrix.execute.ansible import _failure_message, run_playbook

PLAY = """\
- name: Apply a knob
  hosts: "{{ bmx_host }}"
  gather_facts: false
  tasks:
    - name: Apply and verify the knob
      ansible.builtin.include_role:
        name: "{{ bmx_role }}"
"""


@pytest.fixture
def tiny_project(tmp_path):
    project = tmp_path / "playbooks"
    (project / "roles" / "knob_broken" / "tasks").mkdir(parents=True)
    (project / "roles" / "knob_broken" / "tasks" / "main.yml").write_text(
        "- name: Broken\n  ansible.builtin.debug:\n    msg: [unclosed\n")
    (project / "play.yml").write_text(PLAY)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    return project, inventory


def _fail(project: Path, inventory: Path, role: str, log: Path) -> PlaybookFailedError:
    with pytest.raises(PlaybookFailedError) as info:
        run_playbook("play.yml", project_dir=project, inventory=inventory, host="localhost",
                     extravars={"bmx_host": "localhost", "bmx_role": role}, log=log)
    return info.value


@pytest.mark.slow
def test_a_missing_role_is_named(tiny_project, tmp_path):
    err = _fail(*tiny_project, "knob_missing", tmp_path / "missing.log")
    assert err.task == "Apply and verify the knob"
    assert "the role 'knob_missing' was not found" in str(err) and "no message" not in str(err)
    assert len(str(err).splitlines()) == 1


@pytest.mark.slow
def test_a_role_with_a_syntax_error_names_the_file_and_line(tiny_project, tmp_path):
    err = _fail(*tiny_project, "knob_broken", tmp_path / "broken.log")
    assert err.task == "Apply and verify the knob"
    assert "YAML parsing failed" in str(err)
    assert "roles/knob_broken/tasks/main.yml:4" in str(err)
    assert len(str(err).splitlines()) == 1


def test_failure_message_reads_reason_and_loop_items():
    assert _failure_message({"failed": True, "reason": "the role 'x' was not found in roles"}) == \
        "the role 'x' was not found in roles"
    res = {"failed": True, "results": [{"item": "a", "failed": False, "msg": "fine"},
                                       {"item": "b", "failed": True, "msg": "No such file\nmore"}]}
    assert _failure_message(res) == "item b: No such file"
    assert _failure_message({"failed": True}) == "no message"


SPEC = """\
name: missing_knob_role
inventory: config/inventory/test.yml
factors:
  level: [1, 2]
knobs:
  level: {role: knob_missing}
workload:
  role: workload_command
  vars:
    argv: [echo, "{{ level }}"]
replicates: 1
"""


@pytest.mark.slow
def test_a_spec_with_a_missing_knob_role_says_why(project):
    # A role directory without a backend: bmx run refuses a role no directory ships before
    # anything runs (test_did_you_mean.py), so the batch's own message needs one that exists.
    (project.root / "playbooks" / "roles" / "knob_missing" / "defaults").mkdir(parents=True)
    (project.root / "playbooks" / "roles" / "knob_missing" / "defaults" / "main.yml").write_text("---\n{}\n")
    spec = project.write_spec("missing_knob_role", SPEC)
    res = project.bmx("run", str(spec), "--cores", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    missing = "role 'knob_missing' has no backend in the bmx_knob module"
    assert missing in res.stdout + res.stderr
    recs = [json.loads(p.read_text()) for p in project.exp("missing_knob_role").glob("runs/*/1/record.json")]
    assert len(recs) == 2
    for rec in recs:
        assert rec["status"] == "failed" and rec["failed_task"] == "Read, set and verify the knobs in one call"
        assert missing in rec["reason"], rec["reason"]
