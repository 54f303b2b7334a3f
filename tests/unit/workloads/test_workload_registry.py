"""The workload registry (benchmatrix.workloads.WORKLOADS) against the roles it describes
and against docs/workloads.md's table of built-in workloads."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from benchmatrix.workloads import PARSERS, WORKLOADS, Workload, metric_direction

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "playbooks" / "roles"


def table_row(w: Workload) -> str:
    """The line of docs/workloads.md's table for one descriptor."""
    binary = f"`{w.binary}`" if w.binary else "the argv's first"
    catalogue = (f"{len(w.metrics)} metrics" if w.metrics
                 else "per spec" if w.role == "workload_command" else "per run")
    yes = {True: "yes", False: "no"}
    return (f"| `{w.role}` | {w.summary} | {binary} | {catalogue} | {yes[w.install_once]} | {yes[w.cleanup]} |")


def test_every_workload_role_has_a_descriptor_and_every_descriptor_a_role():
    assert {p.name for p in ROLES.iterdir() if p.name.startswith("workload_")} == set(WORKLOADS)
    assert all(role == w.role for role, w in WORKLOADS.items())
    assert PARSERS == {role: w.parse for role, w in WORKLOADS.items()}


@pytest.mark.parametrize("role", sorted(WORKLOADS))
def test_descriptor_matches_its_role(role):
    w = WORKLOADS[role]
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    # bmx check asks the descriptor's binary; the role runs its <role>_binary default.
    assert str(defaults.get(f"{role}_binary") or w.binary) == w.binary
    # The role's filter plugin imports the argv builder the descriptor names.
    plugin = (ROLES / role / "filter_plugins" / f"{role}.py").read_text()
    assert f"from {w.argv} import FilterModule" in plugin
    assert hasattr(importlib.import_module(w.argv), "FilterModule")
    # A role without clean-up has a no-op finish.yml.
    finish = yaml.safe_load((ROLES / role / "tasks" / "finish.yml").read_text())
    noop = [t for t in finish if t.get("ansible.builtin.meta") == "noop"]
    assert w.cleanup == (len(noop) != len(finish))
    # The host variables the descriptor names for tasks/prepare.yml are the role's own.
    assert all(not var or var in defaults for var in (w.directory_var, w.cleanup_var))
    assert w.cleanup or not w.cleanup_var
    for pattern, better in w.directions:
        re.compile(pattern)
        assert better in ("higher", "lower")
    assert all(isinstance(unit, str) for unit in w.metrics.values())


def test_directions_come_from_the_descriptors():
    assert metric_direction("read_iops") == "higher" and metric_direction("write_clat_p99_us") == "lower"
    assert metric_direction("tps") == ""


def test_the_docs_table_is_the_registry():
    text = (ROOT / "docs" / "workloads.md").read_text()
    section = text.split("## Built-in workloads", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `workload_")]
    assert rows == [table_row(w) for w in WORKLOADS.values()]


def test_registry_refuses_a_second_descriptor_of_the_same_role():
    from benchmatrix.workloads.base import registry

    fio = WORKLOADS["workload_fio"]
    assert registry([fio, WORKLOADS["workload_pgbench"]]) == {
        "workload_fio": fio, "workload_pgbench": WORKLOADS["workload_pgbench"]}
    twin = Workload(role="workload_fio", summary="another fio", parse=fio.parse, argv=fio.argv)
    with pytest.raises(ValueError, match="workload_fio.*registered twice"):
        registry([fio, twin])


@pytest.mark.parametrize("role", sorted(WORKLOADS))
def test_files_directory_is_the_roles_default(role):
    """bmx check takes the directory of the workload's files from the descriptor; the role's
    defaults file must say the same."""
    w = WORKLOADS[role]
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    assert (w.files_var, w.files_default) == ((f"{role}_directory", defaults[f"{role}_directory"])
                                              if f"{role}_directory" in defaults else ("", ""))


@pytest.mark.parametrize("role", sorted(WORKLOADS))
def test_the_role_variables_named_are_the_roles_own(role):
    """bmx check reads a host's binary, install and loop file system settings by the
    names the descriptor gives; each is the role's variable where the role has one."""
    w = WORKLOADS[role]
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    for name, var in (("binary", w.binary_var), ("install", w.install_var), ("loopfs_mb", w.loopfs_var)):
        assert var == (f"{role}_{name}" if f"{role}_{name}" in defaults else ""), (name, var)


@pytest.mark.parametrize("role", sorted(WORKLOADS))
def test_the_version_fact_is_the_one_the_role_sets(role):
    w = WORKLOADS[role]
    install = (ROLES / role / "tasks" / "install.yml").read_text()
    assert w.version_var and re.search(rf"^\s+{w.version_var}:", install, re.M), w.version_var
