"""What `make demo` and `make test` install (issue 24, item 6): the demo's environment holds
the runtime dependencies only; the test and lint tools come with the test targets; the
license is an SPDX string (setuptools warns about the old table on every install)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make_n(target: str) -> list[str]:
    res = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [ln for ln in res.stdout.splitlines() if "pip install" in ln and "--upgrade pip" not in ln]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_demo_installs_the_runtime_only_and_test_targets_the_test_tools():
    assert _make_n("demo") == [".venv/bin/pip install --quiet -e ."]
    for target in ("test-fast", "lint"):
        assert ".venv/bin/pip install --quiet -e '.[test]'" in _make_n(target), target


def test_runtime_and_test_dependencies_are_apart_and_the_license_is_spdx():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    runtime = " ".join(project["dependencies"])
    test = " ".join(project["optional-dependencies"]["test"])
    # Used by bmx itself: the pyperf export's classes, the completion script.
    assert "pyperf" in runtime and "shtab" in runtime
    for tool in ("pytest", "hypothesis", "ruff", "snakefmt", "ansible-lint"):
        assert tool in test and tool not in runtime, tool
