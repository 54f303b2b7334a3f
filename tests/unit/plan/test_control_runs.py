"""Control (drift sentinel) runs are comparable with each other (issue 12, item 2).

Every control run follows the warm-up rule of measured runs, never costs a
reconfiguration, ``order.control_every`` bounds how many there are, and the drift
test uses only the control runs that ran warm.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from test_design import make_spec, measured
from test_design_restricted import WORKED, WORKED_KNOBS, check_warmups, restricted_matrices
from test_design_restricted import make_spec as make_restricted_spec

from benchmatrix.analyze import sanity
from benchmatrix.errors import SpecErrors
from benchmatrix.plan.design import PlannedRun, make_plan, plan_costs, reconfigurations
from benchmatrix.spec.load import Spec

# The issue's random plan with knobs: 2 restart-class x 2 none-class levels x 3 cheap
# cells, 5 replicates = 60 measured runs. It had 45 control runs, restarts 33 -> 49.
ISSUE = {"k": [1, 2], "m": [1, 2], "w": [1, 2, 3]}
ISSUE_KNOBS = {"k": {"role": "knob_k", "cost": "restart"}, "m": {"role": "knob_m", "cost": "none"}}
ISSUE_CTL = {"k": 1, "m": 1, "w": 1}


def without_control(spec: Spec) -> Spec:
    alt = dataclasses.replace(spec, data=copy.deepcopy(spec.data))
    alt.order["control"] = None
    return alt


def knob_state(spec: Spec, run: PlannedRun) -> tuple:
    return tuple(repr(run.factors[k]) for k in sorted(spec.knobs))


def check_controls(spec: Spec, runs: list[PlannedRun]) -> None:
    """Every control run is warm by the measured runs' rule, costs no reconfiguration,
    and there are at most 1 + measured // control_every of them per host."""
    every, n_warm = spec.order["control_every"], spec.data["warmup"]
    ctl = spec.control_cell()
    for host in {r.host for r in runs}:
        mine = [r for r in runs if r.host == host]
        controls = [r for r in mine if r.control]
        assert len(controls) <= 1 + len(measured(mine)) // every
        state, since_change, warm = None, 0, set()
        for i, r in enumerate(mine):
            s = knob_state(spec, r)
            if s != state:
                state, since_change, warm = s, 0, set()
            if r.control:
                assert r.cell_id == ctl.cell_id and r.factors == ctl.factors and not r.warmup
                # never the first run after a reconfiguration, and warm when warm-ups are asked for
                assert since_change > 0, f"{r.run_id} runs right after a reconfiguration"
                if n_warm:
                    assert r.cell_id in warm, f"{r.run_id} runs cold"
                    if mine[i - 1].warmup:
                        assert mine[i - 1].cell_id == r.cell_id
            warm.add(r.cell_id)
            since_change += 1


def test_issue_random_plan_controls_are_bounded_and_free(tmp_path):
    spec = make_spec(tmp_path, ISSUE, knobs=ISSUE_KNOBS, replicates=5, warmup=1, seed=7,
                     control=ISSUE_CTL, control_every=10)
    runs = make_plan(spec, ["h1"])
    plain = make_plan(without_control(spec), ["h1"])
    assert len(measured(runs)) == 60
    controls = [r for r in runs if r.control]
    assert 3 <= len(controls) <= 7, f"{len(controls)} control runs for 60 measured, control_every 10"
    with_ctl, without = reconfigurations(runs, spec), reconfigurations(plain, spec)
    assert without["restart"] == 33
    for cls in without:
        assert with_ctl[cls] <= 1.1 * without[cls], (cls, with_ctl, without)
    # The measured runs keep their order: controls are inserted, never reshuffle the plan.
    assert [r.run_id for r in measured(runs)] == [r.run_id for r in measured(plain)]
    check_controls(spec, runs)


def test_control_opening_a_visit_is_warmed_up_first(tmp_path):
    spec = make_restricted_spec(tmp_path, WORKED, knobs=WORKED_KNOBS, replicates=3, warmup=1,
                                control={"bios": "a", "db": "x", "c1": 1, "c2": "p"}, control_every=2)
    runs = make_plan(spec, ["h1"])
    check_controls(spec, runs)
    check_warmups(spec, runs)
    assert reconfigurations(runs, spec) == {"none": 0, "restart": 6, "reboot": 6}
    # Only in the 3 visits of the control's own whole plot, spread over them.
    visits = {r.visit for r in runs if r.control}
    assert len(visits) == 3
    assert all(r.factors["bios"] == "a" and r.factors["db"] == "x" for r in runs if r.visit in visits)


