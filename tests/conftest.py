"""Shared fixtures: a throw-away copy of the project for end-to-end runs."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ["Snakefile", "workflow", "playbooks", "config", "scripts", "profiles"]

# Seconds each of the slowest test files took on one xdist worker of `make test` (2
# workers on a busy 2-core machine; junit times). `make test` hands out whole files (--dist loadfile);
# pytest-xdist would hand them out most tests first, so these files, few tests each but
# minutes of real campaigns, came last and one worker ran them long after the other had
# finished. pytest_collection_modifyitems puts the files in this order, longest first,
# and pytest_configure keeps xdist from reordering them. A file not named here comes
# after these (an end-to-end one first); only the order changes, never what runs.
FILE_SECONDS = {
    "tests/e2e/test_controller_failures.py": 640,
    "tests/e2e/test_bench_smoke.py": 470,
    "tests/e2e/test_workloads_e2e.py": 465,
    "tests/e2e/test_hosts_ssh.py": 325,
    "tests/e2e/test_reboot.py": 320,
    "tests/unit/report/test_report.py": 305,
    "tests/e2e/test_failures.py": 310,
    "tests/e2e/test_runner_install.py": 260,
    "tests/unit/campaigns/test_campaigns.py": 220,
    "tests/e2e/test_e2e_states.py": 200,
    "tests/e2e/test_e2e_local.py": 200,
    "tests/unit/analyze/test_verdict_calibration.py": 190,
    "tests/unit/plan/test_order.py": 185,
    "tests/unit/campaigns/test_publish.py": 175,
    "tests/e2e/test_host_facts_cache.py": 165,
    "tests/e2e/test_live_knobs_failures_e2e.py": 125,
    "tests/e2e/test_check.py": 150,
    "tests/unit/results/test_export.py": 140,
    "tests/e2e/test_adaptive_e2e.py": 115,
    "tests/e2e/test_secrets.py": 110,
    "tests/e2e/test_progress.py": 110,
    "tests/e2e/test_e2e_knobs.py": 105,
    "tests/e2e/test_verdicts_e2e.py": 105,
    "tests/e2e/test_workloads_examples.py": 105,
    "tests/lint/test_lint.py": 100,
    "tests/e2e/test_knob_cpu.py": 100,
    "tests/e2e/test_knob_postgresql.py": 95,
    "tests/e2e/test_e2e_processes.py": 80,
    "tests/unit/analyze/test_analysis.py": 75,
    "tests/unit/execute/test_ansible_errors.py": 60,
    "tests/e2e/test_knob_file_layout.py": 45,
    "tests/e2e/test_knob_sysfs.py": 45,
    "tests/e2e/test_terminal_e2e.py": 35,
    "tests/unit/analyze/test_adaptive.py": 35,
    "tests/unit/execute/test_ansible_starts.py": 35,
}


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


@pytest.fixture
def in_project(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """:func:`project` as the working directory and ``BMX_PROJECT_DIR``: bmx's commands
    called in-process (``cli.main``) act on it as a user's would."""
    monkeypatch.setenv("BMX_PROJECT_DIR", str(project.root))
    monkeypatch.chdir(project.root)
    return project


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a result CSV (runs.csv, plan.csv, ...) as dicts of strings."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


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


def pytest_configure(config: pytest.Config) -> None:
    # Keep the order pytest_collection_modifyitems gives the files (pytest-xdist's
    # --loadscope-reorder, on by default, would sort them by their number of tests).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _file_weight(item: pytest.Item) -> tuple[float, bool]:
    path = item.nodeid.split("::", 1)[0]
    return FILE_SECONDS.get(path, 0.0), item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (FILE_SECONDS), then the other end-to-end ones, then the
    rest; within a file the tests keep their order (sorted() is stable)."""
    weight: dict[str, tuple[float, bool]] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        seconds, slow = _file_weight(item)
        old = weight.get(path, (0.0, False))
        weight[path] = (max(old[0], seconds), old[1] or slow)
    items.sort(key=lambda item: tuple(-w for w in weight[item.nodeid.split("::", 1)[0]]))
