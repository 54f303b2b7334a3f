"""Export: the long table (runs_long.parquet) and bmx export's formats.

Fast unit tests on a synthetic runs.csv and summary.csv; one slow end-to-end suite
that runs a tiny real campaign (workload_command, real Snakemake and batch runner, the
fake Ansible port: tests/fake_ansible.py) and reads
its exports with pyarrow; pyperf itself reads the exports of two synthetic campaigns
(tests/campaign_factory.py).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pyperf
import pytest

from benchmatrix import cli
from benchmatrix.campaigns.export import (
    SCHEMA_VERSION,
    export,
    long_columns,
    long_table,
    parquet_bytes,
    pyperf_mapping,
    to_bmf,
    to_pyperf,
    write_long_table,
)
from benchmatrix.errors import BenchmatrixError

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "config" / "experiments" / "quickstart.yaml")

RUNS_CSV = """\
seq,host,run_id,cell_id,replicate,warmup,control,visit,batch,attempt,status,reason,started_at,ended_at,duration_s,bs,depth,read_iops,read_clat_p99_us,tps
1,h1,r1,c1,0,true,false,1,b1,1,ok,,2026-01-01T00:00:00+00:00,2026-01-01T00:00:01+00:00,1,4k,1,100,50,
2,h1,r2,c1,1,false,false,1,b1,1,ok,,2026-01-01T00:00:01+00:00,2026-01-01T00:00:02+00:00,1,4k,1,110,40,
3,h1,r3,c1,2,false,false,1,b1,1,ok,,2026-01-01T00:00:02+00:00,2026-01-01T00:00:03+00:00,1,4k,1,90,60,
4,h1,r4,c2,1,false,false,2,b2,1,failed,boom,2026-01-01T00:00:03+00:00,,,64k,auto,,,
5,h1,r4,c2,1,false,false,2,b3,2,ok,,2026-01-01T00:00:04+00:00,2026-01-01T00:00:05+00:00,1,64k,auto,200,0,
6,h1,r5,c2,2,false,false,2,b3,1,ok,,2026-01-01T00:00:05+00:00,2026-01-01T00:00:06+00:00,1,64k,auto,210,30,
"""
UNITS = {"read_iops": "IO/s", "read_clat_p99_us": "µs", "tps": "tx/s"}
FACTORS = ["bs", "depth"]


def synthetic_runs() -> pd.DataFrame:
    return pd.read_csv(io.StringIO(RUNS_CSV))


# ---------------------------------------------------------------- long table

def test_long_table_has_one_row_per_attempt_and_metric_with_its_unit_and_direction():
    table = long_table(synthetic_runs(), FACTORS, UNITS, experiment="exp", campaign="c0ffee")
    assert list(table.columns) == long_columns(FACTORS)
    assert list(table.columns[:7]) == ["schema_version", "experiment", "campaign", "run_id", "cell_id", "bs", "depth"]
    # 5 ok attempts x 2 metrics (tps has no value anywhere) + 1 empty row for the failed attempt.
    assert len(table) == 11
    assert (table["schema_version"] == SCHEMA_VERSION).all()
    assert set(table["experiment"]) == {"exp"} and set(table["campaign"]) == {"c0ffee"}
    r2 = table[table["run_id"] == "r2"].set_index("metric")
    assert r2.loc["read_iops", "value"] == 110 and r2.loc["read_iops", "unit"] == "IO/s"
    assert r2.loc["read_iops", "direction"] == "higher"
    assert r2.loc["read_clat_p99_us", "direction"] == "lower" and r2.loc["read_clat_p99_us", "unit"] == "µs"
    failed = table[(table["run_id"] == "r4") & (table["attempt"] == 1)]
    assert len(failed) == 1 and failed["status"].iloc[0] == "failed"
    assert pd.isna(failed["metric"].iloc[0]) and pd.isna(failed["value"].iloc[0])
    # Warm-up and control flags are booleans, ids integers, a zero a value like any other.
    assert table.loc[table["run_id"] == "r1", "warmup"].all() and not table["control"].any()
    assert table.loc[(table["run_id"] == "r4") & (table["metric"] == "read_clat_p99_us"), "value"].iloc[0] == 0
    assert str(table["attempt"].dtype).lower().startswith("int")
    assert table["started_at"].dt.tz is not None


def test_declared_directions_win_and_unknown_ones_stay_empty():
    runs = synthetic_runs()
    table = long_table(runs, FACTORS, {"tps": "tx/s", "read_iops": "IO/s"},
                       {"read_iops": {"better": "lower"}})
    assert set(table.loc[table["metric"] == "read_iops", "direction"]) == {"lower"}
    runs.loc[0, "tps"] = 5.0
    table = long_table(runs, FACTORS, {"tps": "tx/s"})
    assert table.loc[table["metric"] == "tps", "direction"].iloc[0] == ""


def test_parquet_round_trip_keeps_types_and_carries_the_schema_version():
    table = long_table(synthetic_runs(), FACTORS, UNITS, experiment="exp", campaign="c0ffee")
    arrow = pq.read_table(pa.BufferReader(parquet_bytes(table, FACTORS, "exp", "c0ffee")))
    meta = json.loads(arrow.schema.metadata[b"benchmatrix"])
    assert meta == {"schema_version": SCHEMA_VERSION, "experiment": "exp", "campaign": "c0ffee",
                    "factors": FACTORS, "reference": "docs/export.md"}
    assert pa.types.is_floating(arrow.schema.field("value").type)
    assert pa.types.is_boolean(arrow.schema.field("warmup").type)
    assert pa.types.is_timestamp(arrow.schema.field("started_at").type)
    # A factor mixing numbers and words is text; a numeric one stays numeric.
    assert pa.types.is_string(arrow.schema.field("depth").type) or pa.types.is_large_string(
        arrow.schema.field("depth").type)
    back = arrow.to_pandas()
    assert back["value"].tolist()[:4] == table["value"].tolist()[:4]


@pytest.mark.parametrize("chunk", [1, 2, 4, 100_000])
def test_the_long_table_written_in_row_groups_reads_back_as_the_whole_table(tmp_path, chunk):
    """collect writes runs_long.parquet a slice of attempts at a time (constant memory
    per run); the file is the same table whatever the slice: types, rows, metadata.
    depth is a number in the first attempts and a word later: its type comes from every
    attempt, not from each slice."""
    runs = synthetic_runs()
    path = write_long_table(tmp_path, runs, FACTORS, UNITS, None, "exp", chunk=chunk)
    got = pq.read_table(path)
    want = pq.read_table(pa.BufferReader(parquet_bytes(long_table(runs, FACTORS, UNITS, experiment="exp"),
                                                       FACTORS, "exp")))
    assert got.schema.remove_metadata() == want.schema.remove_metadata()
    assert got.schema.metadata[b"benchmatrix"] == want.schema.metadata[b"benchmatrix"]
    pd.testing.assert_frame_equal(got.to_pandas(), want.to_pandas())
    assert pq.ParquetFile(path).num_row_groups == -(-len(runs) // chunk)


def test_factor_types_are_the_same_from_records_and_from_runs_csv():
    # collect passes Python objects from the records; bmx export reads runs.csv.
    parsed = synthetic_runs()[synthetic_runs()["run_id"] != "r4"]
    objects = parsed.astype(object).assign(depth=[1, 1, 1, 8])
    parsed = parsed.assign(depth=[1, 1, 1, 8])
    a = pq.read_table(pa.BufferReader(parquet_bytes(long_table(objects, FACTORS, UNITS), FACTORS)))
    b = pq.read_table(pa.BufferReader(parquet_bytes(long_table(parsed, FACTORS, UNITS), FACTORS)))
    assert pa.types.is_integer(a.schema.field("depth").type)
    assert a.schema.remove_metadata() == b.schema.remove_metadata()


def test_a_factor_named_like_a_long_table_column_is_refused():
    with pytest.raises(BenchmatrixError, match="factor.s. value share a name with a long-table column"):
        long_table(synthetic_runs().rename(columns={"bs": "value"}), ["value", "depth"], UNITS)


def test_long_table_column_names_are_reserved_factor_names(tmp_path, capsys):
    text = Path(QUICKSTART).read_text().replace("  rw: [randread, read]", "  value: [randread, read]")
    spec = tmp_path / "q.yaml"
    spec.write_text(text.replace('rw: "{{ rw }}"', 'rw: "{{ value }}"'))
    assert cli.main(["validate", str(spec)]) == 2
    assert "factor name 'value' is reserved" in capsys.readouterr().err


# ---------------------------------------------------------------- formats

def test_bmf_gives_mean_and_ci_bounds_per_cell_label_and_metric():
    summary = pd.DataFrame({
        "cell_id": ["c1", "c1", "c2"], "bs": ["4k", "4k", "64k"], "depth": [1.0, 1.0, 8.0],
        "metric": ["read_iops", "read_clat_p99_us", "read_iops"], "unit": ["IO/s", "µs", "IO/s"],
        "mean": [100.0, 50.0, 200.0], "ci_low": [90.0, 40.0, float("nan")], "ci_high": [110.0, 60.0, float("nan")]})
    bmf = to_bmf(summary, FACTORS)
    assert bmf == {
        "bs=4k depth=1": {"read_iops": {"value": 100.0, "lower_value": 90.0, "upper_value": 110.0},
                          "read_clat_p99_us": {"value": 50.0, "lower_value": 40.0, "upper_value": 60.0}},
        "bs=64k depth=8": {"read_iops": {"value": 200.0}},  # n = 1: no interval, no bounds
    }


@pytest.mark.parametrize("metric, unit, direction, expected", [
    ("read_iops", "IO/s", "higher", ("1/read_iops", "second", None)),
    ("score", "points", "higher", ("1/score", "integer", None)),
    ("read_clat_p99_us", "µs", "lower", ("read_clat_p99_us", "second", 1e-6)),
    ("p99_ms", "ms", "lower", ("p99_ms", "second", 1e-3)),
    ("errors", "count", "lower", ("errors", "integer", 1.0)),
    ("jobs", "count", "", ("jobs", "integer", 1.0)),
])
def test_pyperf_mapping_makes_smaller_mean_better(metric, unit, direction, expected):
    assert pyperf_mapping(metric, unit, direction) == expected


def test_pyperf_json_is_read_by_pyperf_with_the_measured_runs_only():
    suite = to_pyperf(synthetic_runs(), FACTORS, UNITS, experiment="exp")
    loaded = pyperf.BenchmarkSuite.loads(json.dumps(suite))
    by_name = {b.get_name(): b for b in loaded.get_benchmarks()}
    # The warm-up (r1) and the failed attempt are left out; r4's rerun counts; a
    # latency of 0 cannot be a pyperf value and is left out.
    assert sorted(by_name) == ["bs=4k depth=1 :: 1/read_iops", "bs=4k depth=1 :: read_clat_p99_us",
                               "bs=64k depth=auto :: 1/read_iops", "bs=64k depth=auto :: read_clat_p99_us"]
    assert sorted(by_name["bs=4k depth=1 :: 1/read_iops"].get_values()) == pytest.approx([1 / 110, 1 / 90])
    assert by_name["bs=4k depth=1 :: read_clat_p99_us"].get_unit() == "second"
    assert sorted(by_name["bs=4k depth=1 :: read_clat_p99_us"].get_values()) == pytest.approx([40e-6, 60e-6])
    assert by_name["bs=64k depth=auto :: read_clat_p99_us"].get_values() == pytest.approx((30e-6,))
    assert by_name["bs=64k depth=auto :: 1/read_iops"].get_metadata()["benchmatrix_transform"] == "reciprocal"


def test_pyperf_runs_carry_their_duration_date_and_host():
    """Issue 24: built through pyperf's classes, each run says when it ran, for how long
    and where, so `pyperf show`/`stats` give the real total duration and dates."""
    runs = synthetic_runs()
    runs.loc[runs["run_id"] == "r3", "duration_s"] = 2.5
    suite = pyperf.BenchmarkSuite.loads(json.dumps(to_pyperf(runs, FACTORS, UNITS, experiment="exp")))
    bench = suite.get_benchmark("bs=4k depth=1 :: 1/read_iops")
    assert bench.get_total_duration() == pytest.approx(1 + 2.5)
    first, last = bench.get_dates()
    # pyperf's span: the first run's start to the last run's end, whole seconds (r3: 00:00:02 + ceil(2.5)).
    assert first.isoformat().startswith("2026-01-01T00:00:01") and last.isoformat().startswith("2026-01-01T00:00:05")
    assert all(r.get_metadata()["hostname"] == "h1" for r in bench.get_runs())


def test_pyperf_without_any_positive_measured_value_is_an_error():
    runs = synthetic_runs().assign(read_iops=float("nan"), read_clat_p99_us=0.0)
    with pytest.raises(BenchmatrixError, match="no measured run has a positive value"):
        to_pyperf(runs, FACTORS, UNITS, experiment="exp")


# ---------------------------------------------------------------- errors

def test_export_before_any_run_says_to_run_first(tmp_path):
    with pytest.raises(BenchmatrixError, match=r"runs.csv: no runs yet; run 'bmx run .*quickstart.yaml' first"):
        export(QUICKSTART, tmp_path, "csv")


def test_bmx_export_errors_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    assert cli.main(["export", QUICKSTART, "--format", "xml"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown export format 'xml'; use one of bmf, pyperf, csv, parquet" in err
    assert cli.main(["export", QUICKSTART, "--format", "parquet"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no runs yet; run 'bmx run" in err


# ---------------------------------------------------------------- end to end

SPEC = """\
name: {name}
description: export test, {work}x the work per run
inventory: config/inventory/test.yml
factors:
  loops: [0, 200000, 400000]          # 0: the command fails (exit 3), a failed cell
