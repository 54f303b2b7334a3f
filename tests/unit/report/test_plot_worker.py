"""Collect's plot worker (report/plot_worker.py, issue 34 item 4): the plots drawn in a
forked process while the job computes the tables are the plots the job would draw itself,
and a worker that fails leaves the drawing to the job."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest
from campaign_factory import make_experiment
from test_report_cost import _modules_after

from benchmatrix import layout
from benchmatrix.report import plots
from benchmatrix.report.plot_worker import PlotWorker, in_process


def _collect(made_root: Path, exp: Path, spec: Path, worker: str) -> set[str]:
    argv = ["--spec", str(spec), "--project-dir", str(made_root), "--plan", str(exp / layout.PLAN)]
    return _modules_after("from benchmatrix.execute.entry import entry\n"
                          f"assert entry('collect', {argv!r}) == 0", cwd=made_root,
                          env={"BMX_PLOT_WORKER": worker})


def _without_stamp(text: str, root: Path) -> str:
    # The render's time and the project's place are all that differ between the two renders.
    text = text.replace(str(root), "ROOT")
    return "\n".join(line for line in text.splitlines() if "Generated" not in line and "generated" not in line)


def test_the_collect_job_draws_in_its_worker_the_plots_it_would_draw_itself(tmp_path):
    made = make_experiment(tmp_path / "a")
    twin = tmp_path / "b"
    shutil.copytree(made.root, twin)
    twin_exp = twin / made.exp.relative_to(made.root)
    twin_spec = twin / made.spec_path.relative_to(made.root)

    loaded = _collect(made.root, made.exp, made.spec_path, "1")
    # The job's own process never imported matplotlib: the worker drew every plot.
    assert not {m for m in loaded if m.split(".")[0] == "matplotlib"}
    here = _collect(twin, twin_exp, twin_spec, "0")
    assert "matplotlib.figure" in here  # and this one drew them itself

    drawn = sorted(p.name for p in (made.exp / layout.PLOTS_DIR).glob("*.svg"))
    assert "order.svg" in drawn
    assert drawn == sorted(p.name for p in (twin_exp / layout.PLOTS_DIR).glob("*.svg"))
    for name in drawn:
        assert (made.exp / layout.PLOTS_DIR / name).read_bytes() == (twin_exp / layout.PLOTS_DIR / name).read_bytes()
    for report in (layout.REPORT_HTML, layout.REPORT_MD):
        assert (_without_stamp((made.exp / report).read_text(), made.root)
                == _without_stamp((twin_exp / report).read_text(), twin))


def _jobs() -> list[plots.PlotJob]:
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(6)], "seq": range(6), "cell_id": ["c0", "c1"] * 3,
                         "status": ["ok"] * 6, "warmup": [False] * 6, "control": [False] * 6,
                         "score": [1.0, 2.0, 1.1, 2.1, 0.9, 1.9],
                         "started_at": [f"2026-12-03T10:00:0{i}+00:00" for i in range(6)]})
    return [plots.PlotJob("run_order", (runs, ["score"], {"score": "count"}, {"c0": "x=1", "c1": "x=2"}))]


def _svgs(drawn: list[tuple[list[plots.Plot], list[str]]]) -> list[str]:
    return [p.svg for got, _notes in drawn for p in got]


def test_a_worker_that_dies_leaves_the_drawing_to_the_job():
    jobs = _jobs()
    expected = _svgs(in_process(jobs)())
    assert expected  # the job draws a plot
    worker = PlotWorker.start()
    assert worker is not None
    try:
        pid = next(iter(worker._pool._processes))  # noqa: SLF001 (the pool's one process)
        os.kill(pid, signal.SIGKILL)
        assert _svgs(worker.submit(jobs, runs=6)()) == expected
    finally:
        worker.close()


def test_a_value_that_does_not_pickle_is_drawn_here():
    class Label(str):  # a class local to this function: pickle cannot name it
        pass

    runs, metrics, units, labels = _jobs()[0].args
    jobs = [plots.PlotJob("run_order", (runs, metrics, units, {k: Label(v) for k, v in labels.items()}))]
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(jobs[0])
    worker = PlotWorker.start()
    assert worker is not None
    assert _svgs(worker.submit(jobs, runs=6)()) == _svgs(in_process(_jobs())())


def test_no_worker_when_switched_off_or_for_a_large_campaign(monkeypatch):
    from benchmatrix.report import plot_worker

    monkeypatch.setenv("BMX_PLOT_WORKER", "0")
    assert PlotWorker.start() is None
    monkeypatch.delenv("BMX_PLOT_WORKER")
    # A plan too large for a worker starts none (no matplotlib import in a process for nothing).
    assert PlotWorker.start(plan_bytes=plot_worker.MAX_PLAN_BYTES + 1) is None
    worker = PlotWorker.start()
    assert worker is not None
    # Past MAX_WORKER_RUNS the runs would be copied to the worker: drawn here, the worker stopped.
    drawing = worker.submit(_jobs(), runs=plot_worker.MAX_WORKER_RUNS + 1)
    assert worker._pool is None  # noqa: SLF001
    assert _svgs(drawing()) == _svgs(in_process(_jobs())())


def test_the_worker_ends_with_a_job_killed_outright(tmp_path):
    # A collect job killed by SIGKILL (bmx's group killed, the OOM killer) must not leave
    # its worker waiting for tasks for ever.
    import subprocess
    import sys
    import time

    code = ("import sys, time\nfrom benchmatrix.report.plot_worker import PlotWorker\n"
            "w = PlotWorker.start()\nw._pool.submit(int).result()\n"
            "print(next(iter(w._pool._processes)), flush=True)\ntime.sleep(600)\n")
    job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(job.stdout.readline())
        os.kill(pid, 0)  # the worker runs
    finally:
        job.kill()
        job.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"the plot worker {pid} outlived its killed job")


def _whoami(notes: list[str]) -> list[plots.Plot]:
    notes.append(str(os.getpid()))
    return []


def _die_unless_in(pid: int, notes: list[str]) -> list[plots.Plot]:
    if os.getpid() != pid:
        os._exit(3)  # the worker's fork dies mid-job
    notes.append(str(os.getpid()))
    return []


def test_the_worker_draws_every_other_job_in_a_fork_of_itself(monkeypatch):
    # Two drawers on the controller's two cores; the fork shares the worker's matplotlib.
    from benchmatrix.report import plot_worker

    monkeypatch.setitem(plots.JOBS, "whoami", (_whoami, True))
    drawn = plot_worker._draw_split([plots.PlotJob("whoami", ())] * 4)
    pids = [notes[0] for _got, notes in drawn]
    assert pids[0] == pids[2] == str(os.getpid())
    assert pids[1] == pids[3] != str(os.getpid())


def test_a_fork_that_dies_leaves_its_jobs_to_the_worker(monkeypatch):
    from benchmatrix.report import plot_worker

    monkeypatch.setitem(plots.JOBS, "die_unless_in", (_die_unless_in, True))
    drawn = plot_worker._draw_split([plots.PlotJob("die_unless_in", (os.getpid(),))] * 3)
    assert [notes for _got, notes in drawn] == [[str(os.getpid())]] * 3
