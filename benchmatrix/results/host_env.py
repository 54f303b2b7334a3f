"""Is a host noisy? The facts the batch runner records (``host_environment``) judged
the same way by ``bmx check`` (before a campaign) and by the report (after it).

A host is **busy** when its 1-minute load average is above the number of CPUs the
runs use (their ``cpus`` list, else every online CPU): then something besides the
runs wants those CPUs. It is **untuned** when the CPU clock may change under the
runs: a cpufreq governor other than ``performance``, or turbo/boost on (the clock
then depends on load and temperature; pyperf's ``system tune`` makes the same two
changes).
"""

from __future__ import annotations

from typing import Any

from benchmatrix.layout import ENV_COLUMNS

__all__ = ["ENV_COLUMNS", "busy_warning", "env_columns", "env_line", "untuned_warnings"]


def busy_warning(load: float | None, cpus_used: int | None, when: str) -> str:
    """``''`` or why the host was busy ``when`` (e.g. "before the check")."""
    if load is None or not cpus_used or load <= cpus_used:
        return ""
    return f"busy {when}: load average {load:g} is above the {cpus_used} CPU(s) the runs use"


def untuned_warnings(env: dict[str, Any]) -> list[str]:
    """Why the host's CPU clock may change under the runs (empty: tuned, or nothing to tell)."""
    out = []
    governors = [g for g in str(env.get("governor") or "").split(",") if g]
    if governors and governors != ["performance"]:
        out.append(f"untuned: CPU frequency governor {','.join(governors)}, not performance")
    if env.get("turbo") == "on":
        out.append("untuned: turbo/boost is on (the clock follows load and temperature)")
    return out


def env_line(env: dict[str, Any]) -> str:
    """The facts on one line, as ``bmx check`` prints them."""
    def show(v: Any) -> str:
        return "n/a" if v in (None, "") else str(v)

    return (f"governor {show(env.get('governor'))}, turbo {show(env.get('turbo'))}, THP {show(env.get('thp'))}, "
            f"mitigations {show(env.get('mitigations'))}, NUMA nodes {show(env.get('numa_nodes'))}, "
            f"{show(env.get('cpus'))} CPU(s), load {show(env.get('load_1m'))}")


def env_columns(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's host environment as the ``env_*`` columns of runs.csv (None where unknown)."""
    env = rec.get("host_env") or {}
    return {"env_governor": env.get("governor"), "env_turbo": env.get("turbo"), "env_thp": env.get("thp"),
            "env_mitigations": env.get("mitigations"), "env_numa_nodes": env.get("numa_nodes"),
            "env_cmdline": env.get("cmdline"), "env_load_before": env.get("load_before"),
            "env_load_after": env.get("load_after")}