workload:
  role: workload_command
  vars:
    argv: [python3, -c, "import sys, time; sys.exit(3) if {{{{ loops }}}} == 0 else None;
           t = time.perf_counter(); sum(range({{{{ loops }}}} * {work}));
           d = time.perf_counter() - t; print('elapsed_ms=%.6f' % (d * 1e3));
           print('rate=%.3f' % ({{{{ loops }}}} / d))"]
  metrics:
    elapsed_ms: {{regex: 'elapsed_ms=(?P<value>[0-9.]+)', unit: ms, better: lower}}
    rate: {{regex: 'rate=(?P<value>[0-9.]+)', unit: ops/s, better: higher}}
  timeout: 60
replicates: 3
warmup: 0
order: {{strategy: random, seed: 5}}
"""


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """One real campaign, ``export_a``: what a run writes (the long table, the host's
    environment in every record); its cell ``loops=0`` fails."""
    from conftest import copy_project
    from fake_ansible import use_fake_port

    project = use_fake_port(copy_project(tmp_path_factory.mktemp("export")))
    specs = {"export_a": project.write_spec("export_a", SPEC.format(name="export_a", work=1))}
    res = project.bmx("run", str(specs["export_a"]), "--cores", "1")
    assert res.returncode == 1 and "3 failed" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    return project, specs


@pytest.mark.slow
def test_run_writes_the_long_table_that_export_parquet_and_csv_reproduce(campaigns):
    project, specs = campaigns
    exp = project.exp("export_a")
    stored = pq.read_table(exp / "runs_long.parquet")
    meta = json.loads(stored.schema.metadata[b"benchmatrix"])
    campaign_id = json.loads((exp / "campaign.json").read_text())["id"]
    assert meta["schema_version"] == SCHEMA_VERSION and meta["campaign"] == campaign_id
    assert meta["factors"] == ["loops"]
    table = stored.to_pandas()
    runs = pd.read_csv(exp / "runs.csv")
    # 6 ok runs x 2 metrics, and one row without a metric for each of the 3 failed runs.
    assert len(runs) == 9 and len(table) == 15
    failed = table[table["status"] == "failed"]
    assert len(failed) == 3 and set(failed["loops"]) == {0}
    assert failed["metric"].isna().all() and failed["value"].isna().all()
    table_ok = table[table["status"] == "ok"]
    assert set(table_ok["metric"]) == {"elapsed_ms", "rate"}
    assert dict(zip(table_ok["metric"], table_ok["unit"])) == {"elapsed_ms": "ms", "rate": "ops/s"}
    assert dict(zip(table_ok["metric"], table_ok["direction"])) == {"elapsed_ms": "lower", "rate": "higher"}
    assert set(table["loops"]) == {0, 200000, 400000} and len(table_ok) == 12
    rate = table[table["metric"] == "rate"].set_index("run_id")["value"]
    assert rate.sort_index().tolist() == runs.set_index("run_id")["rate"].dropna().sort_index().tolist()

    out = project.root / "a.parquet"
    res = project.bmx("export", str(specs["export_a"]), "--format", "parquet", "--out", str(out))
    assert res.returncode == 0 and f"export: {out}" in res.stdout, res.stderr
    exported = pq.read_table(out)
    assert exported.schema.remove_metadata() == stored.schema.remove_metadata()
    pd.testing.assert_frame_equal(exported.to_pandas(), table)

    res = project.bmx("export", str(specs["export_a"]), "--format", "csv")
    assert res.returncode == 0, res.stderr
    csv = pd.read_csv(exp / "runs_long.csv")
    assert list(csv.columns) == long_columns(["loops"]) and len(csv) == 15
    assert csv["value"].tolist() == pytest.approx(table["value"].tolist(), nan_ok=True)


@pytest.mark.slow
def test_export_bmf_reports_summary_means_and_cis(campaigns):
    project, specs = campaigns
    res = project.bmx("export", str(specs["export_a"]), "--format", "bmf", "--out", "-")
    assert res.returncode == 0, res.stderr
    bmf = json.loads(res.stdout)
    summary = pd.read_csv(project.exp("export_a") / "summary.csv")
    assert sorted(bmf) == ["loops=200000", "loops=400000"]
    for row in summary.itertuples():
        measure = bmf[f"loops={row.loops}"][row.metric]
        assert measure == pytest.approx({"value": row.mean, "lower_value": row.ci_low, "upper_value": row.ci_high})
        assert measure["lower_value"] < measure["value"] < measure["upper_value"]


def test_pyperf_compare_to_reads_two_campaigns_exports(tmp_path, monkeypatch, capsys):
    """Two campaigns of the same cells, ``export_b`` doing 6x the work, as synthetic
    results (tests/campaign_factory.py; what reads results needs no real run); the
    cell ``loops=0`` fails in both."""
    from campaign_factory import Campaign, make_experiment

    from benchmatrix import cli

    root = tmp_path / "project"
    specs = {}
    for name, work in (("export_a", 1), ("export_b", 6)):
        def means(factors, metric, work=work):
            loops = int(factors["loops"])
            return {"elapsed_ms": 0.02 * work * loops / 1000, "rate": 5e7 / work}[metric]

        made = make_experiment(root, SPEC.format(name=name, work=work), name=name, seed=work, means=means,
                               campaigns=[Campaign(failed_cells=[{"loops": 0}])])
        specs[name] = made.spec_path
    monkeypatch.setenv("BMX_PROJECT_DIR", str(root))
    monkeypatch.chdir(root)
    files = []
    for name in ("export_a", "export_b"):
        out = root / f"{name}.json"
        assert cli.main(["export", str(specs[name]), "--format", "pyperf", "--out", str(out)]) == 0, \
            capsys.readouterr().err
        files.append(str(out))
    res = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", *files], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    # The cells are matched by name across the campaigns; 6x the work is slower both
    # as a time (elapsed_ms) and as a reciprocal rate (1/rate).
    for cell in ("loops=200000", "loops=400000"):
        for bench in ("elapsed_ms", "1/rate"):
            line = next(ln for ln in res.stdout.splitlines() if ln.startswith(f"{cell} :: {bench}:"))
            assert "slower" in line, res.stdout


@pytest.mark.slow
def test_the_host_environment_is_recorded_and_in_the_long_table(campaigns):
    """Issue 24: each record holds the host's noise settings and the load around the run;
    runs.csv and the long table carry them as env_* columns, to join with history steps."""
    project, _ = campaigns
    exp = project.exp("export_a")
    rec = json.loads(next(exp.glob("runs/*/1/record.json")).read_text())
    env = rec["host_env"]
    assert env["cpus"] >= 1 and env["cmdline"] and env["load_before"] is not None and env["load_after"] is not None
    table = pq.read_table(exp / "runs_long.parquet").to_pandas()
    ok = table[table["status"] == "ok"]
    assert ok["env_cmdline"].notna().all() and ok["env_load_before"].notna().all()
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.is_file():
        mode = thp.read_text().split("[")[1].split("]")[0]
        assert set(ok["env_thp"]) == {mode}
    assert str(table["env_load_before"].dtype) == "float64" and str(table["env_numa_nodes"].dtype) == "Int64"
    runs = pd.read_csv(exp / "runs.csv")
    assert {"env_governor", "env_turbo", "env_load_before", "env_load_after"} <= set(runs.columns)
