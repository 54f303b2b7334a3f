"""Fixtures of the plan tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def in_project(project, monkeypatch):
    """A copy of the project as the working directory and BMX_PROJECT_DIR (bmx as a user runs it)."""
    monkeypatch.setenv("BMX_PROJECT_DIR", str(project.root))
    monkeypatch.chdir(project.root)
    return project
