"""Planning: order, warm-ups, control runs, batches, plan.csv."""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmatrix.plan.design import (
    PLAN_COLUMNS,
    PlannedRun,
    assign_batches,
    knob_changes,
    make_plan,
    plan_csv_text,
    plan_host,
    read_plan,
)
from benchmatrix.spec.load import Spec, load_spec

# ---------------------------------------------------------------- helpers

def make_spec(directory: Path | str, factors: dict[str, list[Any]], *, knobs: dict | None = None,
              replicates: int = 3, warmup: int = 1, strategy: str = "random", seed: int = 7,
              control: dict | None = None, control_every: int | None = None,
              name: str = "spec.yaml", live: bool | None = None, warmup_after: str | None = None) -> Spec:
    """Write a spec with these settings and load it (every factor used by the workload).

    ``live`` and ``warmup_after`` are written only when given (``order.batch_live_knobs``
    and ``warmup_after``; absent, the spec takes their defaults)."""
    order: dict[str, Any] = {"strategy": strategy, "seed": seed}
    if live is not None:
        order["batch_live_knobs"] = live
    if control is not None:
        order["control"] = control
    if control_every is not None:
        order["control_every"] = control_every
    doc: dict[str, Any] = {
        "name": "plan_test",
        "factors": factors,
        "workload": {"role": "workload_command",
                     "vars": {"argv": ["echo"] + ["{{ %s }}" % f for f in factors]}},
        "replicates": replicates,
        "warmup": warmup,
        "order": order,
    }
    if knobs:
        doc["knobs"] = knobs
    if warmup_after is not None:
        doc["warmup_after"] = warmup_after
    path = Path(directory) / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    spec = load_spec(path)
    assert spec.warnings == []
    return spec


def measured(runs: list[PlannedRun]) -> list[PlannedRun]:
    return [r for r in runs if not r.warmup and not r.control]


def knob_key(spec: Spec, run: PlannedRun, classes: tuple[str, ...] = ("none", "restart", "reboot")) -> tuple:
    return tuple((k, type(run.factors[k]).__name__, run.factors[k]) for k in sorted(spec.knobs)
                 if spec.knobs[k].cost_class in classes)


def cooling_key(spec: Spec, run: PlannedRun) -> tuple:
    """What must stay the same for a cell to stay warm, by the spec's ``warmup_after``."""
    after = spec.warmup_after
    if after == "first_run":
        return ()
    return knob_key(spec, run, ("restart", "reboot") if after == "costly_change" else ("none", "restart", "reboot"))


def stretches(spec: Spec, runs: list[PlannedRun], key_of=knob_key) -> list[list[PlannedRun]]:
    """Maximal stretches of consecutive runs of one host sharing every knob setting
    (or what ``key_of`` says they share)."""
    out: list[list[PlannedRun]] = []
    prev = None
    for r in runs:
        key = (r.host, key_of(spec, r))
        if not out or key != prev:
            out.append([])
        out[-1].append(r)
        prev = key
    return out


def check_warmups_per_stretch(spec: Spec, runs: list[PlannedRun]) -> None:
    """In every stretch of equal knob settings, each cell's first measured or control
    run is immediately preceded by exactly ``warmup`` warm-ups of that cell, and
    every warm-up sits in such a block."""
    n = spec.data["warmup"]
    for stretch in stretches(spec, runs, cooling_key):
        seen: set[str] = set()
        warm_ok: set[int] = set()
        for i, r in enumerate(stretch):
            if r.warmup or r.cell_id in seen:
                continue
            seen.add(r.cell_id)
            before = stretch[max(0, i - n):i]
            assert len(before) == n, f"{r.run_id}: first measured run of the stretch without warm-ups"
            for w in before:
                assert w.warmup and not w.control and w.cell_id == r.cell_id, (
                    f"{r.run_id}: expected {n} warm-up(s) of {r.cell_id} right before, got {w.run_id}")
                warm_ok.add(id(w))
        stray = [r.run_id for r in stretch if r.warmup and id(r) not in warm_ok]
        assert not stray, f"warm-ups not right before a first measured run: {stray}"


