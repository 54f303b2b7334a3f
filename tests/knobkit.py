"""Drive knob roles through real Ansible, the way run_batch.yml does.

A tiny project in the test's temporary directory links the repository's roles, tasks
and library (the bmx_knob module), and holds a playbook that includes tasks/knobs.yml,
the knob loop run_batch.yml and restore_host.yml include, then publishes the knob states
and the merged run settings (set_stats: bmx_knobs, bmx_run_settings). Calls go through
benchmatrix.execute.ansible.run_playbook.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from benchmatrix.errors import PlaybookFailedError
from benchmatrix.execute.ansible import run_playbook

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOKS = ROOT / "playbooks"

PLAYBOOK = """\
---
- name: Apply knobs as run_batch.yml does
  hosts: "{{ bmx_host }}"
  gather_facts: false
  check_mode: "{{ bmx_check_mode | default(false) | bool }}"
  tasks:
    - name: Apply and verify the knobs
      ansible.builtin.include_tasks: tasks/knobs.yml

    - name: Publish the knob states and run settings
      ansible.builtin.set_stats:
        data:
          bmx_knobs: "{{ bmx_knob_states | default({}) }}"
          bmx_run_settings: "{{ bmx_run_settings | default({}) }}"
        per_host: true
        aggregate: false
"""


def knob(factor: str, role: str, value: Any, cost: str = "none", **role_vars: Any) -> dict[str, Any]:
    """One item of ``bmx_knobs`` (what benchmatrix.execute.restore.knob_items makes)."""
    return {"factor": factor, "role": role, "value": value, "vars": role_vars, "cost": cost}


class KnobRunner:
    """Runs the knob playbook against localhost."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path / "knobproject"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "roles").symlink_to(PLAYBOOKS / "roles")
        (self.dir / "tasks").symlink_to(PLAYBOOKS / "tasks")
        (self.dir / "library").symlink_to(PLAYBOOKS / "library")
        (self.dir / "filter_plugins").symlink_to(PLAYBOOKS / "filter_plugins")
        shutil.copy(PLAYBOOKS / "ansible.cfg", self.dir / "ansible.cfg")
        (self.dir / "apply_knobs.yml").write_text(PLAYBOOK)
        self.inventory = self.dir / "inventory.yml"
        self.inventory.write_text(
            "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
            "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n"
            # The baselines the module keeps before a change stay in this test's directory.
            f"      batch_runner_root: {self.dir / 'hostwork'}\n")
        self.calls = 0

    def run(self, knobs: list[dict[str, Any]], check: bool = False,
            extravars: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Apply ``knobs``; returns (knob states by factor, merged run settings)."""
        self.calls += 1
        result = run_playbook(
            "apply_knobs.yml", project_dir=self.dir, inventory=self.inventory, host="localhost",
            extravars={"bmx_host": "localhost", "bmx_knobs": knobs, "bmx_check_mode": check,
                       "bmx_experiment": "knobtest", **(extravars or {})},
            log=self.dir / "logs" / f"{self.calls}.log", timeout=600)
        return result.payload("bmx_knobs"), result.payload("bmx_run_settings")

    def fail(self, knobs: list[dict[str, Any]], extravars: dict[str, Any] | None = None) -> PlaybookFailedError:
        """Apply ``knobs`` expecting a failure; returns the error."""
        try:
            self.run(knobs, extravars=extravars)
        except PlaybookFailedError as exc:
            return exc
        raise AssertionError(f"applying {knobs} did not fail")


def assert_cycle(runner: KnobRunner, make, value: Any, read_state) -> dict[str, Any]:
    """The contract's cycle for one knob: apply (changed, verified), apply again (no
    change), reset to the baseline (changed back, verified). ``make(value)`` builds the
    knob item; ``read_state()`` reads the host's real state independently of Ansible."""
    before = read_state()
    states, _ = runner.run([make(value)])
    (state,) = states.values()
    assert state["ok"], state
    assert state["changed"] is True, state
    assert state["actual"] == str(value)
    baseline = state["baseline"]
    changed_state = read_state()
    assert changed_state != before, f"the host did not change: {changed_state!r}"

    states, _ = runner.run([make(value)])
    (again,) = states.values()
    assert again["ok"] and again["changed"] is False, again
    assert read_state() == changed_state

    states, _ = runner.run([make(baseline)])
    (reset,) = states.values()
    assert reset["ok"] and reset["changed"] is True, reset
    assert reset["actual"] == baseline
    assert read_state() == before
    return state


def sh(*argv: str, check: bool = True) -> str:
    """Run a command; returns its stdout."""
    return subprocess.run(list(argv), check=check, capture_output=True, text=True).stdout.strip()


class LoopDevice:
    """A loop device over a sparse file, optionally with an ext4 filesystem mounted."""

    def __init__(self, tmp_path: Path, size_mb: int = 64, mkfs: bool = False):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.image = tmp_path / "loop.img"
        with open(self.image, "wb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        self.device = sh("losetup", "--find", "--show", str(self.image))
        self.name = Path(self.device).name
        self.mountpoint: Path | None = None
        if mkfs:
            try:
                sh("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.device)
                self.mountpoint = tmp_path / "mnt"
                self.mountpoint.mkdir()
                sh("mount", self.device, str(self.mountpoint))
            except subprocess.CalledProcessError:
                self.close()
                raise

    def sysfs(self, name: str) -> Path:
        return Path("/sys/block") / self.name / "queue" / name

    def close(self) -> None:
        if self.mountpoint is not None:
            sh("umount", str(self.mountpoint), check=False)
            self.mountpoint = None
        sh("losetup", "--detach", self.device, check=False)
