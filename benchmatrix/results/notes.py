"""Notes drawn from run records (record_notes.csv), without pandas.

A batch job computes its own records' notes with these (importing pandas would cost
each batch about half a second), and :func:`benchmatrix.analyze.sanity.record_notes`
wraps the same rows in a DataFrame for collect and the report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Facts that change without the host changing.
VOLATILE_FACTS = frozenset({"gathered_at", "uptime", "uptime_seconds", "date_time", "inventory_name",
                            "boot_time", "load_average", "memory_free_mb", "facts_from"})


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()


def _killed_note(details: dict[str, Any]) -> str:
    """What the batch runner had to kill after a run (``details.killed``), or ''."""
    killed = [k for k in details.get("killed") or [] if isinstance(k, dict)]
    survivors = [k for k in details.get("survivors") or [] if isinstance(k, dict)]
    if not killed and not survivors:
        return ""
    after = {str(k.get("after")) for k in killed}
    when = "at the timeout" if "timeout" in after else "interrupted" if "interrupt" in after else \
        "left running after the workload ended"
    text = f"{len(killed)} process(es) killed ({when}): " + ", ".join(
        f"{str(k.get('command', '?')).split(' ')[0]} [{k.get('pid')}] by {k.get('signal')}" for k in killed[:5])
    if len(killed) > 5:
        text += f" and {len(killed) - 5} more"
    if survivors:
        text += f"; {len(survivors)} survived SIGKILL: " + ", ".join(
            f"{k.get('command', '?')} [{k.get('pid')}]" for k in survivors[:5])
    return text


def note_rows(records: Iterable[dict[str, Any]], with_facts: bool = True) -> list[dict[str, Any]]:
    """Findings that only the run records hold, one row per (run attempt, finding).

    Reads ``knobs: {name: {intended, actual, ...}}``, ``host_facts``,
    ``details.warnings`` (strings) and ``details.jobs`` (fio jobs with
    ``start_ms``/``end_ms``); records lacking them give no note.

    Args:
        records: Run records in plan order.
        with_facts: Also the ``host_facts`` notes (a host's facts changed since its
            previous record); a batch job leaves them to :func:`facts_change_rows`
            over every batch's :func:`facts_entries`.

    Returns:
        Rows with the keys of ``benchmatrix.layout.NOTE_COLUMNS``: run_id, attempt, host, started_at,
        check, detail.
    """
    rows: list[dict[str, Any]] = []
    records = list(records)
    untuned_seen: set[tuple[Any, ...]] = set()
    for rec in records:
        base = {"run_id": rec.get("run_id"), "attempt": rec.get("attempt"), "host": rec.get("host"),
                "started_at": rec.get("started_at")}
        rows += _host_env_rows(rec, base, untuned_seen)
        for name, knob in (rec.get("knobs") or {}).items():
            if not isinstance(knob, dict) or knob.get("actual") is None:
                continue
            # The knob role's own verdict ("ok") wins; otherwise compare the values.
            if knob.get("ok") is False or ("ok" not in knob and not _same(knob.get("intended"), knob.get("actual"))):
                rows.append({**base, "check": "knob",
                             "detail": f"{name}: intended {knob.get('intended')}, actual {knob.get('actual')}"})
        details = rec.get("details") or {}
        for text in details.get("warnings") or []:
            rows.append({**base, "check": "tool", "detail": str(text)})
        killed_note = _killed_note(details)
        if killed_note:
            rows.append({**base, "check": "killed", "detail": killed_note})
        # The fio parser already reports overlaps it can see (with the job file at hand);
        # this derivation from the job timing only covers records where it did not.
        told = any("at the same time" in str(t) or "overlapped" in str(t) for t in details.get("warnings") or [])
        jobs = [] if told else [
            j for j in details.get("job_timing") or [] if isinstance(j, dict)
            and isinstance(j.get("start_ms"), (int, float)) and isinstance(j.get("end_ms"), (int, float))]
        jobs.sort(key=lambda j: j["start_ms"])
        for a, b in zip(jobs, jobs[1:]):
            if b["start_ms"] < a["end_ms"]:
                rows.append({**base, "check": "fio_overlap",
                             "detail": f"fio jobs {a.get('name')} and {b.get('name')} ran at the same time for "
                                       f"{(min(a['end_ms'], b['end_ms']) - b['start_ms']) / 1000:.1f} s "
                                       "(a missing stonewall?)"})
    if with_facts:
        rows += facts_change_rows(facts_entries(records))
    return rows


def _host_env_rows(rec: dict[str, Any], base: dict[str, Any], seen: set[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """``host_busy`` when the load before the run was above the CPUs it used; ``host_untuned``
    once per batch and setting (not on every run: the runner reads it when the batch starts;
    per batch, so notes made batch by batch and from every record agree)."""
    from benchmatrix.results.host_env import busy_warning, untuned_warnings

    env = rec.get("host_env")
    if not isinstance(env, dict) or not env:
        return []
    affinity = (rec.get("workload") or {}).get("affinity")
    used = len(affinity) if isinstance(affinity, list) and affinity else env.get("cpus")
    out = []
    busy = busy_warning(env.get("load_before"), used, "before the run")
    if busy:
        out.append({**base, "check": "host_busy", "detail": busy})
    for text in untuned_warnings(env):
        if (rec.get("host"), rec.get("batch"), text) not in seen:
            seen.add((rec.get("host"), rec.get("batch"), text))
            out.append({**base, "check": "host_untuned", "detail": text})
    return out


def facts_entries(records: Iterable[dict[str, Any]], reduce: bool = False) -> list[list[Any]]:
    """``[host, started_at, base, stable facts]`` of every record that has host facts.

    Args:
        records: Run records.
        reduce: Keep only the entries whose facts differ from the previous entry of
            the same host (in start order), and each host's first: enough for
            :func:`facts_change_rows`, and what a batch job stores (one entry a batch,
            as a rule).
    """
    entries: list[list[Any]] = []
    # A batch job's records share one facts dict: its stable part made once, not once a
    # run (the records are alive throughout, so an id is not reused meanwhile).
    stable_of: dict[int, dict[str, Any]] = {}
    for rec in records:
        facts = rec.get("host_facts")
        if isinstance(facts, dict) and facts:
            base = {"run_id": rec.get("run_id"), "attempt": rec.get("attempt"), "host": rec.get("host"),
                    "started_at": rec.get("started_at")}
            stable = stable_of.get(id(facts))
            if stable is None:
                stable = stable_of[id(facts)] = {k: v for k, v in facts.items() if k not in VOLATILE_FACTS}
            entries.append([str(rec.get("host")), str(rec.get("started_at") or ""), base, stable])
    if not reduce:
        return entries
    kept, last = [], {}
    for entry in sorted(entries, key=lambda t: (t[0], t[1])):
        if last.get(entry[0]) != entry[3]:
            kept.append(entry)
        last[entry[0]] = entry[3]
    return kept


def facts_change_rows(entries: Iterable[list[Any]]) -> list[dict[str, Any]]:
    """A ``host_facts`` note for each entry whose facts differ from its host's previous one."""
    rows: list[dict[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    for host, _, base, stable in sorted(entries, key=lambda t: (t[0], t[1])):
        prev = last.get(host)
        if prev is not None and prev != stable:
            changed = [f"{k}: {prev.get(k)} → {stable.get(k)}" for k in sorted(set(prev) | set(stable))
                       if prev.get(k) != stable.get(k)]
            rows.append({**base, "check": "host_facts", "detail": "; ".join(changed)})
        last[host] = stable
    return rows