def check_warmups_adjacent(runs: list[PlannedRun], n: int) -> None:
    """Every warm-up is followed (after the rest of its block) by a measured or control run of its cell."""
    for i, r in enumerate(runs):
        if not r.warmup:
            continue
        j = i
        while j < len(runs) and runs[j].warmup:
            assert runs[j].cell_id == r.cell_id
            j += 1
        assert j < len(runs), f"{r.run_id} is the last run"
        nxt = runs[j]
        assert nxt.cell_id == r.cell_id and nxt.host == r.host
        assert j - i <= n


def check_each_cell_replicate_once(spec: Spec, runs: list[PlannedRun], hosts: list[str]) -> None:
    want = Counter((h, c.cell_id, rep) for h in hosts for c in spec.cells
                   for rep in range(1, spec.data["replicates"] + 1))
    got = Counter((r.host, r.cell_id, r.replicate) for r in measured(runs))
    assert got == want


def order_of(runs: list[PlannedRun]) -> list[tuple[str, int]]:
    return [(r.cell_id, r.replicate) for r in measured(runs)]


FACTORS = {"rw": ["randread", "read"], "bs": ["4k", "64k"], "iodepth": [1, 8]}
KNOB_FACTORS = {"ra": [0, 128, 4096], "bs": ["4k", "64k"], "rw": ["read", "write"]}
RA_KNOB = {"ra": {"role": "knob_sysctl", "cost": "restart"}}


# ---------------------------------------------------------------- reproducibility

def test_same_seed_identical_plan(tmp_path):
    one = make_spec(tmp_path, FACTORS, seed=11, name="one.yaml")
    two = make_spec(tmp_path, FACTORS, seed=11, name="two.yaml")
    names = one.factor_names
    assert plan_csv_text(make_plan(one, ["h1"]), names) == plan_csv_text(make_plan(two, ["h1"]), names)
    assert plan_csv_text(make_plan(one, ["h1", "h2"]), names) == plan_csv_text(make_plan(one, ["h1", "h2"]), names)


def test_different_seed_different_order(tmp_path):
    one = make_spec(tmp_path, FACTORS, seed=11, name="one.yaml")
    two = make_spec(tmp_path, FACTORS, seed=12, name="two.yaml")
    a, b = make_plan(one, ["h1"]), make_plan(two, ["h1"])
    assert order_of(a) != order_of(b)
    assert sorted(order_of(a)) == sorted(order_of(b))
    assert plan_csv_text(a, one.factor_names) != plan_csv_text(b, two.factor_names)


def test_random_order_is_not_matrix_order(tmp_path):
    spec = make_spec(tmp_path, FACTORS, seed=5)
    seq = [(c.cell_id, r) for c in spec.cells for r in range(1, 4)]
    rep_major = [(c.cell_id, r) for r in range(1, 4) for c in spec.cells]
    got = order_of(make_plan(spec, ["h1"]))
    assert got != seq and got != rep_major


# ---------------------------------------------------------------- runs, warm-ups

@pytest.mark.parametrize("strategy", ["random", "sequential", "restricted"])
def test_every_cell_replicate_measured_exactly_once(tmp_path, strategy):
    spec = make_spec(tmp_path, FACTORS, replicates=4, warmup=2, strategy=strategy)
    runs = make_plan(spec, ["h1"])
    check_each_cell_replicate_once(spec, runs, ["h1"])
    assert len(measured(runs)) == 8 * 4


def test_warmup_count_without_knobs(tmp_path):
    for warm in (0, 1, 2):
        spec = make_spec(tmp_path, FACTORS, warmup=warm, name=f"w{warm}.yaml")
        runs = make_plan(spec, ["h1"])
        warmups = [r for r in runs if r.warmup]
        assert len(warmups) == warm * len(spec.cells)
        assert Counter(r.cell_id for r in warmups) == Counter({c.cell_id: warm for c in spec.cells} if warm else {})
        assert len(runs) == (warm + 3) * len(spec.cells)


def test_warmups_immediately_before_first_measured_run(tmp_path):
    spec = make_spec(tmp_path, FACTORS, warmup=2, replicates=3)
    runs = make_plan(spec, ["h1"])
    for cell in spec.cells:
        idx = next(i for i, r in enumerate(runs) if r.cell_id == cell.cell_id and not r.warmup)
        assert idx >= 2
        assert [r.warmup for r in runs[idx - 2:idx + 1]] == [True, True, False]
        assert all(r.cell_id == cell.cell_id for r in runs[idx - 2:idx + 1])
        # no warm-up of this cell anywhere else
        assert sum(1 for r in runs if r.warmup and r.cell_id == cell.cell_id) == 2
    check_warmups_adjacent(runs, 2)


