"""Filters of the knob_raid_level role.

``knob_raid_level_state``: the array as ``mdadm --detail`` and /proc/mdstat show it
(level, chunk, member devices, state), and what it reads back as against the
intended level: the intended spelling ("10", "raid10") when level, chunk size and
member devices all match and the array is active and not degraded, else a
description of what is there ("raid5 chunk 64K on loop1,loop2,loop3, degraded").
"""

import os
import re

_LEVEL = re.compile(r"^(?:raid)?(\d+)$", re.IGNORECASE)


def knob_raid_level_number(value):
    """'raid10' / '10' / 10 -> 10; 'absent' -> 'absent'; anything else -> None."""
    text = str(value).strip().lower()
    if text == "absent":
        return "absent"
    match = _LEVEL.match(text)
    return int(match.group(1)) if match else None


def knob_raid_level_state(detail, exists, wanted, devices, chunk_kb):
    """What the array reads back as: {level, chunk_kb, members, state, actual}."""
    if not exists or not str(detail or "").strip():
        return {"level": None, "chunk_kb": None, "members": [], "state": "absent", "actual": "absent"}
    fields = {}
    members = []
    for line in str(detail).splitlines():
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip().lower()] = value.strip()
        dev = re.search(r"\s(/dev/\S+)\s*$", line)
        if dev and re.match(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s", line):
            members.append(os.path.basename(dev.group(1)))
    level = knob_raid_level_number(fields.get("raid level", ""))
    chunk = fields.get("chunk size", "")
    chunk_match = re.match(r"^(\d+)K$", chunk)
    chunk_value = int(chunk_match.group(1)) if chunk_match else None
    state = fields.get("state", "unknown")
    # Names as mdadm prints them: give the devices by their kernel names (/dev/sdb, /dev/loop1).
    want_members = sorted(os.path.basename(str(d)) for d in devices or [])
    have_members = sorted(members)
    ok = (level == knob_raid_level_number(wanted) and have_members == want_members
          and (chunk_value is None or level == 1 or chunk_value == int(chunk_kb))
          and not re.search(r"degraded|failed|inactive", state))
    desc = "raid%s" % level + (" chunk %sK" % chunk_value if chunk_value else "")
    desc += " on " + ",".join(have_members) + (", " + state if state not in ("clean", "active") else "")
    return {"level": level, "chunk_kb": chunk_value, "members": have_members, "state": state,
            "actual": str(wanted) if ok else desc}


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"knob_raid_level_number": knob_raid_level_number,
                "knob_raid_level_state": knob_raid_level_state}