def test_without_warmups_a_control_never_opens_a_stretch(tmp_path):
    spec = make_spec(tmp_path, ISSUE, knobs=ISSUE_KNOBS, replicates=5, warmup=0, seed=3,
                     control=ISSUE_CTL, control_every=4)
    runs = make_plan(spec, ["h1", "h2"])
    check_controls(spec, runs)
    assert plan_costs(spec, runs)["warmup"] == 0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(restricted_matrices())
def test_controls_never_add_reconfigurations(m):
    if m["control"] is None:
        return
    with tempfile.TemporaryDirectory() as d:
        spec = make_restricted_spec(d, m["factors"], knobs=m["knobs"], replicates=m["replicates"],
                                    warmup=m["warmup"], visits=m["visits"], control=m["control"],
                                    control_every=m["control_every"], seed=m["seed"])
    for strategy in ("restricted", "random", "sequential"):
        s = dataclasses.replace(spec, data=copy.deepcopy(spec.data))
        s.order["strategy"] = strategy
        runs = make_plan(s, m["hosts"], max_runs=m["max_runs"])
        assert reconfigurations(runs, s) == reconfigurations(make_plan(without_control(s), m["hosts"]), s)
        check_controls(s, runs)
        assert any(r.control for r in runs), "the control's knob setting is in the matrix, so it runs"


def test_control_in_a_knob_setting_no_cell_has_is_refused(tmp_path):
    spec_file = tmp_path / "spec.yaml"
    with pytest.raises(SpecErrors) as info:
        make_spec(tmp_path, {"ra": [0, 128], "bs": ["4k", "64k"]}, knobs={"ra": {"role": "knob_ra", "cost": "none"}},
                  control={"ra": 4096, "bs": "4k"})
    msg = str(info.value)
    assert msg.count("\n") == 0 and msg.startswith(f"{spec_file}:")
    assert "order.control sets ra=4096, which no cell of the matrix has" in msg and "never run" in msg


# ---------------------------------------------------------------- the drift test

def control_history(n: int = 40, cold_from: int = 20, cold_effect: float = -0.08) -> pd.DataFrame:
    """runs.csv rows of one host as an older plan ran them: a knob ``k`` alternates
    between stretches; a control run either follows its warm-up in its stretch, or
    opens a stretch cold right after the reconfiguration (from ``cold_from`` on),
    where it reads ``cold_effect`` lower. The host itself never drifts."""
    rng = np.random.default_rng(11)
    rows = []
    start = pd.Timestamp("2025-01-01T00:00:00Z")

    def add(kind: str, k: int, value: float | None) -> None:
        rows.append({"cell_id": "cctl" if kind != "other" else "cother", "k": k,
                     "warmup": kind == "warmup", "control": kind == "control",
                     "started_at": (start + pd.Timedelta(seconds=10 * len(rows))).isoformat(),
                     "tps": value})

    for i in range(n):
        add("other", 2, 500.0)  # a stretch in the other setting
        if i < cold_from:
            add("warmup", 1, 900.0)
            add("control", 1, 1000.0 * rng.normal(1.0, 0.005))
        else:
            add("control", 1, 1000.0 * (1 + cold_effect) * rng.normal(1.0, 0.005))
            add("other", 1, 500.0)
    table = pd.DataFrame(rows)
    for col, value in {"status": "ok", "attempt": 1, "host": "h1"}.items():
        table[col] = value
    table["run_id"] = [f"r{i}" for i in range(len(table))]
    table["seq"] = range(1, len(table) + 1)
    return table


def test_drift_uses_only_comparable_control_runs():
    runs = control_history()
    table = sanity.drift(runs, ["tps"], knobs=["k"], warmup=1)
    row = table.iloc[0]
    # The 20 cold control runs are left out: no false level shift from warm to cold.
    assert row["n"] == 20 and not bool(row["flagged"])
    assert len(sanity.control_runs(runs, knobs=["k"], warmup=1)) == 20
    # Comparability needs the knobs: with no knob known, every start of a stretch
    # looks warm and the cold half shows up as a (false) level shift.
    assert bool(sanity.drift(runs, ["tps"], knobs=[], warmup=1).iloc[0]["flagged"])


def test_drift_without_warmups_drops_controls_right_after_a_reconfiguration():
    runs = control_history(cold_from=10)
    assert len(sanity.control_runs(runs, knobs=["k"], warmup=0)) == 10


def test_left_out_control_runs_are_reported():
    runs = control_history()
    table = sanity.drift(runs, ["tps"], knobs=["k"], warmup=1)
    notes = sanity.drift_warnings(table, runs, "k=1", knobs=["k"], warmup=1)
    left = [w for w in notes if w["title"] == "control runs left out of the drift test"]
    assert len(left) == 1 and left[0]["runs_total"] == 20 and left[0]["severity"] == "notice"