def test_warmup_runs_are_flagged_and_named(tmp_path):
    spec = make_spec(tmp_path, FACTORS, warmup=1)
    runs = make_plan(spec, ["h1"])
    for r in runs:
        if r.warmup:
            assert not r.control
            assert r.run_id.startswith(f"h1-{r.cell_id}-w")
        else:
            assert r.run_id == f"h1-{r.cell_id}-r{r.replicate}"


def test_sequential_order_is_matrix_order(tmp_path):
    spec = make_spec(tmp_path, FACTORS, strategy="sequential", replicates=2, warmup=1)
    runs = make_plan(spec, ["h1"])
    assert order_of(runs) == [(c.cell_id, r) for c in spec.cells for r in (1, 2)]
    # matrix order: first factor slowest
    assert [r.factors["rw"] for r in measured(runs)] == ["randread"] * 8 + ["read"] * 8
    assert [r.warmup for r in runs[:4]] == [True, False, False, True]


def test_seq_numbers_consecutive(tmp_path):
    spec = make_spec(tmp_path, FACTORS)
    runs = make_plan(spec, ["h1", "h2"])
    assert [r.seq for r in runs] == list(range(1, len(runs) + 1))
    assert all(r.attempt == 1 for r in runs)


# ---------------------------------------------------------------- knobs

def test_knob_batches_never_mix_settings(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, replicates=3, warmup=1)
    runs = make_plan(spec, ["h1"])
    by_batch: dict[str, list[PlannedRun]] = {}
    for r in runs:
        by_batch.setdefault(r.batch, []).append(r)
    assert len(by_batch) > 1
    for batch, members in by_batch.items():
        assert len({knob_key(spec, r) for r in members}) == 1, batch
        assert len({r.host for r in members}) == 1
        seqs = [r.seq for r in members]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a batch is consecutive"
    # A new batch starts at every knob change.
    for prev, cur in zip(runs, runs[1:]):
        if knob_key(spec, prev) != knob_key(spec, cur):
            assert prev.batch != cur.batch


def test_knob_warmups_reinserted_after_each_change(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, replicates=3, warmup=2)
    runs = make_plan(spec, ["h1"])
    check_each_cell_replicate_once(spec, runs, ["h1"])
    check_warmups_per_stretch(spec, runs)
    # With a random order over a costly knob, settings change many times and cells are
    # warmed up more than once.
    assert len(stretches(spec, runs)) > 3
    assert sum(r.warmup for r in runs) > 2 * len(spec.cells)


def test_knob_visits_count_setting_changes(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB)
    runs = make_plan(spec, ["h1"])
    assert runs[0].visit == 1
    for prev, cur in zip(runs, runs[1:]):
        changed = knob_key(spec, prev) != knob_key(spec, cur)
        assert cur.visit == prev.visit + (1 if changed else 0)


def test_sequential_with_knob_warms_once_per_setting(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, strategy="sequential", warmup=1)
    runs = make_plan(spec, ["h1"])
    # ra is the slowest factor: three stretches, each cell warmed once.
    assert len(stretches(spec, runs)) == 3
    assert sum(r.warmup for r in runs) == len(spec.cells)
    check_warmups_per_stretch(spec, runs)


def test_batch_size_cap(tmp_path):
    spec = make_spec(tmp_path, FACTORS, replicates=5, warmup=1)
    for cap in (1, 3, 7, 50):
        runs = make_plan(spec, ["h1", "h2"], max_runs=cap)
        sizes = Counter(r.batch for r in runs)
        assert max(sizes.values()) <= cap
        per_host = Counter(r.host for r in runs)
        for host, n in per_host.items():
            host_batches = {r.batch for r in runs if r.host == host}
            assert len(host_batches) == -(-n // cap)  # no knobs: only the cap splits
            assert all(b.startswith(f"{host}-b") for b in host_batches)


def test_batch_ids_stable_when_plan_unchanged(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB)
    again = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, name="again.yaml")
    a = [r.batch for r in make_plan(spec, ["h1", "h2"], max_runs=5)]
    b = [r.batch for r in make_plan(again, ["h1", "h2"], max_runs=5)]
    assert a == b


