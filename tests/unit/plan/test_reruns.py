"""Re-run rounds are planned like a plan: grouped by whole plot, fewest
reconfigurations, randomized within, warm-ups after each reconfiguration, and visit
numbers of their own after the plan's (issue 12, item 1)."""

from __future__ import annotations

import random
from collections import Counter

from test_design_restricted import WORKED_KNOBS, check_warmups, make_spec

from benchmatrix.plan.design import PlannedRun, make_plan, reconfigurations
from benchmatrix.plan.reruns import plan_reruns

# The example: 2 reboot-class x 2 restart-class levels x 3 cheap cells, 3 replicates:
# 36 measured runs, 12 visits, 6 reboots and 6 restarts planned.
SMALL = {"bios": ["a", "b"], "db": ["x", "y"], "c": [1, 2, 3]}


def measured(runs: list[PlannedRun]) -> list[PlannedRun]:
    return [r for r in runs if not r.warmup and not r.control]


def requests_for(runs: list[PlannedRun], rnd: int, attempt: int = 2) -> list[dict]:
    return [{"round": rnd, "run_id": r.run_id, "attempt": attempt, "reason": "test"} for r in runs]


def setting(run: PlannedRun, names: list[str]) -> tuple:
    return tuple(repr(run.factors[f]) for f in names)


def check_round(spec, planned: list[PlannedRun], rerun: list[PlannedRun], picked: list[PlannedRun]) -> None:
    """The properties every re-run round must have, on one host."""
    wp, outer = spec.whole_plot_factors(), spec.costly_factors("reboot")
    before, after = reconfigurations(planned, spec), reconfigurations(planned + rerun, spec)
    added_reboots = after["reboot"] - before["reboot"]
    added_costly = added_reboots + after["restart"] - before["restart"]
    # Fewest reconfigurations: one per whole-plot setting the round touches.
    assert added_reboots <= (len({setting(r, outer) for r in picked}) if outer else 0)
    assert added_costly <= len({setting(r, wp) for r in picked})
    # Every requested run once, as its new attempt, after every planned run.
    assert Counter(r.run_id for r in measured(rerun) + [r for r in rerun if r.control]) == \
        Counter(r.run_id for r in picked)
    assert all(r.attempt == 2 for r in rerun if not r.warmup)
    # New visits: numbered after the plan's, consecutive, in execution order, and one
    # whole-plot setting each, each whole plot visited once per round.
    last = max(r.visit for r in planned)
    visits = [r.visit for r in rerun]
    assert visits == sorted(visits) and visits[0] == last + 1
    assert sorted(set(visits)) == list(range(last + 1, last + 1 + len(set(visits))))
    per_visit: dict[int, set] = {}
    for r in rerun:
        per_visit.setdefault(r.visit, set()).add(setting(r, wp))
    assert all(len(s) == 1 for s in per_visit.values())
    assert len(per_visit) == len({setting(r, wp) for r in picked})
    # Warm-ups: before each cell's first run after every knob change of the round
    # (a round starts cold: hosts were put back to their baseline in between).
    check_warmups(spec, rerun)


def test_rerun_round_keeps_the_split_plot_structure(tmp_path):
    spec = make_spec(tmp_path, SMALL, knobs=WORKED_KNOBS, replicates=3, warmup=1)
    planned = make_plan(spec, ["h1"])
    assert reconfigurations(planned, spec) == {"none": 0, "restart": 6, "reboot": 6}
    picked = random.Random(3).sample(measured(planned), 12)
    rerun = plan_reruns(spec, planned, requests_for(picked, 1))
    check_round(spec, planned, rerun, picked)
    after = reconfigurations(planned + rerun, spec)
    # A plain shuffle added 8 reboots and 2 restarts; now at most one reboot per
    # reboot-class setting (2) and one reconfiguration per whole plot (4).
    assert after["reboot"] - 6 <= 2 and after["reboot"] + after["restart"] - 12 <= 4


