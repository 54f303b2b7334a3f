"""`bmx run` prints progress in runs, not Snakemake jobs (issue 23): one batch job may
hold one run or a thousand, and Snakemake prints a line only when a job ends; while a
long batch runs, a line every 20 s, changed or not (issue 38), counts the records
written and the runs finished on the hosts (issue 15), with an ETA from the runs' own
pace and, once no run is left, the phase."""

from __future__ import annotations

import json
import os

from benchmatrix.execute.supervise import RunProgress, progress_tick


def _plan(exp, attempts: int) -> None:
    (exp / "plan.csv").write_text("seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt\n"
                                  + "".join(f"{i},h,r{i},c,{i},false,false,1,b1,1\n" for i in range(1, attempts + 1)))


def _record(exp, run_id: str) -> None:
    (exp / "runs" / run_id / "1").mkdir(parents=True)
    (exp / "runs" / run_id / "1" / "record.json").write_text("{}")


def test_progress_line_counts_records_and_runs_finished_on_the_hosts(tmp_path):
    exp = tmp_path
    progress = RunProgress(exp, t0=0.0)
    progress.start = 0.0
    progress.job_started("run_batch")
    assert progress_tick(progress, 5) == "bmx: 0 run records, elapsed 0:00:05"
    (exp / "batches").mkdir()
    (exp / "batches" / "b1.progress.json").write_text(json.dumps(
        {"batch": "b1", "finished": [{"run_id": "r1", "attempt": 1}, {"run_id": "r2", "attempt": 1}]}))
    # No plan.csv (yet): no total. Two runs done in 65 s but the plan is unknown: no ETA.
    assert progress_tick(progress, 65) == "bmx: 0 run records, 2 more finished on the hosts, elapsed 0:01:05"
    _plan(exp, 10)
    # The first slice's records are written: r1 no longer counts as only on the host.
    _record(exp, "r1")
    # 2 of 10 finished in 90 s (no model: the rate of this pass): 8 left at that rate take 360 s.
    assert progress_tick(progress, 90) == \
        "bmx: 1/10 runs done, 1 more finished on the hosts, elapsed 0:01:30, ETA 0:06:00"


def test_the_eta_counts_this_passs_runs_not_earlier_ones(tmp_path):
    """Records of an earlier pass (a resumed campaign) do not make this one look fast."""
    exp = tmp_path
    _plan(exp, 8)
    for r in ("r1", "r2", "r3", "r4"):
        _record(exp, r)
    progress = RunProgress(exp, t0=0.0)
    progress.start = 100.0
    progress.job_started("run_batch")
    # Nothing new yet and no estimate: no ETA (the jobs' rate said 3 s at every start).
    assert progress.line(160.0, jobs=(1, 3)) == "bmx: 4/8 runs done, 1/3 jobs, elapsed 0:02:40"
    _record(exp, "r5")
    _record(exp, "r6")
    # 2 runs of this pass in 60 s; 2 left: 60 s.
    assert progress.line(160.0, jobs=(2, 3)) == "bmx: 6/8 runs done, 2/3 jobs, elapsed 0:02:40, ETA 0:01:00"


def test_the_plans_attempts_are_read_again_when_it_changes(tmp_path):
    exp = tmp_path
    _plan(exp, 3)
    progress = RunProgress(exp, t0=0.0)
    assert progress.planned() == 3
    _plan(exp, 5)  # a re-run round appended
    os.utime(exp / "plan.csv", (1, 1))
    assert progress.planned() == 5


# ------------------------------------------------------------------ issue 38, item 1

def _real_plan(exp, tmp_path, hosts=("h1",)):
    """A real plan.csv of a 2-cell, 3-replicate spec without knobs (one batch a host)."""
    import yaml

    from benchmatrix.plan.design import make_plan, plan_csv_text
    from benchmatrix.spec.load import load_spec

    doc = {"name": "t", "factors": {"bs": ["4k", "64k"]},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ bs }}"]}},
           "replicates": 3, "warmup": 0, "order": {"strategy": "random", "seed": 3}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(doc))
    spec = load_spec(tmp_path / "spec.yaml")
    runs = make_plan(spec, list(hosts), 1000, 300, {})
    exp.mkdir(parents=True, exist_ok=True)
    (exp / "plan.csv").write_text(plan_csv_text(runs, spec.factor_names))
    return spec, runs


def _model(spec, per_run=2.0):
    from benchmatrix.plan.measured_costs import OrchestrationCosts
    from benchmatrix.plan.wall_time import WallModel

    costs = OrchestrationCosts(batch_s=3.0, batch_source="t", campaign_s=20.0, campaign_source="t", tail_s=8.0,
                               tail_source="t")
    return WallModel({c.cell_id: per_run for c in spec.cells}, None, costs)


def _batch_running(tmp_path):
    """A one-host plan of 6 runs of 2 s (the model's), its batch job started at 0 s."""
    exp = tmp_path / "exp"
    spec, runs = _real_plan(exp, tmp_path)
    progress = RunProgress(exp, t0=0.0, spec=spec, model=_model(spec))
    progress.start = 0.0
    progress.job_started("run_batch")
    return exp, runs, progress


def _host_reported(exp, runs, ends=None) -> None:
    """The batch's runner reported ``runs`` finished on h1 (ended at ``ends``, host clock)."""
    (exp / "batches").mkdir(exist_ok=True)
    finished = [{"run_id": r.run_id, "attempt": 1, **({"ended_at": ends[i]} if ends else {})}
                for i, r in enumerate(runs)]
    (exp / "batches" / f"{runs[0].batch}.progress.json").write_text(json.dumps(
        {"batch": runs[0].batch, "host": "h1", "finished": finished}))