def test_batch_ids_kept_when_another_host_is_added(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB)
    two = make_plan(spec, ["h1", "h2"], max_runs=6)
    three = make_plan(spec, ["h1", "h2", "h3"], max_runs=6)
    assert [(r.run_id, r.batch) for r in two] == [(r.run_id, r.batch) for r in three if r.host != "h3"]


def test_batch_ids_kept_when_plan_extended_with_new_attempts(tmp_path):
    spec = make_spec(tmp_path, FACTORS)  # 8 cells x (3 + 1 warm-up) = 32 runs
    runs = make_plan(spec, ["h1"], max_runs=10)
    before = [r.batch for r in runs]
    assert Counter(before).most_common()[-1][1] == 2  # batches of 10, 10, 10, 2
    retry = [PlannedRun(len(runs) + i + 1, r.host, r.run_id, r.cell_id, r.replicate, r.warmup,
                        r.control, r.visit, "", 2, dict(r.factors), round=1)
             for i, r in enumerate(measured(runs)[:3])]
    extended = runs + retry
    assign_batches(extended, spec, 10)
    # The three full batches are unchanged and keep their ids.
    assert [r.batch for r in extended[:30]] == before[:30]
    # The last planned batch keeps its id too: re-run attempts never join a planned batch,
    # they form a batch of their own with a new id (docs/failures.md: a re-run is a new batch).
    assert [r.batch for r in extended[30:32]] == before[30:32]
    tail = {r.batch for r in extended[32:]}
    assert len(tail) == 1 and not tail & set(before)


def test_batch_id_changes_when_its_runs_change(tmp_path):
    spec = make_spec(tmp_path, FACTORS)
    runs = make_plan(spec, ["h1"], max_runs=10)
    first = runs[0].batch
    changed = [PlannedRun(r.seq, r.host, r.run_id + ("x" if i == 0 else ""), r.cell_id, r.replicate,
                          r.warmup, r.control, r.visit, "", r.attempt, dict(r.factors))
               for i, r in enumerate(runs)]
    assign_batches(changed, spec, 10)
    assert changed[0].batch != first
    assert [r.batch for r in changed[10:]] == [r.batch for r in runs[10:]]


# ---------------------------------------------------------------- hosts

def test_run_ids_unique_and_hosts_have_own_order(tmp_path):
    spec = make_spec(tmp_path, FACTORS, replicates=3, warmup=1)
    runs = make_plan(spec, ["h1", "h2"])
    assert len({r.run_id for r in runs}) == len(runs)
    check_each_cell_replicate_once(spec, runs, ["h1", "h2"])
    h1 = [r for r in runs if r.host == "h1"]
    h2 = [r for r in runs if r.host == "h2"]
    assert runs == h1 + h2
    assert order_of(h1) != order_of(h2)
    assert sorted(order_of(h1)) == sorted(order_of(h2))
    assert all(r.run_id.startswith("h1-") for r in h1)
    assert not {r.batch for r in h1} & {r.batch for r in h2}


def test_host_order_independent_of_other_hosts(tmp_path):
    spec = make_spec(tmp_path, FACTORS)
    alone = plan_host(spec, "h2")
    runs = make_plan(spec, ["h1", "h2"])
    assert [r.run_id for r in runs if r.host == "h2"] == [r.run_id for r in alone]


# ---------------------------------------------------------------- control cell

def test_control_cell_recurs_every_control_every_measured_runs(tmp_path):
    ctl = {"rw": "read", "bs": "64k", "iodepth": 8}
    spec = make_spec(tmp_path, FACTORS, replicates=3, warmup=1, control=ctl, control_every=3)
    runs = make_plan(spec, ["h1"])
    ctl_id = spec.control_cell().cell_id
    assert ctl_id in {c.cell_id for c in spec.cells}
    controls = [r for r in runs if r.control]
    for r in controls:
        assert r.cell_id == ctl_id and r.factors == ctl
        assert not r.warmup and r.replicate == 0
    # Due at the start and after every 3 measured runs; never the first run of the plan.
    gaps, since = [], 0
    for r in runs:
        if r.control:
            gaps.append(since)
            since = 0
        elif not r.warmup:
            since += 1
    assert gaps == [1] + [3] * (len(gaps) - 1) and since <= 3
    assert len(controls) == 1 + (len(measured(runs)) - 1) // 3
    # control runs are extra: the control cell's own replicates are all still there
    check_each_cell_replicate_once(spec, runs, ["h1"])
    check_warmups_adjacent(runs, 1)
    check_warmups_per_stretch(spec, runs)
    assert len({r.run_id for r in runs}) == len(runs)


