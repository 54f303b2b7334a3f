"""Resolving a host pattern over a plain inventory file is kept in the user's cache
(issue 34, item 4): Ansible's inventory code costs about 0.3 CPU-s to import, and both
``bmx run`` and the plan job resolved the same pattern over the same file in every
campaign. The cache follows the file's content, and an inventory whose hosts are not
in the file (a script, an inventory plugin) is asked every time.

Each resolution runs in a fresh interpreter, as the processes of a campaign do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from unit.report.test_report_cost import ROOT

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n    h2: {ansible_connection: local}\n" \
            "  children:\n    web:\n      hosts: {h2: {}}\n"


def _resolve(tmp_path, inventory, pattern: str) -> tuple[list[str] | str, bool]:
    """(the hosts or the error line, whether Ansible's inventory code was imported)."""
    code = ("import json, sys\nfrom benchmatrix.errors import PlanError\n"
            "from benchmatrix.execute.hosts import resolve_hosts\n"
            f"try:\n    out = resolve_hosts({str(inventory)!r}, {pattern!r})\n"
            "except PlanError as exc:\n    out = str(exc)\n"
            "print(json.dumps([out, 'ansible.inventory.manager' in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          check=True)
    out, loaded = json.loads(proc.stdout)
    return out, loaded


def test_a_second_resolution_reads_the_cache_and_follows_the_file(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(INVENTORY)
    assert _resolve(tmp_path, inv, "all") == (["h1", "h2"], True)
    assert _resolve(tmp_path, inv, "all") == (["h1", "h2"], False)
    # Another pattern over the same file is its own entry.
    assert _resolve(tmp_path, inv, "web") == (["h2"], True)
    assert _resolve(tmp_path, inv, "web") == (["h2"], False)
    # An edited inventory is read again.
    inv.write_text(INVENTORY.replace("h2", "h3"))
    assert _resolve(tmp_path, inv, "all") == (["h1", "h3"], True)
    assert _resolve(tmp_path, inv, "all") == (["h1", "h3"], False)


def test_errors_are_not_kept(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(INVENTORY)
    for _ in range(2):
        out, loaded = _resolve(tmp_path, inv, "db")
        assert out == f"{inv}: host pattern 'db' matches no host" and loaded


@pytest.mark.parametrize("kind", ["script", "plugin"])
def test_an_inventory_whose_hosts_are_not_in_the_file_is_asked_every_time(tmp_path, kind):
    if kind == "script":
        inv = tmp_path / "inv.py"
        inv.write_text(f"#!{sys.executable}\nimport json\n"
                       "print(json.dumps({'all': {'hosts': ['h1']}, '_meta': {'hostvars': {}}}))\n")
        inv.chmod(0o755)
    else:
        (tmp_path / "inv.yml").write_text(INVENTORY)
        inv = tmp_path / "inv.constructed.yml"  # groups made from host variables: the plugin decides
        inv.write_text("plugin: ansible.builtin.constructed\nstrict: false\n")
    for _ in range(2):
        assert _resolve(tmp_path, inv, "all")[1]