def test_a_line_every_tick_while_nothing_changes(tmp_path):
    """A batch of long runs changed nothing for minutes and bmx run printed nothing (issue 38)."""
    exp = tmp_path / "exp"
    spec, _ = _real_plan(exp, tmp_path)
    progress = RunProgress(exp, t0=0.0, spec=spec, model=_model(spec))
    progress.job_started("run_batch")
    first = progress_tick(progress, 20.0)
    second = progress_tick(progress, 40.0)
    assert first.startswith("bmx: 0/6 runs done, elapsed 0:00:20") and second.startswith(
        "bmx: 0/6 runs done, elapsed 0:00:40"), (first, second)


def test_before_the_first_run_the_eta_comes_from_the_estimates_then_from_the_hosts_pace(tmp_path):
    exp, runs, progress = _batch_running(tmp_path)
    # 6 runs of 2 s (earlier campaigns), one batch of 3 s, then the 8 s tail: 23 s.
    assert progress_tick(progress, 5.0) == "bmx: 0/6 runs done, elapsed 0:00:05, ETA 0:00:23"
    _host_reported(exp, runs[:2], [f"2026-12-03T00:00:{s:02d}+00:00" for s in (10, 20)])
    # The host runs one every 10 s, not 2: 4 left take 40 s, the batch is paid, 8 s tail.
    assert progress_tick(progress, 30.0) == \
        "bmx: 0/6 runs done, 2 more finished on the hosts, elapsed 0:00:30, ETA 0:00:48"


def test_after_the_last_run_the_line_names_the_phase(tmp_path):
    exp = tmp_path / "exp"
    spec, runs = _real_plan(exp, tmp_path)
    progress = RunProgress(exp, t0=0.0, spec=spec, model=_model(spec))
    assert progress_tick(progress, 3.0).endswith("; starting")
    progress.job_started("plan")
    assert progress_tick(progress, 4.0).endswith("; planning")
    progress.job_ended("plan")
    progress.job_started("run_batch")
    assert progress.phase_line(5.0) is None, "runs are counted, no phase"
    for r in runs:
        _record(exp, r.run_id)
    # Every run is done, the batch job still writes its records and restores.
    assert progress_tick(progress, 60.0) == "bmx: 6/6 runs done, elapsed 0:01:00; fetching the last results"
    progress.job_ended("run_batch")
    # Between two jobs: no phase to name (Snakemake's own line says a job ended).
    assert progress.line(61.0, jobs=(2, 3)) == "bmx: 6/6 runs done, 2/3 jobs, elapsed 0:01:01"
    # The next job's start is said at once, not at the next tick.
    progress.job_started("collect")
    assert progress.phase_line(62.0) == \
        "bmx: 6/6 runs done, elapsed 0:01:02; collecting the results and writing the report"
    assert progress.phase_line(63.0) is None, "said once"
    assert progress_tick(progress, 80.0) == \
        "bmx: 6/6 runs done, elapsed 0:01:20; collecting the results and writing the report"


def test_the_runners_progress_is_read_at_least_every_20_s_whatever_the_lease():
    """A 300 s lease was renewed (and the progress read) every 75 s: the 30 s lines
    counted runs a minute old."""
    from benchmatrix.execute.lease import renewal_interval

    assert renewal_interval(300) == 20.0
    assert renewal_interval(40) == 10.0  # a quarter lease when that is shorter


def test_the_eta_counts_down_while_nothing_new_is_known(tmp_path):
    """The trial's ETA read 0:00:21 at 0:00:02 and still 0:00:21 at 0:00:20 (issue 38,
    trial point 16): with nothing new from the hosts, the time since is taken off."""
    exp, runs, progress = _batch_running(tmp_path)
    assert progress_tick(progress, 5.0).endswith("ETA 0:00:23")
    assert progress_tick(progress, 15.0).endswith("ETA 0:00:13")
    assert progress_tick(progress, 40.0).endswith("ETA 0:00:00")
    # News from the host: the ETA is priced again from it.
    _host_reported(exp, runs[:2], [f"2026-12-03T00:00:{s:02d}+00:00" for s in (10, 20)])
    assert progress_tick(progress, 50.0).endswith("2 more finished on the hosts, elapsed 0:00:50, ETA 0:00:48")
    assert progress_tick(progress, 60.0).endswith("ETA 0:00:38")


def test_runs_the_hosts_report_between_two_ticks_get_a_line_at_once(tmp_path):
    """A batch of 19 short runs said 0/19 at 20 s and 19/19 at 40 s (issue 38, trial point
    15): the lease renewal between the ticks brought the count, and nobody printed it."""
    from benchmatrix.execute.supervise import progress_poll

    exp, runs, progress = _batch_running(tmp_path)
    assert progress_tick(progress, 20.0).startswith("bmx: 0/6 runs done, elapsed 0:00:20")
    assert progress_poll(progress, 22.0) is None, "nothing new: the tick's line stands"
    _host_reported(exp, runs[:4])
    line = progress_poll(progress, 27.0)
    assert line is not None and line.startswith("bmx: 0/6 runs done, 4 more finished on the hosts, elapsed 0:00:27"), \
        line
    assert progress_poll(progress, 29.0) is None, "said once"


def test_the_first_progress_read_comes_half_an_interval_after_the_runners_start():
    """A batch of 20-35 s ended before its first renewal (20 s after the runner's
    start) brought any count (issue 38, trial point 15): the first comes after 10 s; a
    batch shorter than that still costs no renewal call."""
    from benchmatrix.execute.lease import first_renewal

    assert first_renewal(300) == 10.0
    assert first_renewal(40) == 10.0
    assert first_renewal(8) == 2.0  # a quarter lease when that is shorter