def test_control_runs_only_where_the_host_is_in_its_knob_setting(tmp_path):
    ctl = {"ra": 0, "bs": "4k", "rw": "read"}
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, strategy="sequential", replicates=2,
                     warmup=0, control=ctl, control_every=4)
    runs = make_plan(spec, ["h1"])
    controls = [i for i, r in enumerate(runs) if r.control]
    # Sequential order runs ra=0 first (8 measured runs): controls after the 1st and 5th.
    assert [runs[i].visit for i in controls] == [1, 1]
    assert all(runs[i - 1].factors["ra"] == 0 and not runs[i - 1].control for i in controls)
    assert knob_changes(runs, spec) == {"none": 0, "restart": 3, "reboot": 0}


def test_no_control_runs_without_control(tmp_path):
    spec = make_spec(tmp_path, FACTORS)
    assert not any(r.control for r in make_plan(spec, ["h1"]))


def test_control_with_other_knob_setting_keeps_warmup_rule(tmp_path):
    ctl = {"ra": 0, "bs": "4k", "rw": "read"}
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, strategy="random", replicates=2,
                     warmup=1, control=ctl, control_every=1)
    runs = make_plan(spec, ["h1"])
    check_warmups_per_stretch(spec, runs)
    check_warmups_adjacent(runs, 1)


# ---------------------------------------------------------------- plan.csv

def test_plan_csv_round_trip(tmp_path):
    ctl = {"ra": 128, "bs": "64k", "rw": "read"}
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, control=ctl, control_every=4)
    runs = make_plan(spec, ["h1", "h2"], max_runs=7)
    text = plan_csv_text(runs, spec.factor_names)
    header = text.splitlines()[0]
    assert header == "seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,ra,bs,rw"
    assert PLAN_COLUMNS == header.split(",")[:10]
    assert len(text.splitlines()) == len(runs) + 1
    path = tmp_path / "plan.csv"
    path.write_text(text, encoding="utf-8")
    back, names = read_plan(path)
    assert names == ["ra", "bs", "rw"]
    assert len(back) == len(runs)
    for a, b in zip(runs, back):
        assert (a.seq, a.host, a.run_id, a.cell_id, a.replicate, a.warmup, a.control, a.visit,
                a.batch, a.attempt) == (b.seq, b.host, b.run_id, b.cell_id, b.replicate, b.warmup,
                                        b.control, b.visit, b.batch, b.attempt)
        assert b.factors == {k: str(v) for k, v in a.factors.items()}
    assert plan_csv_text(back, names) == text
    assert {r.warmup for r in back} == {True, False} and {r.control for r in back} == {True, False}


def test_plan_csv_flags_are_lowercase(tmp_path):
    spec = make_spec(tmp_path, FACTORS, strategy="sequential", warmup=1)
    rows = plan_csv_text(make_plan(spec, ["h1"]), spec.factor_names).splitlines()[1:]
    first = rows[0].split(",")
    assert first[5] == "true" and first[6] == "false"


# ---------------------------------------------------------------- knob_changes

def test_knob_changes_per_cost_class(tmp_path):
    spec = make_spec(tmp_path, {"ht": ["on", "off"], "ra": [0, 128], "bs": ["4k", "64k"]},
                     knobs={"ht": {"role": "knob_ht", "cost": "reboot"},
                            "ra": {"role": "knob_ra", "cost": {"class": "restart", "seconds": 5}}},
                     strategy="sequential", replicates=2, warmup=1)
    runs = make_plan(spec, ["h1"])
    # ht on: ra 0, ra 128; ht off: ra 0, ra 128 (the first setting counts).
    assert knob_changes(runs, spec) == {"none": 0, "restart": 4, "reboot": 2}
    runs2 = make_plan(spec, ["h1", "h2"])
    assert knob_changes(runs2, spec) == {"none": 0, "restart": 8, "reboot": 4}


