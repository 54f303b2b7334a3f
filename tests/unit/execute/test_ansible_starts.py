"""ansible-playbook starts are bounded per controller (BMX_ANSIBLE_STARTS): a call
waits for a free start slot, and gives it back as soon as its playbook's first task
starts, so a long task (a batch's runs) never holds one.

Real ansible-runner against localhost and real processes holding the slots.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from benchmatrix.errors import AnsibleError
from benchmatrix.execute.ansible import START_TAG, run_playbook, start_slot, start_slots

PLAY = """\
- name: Setup, then a long task
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The setup
      ansible.builtin.command: sleep 5
    - name: A long task
      ansible.builtin.command: sleep 4
      tags: [bmx_runner_start]
"""

HOLD = """\
import fcntl, sys, time
fh = open(sys.argv[1], "a")
fcntl.flock(fh, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _free(path) -> bool:
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True


def test_the_number_of_slots_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("BMX_ANSIBLE_STARTS", "3")
    assert start_slots() == 3
    monkeypatch.setenv("BMX_ANSIBLE_STARTS", "0")
    with start_slot() as give_back:  # no bound: nothing is locked
        give_back()
    monkeypatch.setenv("BMX_ANSIBLE_STARTS", "many")
    with pytest.raises(AnsibleError, match="BMX_ANSIBLE_STARTS='many': must be a whole number"):
        start_slots()
    monkeypatch.delenv("BMX_ANSIBLE_STARTS")
    assert start_slots() >= 2


def test_a_slot_held_by_another_process_is_waited_for(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "slot0.lock"), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with start_slot(1, tmp_path):
            waited = time.monotonic() - t0
            assert not _free(tmp_path / "slot0.lock")
        assert waited >= 1.0, waited
        assert _free(tmp_path / "slot0.lock"), "the slot was not given back"
    finally:
        holder.kill()
        holder.wait()


def test_a_slot_goes_back_after_its_longest_hold(tmp_path):
    with start_slot(1, tmp_path, max_seconds=0.3):
        assert not _free(tmp_path / "slot0.lock")
        time.sleep(1)
        assert _free(tmp_path / "slot0.lock"), "a call that waits long (a reboot) kept its slot"


def _sample_slot(tmp_path, monkeypatch, start_tag: str) -> tuple[float, list[tuple[float, bool]]]:
    """Run PLAY on localhost with one start slot; the call's seconds and whether the slot
    was free, sampled every 0.1 s while the call ran."""
    project = tmp_path / "playbooks"
    project.mkdir()
    (project / "play.yml").write_text(PLAY)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         f"      ansible_python_interpreter: {sys.executable}\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("BMX_ANSIBLE_STARTS", "1")
    slot = tmp_path / f"bmx-ansible-starts-{os.getuid()}" / "slot0.lock"
    done: list[float] = []
    call = threading.Thread(target=lambda: done.append(run_playbook(
        "play.yml", project_dir=project, inventory=inventory, host="localhost", extravars={},
        log=tmp_path / "play.log", start_tag=start_tag).seconds))
    t0 = time.monotonic()
    call.start()
    samples = []
    while call.is_alive():
        samples.append((time.monotonic() - t0, slot.exists() and _free(slot)))
        time.sleep(0.1)
    call.join()
    assert done, "the playbook failed"
    return done[0], samples


@pytest.mark.slow
def test_a_playbook_holds_a_start_slot_until_the_tagged_task_starts(tmp_path, monkeypatch):
    """Run the batch's way: held through the setup task, given back while the long
    task (the runs, tagged START_TAG) still goes on."""
    seconds, samples = _sample_slot(tmp_path, monkeypatch, START_TAG)
    held = [t for t, free in samples if not free]
    freed = [t for t, free in samples if free and held and t > held[-1]]
    assert held and held[-1] >= 4.5, f"the slot went back before the setup task ended: {samples}"
    assert freed and seconds - freed[0] >= 2, f"the slot was held into the long task: {samples}"
