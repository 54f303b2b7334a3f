"""Host patterns over Ansible inventories."""

from __future__ import annotations

import re
from pathlib import Path

from benchmatrix.errors import PlanError
from benchmatrix.names import name_problem, shown

# Matched whole: with re.match, '$' also matched before a final newline ('h1\n').
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def resolve_hosts(inventory: Path, pattern: str) -> list[str]:
    """Names of the inventory's hosts that match an Ansible host pattern, sorted.

    Raises:
        PlanError: missing inventory, no host matched, or a host name unusable in paths.
    """
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    if not Path(inventory).is_file():
        raise PlanError(f"{inventory}: inventory file not found")
    manager = InventoryManager(loader=DataLoader(), sources=[str(inventory)])
    # ansible-core 2.19 names hosts with tagged str subclasses, which YAML cannot dump
    # into a later call's extra variables (`bmx restore` failed so): plain str only.
    hosts = sorted(str(h.name) for h in manager.get_hosts(pattern=pattern))
    if not hosts:
        raise PlanError(f"{inventory}: host pattern '{pattern}' matches no host")
    for name in hosts:
        if name_problem(name, "host name", 253) or not _HOST_RE.fullmatch(name):
            raise PlanError(f"{inventory}: host name {shown(name)} cannot be used in result paths "
                            "(letters, digits, '.', '_' and '-' only, at most 253); give it an alias")
    return hosts