def test_knob_changes_none_class_and_no_knobs(tmp_path):
    spec = make_spec(tmp_path, {"a": [1, 2], "b": ["x", "y"]},
                     knobs={"a": {"role": "knob_a"}}, strategy="sequential", replicates=1, warmup=0)
    assert knob_changes(make_plan(spec, ["h1"]), spec) == {"none": 2, "restart": 0, "reboot": 0}
    plain = make_spec(tmp_path, FACTORS, name="plain.yaml")
    assert knob_changes(make_plan(plain, ["h1"]), plain) == {"none": 0, "restart": 0, "reboot": 0}


def test_knob_changes_match_a_recount(tmp_path):
    spec = make_spec(tmp_path, KNOB_FACTORS, knobs=RA_KNOB, seed=3)
    runs = make_plan(spec, ["h1", "h2"])
    expected = 0
    for host in ("h1", "h2"):
        settings_ = [r.factors["ra"] for r in runs if r.host == host]
        expected += 1 + sum(a != b for a, b in zip(settings_, settings_[1:]))
    assert knob_changes(runs, spec) == {"none": 0, "restart": expected, "reboot": 0}
    assert expected == len(stretches(spec, runs))


# ---------------------------------------------------------------- property

@st.composite
def matrices(draw):
    n_factors = draw(st.integers(1, 3))
    names = ["f1", "f2", "f3"][:n_factors]
    factors = {}
    for name in names:
        n_levels = draw(st.integers(1, 3))
        kind = draw(st.sampled_from(["int", "str"]))
        factors[name] = list(range(n_levels)) if kind == "int" else [f"l{i}" for i in range(n_levels)]
    knob = draw(st.one_of(st.none(), st.sampled_from(names)))
    return {
        "factors": factors,
        "knobs": {knob: {"role": "knob_x", "cost": draw(st.sampled_from(["none", "restart", "reboot"]))}}
        if knob else None,
        "replicates": draw(st.integers(1, 3)),
        "warmup": draw(st.integers(0, 2)),
        "strategy": draw(st.sampled_from(["random", "sequential", "restricted"])),
        "seed": draw(st.integers(0, 10_000)),
        "hosts": draw(st.sampled_from([["h1"], ["h1", "h2"]])),
        "max_runs": draw(st.integers(1, 20)),
        "live": draw(st.sampled_from([None, True, False])),
        "warmup_after": draw(st.sampled_from([None, "change", "costly_change", "first_run"])),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matrices())
def test_plan_properties(m):
    with tempfile.TemporaryDirectory() as d:
        spec = make_spec(d, m["factors"], knobs=m["knobs"], replicates=m["replicates"],
                         warmup=m["warmup"], strategy=m["strategy"], seed=m["seed"], live=m["live"],
                         warmup_after=m["warmup_after"])
        again = make_spec(d, m["factors"], knobs=m["knobs"], replicates=m["replicates"],
                          warmup=m["warmup"], strategy=m["strategy"], seed=m["seed"], name="again.yaml",
                          live=m["live"], warmup_after=m["warmup_after"])
    hosts = m["hosts"]
    runs = make_plan(spec, hosts, max_runs=m["max_runs"])
    check_each_cell_replicate_once(spec, runs, hosts)
    check_warmups_adjacent(runs, m["warmup"])
    check_warmups_per_stretch(spec, runs)
    assert len({r.run_id for r in runs}) == len(runs)
    assert max(Counter(r.batch for r in runs).values()) <= m["max_runs"]
    for _, group in itertools.groupby(runs, key=lambda r: r.batch):
        group = list(group)
        # A batch shares every knob setting Ansible makes: all of them, or with live
        # knobs (the default) those of cost restart or reboot.
        shared = ("restart", "reboot") if m["live"] is not False else ("none", "restart", "reboot")
        assert len({(r.host, knob_key(spec, r, shared)) for r in group}) == 1
    if not m["knobs"] or m["warmup_after"] == "first_run":
        assert sum(r.warmup for r in runs) == m["warmup"] * len(spec.cells) * len(hosts)
    names = spec.factor_names
    assert plan_csv_text(runs, names) == plan_csv_text(make_plan(again, hosts, max_runs=m["max_runs"]), names)
