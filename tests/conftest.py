"""Shared fixtures: a throw-away copy of the project for end-to-end runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ["Snakefile", "workflow", "playbooks", "config", "scripts", "profiles"]


class Project:
    """A copy of the project in a temporary directory, with localhost paths inside it."""

    def __init__(self, root: Path):
        self.root = root
        self.hostwork = root / "hostwork"       # batch_runner_root "on the host"
        self.scratch = root / "scratch"         # fio's scratch files
        self.inventory = root / "config" / "inventory" / "test.yml"
        self.inventory.write_text(
            "all:\n  hosts:\n    localhost:\n"
            "      ansible_connection: local\n"
            "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n"
            f"      batch_runner_root: {self.hostwork}\n"
            f"      workload_fio_directory: {self.scratch}\n")

    def host_runs(self) -> Path:
        """``runs/`` of the (single) campaign work directory on the host."""
        dirs = sorted(self.hostwork.glob("*/runs"))
        return dirs[0] if dirs else self.hostwork / "none" / "runs"

    def write_spec(self, name: str, text: str) -> Path:
        path = self.root / "config" / "experiments" / f"{name}.yaml"
        path.write_text(text)
        return path

    def exp(self, name: str) -> Path:
        return self.root / "results" / name

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["BMX_PROJECT_DIR"] = str(self.root)
        return env

    def bmx(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run ``bmx`` as a user would, from the project directory."""
        return subprocess.run([sys.executable, "-m", "benchmatrix.cli", *args], cwd=self.root,
                              env=self.env(), capture_output=True, text=True, timeout=timeout)

    def popen_bmx(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "benchmatrix.cli", *args], cwd=self.root,
                                env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A fresh copy of the project (no results) for one end-to-end test."""
    return copy_project(tmp_path)


def copy_project(tmp_path: Path) -> Project:
    """Copy the project into ``tmp_path/project`` (module-scoped fixtures use it too)."""
    root = tmp_path / "project"
    root.mkdir()
    for part in PROJECT_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / part)
    return Project(root)
