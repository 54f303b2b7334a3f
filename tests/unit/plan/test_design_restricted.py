"""Restricted (split-plot) plans, cost accounting and replicate planning."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmatrix.analyze.power import (
    CvSample,
    log_sd_from_cv,
    parse_fraction,
    pilot_cvs,
    replicate_plan,
    runs_needed,
    runs_needed_log,
)
from benchmatrix.cli import main
from benchmatrix.errors import BenchmatrixError, SpecErrors
from benchmatrix.plan.design import (
    PlannedRun,
    costly_visits,
    earlier_run_seconds,
    knob_changes,
    make_plan,
    per_run_estimate,
    plan_costs,
    plan_csv_text,
    read_plan,
    reconfigurations,
    visits_per_cell,
)
from benchmatrix.spec.config import read_config
from benchmatrix.spec.load import Spec, load_spec

ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- helpers

def make_spec(directory: Path | str, factors: dict[str, list[Any]], *, knobs: dict | None = None,
              replicates: int = 3, warmup: int = 1, strategy: str = "restricted", seed: int = 7,
              visits: int | None = None, control: dict | None = None, control_every: int | None = None,
              estimate_s: float | None = None, name: str = "spec.yaml", live: bool | None = None,
              warmup_after: str | None = None, **load: Any) -> Spec:
    """Write a spec (every factor used by the workload or a knob) and load it (``live``:
    ``order.batch_live_knobs`` and ``warmup_after`` written only when given)."""
    order: dict[str, Any] = {"strategy": strategy, "seed": seed}
    if live is not None:
        order["batch_live_knobs"] = live
    for key, value in (("visits", visits), ("control", control), ("control_every", control_every)):
        if value is not None:
            order[key] = value
    workload: dict[str, Any] = {"role": "workload_command",
                                "vars": {"argv": ["echo"] + ["{{ %s }}" % f for f in factors]}}
    if estimate_s is not None:
        workload["estimate_s"] = estimate_s
    doc: dict[str, Any] = {"name": "restricted_test", "factors": factors, "workload": workload,
                           "replicates": replicates, "warmup": warmup, "order": order}
    if knobs:
        doc["knobs"] = knobs
    if warmup_after is not None:
        doc["warmup_after"] = warmup_after
    path = Path(directory) / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_spec(path, **load)


def with_strategy(spec: Spec, strategy: str, seed: int | None = None) -> Spec:
    alt = dataclasses.replace(spec, data=copy.deepcopy(spec.data))
    alt.order["strategy"] = strategy
    if seed is not None:
        alt.order["seed"] = seed
    return alt


def measured(runs: list[PlannedRun]) -> list[PlannedRun]:
    return [r for r in runs if not r.warmup and not r.control]


def key_of(run: PlannedRun, names: list[str]) -> tuple:
    return tuple((f, type(run.factors[f]).__name__, run.factors[f]) for f in names)


def visit_settings(runs: list[PlannedRun], names: list[str]) -> list[tuple]:
    """The whole-plot setting of each visit of one host, in visit order."""
    out: dict[int, set] = {}
    for r in runs:
        out.setdefault(r.visit, set()).add(key_of(r, names))
    assert sorted(out) == list(range(1, len(out) + 1)), "visits are numbered 1..n in time order"
    for v, keys in out.items():
        assert len(keys) == 1, f"visit {v} mixes whole-plot settings {keys}"
    return [next(iter(out[v])) for v in sorted(out)]


def host_runs(runs: list[PlannedRun], host: str) -> list[PlannedRun]:
    return [r for r in runs if r.host == host]


def check_warmups(spec: Spec, runs: list[PlannedRun]) -> None:
    """Warm-ups sit right before the measured or control run they warm, exactly there:
    before a cell's first run after every change of the host's knob settings."""
    n = spec.data["warmup"]
    knobs = sorted(spec.knobs)
    for host in {r.host for r in runs}:
        seq = host_runs(runs, host)
        state, warmed = None, set()
        for i, r in enumerate(seq):
            s = key_of(r, knobs)
            if s != state:
                state, warmed = s, set()
            if r.warmup:
                # the block of warm-ups ends in a measured or control run of the same cell
                j = i
                while seq[j].warmup:
                    assert seq[j].cell_id == r.cell_id and key_of(seq[j], knobs) == s
                    j += 1
                assert seq[j].cell_id == r.cell_id
                assert j - i <= n
                continue
            if r.cell_id not in warmed:
                warmed.add(r.cell_id)
                before = seq[max(0, i - n):i]
                assert len(before) == n and all(w.warmup and w.cell_id == r.cell_id for w in before), (
                    f"{r.run_id}: first measured run after a reconfiguration lacks its {n} warm-up(s)")
            else:
                assert i == 0 or not seq[i - 1].warmup or seq[i - 1].cell_id != r.cell_id or n == 0


def expected_random_changes(spec: Spec, hosts: int) -> float:
    """Expected costly reconfigurations of a full shuffle of the measured runs (no control):
    1 + (N - 1) * P(two neighbours differ in their whole-plot setting), per host."""
    names = spec.whole_plot_factors()
    if not names:
        return 0.0
    sizes = Counter(tuple(repr(c.factors[f]) for f in names) for c in spec.cells)
    reps = spec.data["replicates"]
    n = sum(sizes.values()) * reps
    if n < 2:
        return float(hosts)
    same = sum(k * reps * (k * reps - 1) for k in sizes.values()) / (n * (n - 1))
    return hosts * (1 + (n - 1) * (1 - same))


# ---------------------------------------------------------------- the worked example

# 2 reboot-class levels x 2 restart-class levels = 4 whole plots, x 6 cheap cells, 3 replicates.
WORKED = {"bios": ["a", "b"], "db": ["x", "y"], "c1": [1, 2, 3], "c2": ["p", "q"]}
WORKED_KNOBS = {"bios": {"role": "knob_bios", "cost": "reboot"},
                "db": {"role": "knob_db", "cost": {"class": "restart", "seconds": 45}}}


def test_worked_example_counts(tmp_path):
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=1, estimate_s=10)
    assert spec.whole_plot_factors() == ["bios", "db"] and spec.visits == 3
    runs = make_plan(spec, ["h1"], max_runs=50)
    costs = plan_costs(spec, runs, per_run_s=10, batch_overhead_s=2)
    # 3 rounds x 4 whole plots = 12 visits of 6 measured runs, each after a reconfiguration,
    # so each of its 6 cells is warmed up once: 72 measured + 72 warm-ups.
    assert costs["measured"] == 72 and costs["warmup"] == 72 and costs["control"] == 0
    assert costs["runs"] == 144 and costs["visits"] == 12
    # One reboot per outer visit (3 rounds x 2), one restart for the second inner plot of each.
    assert costs["reconfigurations"] == {"none": 0, "restart": 6, "reboot": 6}
    assert costs["knob_changes"]["reboot"] == 6
    # No cheap knob: one batch per visit.
    assert costs["batches"] == 12
    assert costs["reconfiguration_s"] == 6 * 300 + 6 * 45
    assert costs["workload_s"] == 1440
    assert costs["campaign_s"] == 1440 + 6 * 300 + 6 * 45 + 12 * 2
    # The orchestration: 12 batches at 2 s and the reconfigurations; its share of all the time.
    assert costs["orchestration_s"] == 12 * 2 + 6 * 300 + 6 * 45
    assert costs["overhead_pct"] == pytest.approx(100 * 2094 / (2094 + 1440))
    assert costs["warmup_pct"] == 50.0
    assert costly_visits(runs, spec) == 12
    settings_ = visit_settings(runs, ["bios", "db"])
    for rnd in range(3):
        chunk = settings_[4 * rnd:4 * rnd + 4]
        assert len(set(chunk)) == 4, "every round visits each whole plot once"
        # reboot-class settings are outer plots: a round's two visits of one bios level are adjacent
        assert chunk[0][0] == chunk[1][0] and chunk[2][0] == chunk[3][0] and chunk[1][0] != chunk[2][0]
    for v in range(1, 13):
        cells = Counter(r.cell_id for r in measured(runs) if r.visit == v)
        assert len(cells) == 6 and set(cells.values()) == {1}, "each cheap cell once per visit"
    for cell in spec.cells:
        mine = [r for r in measured(runs) if r.cell_id == cell.cell_id]
        assert len({r.visit for r in mine}) == 3, "a cell's replicates lie in 3 separate visits"
        assert [r.replicate for r in sorted(mine, key=lambda r: r.seq)] == [1, 2, 3]
    assert visits_per_cell(runs) == 3


def test_worked_example_against_random_and_sequential(tmp_path):
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=1)
    seq = make_plan(with_strategy(spec, "sequential"), ["h1"])
    # Matrix order, bios slowest: a, a, b, b over db x, y.
    assert reconfigurations(seq, spec) == {"none": 0, "restart": 2, "reboot": 2}
    for seed in range(20):
        rnd = make_plan(with_strategy(spec, "random", seed), ["h1"])
        rc = reconfigurations(rnd, spec)
        assert rc["reboot"] > 6 and rc["reboot"] + rc["restart"] > 12


def test_worked_example_with_control(tmp_path):
    ctl = {"bios": "a", "db": "x", "c1": 1, "c2": "p"}
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=1, control=ctl, control_every=2)
    runs = make_plan(spec, ["h1"])
    controls = [r for r in runs if r.control]
    # Only in the 3 visits of the control's own whole plot (6 measured runs each): due at
    # the start and every 2 measured runs, each right after a measured run of that plot.
    assert len(controls) == 9
    assert all(r.factors == ctl and r.replicate == 0 and not r.warmup for r in controls)
    assert reconfigurations(runs, spec) == {"none": 0, "restart": 6, "reboot": 6}
    for v in {r.visit for r in controls}:
        in_visit = [r for r in runs if r.visit == v]
        assert not in_visit[0].control and sum(r.control for r in in_visit) == 3
    # Control runs add no reconfiguration; the control's warm-up also warms its matrix cell,
    # so every cell still gets one warm-up per visit.
    assert sum(r.warmup for r in runs) == 72
    check_warmups(spec, runs)


def test_more_visits_than_replicates(tmp_path):
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=0, visits=6)
    runs = make_plan(spec, ["h1"])
    assert plan_costs(spec, runs)["reconfigurations"] == {"none": 0, "restart": 12, "reboot": 12}
    for v in range(1, 25):
        assert len([r for r in measured(runs) if r.visit == v]) == 3
    for cell in spec.cells:
        assert len({r.visit for r in measured(runs) if r.cell_id == cell.cell_id}) == 3


def test_fewer_visits_than_replicates_warns_and_balances(tmp_path):
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=0, visits=2)
    assert any("order.visits 2 is below replicates 3" in w for w in spec.warnings)
    runs = make_plan(spec, ["h1"])
    assert plan_costs(spec, runs)["visits"] == 8
    for cell in spec.cells:
        per_visit = Counter(r.visit for r in measured(runs) if r.cell_id == cell.cell_id)
        assert sorted(per_visit.values()) == [1, 2]
    assert visits_per_cell(runs) == 2


def test_restricted_without_costly_knobs_is_blocked_by_replicate(tmp_path):
    spec = make_spec(tmp_path, {"a": [1, 2, 3], "b": ["x", "y"]}, replicates=4, warmup=1,
                     control={"a": 1, "b": "x"}, control_every=100)
    runs = make_plan(spec, ["h1"])
    assert plan_costs(spec, runs)["visits"] == 4
    for v in range(1, 5):
        block = measured([r for r in runs if r.visit == v])
        assert sorted(r.cell_id for r in block) == sorted(c.cell_id for c in spec.cells)
    # control_every bounds the control runs: one, after the first measured run.
    assert [i for i, r in enumerate(r for r in runs if not r.warmup) if r.control] == [1]
    # No reconfiguration between blocks: warm-ups only at the start.
    assert sum(r.warmup for r in runs) == len(spec.cells)
    orders = [[r.cell_id for r in measured(runs) if r.visit == v] for v in range(1, 5)]
    assert len({tuple(o) for o in orders}) > 1, "cheap cells are shuffled inside each visit"


def test_rounds_never_repeat_the_previous_whole_plot(tmp_path):
    spec = make_spec(tmp_path, {"k": ["a", "b"], "c": [1, 2]}, knobs={"k": {"role": "knob_k", "cost": "restart"}},
                     replicates=4, warmup=0, visits=8)
    for seed in range(30):
        runs = make_plan(with_strategy(spec, "restricted", seed), ["h1"])
        settings_ = visit_settings(runs, ["k"])
        assert len(settings_) == 16
        assert all(a != b for a, b in zip(settings_, settings_[1:]))


def test_none_class_knob_is_cheap_inside_visits(tmp_path):
    spec = make_spec(tmp_path, {"k": ["a", "b"], "ra": [0, 128], "bs": ["4k", "64k"]},
                     knobs={"k": {"role": "knob_k", "cost": "reboot"}, "ra": {"role": "knob_ra", "cost": "none"}},
                     replicates=3, warmup=1)
    assert spec.whole_plot_factors() == ["k"]
    runs = make_plan(spec, ["h1", "h2"], max_runs=50)
    for host in ("h1", "h2"):
        assert len(visit_settings(host_runs(runs, host), ["k"])) == 6
    check_warmups(spec, runs)
    # Batches split at every change of the reboot knob; the batch runner sets the
    # cheap one between runs, so its settings share batches.
    mixed = 0
    for b in {r.batch for r in runs}:
        members = [r for r in runs if r.batch == b]
        assert len({key_of(r, ["k"]) for r in members}) == 1
        mixed += len({key_of(r, ["ra"]) for r in members}) > 1
    assert mixed > 0
    assert reconfigurations(runs, spec)["reboot"] == 12
    # Without live knobs, batches split at cheap-knob changes too and never mix settings.
    plain = make_spec(tmp_path, {"k": ["a", "b"], "ra": [0, 128], "bs": ["4k", "64k"]},
                      knobs={"k": {"role": "knob_k", "cost": "reboot"}, "ra": {"role": "knob_ra", "cost": "none"}},
                      replicates=3, warmup=1, live=False, name="plain.yaml")
    plain_runs = make_plan(plain, ["h1", "h2"], max_runs=50)
    for b in {r.batch for r in plain_runs}:
        members = [r for r in plain_runs if r.batch == b]
        assert len({key_of(r, ["k", "ra"]) for r in members}) == 1


def test_unequal_whole_plots_from_exclude_and_include(tmp_path):
    path = tmp_path / "uneq.yaml"
    path.write_text(yaml.safe_dump({
        "name": "uneq", "factors": {"k": ["a", "b"], "c": [1, 2, 3]},
        "exclude": [{"k": "b", "c": [2, 3]}], "include": [{"k": "z", "c": 9}],
        "knobs": {"k": {"role": "knob_k", "cost": "reboot"}},
        "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ c }}"]}},
        "replicates": 2, "warmup": 1, "order": {"strategy": "restricted", "seed": 3}}))
    spec = load_spec(path)
    runs = make_plan(spec, ["h1"])
    settings_ = visit_settings(runs, ["k"])
    assert Counter(settings_) == Counter({s: 2 for s in set(settings_)}) and len(set(settings_)) == 3
    assert all(a != b for a, b in zip(settings_, settings_[1:]))
    for cell in spec.cells:
        assert len({r.visit for r in measured(runs) if r.cell_id == cell.cell_id}) == 2
    check_warmups(spec, runs)
    assert reconfigurations(runs, spec)["reboot"] == 6


# ---------------------------------------------------------------- validation

def test_visits_leaving_visits_empty_is_an_error(tmp_path):
    with pytest.raises(SpecErrors) as info:
        make_spec(tmp_path, {"k": ["a", "b"], "c": [1, 2]}, knobs={"k": {"role": "knob_k", "cost": "reboot"}},
                  replicates=2, visits=5)
    (err,) = info.value.errors
    text = str(err)
    assert text.startswith(f"{tmp_path / 'spec.yaml'}:") and "order.visits 5 would leave visits empty" in text
    lines = (tmp_path / "spec.yaml").read_text().splitlines()
    assert lines[err.line - 1].strip().startswith("visits:")


def test_control_outside_every_whole_plot_is_an_error(tmp_path):
    with pytest.raises(SpecErrors) as info:
        make_spec(tmp_path, {"k": ["a", "b"], "c": [1, 2]}, knobs={"k": {"role": "knob_k", "cost": "reboot"}},
                  control={"k": "z", "c": 1})
    assert "order.control sets k=z, which is no whole plot" in str(info.value)


def test_visits_with_random_strategy_warns(tmp_path):
    spec = make_spec(tmp_path, {"c": [1, 2]}, strategy="random", visits=2)
    assert any("order.visits applies to the restricted strategy only" in w for w in spec.warnings)


def test_cost_seconds_from_config(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("spec: x.yaml\ncost_seconds:\n  reboot: 90\nbatch_overhead_seconds: 1.5\n")
    got = read_config(cfg)
    assert got.cost_seconds == {"none": 0.0, "restart": 60.0, "reboot": 90.0}
    assert got.batch_overhead_seconds == 1.5 and got.batch_max_runs == 10000 and "batch_max_runs" not in got.given
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, cost_seconds=got.cost_seconds)
    assert spec.knobs["bios"].cost_seconds == 90.0
    assert spec.knobs["db"].cost_seconds == 45.0, "a knob's own seconds beat the config"
    assert read_config(tmp_path / "missing.yaml").cost_seconds["reboot"] == 300.0


def test_shipped_config_has_documented_cost_defaults():
    got = read_config(ROOT / "config" / "config.yaml")
    assert got.cost_seconds == {"none": 0.0, "restart": 60.0, "reboot": 300.0}


@pytest.mark.parametrize("text, where, words", [
    ("cost_seconds:\n  reboot: slow\n", 2, "cost_seconds.reboot must be a number"),
    ("cost_seconds:\n  restart: 1\n  shutdown: 5\n", 3, "unknown cost class 'shutdown'"),
    ("cost_seconds: 5\n", 1, "cost_seconds must be a mapping"),
    ("batch_overhead_seconds: -1\n", 1, "batch_overhead_seconds must be"),
    ("spec: x.yaml\nrunner_lease_seconds: soon\n", 2, "runner_lease_seconds must be a number of seconds >= 0"),
])
def test_bad_cost_config_names_file_and_line(tmp_path, text, where, words):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    with pytest.raises(SpecErrors) as info:
        read_config(cfg)
    assert str(info.value).startswith(f"{cfg}:{where}: ") and words in str(info.value)


# ---------------------------------------------------------------- properties

@st.composite
def restricted_matrices(draw):
    names = iter(f"f{i}" for i in range(10))
    factors: dict[str, list[Any]] = {}
    knobs: dict[str, Any] = {}
    for cls, most in (("reboot", 2), ("restart", 2), ("none", 1), (None, 2)):
        for _ in range(draw(st.integers(0, most))):
            name = next(names)
            n_levels = draw(st.integers(1, 3))
            factors[name] = draw(st.sampled_from([list(range(n_levels)), [f"l{i}" for i in range(n_levels)]]))
            if cls is not None:
                cost = draw(st.sampled_from([cls, {"class": cls, "seconds": 7}]))
                knobs[name] = {"role": "knob_x", "cost": cost}
    if not factors:
        factors["f9"] = [1, 2]
    reps = draw(st.integers(1, 4))
    smallest_plot = len(factors) and math.prod(len(v) for f, v in factors.items()
                                               if f not in knobs or knobs[f]["cost"] in ("none",)
                                               or (isinstance(knobs[f]["cost"], dict)
                                                   and knobs[f]["cost"]["class"] == "none"))
    visits = draw(st.one_of(st.none(), st.integers(1, max(1, smallest_plot * reps))))
    control = None
    if draw(st.booleans()):
        control = {f: draw(st.sampled_from(levels)) for f, levels in factors.items()}
    return {"factors": factors, "knobs": knobs, "replicates": reps, "warmup": draw(st.integers(0, 2)),
            "visits": visits, "control": control, "control_every": draw(st.integers(1, 6)),
            "seed": draw(st.integers(0, 10_000)), "hosts": draw(st.sampled_from([["h1"], ["h1", "h2"]])),
            "max_runs": draw(st.integers(1, 30))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(restricted_matrices())
def test_restricted_plan_properties(m):
    with tempfile.TemporaryDirectory() as d:
        kw = dict(knobs=m["knobs"], replicates=m["replicates"], warmup=m["warmup"], visits=m["visits"],
                  control=m["control"], control_every=m["control_every"], seed=m["seed"])
        spec = make_spec(d, m["factors"], **kw)
        again = make_spec(d, m["factors"], name="again.yaml", **kw)
    hosts, reps, n_visits = m["hosts"], m["replicates"], spec.visits
    runs = make_plan(spec, hosts, max_runs=m["max_runs"])
    wp = spec.whole_plot_factors()

    # every (host, cell, replicate) exactly once among measured runs
    want = Counter((h, c.cell_id, r) for h in hosts for c in spec.cells for r in range(1, reps + 1))
    assert Counter((r.host, r.cell_id, r.replicate) for r in measured(runs)) == want
    assert len({r.run_id for r in runs}) == len(runs)
    check_warmups(spec, runs)

    n_plots = len({tuple(repr(c.factors[f]) for f in wp) for c in spec.cells})
    for host in hosts:
        mine = host_runs(runs, host)
        settings_ = visit_settings(mine, wp)  # one whole-plot setting per visit
        assert len(settings_) == n_plots * n_visits
        if n_plots > 1:
            assert all(a != b for a, b in zip(settings_, settings_[1:])), "a visit follows another plot's"
        # a cell's replicates lie in separate visits, or spread as evenly as visits allow
        for cell in spec.cells:
            per_visit = Counter(r.visit for r in measured(mine) if r.cell_id == cell.cell_id)
            assert max(per_visit.values()) == math.ceil(reps / n_visits)
            assert len(per_visit) == min(reps, n_visits)
        # control runs only in visits of their own whole plot, never as a costly change
        for r in mine:
            if r.control:
                assert r.factors == m["control"]

    # costly reconfigurations = visits minus the visits that keep the previous setting
    rc = reconfigurations(runs, spec)
    assert rc["reboot"] + rc["restart"] == costly_visits(runs, spec)
    if wp and n_plots > 1:
        assert costly_visits(runs, spec) == n_plots * n_visits * len(hosts)
    # reboot-class changes: the visits whose reboot-class setting differs from the previous one's
    outer = spec.costly_factors("reboot")
    if outer:
        expect = sum(1 for h in hosts for i, s in enumerate(visit_settings(host_runs(runs, h), outer))
                     if i == 0 or s != visit_settings(host_runs(runs, h), outer)[i - 1])
        assert rc["reboot"] == expect

    # batches are consecutive, one host, one setting of the knobs Ansible sets (live
    # knobs, the default, leave the cost-none ones to the batch runner), capped
    ansible_set = sorted(k for k in spec.knobs if spec.knobs[k].cost_class != "none")
    for b in {r.batch for r in runs}:
        members = [r for r in runs if r.batch == b]
        assert len(members) <= m["max_runs"]
        assert len({(r.host, key_of(r, ansible_set)) for r in members}) == 1
        seqs = [r.seq for r in members]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))

    # never more costly reconfigurations than full randomization is expected to need,
    # when visits hold at least two runs (with one run a visit, both are a shuffle)
    if m["control"] is None and len(set(Counter(tuple(repr(c.factors[f]) for f in wp)
                                                for c in spec.cells).values())) == 1:
        per_visit = len(spec.cells) // n_plots * reps / n_visits
        if per_visit >= 2:
            assert rc["reboot"] + rc["restart"] <= expected_random_changes(spec, len(hosts)) + 1e-9

    # same seed, same plan; another seed, another plan (when there is freedom to differ)
    names = spec.factor_names
    text = plan_csv_text(runs, names)
    assert text == plan_csv_text(make_plan(again, hosts, max_runs=m["max_runs"]), names)
    if len(measured(host_runs(runs, "h1"))) >= 4 and (len(spec.cells) > 1):
        others = {plan_csv_text(make_plan(with_strategy(spec, "restricted", m["seed"] + k), hosts,
                                          max_runs=m["max_runs"]), names) for k in range(1, 11)}
        assert others - {text}, "ten other seeds all gave the same plan"


# ---------------------------------------------------------------- plan.csv

def test_restricted_plan_csv_round_trip(tmp_path):
    ctl = {"bios": "b", "db": "y", "c1": 2, "c2": "q"}
    spec = make_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, control=ctl, control_every=3)
    runs = make_plan(spec, ["h1", "h2"], max_runs=7)
    text = plan_csv_text(runs, spec.factor_names)
    assert text.splitlines()[0] == ("seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,"
                                    "bios,db,c1,c2")
    path = tmp_path / "plan.csv"
    path.write_text(text)
    back, _ = read_plan(path)
    assert [(r.run_id, r.visit, r.control, r.warmup) for r in back] == [
        (r.run_id, r.visit, r.control, r.warmup) for r in runs]
    assert {r.control for r in back} == {True, False}


# ---------------------------------------------------------------- estimates

def test_earlier_runs_give_the_per_run_estimate(tmp_path):
    spec = make_spec(tmp_path, {"c": [1, 2]}, strategy="random")
    runs_csv = tmp_path / "runs.csv"
    assert per_run_estimate(spec, runs_csv)[0] is None
    with open(runs_csv, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["run_id", "status", "duration_s"])
        for i, (status, d) in enumerate([("ok", 10), ("ok", 12), ("failed", 99), ("ok", 30), ("ok", "")]):
            w.writerow([f"r{i}", status, d])
    assert earlier_run_seconds(runs_csv) == (12.0, 3)
    value, source = per_run_estimate(spec, runs_csv)
    assert value == 12.0 and "median of 3 earlier run(s)" in source
    given = make_spec(tmp_path, {"c": [1, 2]}, strategy="random", estimate_s=4, name="given.yaml")
    assert per_run_estimate(given, runs_csv) == (4.0, "workload.estimate_s")


def test_reconfiguration_counts_one_reboot_for_knobs_changed_together(tmp_path):
    spec = make_spec(tmp_path, {"ht": ["on", "off"], "cores": [20, 40], "u": [1, 2]},
                     knobs={"ht": {"role": "knob_smt", "cost": "reboot"},
                            "cores": {"role": "knob_cpu", "cost": {"class": "reboot", "seconds": 200}}},
                     strategy="sequential", replicates=1, warmup=0)
    runs = make_plan(spec, ["h1"])
    # (on,20) (on,40) (off,20) (off,40): the third changes both knobs, one reboot.
    assert knob_changes(runs, spec) == {"none": 0, "restart": 0, "reboot": 6}
    assert reconfigurations(runs, spec) == {"none": 0, "restart": 0, "reboot": 4}
    assert plan_costs(spec, runs)["reconfiguration_s"] == 300 + 200 + 300 + 200


# ---------------------------------------------------------------- replicate planning

def test_runs_needed_is_the_smallest_n_with_welch_power():
    from benchmatrix.analyze.power import welch_power

    for detect, cv, family in ((0.03, 0.04, 1), (0.05, 0.02, 1), (0.01, 0.05, 1), (0.05, 0.02, 12)):
        n = runs_needed(detect, cv, family=family)
        assert welch_power(detect / cv, n, 0.05 / family) >= 0.8
        assert n == 2 or welch_power(detect / cv, n - 1, 0.05 / family) < 0.8
    assert runs_needed(0.03, 0.04) == 29
    assert runs_needed(0.03, 0.04, power=0.9) > 29 and runs_needed(0.03, 0.04, alpha=0.01) > 29
    assert runs_needed(0.03, 0.04, family=12) > 29


@pytest.mark.parametrize("text, value", [("3%", 0.03), ("0.04", 0.04), (" 12.5% ", 0.125)])
def test_parse_fraction(text, value):
    assert parse_fraction(text, "--detect") == pytest.approx(value)


@pytest.mark.parametrize("text, words", [("3", "write 3%"), ("abc", "percentage"), ("0", "above zero")])
def test_parse_fraction_errors(text, words):
    with pytest.raises(BenchmatrixError, match=words):
        parse_fraction(text, "--detect")


def test_pilot_cvs_and_the_max_cv_rule(tmp_path):
    # Units that make no positive quantity: the linear planning (the log scale's is
    # tests/unit/analyze/test_power_log.py).
    (tmp_path / "summary.csv").write_text(
        "cell_id,metric,unit,n,mean,median,min,max,sd,cv,ci_low,ci_high\n"
        "c1,iops,%,5,100,100,90,110,2,0.02,,\n"
        "c2,iops,%,5,100,100,90,110,3,0.03,,\n"
        "c3,iops,%,5,100,100,90,110,8,0.08,,\n"
        "c1,p99_us,count,5,100,100,90,110,5,0.05,,\n"
        "c4,iops,%,1,100,100,100,100,,,,\n")
    samples = pilot_cvs(tmp_path)
    assert {(s.cell_id, s.metric) for s in samples} == {("c1", "iops"), ("c2", "iops"), ("c3", "iops"),
                                                        ("c1", "p99_us")}
    assert {s.scale for s in samples} == {"linear"}
    assert {s.metric for s in pilot_cvs(tmp_path, ["iops"])} == {"iops"}
    plan = replicate_plan(0.05, samples, replicates=5, visits_per_cell=3, whole_plot_factors=["ht"],
                          source="pilot")
    iops = next(m for m in plan["metrics"] if m["metric"] == "iops")
    assert iops["median_cv"] == 0.03 and iops["max_cv"] == 0.08 and iops["max_cv_cell"] == "c3"
    assert iops["scale"] == "linear" and iops["sigma"] == 0.08 and iops["max_sigma_cell"] == "c3"
    assert iops["needed_at_median_sigma"] == runs_needed(0.05, 0.03)
    assert plan["cheap"]["needed"] == runs_needed(0.05, 0.08)  # the largest CV rules
    assert plan["needed_per_cell"]["c1"] == runs_needed(0.05, 0.05)
    assert plan["whole_plot"] == {"unit": "visit", "factors": ["ht"], "needed": runs_needed(0.05, 0.08),
                                  "planned": 3}
    assert len(plan["warnings"]) == 2
    enough = replicate_plan(0.05, [CvSample("iops", "c1", 0.01, 5)], 5, 5, ["ht"], "x")
    assert enough["warnings"] == []
    with pytest.raises(BenchmatrixError, match="no summary.csv"):
        pilot_cvs(tmp_path / "nowhere")


# ---------------------------------------------------------------- bmx plan

def plan_json(capsys, *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bmx_plan_ht_example_reboots_and_interleaving(in_project, capsys):
    data = plan_json(capsys, "config/experiments/ht_cores.yaml")
    assert data["strategy"] == "restricted"
    assert data["whole_plot_factors"] == {"reboot": ["ht", "cores"], "restart": []}
    this, shuffle = data["this_plan"], data["alternatives"]["random"]
    # 5 visits of each of the 4 hardware settings: 20 reboots, beside a full shuffle's.
    assert this["reconfigurations"]["reboot"] == 20 and this["visits"] == 20
    assert shuffle["reconfigurations"]["reboot"] > 2 * 20
    assert this["measured"] == shuffle["measured"] == 12 * 5
    assert this["reconfiguration_s"] == 20 * 300 and this["campaign_s"] < shuffle["campaign_s"]
    assert "sequential" in data["alternatives"]
    # The plan went to the project copy, not to the repository.
    plan_path = in_project.exp("ht_cores") / "plan.csv"
    assert Path(data["plan"]) == plan_path.resolve() and plan_path.is_file()
    runs, _ = read_plan(plan_path)
    settings_ = visit_settings(runs, ["ht", "cores"])
    assert len(settings_) == 20 and Counter(settings_) == Counter({s: 5 for s in set(settings_)})
    assert len(set(settings_)) == 4
    # Interleaved over time, not grouped: every stretch of 4 visits holds all four
    # settings, and no setting is visited twice in a row.
    for i in range(0, 20, 4):
        assert len(set(settings_[i:i + 4])) == 4
    assert all(a != b for a, b in zip(settings_, settings_[1:]))
    meas = measured(runs)
    for part in range(5):
        chunk = meas[part * 12:(part + 1) * 12]
        assert len({(r.factors["ht"], r.factors["cores"]) for r in chunk}) == 4


def test_bmx_plan_text_shows_reboots_side_by_side(in_project, capsys):
    assert main(["plan", "config/experiments/ht_cores.yaml"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "this plan (restricted)" in line)
    assert "random" in header and "sequential" in header
    reboots = next(line for line in out.splitlines() if line.startswith("reboots"))
    assert reboots.split()[1] == "20" and int(reboots.split()[2]) > 40
    assert "campaign time (estimate)" in out and "from workload.estimate_s" in out


def test_bmx_plan_detect_with_cv_warns(in_project, capsys):
    capsys.readouterr()
    assert main(["plan", "config/experiments/ht_cores.yaml", "--json", "--detect", "3%", "--cv", "0.04"]) == 0
    cap = capsys.readouterr()
    rp = json.loads(cap.out)["replicate_planning"]
    # ht x (cores x users = 6 combinations) x 2 report.metrics: a Holm family of 12.
    assert rp["family"]["size"] == 12 and rp["family"]["comparisons_per_metric"] == 6
    # fio's IOPS and latency are positive: Welch on log values, the log sd of a CV of 4 %.
    assert [(m["metric"], m["scale"]) for m in rp["metrics"]] == [("read_clat_p99_us", "log"), ("read_iops", "log")]
    needed = runs_needed_log(0.03, log_sd_from_cv(0.04), family=12)
    assert rp["cheap"] == {"unit": "run", "needed": needed, "planned": 5}
    assert rp["whole_plot"]["needed"] == needed and rp["whole_plot"]["planned"] == 5
    assert rp["whole_plot"]["factors"] == ["ht", "cores"]
    assert f"among 12 Holm-adjusted comparison(s) needs {needed} replicates per cell; the spec has 5" in cap.err


def test_bmx_plan_text_says_the_family_it_assumed(in_project, capsys):
    capsys.readouterr()
    assert main(["plan", "config/experiments/ht_cores.yaml", "--detect", "3%", "--cv", "0.04"]) == 0
    out = capsys.readouterr().out
    assert ("Holm family assumed: 12 comparison(s) = 6 per metric x 2 metric(s) from report.metrics "
            "(read_iops, read_clat_p99_us)") in out
    assert "Welch's t-test" in out


def test_bmx_plan_detect_with_pilot(in_project, capsys):
    pilot = in_project.root / "results" / "pilot"
    pilot.mkdir(parents=True)
    (pilot / "summary.csv").write_text("cell_id,metric,n,cv\nc1,read_iops,5,0.005\nc2,read_iops,5,0.01\n")
    data = plan_json(capsys, "config/experiments/ht_cores.yaml", "--detect", "5%", "--pilot", "results/pilot")
    rp = data["replicate_planning"]
    # read_iops is fio's (IO/s): the log scale, with each cell's log sd from its CV (no runs.csv),
    # pooled over the two cells.
    (metric,) = rp["metrics"]
    assert metric["scale"] == "log"
    pooled = math.sqrt((log_sd_from_cv(0.005) ** 2 + log_sd_from_cv(0.01) ** 2) / 2)
    assert metric["sigma"] == pytest.approx(pooled)
    assert rp["cheap"]["needed"] == runs_needed_log(0.05, pooled, family=12) == 4 and rp["warnings"] == []
    assert "results/pilot/summary.csv" in rp["source"]


def test_bmx_plan_uses_config_cost_seconds(in_project, capsys):
    cfg = in_project.root / "config" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("reboot: 300", "reboot: 100"))
    data = plan_json(capsys, "config/experiments/ht_cores.yaml")
    assert data["cost_seconds"]["reboot"] == 100.0
    assert data["this_plan"]["reconfiguration_s"] == 20 * 100


@pytest.mark.parametrize("args, words", [
    (["--detect", "3%"], "--detect needs"),
    (["--cv", "0.04"], "only serve --detect"),
    (["--detect", "3", "--cv", "0.04"], "write 3%"),
])
def test_bmx_plan_detect_errors(in_project, capsys, args, words):
    assert main(["plan", "config/experiments/ht_cores.yaml", *args]) == 1
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not (in_project.exp("ht_cores") / "plan.csv").exists(), "options are checked before planning"


def test_plan_warns_when_orchestration_or_warmups_dominate(tmp_path):
    """A cheap knob in random order without live knobs: a batch (one Ansible call) per
    visit and a warm-up per measured run. bmx plan says so, and what sequential order
    would cost."""
    from benchmatrix.cli import plan_warnings

    spec = make_spec(tmp_path, {"k": ["a", "b"], "c": [1, 2]}, knobs={"k": {"role": "knob_sysctl", "cost": "none",
                     "vars": {"knob_sysctl_key": "vm.swappiness"}}}, strategy="random", replicates=5,
                     estimate_s=1, live=False)
    runs = make_plan(spec, ["h1"], max_runs=50)
    chosen = plan_costs(spec, runs, per_run_s=1, batch_overhead_s=3)
    seq = plan_costs(spec, make_plan(with_strategy(spec, "sequential"), ["h1"], max_runs=50), per_run_s=1,
                     batch_overhead_s=3)
    assert chosen["overhead_pct"] > 30 and seq["overhead_pct"] < chosen["overhead_pct"] / 2
    warnings = plan_warnings(chosen, {"sequential": seq}, "random")
    assert warnings[0].startswith(f"bmx plan warning: orchestration (Ansible calls, reconfigurations) takes "
                                  f"{chosen['overhead_pct']:.0f} % of this plan's time (random); sequential: "
                                  f"{seq['overhead_pct']:.0f} %")
    assert 2 * chosen["warmup"] >= chosen["measured"]
    assert warnings[1] == (f"bmx plan warning: {chosen['warmup']} warm-up runs for {chosen['measured']} measured "
                           "runs (warmup_after: change); warmup_after: costly_change or first_run warms a cell "
                           "up less often")
    # Long runs: the orchestration is noise, no warning about it.
    long = plan_costs(spec, runs, per_run_s=600, batch_overhead_s=3)
    assert not any("orchestration" in w for w in plan_warnings(long, {"sequential": seq}, "random"))


def test_live_knobs_by_default_make_a_random_cheap_plan_one_batch_and_warmup_after_prices_warmups(tmp_path):
    """Issue 23: a cost-none knob in random order is one batch by default (the batch
    runner sets it between runs), so the orchestration is no longer the plan's time;
    ``warmup_after: costly_change`` warms each cell up once, since nothing costly changes."""
    from benchmatrix.cli import plan_warnings

    knobs = {"k": {"role": "knob_sysctl", "cost": "none", "vars": {"knob_sysctl_key": "vm.swappiness"}}}
    factors = {"k": ["a", "b"], "c": [1, 2]}
    spec = make_spec(tmp_path, factors, knobs=knobs, strategy="random", replicates=5, estimate_s=1)
    runs = make_plan(spec, ["h1"], max_runs=50)
    assert len({r.batch for r in runs}) == 1
    assert reconfigurations(runs, spec)["none"] > 2  # the knob does change between runs
    chosen = plan_costs(spec, runs, per_run_s=1, batch_overhead_s=3)
    assert chosen["overhead_pct"] < 30
    assert 2 * chosen["warmup"] >= chosen["measured"]  # warmup_after: change still cools every cell
    cheap = make_spec(tmp_path, factors, knobs=knobs, strategy="random", replicates=5, estimate_s=1,
                      warmup_after="costly_change", name="cheap.yaml")
    cheap_runs = make_plan(cheap, ["h1"], max_runs=50)
    assert [r.run_id for r in cheap_runs if not r.warmup] == [r.run_id for r in runs if not r.warmup]
    assert sum(r.warmup for r in cheap_runs) == len(cheap.cells)
    costs = plan_costs(cheap, cheap_runs, per_run_s=1, batch_overhead_s=3)
    assert plan_warnings(costs, {}, "random", cheap.warmup_after) == []
    assert costs["warmup_pct"] == pytest.approx(100 * 4 / 24)
