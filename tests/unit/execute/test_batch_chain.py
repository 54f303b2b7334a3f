"""Per-host batch chaining: the inputs that order the run_batch jobs (issue 14).

``InputFunctions`` (benchmatrix/execute/snakefile.py) gives each ``run_batch`` job the
marker of the same host's previous batch as an input, so a host's batches run in plan
order while different hosts run in parallel; ``restore_host`` waits for a host's last
marker and ``collect`` for every marker and every host's restore. These tests read a
small plan.csv without running Snakemake.

The ``checkpoints`` argument: in a workflow it is Snakemake's ``checkpoints`` object,
which exists only inside a running workflow and whose ``plan.get(experiment=...)``
returns the finished checkpoint job (its ``output`` list) or raises until the plan job
has run. ``InputFunctions`` uses nothing else of it, so a stand-in with that one method
(:class:`PlanCheckpoint`) stands for it here; a real workflow run covers the rest
(tests/e2e).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from benchmatrix.execute.snakefile import InputFunctions, batches
from benchmatrix.plan.design import assign_batches, make_plan, plan_csv_text
from benchmatrix.plan.reruns import plan_reruns
from benchmatrix.spec.load import load_spec

PLAN_HEADER = "seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,bs\n"


class PlanCheckpoint:
    """Stand-in for Snakemake's ``checkpoints``: ``plan.get(experiment=...).output[0]``."""

    def __init__(self, results: Path):
        self.plan = self
        self._results = results

    def get(self, experiment: str) -> SimpleNamespace:
        path = self._results / experiment / "plan.csv"
        if not path.is_file():  # Snakemake raises IncompleteCheckpointException here
            raise LookupError(f"checkpoint plan has not produced {path}")
        return SimpleNamespace(output=[str(path)])


def functions(results: Path) -> InputFunctions:
    # A spec with a knob: every host gets its restore (tests/unit/execute/test_restore_needed.py).
    return InputFunctions(PlanCheckpoint(results), spec=SimpleNamespace(knobs={"ra": "knob_read_ahead"}))


def marker(batch: str) -> str:
    return f"results/exp/batches/{batch}.done"


def write_plan(results: Path, rows: list[tuple[str, str]]) -> Path:
    """plan.csv with one run per (host, batch) row, in this order."""
    path = results / "exp" / "plan.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{i},{host},r{i},c1,1,False,False,1,{batch},1,4k\n" for i, (host, batch) in enumerate(rows, 1)]
    path.write_text(PLAN_HEADER + "".join(lines))
    return path


# Host a's third batch (a re-run round) comes after host b's batches in plan order,
# and batches span several rows: the chain must follow the host, not the file.
ROWS = [("a", "a-b0001-11"), ("a", "a-b0001-11"), ("a", "a-b0002-22"),
        ("b", "b-b0001-33"), ("b", "b-b0002-44"), ("b", "b-b0002-44"),
        ("a", "a-b0003-55"), ("b", "b-b0003-66")]


def test_each_host_chains_its_batches_in_plan_order(tmp_path: Path) -> None:
    write_plan(tmp_path, ROWS)
    fn = functions(tmp_path)

    def previous(batch: str) -> list[str]:
        return fn.previous_marker(SimpleNamespace(experiment="exp", batch=batch))

    # The first batch of each host waits for nothing: hosts start in parallel.
    assert previous("a-b0001-11") == []
    assert previous("b-b0001-33") == []
    assert previous("a-b0002-22") == [marker("a-b0001-11")]
    # Across the other host's rows: a's next batch waits for a's, never for b's.
    assert previous("a-b0003-55") == [marker("a-b0002-22")]
    assert previous("b-b0002-44") == [marker("b-b0001-33")]
    assert previous("b-b0003-66") == [marker("b-b0002-44")]


