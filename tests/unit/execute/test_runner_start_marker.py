"""The runner's start is recognised by a tag on its task, not by the task's name
(issue 34, item 3): a batch's lease is renewed from that task's start and the call's
start slot goes back then (run_playbook's ``start_tag``).

Real ansible-runner against localhost, with a play whose tagged task has any name and
an untagged task before it named as the batch role's run task once was."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from benchmatrix.execute import batch
from benchmatrix.execute.ansible import START_TAG, run_playbook, tagged_tasks

ROOT = Path(__file__).resolve().parents[3]
ROLE_TASKS = ROOT / "playbooks" / "roles" / "batch_runner" / "tasks" / "main.yml"

PLAY = """\
- name: A decoy, then the marked task
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the batch
      ansible.builtin.command: touch {decoy}
    - name: Whatever the runner's task is called now
      ansible.builtin.command: touch {marked}
      tags: [TAG]
    - name: After it
      ansible.builtin.command: "true"
      tags: [TAG]
"""


def test_the_tagged_task_starts_the_call_whatever_its_name(tmp_path):
    project = tmp_path / "playbooks"
    project.mkdir()
    decoy, marked = tmp_path / "decoy", tmp_path / "marked"
    (project / "play.yml").write_text(PLAY.format(decoy=decoy, marked=marked).replace("TAG", START_TAG))
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         f"      ansible_python_interpreter: {sys.executable}\n")
    seen: list[tuple[bool, bool]] = []
    run_playbook("play.yml", project_dir=project, inventory=inventory, host="localhost", extravars={},
                 log=tmp_path / "play.log", start_tag=START_TAG,
                 on_started=lambda: seen.append((decoy.exists(), marked.exists())))
    # Called once, after the decoy ran and before the marked task did.
    assert seen == [(True, False)], seen


def test_tagged_tasks_names_each_marked_task_by_file_and_line(tmp_path):
    tasks = tmp_path / "main.yml"
    tasks.write_text(f"---\n- name: a\n  ansible.builtin.command: 'true'\n"
                     f"- name: b\n  block:\n    - name: c\n      ansible.builtin.command: 'true'\n"
                     f"      tags: {START_TAG}\n")
    assert tagged_tasks(tmp_path, START_TAG) == {f"{tasks.resolve()}:6"}


def test_the_batch_role_marks_its_run_task():
    tasks = yaml.safe_load(ROLE_TASKS.read_text())
    marked = [t for t in tasks if START_TAG in (t.get("tags") or [])]
    # The first start of the runner; the retry after an install comes after it.
    assert len(marked) == 1 and marked[0] is tasks[0], marked
    assert "batch_runner.py" in " ".join(marked[0]["ansible.builtin.command"]["argv"])
    assert batch.START_TAG == START_TAG
    assert not hasattr(batch, "RUN_TASK"), "the batch job still knows the run task by its name"
