"""A command killed by a signal names it (issue 35, item 7): a batch runner killed on its
host (SIGKILL, the OOM killer) left its runs' reason at Ansible's "non-zero return code".

Real ansible-runner against localhost: a command task whose process kills itself, as
the run task's runner is killed, and the task that reports a hidden result's failure
(tasks/main.yml "Report why the batch runner failed") with the role's own message."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

from benchmatrix.errors import PlaybookFailedError
from benchmatrix.execute.ansible import run_playbook

ROOT = Path(__file__).resolve().parents[3]
PLAY = """\
- name: Run a command that dies
  hosts: "{{ bmx_host }}"
  gather_facts: false
  tasks:
    - name: Run the batch
      ansible.builtin.command:
        argv:
          - "{{ ansible_playbook_python }}"
          - -c
          - "import os, sys; print('halfway', file=sys.stderr, flush=True); os.kill(os.getpid(), {{ bmx_signal }})"
"""
# The role's message for a hidden result, with the role's own template (vars/main.yml).
HIDDEN = """\
- name: Report a hidden failure
  hosts: "{{ bmx_host }}"
  gather_facts: false
  vars:
    batch_runner_hidden_failure: VARS
  tasks:
    - name: Run the batch
      ansible.builtin.command:
        argv: ["{{ ansible_playbook_python }}", -c, "import os; os.kill(os.getpid(), 9)"]
      register: batch_runner_result
      failed_when: false
      no_log: true
    - name: Skipped retry
      ansible.builtin.command: "true"
      register: batch_runner_retry
      when: false
    - name: Report why the batch runner failed
      ansible.builtin.fail:
        msg: "{{ batch_runner_hidden_failure }}"
"""


@pytest.fixture
def tiny_project(tmp_path):
    project = tmp_path / "playbooks"
    project.mkdir()
    (project / "play.yml").write_text(PLAY)
    template = yaml.safe_load((ROOT / "playbooks" / "roles" / "batch_runner" / "vars" / "main.yml").read_text())
    (project / "hidden.yml").write_text(HIDDEN.replace(
        "VARS", yaml.safe_dump(template["batch_runner_hidden_failure"], default_style='"', width=10**6).strip()))
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    return project, inventory


def _fail(project: Path, inventory: Path, playbook: str, log: Path, sig: int = 9) -> PlaybookFailedError:
    with pytest.raises(PlaybookFailedError) as info:
        run_playbook(playbook, project_dir=project, inventory=inventory, host="localhost",
                     extravars={"bmx_host": "localhost", "bmx_signal": sig}, log=log)
    return info.value


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_command_killed_by_a_signal_names_it(tiny_project, tmp_path, sig):
    err = _fail(*tiny_project, "play.yml", tmp_path / "play.log", int(sig))
    assert err.task == "Run the batch"
    line = str(err)
    assert f"was killed by signal {int(sig)} ({sig.name})" in line, line
    assert "non-zero return code" not in line
    assert "halfway" in line, "the command's last stderr line says how far it came"
    assert len(line.splitlines()) == 1


def test_a_hidden_runner_result_names_the_signal(tiny_project, tmp_path):
    err = _fail(*tiny_project, "hidden.yml", tmp_path / "hidden.log")
    assert err.task == "Report why the batch runner failed"
    assert "the batch runner on localhost was killed by signal 9 (SIGKILL)" in str(err), str(err)
