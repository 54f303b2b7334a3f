"""The plan's time estimate from the workload's own time limit (issue 24): fio ``runtime``,
pgbench ``-T`` (``duration``), sysbench ``--time``; ``bmx plan`` and ``bmx check`` share it."""

from __future__ import annotations

import yaml

from benchmatrix.plan.design import per_run_estimate, run_estimates
from benchmatrix.plan.workload_time import run_seconds
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads.fio import fio_seconds


def _spec(tmp_path, workload, factors=None):
    doc = {"name": "t", "factors": factors or {"bs": ["4k", "64k"]}, "workload": workload, "replicates": 2,
           "warmup": 0, "order": {"strategy": "random", "seed": 1}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def test_fio_runtime_per_cell_with_units_and_ramp(tmp_path):
    spec = _spec(tmp_path, {"role": "workload_fio",
                            "vars": {"rw": "read", "bs": "{{ bs }}", "runtime": "{{ rt }}", "ramp_time": "2s"}},
                 {"bs": ["4k"], "rt": ["1m", 30]})
    est = run_estimates(spec, tmp_path)
    assert sorted(est.values()) == [32.0, 62.0]
    per_run, source = per_run_estimate(spec, tmp_path / "runs.csv")
    assert per_run == 47.0 and "time limit" in source


def test_pgbench_and_sysbench_times_and_defaults(tmp_path):
    assert run_seconds("workload_pgbench", {"duration": 30}) == 30.0
    assert run_seconds("workload_pgbench", {}) == 10.0
    assert run_seconds("workload_pgbench", {"transactions": 100}) is None
    assert run_seconds("workload_sysbench", {"time": 5, "test": "cpu"}) == 5.0
    assert run_seconds("workload_command", {"argv": ["pgbench", "-c", "4", "-T", "20", "bench"]}) == 20.0
    assert run_seconds("workload_command", {"argv": ["sysbench", "--time=7", "cpu", "run"]}) == 7.0
    assert run_seconds("workload_command", {"argv": ["fio", "--runtime=3", "--ramp_time=1"]}) == 4.0
    assert run_seconds("workload_command", {"argv": ["sleep", "1"]}) is None
    assert fio_seconds("500ms") == 0.5 and fio_seconds("2h") == 7200.0 and fio_seconds("soon") is None


def test_estimate_s_and_earlier_runs_win_over_the_time_limit(tmp_path):
    wl = {"role": "workload_sysbench", "vars": {"test": "cpu", "time": 5}}
    assert set(run_estimates(_spec(tmp_path, {**wl, "estimate_s": 9}), tmp_path).values()) == {9.0}
    spec = _spec(tmp_path, wl)
    assert set(run_estimates(spec, tmp_path).values()) == {5.0}
    cell = spec.cells[0].cell_id
    (tmp_path / "runs.csv").write_text(f"cell_id,status,duration_s\n{cell},ok,6.5\n")
    assert run_estimates(spec, tmp_path)[cell] == 6.5
    assert per_run_estimate(spec, tmp_path / "runs.csv")[0] == 6.5


def test_no_time_limit_stays_unknown(tmp_path):
    spec = _spec(tmp_path, {"role": "workload_command", "vars": {"argv": ["echo", "{{ bs }}"]}})
    assert run_estimates(spec, tmp_path) == {}
    assert per_run_estimate(spec, tmp_path / "runs.csv")[0] is None


def test_stress_ng_timeout_from_its_descriptor(tmp_path):
    assert run_seconds("workload_stress_ng", {"stressors": {"cpu": 1}, "timeout": 3}) == 3.0
    assert run_seconds("workload_stress_ng", {"stressors": {"cpu": 1}, "timeout": "20"}) == 20.0
    assert run_seconds("workload_stress_ng", {"stressors": {"cpu": 1}}) == 10.0  # the argv builder's default
    spec = _spec(tmp_path, {"role": "workload_stress_ng", "vars": {"stressors": {"cpu": 1}, "timeout": "{{ t }}"}},
                 {"t": [2, 4]})
    assert sorted(run_estimates(spec, tmp_path).values()) == [2.0, 4.0]


def test_every_time_based_workload_declares_its_seconds():
    from benchmatrix.workloads import WORKLOADS

    assert {r for r, w in WORKLOADS.items() if w.seconds is not None} == {
        "workload_fio", "workload_pgbench", "workload_sysbench", "workload_command", "workload_stress_ng"}
    assert run_seconds("workload_unknown", {"time": 5}) is None
