"""Filters of the knob_postgresql_setting role.

``knob_postgresql_setting_actual``: the value read back from the server (a row of
pg_settings with current_setting() as ``show``), in the intended value's spelling
when the two mean the same setting ("64MB" and "65536kB" of work_mem, "on" and
"true" of a boolean), else as SHOW prints it. ``DEFAULT`` means no ALTER SYSTEM
entry for the parameter and no restart pending.
"""

import math
import re

from ansible.errors import AnsibleFilterError

_MEMORY = {"B": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}
_TIME = {"us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def _bool(text):
    """PostgreSQL's boolean spellings (parse_bool): on, off, 1, 0 and unique prefixes
    of true, false, yes, no; None when it is none of them."""
    word = str(text).strip().lower()
    if not word:
        return None
    if word in ("1", "on") or "true".startswith(word) or "yes".startswith(word):
        return True
    if word in ("0", "of", "off") or "false".startswith(word) or "no".startswith(word):
        return False
    return None


def _base_unit(unit):
    """'8kB' -> (8192, 'memory'); 'ms' -> (1, 'time'); '' -> (1, None)."""
    match = re.match(r"^(\d*)\s*([A-Za-z]+)$", unit or "")
    if not match:
        return 1, None
    factor = int(match.group(1) or 1)
    name = match.group(2)
    if name in _MEMORY:
        return factor * _MEMORY[name], "memory"
    if name in _TIME:
        return factor * _TIME[name], "time"
    return 1, None


def _number(text, unit):
    """The value of ``text`` in the parameter's base unit, or None."""
    match = _NUMBER.match(str(text))
    if not match:
        return None
    value = float(match.group(1))
    given = match.group(2)
    if not given:
        return value
    base, kind = _base_unit(unit)
    table = _MEMORY if kind == "memory" else _TIME if kind == "time" else {}
    if given not in table:
        return None
    return value * table[given] / base


def same_value(row, intended):
    """Whether ``intended`` sets the parameter to what ``row`` shows."""
    vartype = row.get("vartype")
    text = str(intended)
    if vartype == "bool":
        return _bool(text) is not None and _bool(text) == _bool(row.get("setting"))
    if vartype in ("integer", "real"):
        want = _number(text, row.get("unit"))
        try:
            have = float(row.get("setting"))
        except (TypeError, ValueError):
            return False
        if want is None:
            return False
        if vartype == "integer":
            return int(round(want)) == int(round(have))
        return math.isclose(want, have, rel_tol=1e-9, abs_tol=1e-12)
    if vartype == "enum":
        return text.strip().lower() == str(row.get("setting")).lower()
    return text == str(row.get("setting"))


def knob_postgresql_setting_actual(row, intended):
    """The value read back, in the intended spelling when it is the same setting."""
    if not isinstance(row, dict) or "setting" not in row:
        raise AnsibleFilterError("knob_postgresql_setting: no pg_settings row")
    text = str(intended)
    if text.strip().upper() == "DEFAULT":
        if not row.get("in_auto_conf") and not row.get("pending_restart"):
            return text
        return str(row.get("show"))
    if same_value(row, text) and not row.get("pending_restart"):
        return text
    return str(row.get("show")) + (" (restart pending)" if row.get("pending_restart") else "")


def knob_postgresql_setting_baseline(row):
    """DEFAULT when no ALTER SYSTEM entry sets the parameter, else its value."""
    return str(row.get("show")) if row.get("in_auto_conf") else "DEFAULT"


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"knob_postgresql_setting_actual": knob_postgresql_setting_actual,
                "knob_postgresql_setting_baseline": knob_postgresql_setting_baseline}