def test_restore_and_collect_wait_for_the_right_markers(tmp_path: Path) -> None:
    write_plan(tmp_path, ROWS)
    fn = functions(tmp_path)
    wc = SimpleNamespace(experiment="exp")
    assert batches(tmp_path / "exp" / "plan.csv") == (
        ["a-b0001-11", "a-b0002-22", "b-b0001-33", "b-b0002-44", "a-b0003-55", "b-b0003-66"],
        {"a-b0001-11": "a", "a-b0002-22": "a", "b-b0001-33": "b", "b-b0002-44": "b",
         "a-b0003-55": "a", "b-b0003-66": "b"})
    assert fn.last_marker(SimpleNamespace(experiment="exp", host="a")) == marker("a-b0003-55")
    assert fn.last_marker(SimpleNamespace(experiment="exp", host="b")) == marker("b-b0003-66")
    assert fn.host_of(SimpleNamespace(experiment="exp", batch="a-b0003-55")) == "a"
    assert fn.all_markers(wc) == [marker(b) for b in dict.fromkeys(b for _, b in ROWS)]
    assert fn.restore_markers(wc) == ["results/exp/hosts/a/restored.json", "results/exp/hosts/b/restored.json"]


def test_a_new_plan_is_read_again(tmp_path: Path) -> None:
    """batches() caches per file version: a re-plan (new mtime) changes the chain."""
    path = write_plan(tmp_path, ROWS[:3])
    fn = functions(tmp_path)
    wc = SimpleNamespace(experiment="exp", host="a")
    assert fn.last_marker(wc) == marker("a-b0002-22")
    write_plan(tmp_path, ROWS)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a coarse clock must not hide it
    assert fn.last_marker(wc) == marker("a-b0003-55")


def test_no_plan_yet_is_the_checkpoints_answer(tmp_path: Path) -> None:
    """Before the plan job ran, the input functions ask the checkpoint and get its exception."""
    with pytest.raises(LookupError, match="checkpoint plan"):
        functions(tmp_path).previous_marker(SimpleNamespace(experiment="exp", batch="a-b0001-11"))


def test_planner_batches_chain_per_host(tmp_path: Path) -> None:
    """On a plan the planner wrote (two hosts, a knob, a re-run round): every batch of a
    host waits for exactly the host's batch before it in plan order, and on nothing else."""
    doc = {"name": "exp", "factors": {"ra": [0, 4096], "bs": ["4k", "64k"]},
           "knobs": {"ra": {"role": "knob_read_ahead", "cost": "none"}},
           "workload": {"role": "workload_command", "vars": {"argv": ["echo", "{{ ra }}", "{{ bs }}"]}},
           "replicates": 2, "warmup": 1, "order": {"strategy": "random", "seed": 3}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(doc))
    spec = load_spec(tmp_path / "spec.yaml")
    runs = make_plan(spec, ["h1", "h2"], max_runs=3)
    # One failed run of h1 re-run: its batch is appended after h2's batches.
    runs += plan_reruns(spec, runs, [{"round": 1, "run_id": runs[1].run_id, "attempt": 2, "reason": "t"}])
    for i, run in enumerate(runs, start=1):  # as benchmatrix.execute.planning.plan does
        run.seq = i
    assign_batches(runs, spec, 3)
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "plan.csv").write_text(plan_csv_text(runs, spec.factor_names))
    fn = functions(tmp_path)

    per_host: dict[str, list[str]] = {}
    for r in runs:
        if r.batch not in per_host.setdefault(r.host, []):
            per_host[r.host].append(r.batch)
    assert per_host["h1"][-1] == runs[-1].batch and len(per_host["h1"]) >= 3 and len(per_host["h2"]) >= 3
    for host, mine in per_host.items():
        for i, batch in enumerate(mine):
            want = [] if i == 0 else [marker(mine[i - 1])]
            assert fn.previous_marker(SimpleNamespace(experiment="exp", batch=batch)) == want, (host, batch)
        assert fn.last_marker(SimpleNamespace(experiment="exp", host=host)) == marker(mine[-1])
