"""Filters of the knob_cpu_affinity role.

``knob_cpu_affinity_choose``: from the online CPU list and each online CPU's
``topology/thread_siblings_list`` (``grep -H ''`` lines), the CPUs a workload runs on
to emulate a host with N cores: the first N cores in order of their lowest CPU
number, with all their sibling threads or with one thread each.

The value is ``N`` (threads per core from the role's ``siblings`` setting) or
``N:on`` / ``N:off`` (sibling threads used or not, overriding the setting). What is
reported back is computed from the CPUs chosen, never echoed: ``N`` is the number of
distinct cores among them, ``:on`` means every chosen core runs on two or more
threads. A host with fewer cores, or without sibling threads, reads back
differently from the value, and the batch is then recorded as invalid.
"""

import re

from ansible.errors import AnsibleFilterError

from benchmatrix.workloads.cpulist import parse_cpu_list

_SIBLINGS_LINE = re.compile(r"/cpu(\d+)/topology/thread_siblings_list:\s*(\S+)\s*$")
_VALUE = re.compile(r"^\s*(\d+)\s*(?::\s*(on|off)\s*)?$", re.IGNORECASE)


def knob_cpu_affinity_cpulist(text):
    """'0-2,5' -> [0, 1, 2, 5]; '' -> [] (benchmatrix.workloads.cpulist)."""
    try:
        return parse_cpu_list(text)
    except ValueError as exc:
        raise AnsibleFilterError(f"knob_cpu_affinity: {exc}") from None


def knob_cpu_affinity_choose(sibling_lines, online, value, siblings=True, candidates=""):
    """The CPUs for ``value`` cores: {cpus, cores, threads, actual, error}."""
    match = _VALUE.match(str(value))
    if not match or int(match.group(1)) < 1:
        return {"cpus": [], "cores": 0, "threads": 0, "actual": "", "error":
                f"'{value}' is not a core count (N, N:on or N:off)"}
    wanted = int(match.group(1))
    suffix = (match.group(2) or "").lower()
    use_siblings = suffix == "on" if suffix else str(siblings).lower() in ("true", "yes", "on", "1")
    allowed = set(knob_cpu_affinity_cpulist(online))
    if str(candidates or "").strip():
        allowed &= set(knob_cpu_affinity_cpulist(candidates))
    siblings_of = {}
    for line in sibling_lines or []:
        found = _SIBLINGS_LINE.search(str(line))
        if found:
            siblings_of[int(found.group(1))] = knob_cpu_affinity_cpulist(found.group(2))
    cores = {}
    for cpu in sorted(allowed):
        threads = tuple(c for c in siblings_of.get(cpu, [cpu]) if c in allowed) or (cpu,)
        cores.setdefault(min(threads), sorted(set(threads) | {cpu}))
    chosen = [cores[k] for k in sorted(cores)][:wanted]
    if not use_siblings:
        chosen = [threads[:1] for threads in chosen]
    cpus = sorted(c for threads in chosen for c in threads)
    smt = bool(chosen) and all(len(threads) > 1 for threads in chosen)
    actual = str(len(chosen)) + ((":on" if smt else ":off") if suffix else "")
    return {"cpus": cpus, "cores": len(chosen), "threads": len(cpus), "actual": actual, "error": ""}


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"knob_cpu_affinity_cpulist": knob_cpu_affinity_cpulist,
                "knob_cpu_affinity_choose": knob_cpu_affinity_choose}
