"""Filters of the service_postgresql role.

``service_postgresql_conf``: the text of benchmatrix.conf (postgresql.conf syntax)
from the role's connection settings and its ``service_postgresql_settings``. Every
value is written as a quoted string, so a value can never add a second parameter.

``service_postgresql_bindir``: the newest ``/usr/lib/postgresql/MAJOR/bin`` among the
directories found (or the requested major version's).
"""

import re

from ansible.errors import AnsibleFilterError

_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
_OWNED = {"port", "listen_addresses", "unix_socket_directories"}


def _quote(name, value):
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, (int, float, str)):
        text = str(value)
    else:
        raise AnsibleFilterError(f"service_postgresql: setting '{name}' must be a string, number or boolean, "
                                 f"not {type(value).__name__}")
    if any(ch in text for ch in "\n\r\x00"):
        raise AnsibleFilterError(f"service_postgresql: setting '{name}' contains a line break or NUL")
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def service_postgresql_conf(settings, port, listen_addresses, socket_dir):
    """benchmatrix.conf: the connection settings, then the user's parameters in name order."""
    lines = ["# Written by benchmatrix (role service_postgresql): edits here are overwritten.",
             f"port = {int(port)}",
             f"listen_addresses = {_quote('listen_addresses', listen_addresses or '')}",
             f"unix_socket_directories = {_quote('unix_socket_directories', socket_dir)}"]
    for name in sorted(settings or {}):
        key = str(name).lower()
        if not _NAME.match(key):
            raise AnsibleFilterError(f"service_postgresql: '{name}' is not a PostgreSQL parameter name")
        if key in _OWNED:
            raise AnsibleFilterError(f"service_postgresql: set '{key}' with the role's own variable, "
                                     "not in service_postgresql_settings")
        lines.append(f"{key} = {_quote(key, settings[name])}")
    return "\n".join(lines) + "\n"


def service_postgresql_bindir(found, major=""):
    """The bin directory of the newest (or the requested) major version in ``found`` paths."""
    versions = {}
    for path in found or []:
        tail = str(path).rstrip("/").rsplit("/", 1)[-1]
        if re.fullmatch(r"\d+(\.\d+)?", tail):
            versions[tuple(int(p) for p in tail.split("."))] = str(path).rstrip("/")
    if not versions:
        raise AnsibleFilterError("service_postgresql: no PostgreSQL server under /usr/lib/postgresql; "
                                 "install it (tasks/install.yml) or set service_postgresql_bindir")
    if str(major):
        want = tuple(int(p) for p in str(major).split("."))
        if want not in versions:
            have = ", ".join(".".join(map(str, v)) for v in sorted(versions))
            raise AnsibleFilterError(f"service_postgresql: PostgreSQL {major} is not installed (found {have})")
        return versions[want] + "/bin"
    return versions[max(versions)] + "/bin"


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"service_postgresql_conf": service_postgresql_conf,
                "service_postgresql_bindir": service_postgresql_bindir}
