#!/usr/bin/env python3
"""Cost of a knob: a verified no-op check and a real change, beside the change itself.

Knobs go through real Ansible exactly as a batch applies them: the playbook of
tests/knobkit.py includes playbooks/tasks/knobs.yml, the knob loop run_batch.yml
includes, via benchmatrix.execute.ansible.run_playbook. Each repetition runs, in a
shuffled order:

  empty    the same playbook with no knob (what a batch costs without knobs);
  no-op    the knob at the value the host already has (read back and verified);
  change   the knob at the other of two values (applied, then read back).

The knob's cost in a batch is (no-op or change) minus empty; the in-play seconds
(the knob's own stopwatch in every record's knob state: knob.yml's for role-path
knobs, the bmx_knob module's on the host for file-backed ones) are shown beside it. "The
change itself" is the same change done directly, without Ansible: writing
/sys/block/loopN/queue/read_ahead_kb; ALTER SYSTEM + pg_reload_conf() until a new
session sees the value; ALTER SYSTEM + pg_ctl restart until it answers.

Knobs: knob_read_ahead on a loop device this script creates and detaches;
knob_postgresql_setting (work_mem by reload, max_connections by restart) against a
PostgreSQL server it initializes on a private port and stops (both need root; the
server needs the Debian postgresql package).

    bench/reconfigure.py           # the published figures (about 3 minutes)
    bench/reconfigure.py --quick   # smoke run: read-ahead only, 2 repetitions

Writes bench/results/reconfigure.json (or reconfigure_quick.json).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, median, read_timing, split_playbooks, table, task_seconds, temp_dir, timing_env, write_result  # noqa: E402

# knobkit.py and pgserver.py (the PostgreSQL server) live in tests/, test_knob_postgresql.py
# (its knob items) in tests/e2e/.
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]


class Case:
    """One knob: how to build its item for a value, and how to change it directly."""

    def __init__(self, name: str, make: Callable[[Any], dict], values: tuple[Any, Any],
                 direct: Callable[[Any], None], read: Callable[[], str]):
        self.name, self.make, self.values, self.direct, self.read = name, make, values, direct, read


def measure_case(runner: Any, case: Case, reps: int, rng: random.Random, timing: Path) -> dict[str, Any]:
    """Interleaved repetitions of empty / no-op / change, then the direct change."""
    timing.unlink(missing_ok=True)
    calls: list[str] = []
    walls: dict[str, list[float]] = {"empty": [], "no-op": [], "change": []}
    inplay: dict[str, list[float]] = {"no-op": [], "change": []}
    # Put the host at the first value, read back, so "no-op" starts from a known state.
    states, _ = runner.run([case.make(case.values[0])])
    calls.append("setup")
    current = case.values[0]
    baseline = next(iter(states.values()))["baseline"]
    for _ in range(reps):
        kinds = ["empty", "no-op", "change"]
        rng.shuffle(kinds)
        for kind in kinds:
            if kind == "empty":
                knobs = []
            elif kind == "no-op":
                knobs = [case.make(current)]
            else:
                current = case.values[1] if str(current) == str(case.values[0]) else case.values[0]
                knobs = [case.make(current)]
            t0 = time.perf_counter()
            states, _ = runner.run(knobs)
            walls[kind].append(time.perf_counter() - t0)
            calls.append(kind)
            if knobs:
                (state,) = states.values()
                if not state["ok"] or bool(state["changed"]) != (kind == "change"):
                    raise RuntimeError(f"{case.name} {kind}: unexpected knob state {state}")
                inplay[kind].append(float(state["seconds"]))
    direct = []
    for _ in range(reps):
        current = case.values[1] if str(current) == str(case.values[0]) else case.values[0]
        t0 = time.perf_counter()
        case.direct(current)
        direct.append(time.perf_counter() - t0)
        if str(case.read()) != str(current) and case.read().lower() != str(current).lower():
            raise RuntimeError(f"{case.name}: direct change to {current} reads back {case.read()}")
    # Leave the host as found.
    runner.run([case.make(baseline)])
    empty = median(walls["empty"])
    # Where the knob's time goes: seconds per task, median over the repetitions of a kind.
    tasks: dict[str, dict[str, list[float]]] = {}
    for kind, events in zip(calls, split_playbooks(read_timing(timing))):
        if kind in ("no-op", "change"):
            per: dict[str, float] = {}
            for task, sec in task_seconds(events):
                per[task] = per.get(task, 0.0) + sec
            for task, sec in per.items():
                tasks.setdefault(kind, {}).setdefault(task, []).append(sec)
    out = {"reps": reps, "walls_s": walls, "in_play_s": inplay, "direct_s": direct,
           "empty_playbook_s": empty, "direct_change_s": median(direct),
           "tasks_s": {k: dict(sorted(((t, median(v)) for t, v in d.items()), key=lambda x: -x[1]))
                       for k, d in tasks.items()}}
    for kind in ("no-op", "change"):
        out[f"{kind}_playbook_s"] = median(walls[kind])
        out[f"{kind}_added_s"] = median(walls[kind]) - empty
        out[f"{kind}_in_play_s"] = median(inplay[kind])
    out["change_beyond_direct_s"] = out["change_added_s"] - out["direct_change_s"]
    return out


def read_ahead_case(loop: Any) -> Case:
    from knobkit import knob

    path = loop.sysfs("read_ahead_kb")

    def direct(value: Any) -> None:
        path.write_text(f"{value}\n")

    return Case("read_ahead_kb (loop device)",
                lambda v: knob("read_ahead_kb", "knob_read_ahead", v, knob_read_ahead_device=loop.name),
                (4096, 128), direct, lambda: path.read_text().strip())


def pg_cases(server: Any) -> list[Case]:
    from test_knob_postgresql import pg

    def read(name: str) -> Callable[[], str]:
        return lambda: server.sql(f"SHOW {name}")

    def reload(value: Any) -> None:
        server.sql(f"ALTER SYSTEM SET work_mem = '{value}'")
        server.sql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while server.sql("SHOW work_mem") != str(value) and time.monotonic() < deadline:
            time.sleep(0.01)

    def restart(value: Any) -> None:
        server.sql(f"ALTER SYSTEM SET max_connections = {value}")
        server.as_postgres(str(server.bindir / "pg_ctl"), "restart", "--pgdata", str(server.data), "--mode", "fast",
                           "--wait", "--log", str(server.log))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if server.sql("SHOW max_connections") == str(value):
                    return
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.01)

    return [Case("work_mem (PostgreSQL, reload)", lambda v: pg(server, "work_mem", v), ("64MB", "32MB"),
                 reload, read("work_mem")),
            Case("max_connections (PostgreSQL, restart)",
                 lambda v: pg(server, "max_connections", v, cost="restart"), (50, 60), restart,
                 read("max_connections"))]


def measure_cases(runner: Any, tmp: Path, reps: int, rng: random.Random, timing: Path,
                  postgresql: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """Every case (read-ahead on a loop device; with ``postgresql`` the two PostgreSQL
    settings on a private server) through ``runner`` (a tests/knobkit.py KnobRunner).

    Returns:
        (measure_case's figures by case name, why a group was left out). Needs root.
    """
    from knobkit import LoopDevice

    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    loop = LoopDevice(tmp / "loop")
    try:
        case = read_ahead_case(loop)
        results[case.name] = measure_case(runner, case, reps, rng, timing)
        print(f"{case.name}: done", flush=True)
    finally:
        loop.close()
    if not postgresql:
        skipped["postgresql"] = "not in a quick run"
        return results, skipped
    from pgserver import Server, pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        skipped["postgresql"] = "PostgreSQL is not installed (Debian package postgresql)"
        return results, skipped
    server = Server(bindir)
    try:
        for case in pg_cases(server):
            results[case.name] = measure_case(runner, case, reps, rng, timing)
            print(f"{case.name}: done", flush=True)
    finally:
        server.stop()
    return results, skipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: read-ahead only, 2 repetitions")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=4)
    args = ap.parse_args()
    reps = 2 if args.quick else args.reps
    rng = random.Random(args.seed)
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    if os.geteuid() != 0:
        skipped["all"] = "loop devices, read_ahead_kb and a private PostgreSQL need root"
    with temp_dir("bmx-bench-reconfigure-") as tmp:
        from knobkit import KnobRunner

        # Task timestamps of every playbook call (bench/ansible_timing): ansible-runner
        # hands this process's environment to ansible-playbook.
        timing = tmp / "timing.jsonl"
        os.environ.update(timing_env(timing))
        runner = KnobRunner(tmp)
        runner.run([])  # imports and caches warmed before anything is timed
        if "all" not in skipped:
            found, why = measure_cases(runner, tmp, reps, rng, timing, postgresql=not args.quick)
            results.update(found)
            skipped.update(why)
    path = write_result("reconfigure_quick" if args.quick else "reconfigure", {"cases": results, "skipped": skipped})
    print("\n== knob cost (medians; 'added' = playbook with the knob minus the same playbook without it)")
    rows = []
    for name, r in results.items():
        rows.append([name, r["empty_playbook_s"], r["no-op_added_s"], r["no-op_in_play_s"], r["change_added_s"],
                     r["change_in_play_s"], r["direct_change_s"], r["change_beyond_direct_s"]])
    print(table(["knob", "empty playbook s", "no-op added s", "no-op in play s", "change added s",
                 "change in play s", "direct change s", "change beyond direct s"], rows))
    for name, r in results.items():
        for kind in ("no-op", "change"):
            top = list(r["tasks_s"].get(kind, {}).items())[:6]
            print(f"\n-- {name}, {kind}: slowest tasks (median seconds)")
            print(table(["task", "seconds"], [[t[:90], v] for t, v in top]))
    for k, why in skipped.items():
        print(f"not measured ({k}): {why}")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