def test_rerun_round_is_randomized_within_and_seeded(tmp_path):
    spec = make_spec(tmp_path, SMALL, knobs=WORKED_KNOBS, replicates=3, warmup=0)
    planned = make_plan(spec, ["h1"])
    picked = measured(planned)
    orders = set()
    for rnd in range(1, 9):
        rerun = plan_reruns(spec, planned, requests_for(picked, rnd))
        assert [r.run_id for r in rerun] == [r.run_id for r in plan_reruns(spec, planned, requests_for(picked, rnd))]
        orders.add(tuple(r.run_id for r in rerun))
    assert len(orders) > 1, "rounds are shuffled with the round number in the seed"


def test_later_rounds_continue_the_visit_numbers(tmp_path):
    spec = make_spec(tmp_path, SMALL, knobs=WORKED_KNOBS, replicates=3, warmup=1)
    planned = make_plan(spec, ["h1", "h2"])
    reqs = []
    picks = []
    for rnd, seed in ((1, 1), (2, 2)):
        picked = random.Random(seed).sample(measured(planned), 10)
        reqs += requests_for(picked, rnd, attempt=rnd + 1)
        picks.append(picked)
    rerun = plan_reruns(spec, planned, reqs)
    for host in ("h1", "h2"):
        mine = [r for r in rerun if r.host == host]
        last = max(r.visit for r in planned if r.host == host)
        first_round = [r for r in mine if r.round == 1]
        second = [r for r in mine if r.round == 2]
        if first_round and second:
            assert min(r.visit for r in second) == max(r.visit for r in first_round) + 1
        if mine:
            assert min(r.visit for r in mine) == last + 1
    # Every round in one piece per host, rounds in order.
    assert [r.round for r in rerun] == sorted(r.round for r in rerun)


def test_rerun_round_without_costly_knobs_is_one_visit(tmp_path):
    spec = make_spec(tmp_path, {"a": [1, 2, 3], "b": ["x", "y"]}, replicates=2, warmup=1, strategy="random")
    planned = make_plan(spec, ["h1"])
    picked = measured(planned)[:5]
    rerun = plan_reruns(spec, planned, requests_for(picked, 1))
    assert {r.visit for r in rerun} == {max(r.visit for r in planned) + 1}
    assert sum(r.warmup for r in rerun) == len({r.cell_id for r in picked})


def test_interrupted_run_resumed_in_a_visit_of_its_own(tmp_path):
    # An interrupted run comes back as a round of reason "interrupted" (tasks.run_batch):
    # its next attempt runs after the plan, so it must not claim its old visit.
    spec = make_spec(tmp_path, SMALL, knobs=WORKED_KNOBS, replicates=3, warmup=1)
    planned = make_plan(spec, ["h1"])
    cut = measured(planned)[7]
    rerun = plan_reruns(spec, planned, [{"round": 1, "run_id": cut.run_id, "attempt": 2, "reason": "interrupted"}])
    again = [r for r in rerun if not r.warmup]
    assert len(again) == 1 and again[0].visit == max(r.visit for r in planned) + 1 != cut.visit
    assert [r.warmup for r in rerun] == [True, False]


def test_interrupted_warmup_is_resumed_as_its_cells_warmup(tmp_path):
    # An interrupt can cut a warm-up: its run id must get its next attempt (or it stays
    # pending for ever), and that attempt is the warm-up its cell needs in the round,
    # not an extra unmeasured run beside a fresh one.
    spec = make_spec(tmp_path, SMALL, knobs=WORKED_KNOBS, replicates=3, warmup=1)
    planned = make_plan(spec, ["h1"])
    cut = [r for r in planned if r.warmup][3]
    rerun = plan_reruns(spec, planned, [{"round": 1, "run_id": cut.run_id, "attempt": 2, "reason": "interrupted"}])
    assert [(r.run_id, r.attempt, r.warmup) for r in rerun] == [(cut.run_id, 2, True)]
    assert rerun[0].visit == max(r.visit for r in planned) + 1
    # With a measured run of the same cell in the round, the warm-up still comes once.
    same_cell = next(r for r in measured(planned) if r.cell_id == cut.cell_id)
    both = plan_reruns(spec, planned, requests_for([cut, same_cell], 1))
    assert sum(r.warmup for r in both) == 1 and {r.run_id for r in both} == {cut.run_id, same_cell.run_id}
