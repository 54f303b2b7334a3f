"""The comparability guard of ``bmx compare`` compares what was measured, not how the
preparation went, and names each difference as one field-level line (issue 22, item 5)."""

from __future__ import annotations

import json

import pandas as pd

from benchmatrix.campaigns.compare import Side, provenance
from benchmatrix.campaigns.store import Campaign

SPEC = {"workload": {"role": "workload_fio", "vars": {"filename": "/a", "rw": "read", "bs": "8k"}, "timeout": 120},
        "before_run": ["drop_caches", "fstrim"], "collect": ["disk"], "warmup": 1,
        "knobs": {"read_ahead_kb": {"role": "knob_read_ahead", "cost": "none"}}}


def _record(run: int, seconds: float, filename: str = "/a", cpus: list[int] | None = None, cell: str = "c1") -> dict:
    """A record as the batch job writes it (benchmatrix/execute/rules.py), reduced to what
    the guard reads; the workload's fields are those of real records."""
    return {"run_id": f"h1-{cell}-r{run}", "attempt": 1, "cell_id": cell, "host": "h1", "status": "ok",
            "warmup": False, "control": False, "benchmatrix_version": "0.1.0",
            "phases": {"before_run_s": 2 * seconds, "workload_s": 5.0 + seconds},
            "workload": {"role": "workload_fio",
                         "argv": ["fio", "--output-format=json", "--eta=never", "--name=benchmatrix",
                                  f"--filename={filename}", "--rw=read", "--bs=8k"],
                         "before_run": [{"action": "drop_caches", "seconds": seconds, "error": None},
                                        {"action": "fstrim", "seconds": seconds * 3, "error": None,
                                         "output": f"/: {int(seconds * 1e6)} bytes trimmed"}],
                         "affinity": {"cpus": [0], "pinned": {"/run/x.pid": int(seconds * 100)}},
                         "affinity_applied": cpus or [0]},
            "knobs": {"read_ahead_kb": {"role": "knob_read_ahead", "intended": "0", "actual": "0",
                                        "seconds": seconds}}}


def _side(tmp_path, spec, records) -> Side:
    return Side(Campaign("a", tmp_path), pd.DataFrame(), ["read_ahead_kb"], spec, {"h1": {"kernel": "6.1"}},
                records)


def test_before_run_timings_outputs_and_pinned_threads_are_not_the_measurement(tmp_path):
    a = _side(tmp_path, SPEC, [_record(1, 0.0007), _record(2, 0.0051)])
    b = _side(tmp_path, json.loads(json.dumps(SPEC)), [_record(1, 0.096), _record(2, 0.012, cpus=[1])])
    measurement, environment, _ = provenance(a, b, [("c1", "h1")])
    assert measurement == [] and environment == []


def test_an_edited_workload_variable_is_refused_with_one_line_per_changed_field(tmp_path):
    a = _side(tmp_path, SPEC, [_record(1, 0.0007), _record(2, 0.0051)])
    edited = json.loads(json.dumps(SPEC))
    edited["workload"]["vars"]["filename"] = "/b"
    b = _side(tmp_path, edited, [_record(1, 0.096, "/b"), _record(2, 0.012, "/b")])
    measurement, _, _ = provenance(a, b, [("c1", "h1")])
    assert [(d["scope"], d["what"], d["a"], d["b"]) for d in measurement] == [
        ("spec", "workload.vars.filename", "/a", "/b"),
        ("cell", "workload.argv.4", "--filename=/a", "--filename=/b"),
    ]


def test_a_knobs_changed_actual_state_is_an_environment_line_of_its_own(tmp_path):
    a = _side(tmp_path, SPEC, [_record(1, 0.0007)])
    other = _record(1, 0.0007)
    other["knobs"]["read_ahead_kb"]["actual"] = "128"  # the device would not take 0
    measurement, environment, _ = provenance(a, _side(tmp_path, SPEC, [other]), [("c1", "h1")])
    assert measurement == [] and [(d["scope"], d["cell_id"], d["what"], d["a"], d["b"]) for d in environment] == [
        ("cell", "c1", "knobs.read_ahead_kb.actual", "0", "128")]


def _campaign_dir(path, cid, filename, seconds):
    """A campaign directory as collect leaves it: plan.csv, runs.csv, records, spec.json, facts."""
    from benchmatrix.results.records import write_record

    spec = json.loads(json.dumps(SPEC))
    spec["workload"]["vars"]["filename"] = filename
    path.mkdir(parents=True)
    (path / "campaign.json").write_text(json.dumps({"id": cid, "created_at": "2026-01-01T00:00:00+00:00"}))
    (path / "spec.json").write_text(json.dumps(spec))
    (path / "hosts" / "h1").mkdir(parents=True)
    (path / "hosts" / "h1" / "facts.json").write_text(json.dumps({"kernel": "6.1"}))
    plan = ["seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,read_ahead_kb"]
    rows = []
    for cell, level in (("c1", 0), ("c2", 4096)):
        for i in range(1, 4):
            plan.append(f"{len(plan)},h1,h1-{cell}-r{i},{cell},{i},false,false,1,b1,1,{level}")
            rec = _record(i, seconds * i, filename, cell=cell)
            rec["metrics"] = {"read_bw_kib": {"value": 1000.0 + i, "unit": "KiB/s"}}
            write_record(path, rec)
            rows.append({"run_id": rec["run_id"], "cell_id": cell, "host": "h1", "status": "ok", "warmup": False,
                         "control": False, "attempt": 1, "read_ahead_kb": level, "read_bw_kib": 1000.0 + i})
    (path / "plan.csv").write_text("\n".join(plan) + "\n")
    pd.DataFrame(rows).to_csv(path / "runs.csv", index=False)
    return path


def test_a_refusal_prints_and_shows_short_field_level_lines_not_json(tmp_path, monkeypatch, capsys):
    from benchmatrix import cli

    a = _campaign_dir(tmp_path / "a", "aaa000000001", "/a", 0.0007)
    b = _campaign_dir(tmp_path / "b", "bbb000000001", "/b", 0.09)
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    assert cli.main(["compare", str(a), str(b), "--out", str(tmp_path / "out")]) == 3
    out = capsys.readouterr().out
    assert "  spec: workload.vars.filename: /a → /b\n" in out, out
    # The same difference in both cells is one line.
    assert "  cells c1, c2 on h1: workload.argv.4: --filename=/a → --filename=/b\n" in out, out
    assert "{" not in out and "seconds" not in out and len(out) < 1000, out
    # More runs decide nothing between campaigns that measured otherwise: no gate advice.
    assert "--until-decided" not in out, out
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "| spec | workload.vars.filename | `/a` | `/b` |" in md and "{" not in md.split("## ")[0], md
    html = (tmp_path / "out" / "compare.html").read_text()
    assert "<td>cells c1, c2 on h1</td><td>workload.argv.4</td>" in html and "seconds" not in html
    # The same records, timings aside, with the same filename: comparable.
    c = _campaign_dir(tmp_path / "c", "ccc000000001", "/a", 0.05)
    assert cli.main(["compare", str(a), str(c), "--out", str(tmp_path / "out2")]) in (0, 1)
    out = capsys.readouterr().out
    assert "not comparable" not in out, out
