"""Host patterns over Ansible inventories."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from benchmatrix.errors import PlanError
from benchmatrix.files import atomic_write, user_cache_dir
from benchmatrix.names import name_problem, shown

# Matched whole: with re.match, '$' also matched before a final newline ('h1\n').
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# An inventory plugin's configuration (constructed, cloud inventories): its hosts are not in the file.
_PLUGIN_RE = re.compile(rb"^plugin\s*:", re.M)


def resolve_hosts(inventory: Path, pattern: str) -> list[str]:
    """Names of the inventory's hosts that match an Ansible host pattern, sorted.

    The answer for a plain inventory file is kept in the user's cache
    (``$XDG_CACHE_HOME/benchmatrix/hosts``) under the file's content, the pattern and
    Ansible's version: ``bmx run`` and its plan job resolve the same pattern in every
    campaign, and Ansible's inventory code costs about 0.3 CPU-s to import. A script or
    an inventory plugin's configuration is asked every time.

    Raises:
        PlanError: missing inventory, no host matched, or a host name unusable in paths.
    """
    if not Path(inventory).is_file():
        raise PlanError(f"{inventory}: inventory file not found")
    entry = _cache_entry(Path(inventory), pattern)
    hosts = _read_cached(entry)
    if hosts is None:
        hosts = _ask_ansible(inventory, pattern)
    if not hosts:
        raise PlanError(f"{inventory}: host pattern '{pattern}' matches no host")
    for name in hosts:
        if name_problem(name, "host name", 253) or not _HOST_RE.fullmatch(name):
            raise PlanError(f"{inventory}: host name {shown(name)} cannot be used in result paths "
                            "(letters, digits, '.', '_' and '-' only, at most 253); give it an alias")
    if entry is not None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(entry, json.dumps(hosts) + "\n")
        except OSError:
            pass  # a cache that cannot be written costs the next resolution, nothing else
    return hosts


def _ask_ansible(inventory: Path, pattern: str) -> list[str]:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(inventory)])
    # ansible-core 2.19 names hosts with tagged str subclasses, which YAML cannot dump
    # into a later call's extra variables (`bmx restore` failed so): plain str only.
    return sorted(str(h.name) for h in manager.get_hosts(pattern=pattern))


def _cache_entry(inventory: Path, pattern: str) -> Path | None:
    """The cache file of this inventory's content and pattern; None when the file does not
    hold its hosts (executable, an inventory plugin) or cannot be read."""
    from ansible.release import __version__ as ansible_version

    try:
        if os.access(inventory, os.X_OK):
            return None
        text = inventory.read_bytes()
        if _PLUGIN_RE.search(text):
            return None
        # What else decides how Ansible reads the file: its settings (ansible.cfg here or
        # named by ANSIBLE_CONFIG, the ANSIBLE_INVENTORY_* variables).
        cfg = Path(os.environ.get("ANSIBLE_CONFIG") or "ansible.cfg")
        settings = [cfg.read_bytes() if cfg.is_file() else b""]
        settings += [f"{k}={v}".encode() for k, v in sorted(os.environ.items()) if k.startswith("ANSIBLE_INVENTORY")]
        key = hashlib.sha256(b"\0".join([text, pattern.encode(), ansible_version.encode(), *settings])).hexdigest()
        return user_cache_dir() / "hosts" / f"{key[:32]}.json"
    except (OSError, RuntimeError):
        return None


def _read_cached(entry: Path | None) -> list[str] | None:
    if entry is None:
        return None
    try:
        hosts = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None
    return hosts if isinstance(hosts, list) and all(isinstance(h, str) for h in hosts) else None
