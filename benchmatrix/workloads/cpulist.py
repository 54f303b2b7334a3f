"""Kernel CPU lists ("0-3,8,10-11"), read on the controller.

The knob roles' filters read the lists the kernel prints (``online``, ``present``,
``thread_siblings_list``); the workload argv builders turn a run's ``cpus`` into the
explicit list of CPU numbers the batch runner's manifest carries, so the runner on the
host needs no parser of its own.
"""

from __future__ import annotations

from typing import Any


def parse_cpu_list(text: Any) -> list[int]:
    """The CPUs of a kernel CPU list, sorted: ``"0-2,5"`` -> ``[0, 1, 2, 5]``; ``""`` -> ``[]``.

    Raises:
        ValueError: ``text`` is not a CPU list (a part is not ``N`` or ``N-M`` with N <= M).
    """
    cpus: set[int] = set()
    for part in str(text if text is not None else "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            first, last = 0, -1
        if first < 0 or last < first:
            raise ValueError(f"'{text}' is not a CPU list (e.g. 0-1,3)")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def manifest_cpus(value: Any) -> str | list[int]:
    """A run's ``cpus`` as the batch runner's manifest carries it.

    Args:
        value: ``"all"`` (every CPU the runner may use on its host), a CPU list
            (``"0-1,3"``), one CPU number, or a list of numbers and CPU lists.

    Returns:
        ``"all"``, or the explicit sorted list of CPU numbers.

    Raises:
        ValueError: ``value`` is not a CPU list or names no CPU.
    """
    if isinstance(value, str) and value.strip() == "all":
        return "all"
    items = value if isinstance(value, (list, tuple)) else [value]
    cpus: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise ValueError(f"'{value}' is not a CPU list (e.g. 0-1,3)")
        cpus.update(parse_cpu_list(item))
    if not cpus:
        raise ValueError(f"'{value}' names no CPU")
    return sorted(cpus)
