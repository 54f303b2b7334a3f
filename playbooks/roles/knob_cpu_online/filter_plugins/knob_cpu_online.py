"""Filters of the knob_cpu_online role.

``knob_cpu_online_cpulist``: a kernel CPU list ("0-3,8,10-11") as a sorted list of
CPU numbers.

``knob_cpu_online_plan``: from the kernel's present and online lists, the per-CPU
``online`` files read back (``grep -H ''`` lines, ``PATH/cpuN/online:1``) and the
wanted number of online CPUs, which CPUs to bring online (lowest numbers first) or
take offline (highest numbers first), or why it cannot be done. A CPU without an
``online`` file (often cpu0) cannot be unplugged; its state is taken from the
kernel's online list.
"""

import re

from ansible.errors import AnsibleFilterError

from benchmatrix.workloads.cpulist import parse_cpu_list

_ONLINE_LINE = re.compile(r"/cpu(\d+)/online:\s*([01])\s*$")


def knob_cpu_online_cpulist(text):
    """'0-2,5' -> [0, 1, 2, 5]; '' -> [] (benchmatrix.workloads.cpulist)."""
    try:
        return parse_cpu_list(text)
    except ValueError as exc:
        raise AnsibleFilterError(f"knob_cpu_online: {exc}") from None


def knob_cpu_online_plan(online_lines, present, online, wanted):
    """What to change to have ``wanted`` CPUs online.

    Returns {online: [cpus], count, hotpluggable: [cpus], to_online: [cpus],
    to_offline: [cpus], error: ""}.
    """
    present = knob_cpu_online_cpulist(present)
    kernel_online = set(knob_cpu_online_cpulist(online))
    state = {}
    for line in online_lines or []:
        match = _ONLINE_LINE.search(str(line))
        if match:
            state[int(match.group(1))] = match.group(2) == "1"
    is_online = {cpu: state.get(cpu, cpu in kernel_online) for cpu in present}
    now = sorted(cpu for cpu, up in is_online.items() if up)
    out = {"online": now, "count": len(now), "hotpluggable": sorted(state), "to_online": [], "to_offline": [],
           "error": ""}
    try:
        wanted = int(str(wanted).strip())
    except ValueError:
        out["error"] = f"'{wanted}' is not a number of CPUs"
        return out
    if not 1 <= wanted <= len(present):
        out["error"] = f"{wanted} CPUs cannot be online: {len(present)} are present"
        return out
    if wanted > len(now):
        can = [cpu for cpu in present if not is_online[cpu] and cpu in state]
        if len(can) < wanted - len(now):
            out["error"] = f"only {len(now) + len(can)} CPUs can be brought online"
            return out
        out["to_online"] = can[:wanted - len(now)]
    elif wanted < len(now):
        can = [cpu for cpu in reversed(now) if cpu in state]
        if len(can) < len(now) - wanted:
            out["error"] = (f"only {len(can)} of the {len(now)} online CPUs can be taken offline "
                            f"(no online file: {', '.join(str(c) for c in now if c not in state)})")
            return out
        out["to_offline"] = sorted(can[:len(now) - wanted])
    return out


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"knob_cpu_online_cpulist": knob_cpu_online_cpulist,
                "knob_cpu_online_plan": knob_cpu_online_plan}
