"""Shared fixtures: a throw-away copy of the project for end-to-end runs."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ["Snakefile", "workflow", "playbooks", "config", "scripts", "profiles"]

# The order of the test files, slowest first, from measurement. `make test` hands out
# whole files (--dist loadfile); pytest-xdist would hand them out most tests first, so
# the files of few tests but minutes of real campaigns came last and one worker ran them
# long after the other had finished. Every run records each file's seconds (the sum of
# its tests' phases, as the xdist controller receives them) in LAST_SECONDS (git-ignored);
# the next run orders by those, falling back to FILE_SECONDS_JSON (committed: the seconds
# of the last full run on a 2-core machine, copied from LAST_SECONDS when the suite
# changes much; a clean clone has only this: `make test PYTEST_ARGS=--update-file-seconds`
# rewrites it from the run, write_committed_seconds). pytest_configure keeps xdist from
# reordering them. A file measured nowhere comes after the measured ones (an end-to-end
# one first); only the order changes, never what runs.
FILE_SECONDS_JSON = ROOT / "tests" / "file_seconds.json"
LAST_SECONDS = ROOT / ".test-file-seconds.json"


def _read_seconds(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def file_seconds() -> dict[str, float]:
    """Seconds per test file: the committed figures, overridden by the last run's."""
    return {**_read_seconds(FILE_SECONDS_JSON), **_read_seconds(LAST_SECONDS)}


FILE_SECONDS = file_seconds()


class Project:
    """A copy of the project in a temporary directory, with localhost paths inside it."""

    def __init__(self, root: Path):
        self.root = root
        self.hostwork = root / "hostwork"       # batch_runner_root "on the host"
        self.scratch = root / "scratch"         # fio's scratch files
        self.inventory = root / "config" / "inventory" / "test.yml"
        # Added to every bmx call's environment (fake_ansible.use_fake_port).
        self.extra_env: dict[str, str] = {}
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
        env.update(self.extra_env)
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-file-seconds", action="store_true", default=False,
                     help="write this run's seconds per test file into tests/file_seconds.json, the order a "
                          "clean clone uses (after a full run on 2 cores: make test PYTEST_ARGS=--update-file-seconds)")


def pytest_configure(config: pytest.Config) -> None:
    # Keep the order pytest_collection_modifyitems gives the files (pytest-xdist's
    # --loadscope-reorder, on by default, would sort them by their number of tests).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _file_weight(item: pytest.Item) -> tuple[float, bool]:
    path = item.nodeid.split("::", 1)[0]
    return FILE_SECONDS.get(path, 0.0), item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (file_seconds()), then the other end-to-end ones, then the
    rest; within a file the tests keep their order (sorted() is stable)."""
    weight: dict[str, tuple[float, bool]] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        seconds, slow = _file_weight(item)
        old = weight.get(path, (0.0, False))
        weight[path] = (max(old[0], seconds), old[1] or slow)
    items.sort(key=lambda item: tuple(-w for w in weight[item.nodeid.split("::", 1)[0]]))


_MEASURED: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs in the xdist controller too (for every worker's report): the files' seconds.
    path = report.nodeid.split("::", 1)[0]
    _MEASURED[path] = _MEASURED.get(path, 0.0) + float(report.duration or 0.0)


def _write_seconds(path: Path, seconds: dict[str, float]) -> None:
    path.write_text(json.dumps(dict(sorted(seconds.items(), key=lambda kv: -kv[1])), indent=1) + "\n")


def write_committed_seconds(measured: dict[str, float]) -> None:
    """Rewrite FILE_SECONDS_JSON from a run: its files' seconds replace theirs, files it did
    not run keep theirs, files that no longer exist are dropped (slowest first)."""
    kept = {path: secs for path, secs in _read_seconds(FILE_SECONDS_JSON).items() if (ROOT / path).is_file()}
    _write_seconds(FILE_SECONDS_JSON, {**kept, **{k: round(v, 1) for k, v in measured.items()}})


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Record this run's seconds per file in LAST_SECONDS (merged: files not run keep
    theirs), and in FILE_SECONDS_JSON with ``--update-file-seconds``."""
    if hasattr(session.config, "workerinput") or not _MEASURED:
        return  # an xdist worker: its controller records the whole run
    if session.config.getoption("update_file_seconds"):
        write_committed_seconds(_MEASURED)
    try:
        _write_seconds(LAST_SECONDS, {**_read_seconds(LAST_SECONDS), **{k: round(v, 1) for k, v in _MEASURED.items()}})
    except OSError:
        pass  # a read-only checkout: the order is only an optimisation
