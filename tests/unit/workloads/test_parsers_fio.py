"""Tests of the fio JSON parser against real fio 3.33 output (tests/fixtures/fio)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmatrix.errors import ParseError
from benchmatrix.workloads import FIO_METRICS, PARSERS, Parsed, parse_fio

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fio"
US = "\u00b5s"

READ_METRICS = {
    "read_iops",
    "read_bw_kib",
    "read_io_kib",
    "read_clat_mean_us",
    "read_clat_p50_us",
    "read_clat_p95_us",
    "read_clat_p99_us",
    "read_clat_p99_9_us",
    "read_clat_max_us",
    "read_runtime_ms",
}
WRITE_METRICS = {name.replace("read_", "write_", 1) for name in READ_METRICS}

# Metric suffix -> key of clat_ns.percentile in fio's JSON.
PERCENTILE_KEYS = {
    "p50": "50.000000",
    "p95": "95.000000",
    "p99": "99.000000",
    "p99_9": "99.900000",
}


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def reports(name: str) -> list[dict[str, Any]]:
    """Every JSON report in a fixture, decoded independently of the parser."""
    raw = text(name)
    decoder = json.JSONDecoder()
    found = []
    pos = raw.index("{")
    while pos >= 0:
        obj, end = decoder.raw_decode(raw, pos)
        found.append(obj)
        pos = raw.find("{", end)
    return found


def report(name: str) -> dict[str, Any]:
    return reports(name)[-1]


def json_only(name: str) -> str:
    """The fixture with the non-JSON lines fio printed around the report removed."""
    raw = text(name)
    return raw[raw.index("\n{") + 1 :]


def expect_direction(metrics: dict[str, tuple[float, str]], d: str, section: dict[str, Any]) -> None:
    """Every metric of direction ``d`` equals the value derived from fio's section."""
    clat = section["clat_ns"]
    assert metrics[f"{d}_iops"] == (section["iops"], "IO/s")
    assert metrics[f"{d}_bw_kib"] == (section["bw_bytes"] / 1024, "KiB/s")
    assert metrics[f"{d}_io_kib"] == (section["io_bytes"] / 1024, "KiB")
    assert metrics[f"{d}_clat_mean_us"] == (clat["mean"] / 1000, US)
    for suffix, key in PERCENTILE_KEYS.items():
        assert metrics[f"{d}_clat_{suffix}_us"] == (clat["percentile"][key] / 1000, US)
    assert metrics[f"{d}_clat_max_us"] == (clat["max"] / 1000, US)
    assert metrics[f"{d}_runtime_ms"] == (section["runtime"], "ms")


# --- single jobs ----------------------------------------------------------------


def test_randread_libaio_values_match_fixture():
    job = report("randread_4k_libaio.json")["jobs"][0]
    parsed = parse_fio(text("randread_4k_libaio.json"))

    assert isinstance(parsed, Parsed)
    expect_direction(parsed.metrics, "read", job["read"])
    assert parsed.metrics["read_iops"][0] == pytest.approx(52216.783217)
    assert parsed.metrics["read_clat_p99_us"][0] == pytest.approx(104.96)
    assert list(parsed.jobs) == ["randread-4k"]
    assert parsed.jobs["randread-4k"] == parsed.metrics


def test_bandwidth_and_volume_agree_with_fio_rounded_fields():
    section = report("randread_4k_libaio.json")["jobs"][0]["read"]
    metrics = parse_fio(text("randread_4k_libaio.json")).metrics

    # fio's "bw" and "io_kbytes" are the same quantities truncated to integers.
    assert int(metrics["read_bw_kib"][0]) == section["bw"]
    assert metrics["read_io_kib"][0] == section["io_kbytes"]


@pytest.mark.parametrize("name", ["randread_4k_libaio.json", "read_64k_psync.json"])
def test_read_only_job_has_exactly_the_read_metrics(name):
    parsed = parse_fio(text(name))

    assert set(parsed.metrics) == READ_METRICS
    assert not any(key.startswith("write_") for job in parsed.jobs.values() for key in job)


def test_psync_buffered_read_values_match_fixture():
    job = report("read_64k_psync.json")["jobs"][0]
    parsed = parse_fio(text("read_64k_psync.json"))

    expect_direction(parsed.metrics, "read", job["read"])
    assert list(parsed.jobs) == ["seqread-64k"]


def test_write_only_job_has_exactly_the_write_metrics():
    parsed = parse_fio(text("numjobs2_same_name.json"))

    assert set(parsed.metrics) == WRITE_METRICS


def test_randrw_has_both_directions_with_their_own_values():
    job = report("randrw_4k_mix70.json")["jobs"][0]
    parsed = parse_fio(text("randrw_4k_mix70.json"))

    assert set(parsed.metrics) == READ_METRICS | WRITE_METRICS
    expect_direction(parsed.metrics, "read", job["read"])
    expect_direction(parsed.metrics, "write", job["write"])
    assert parsed.metrics["read_iops"][0] > parsed.metrics["write_iops"][0]


# --- several jobs ---------------------------------------------------------------


def test_two_jobs_are_reported_per_job_and_aggregated():
    a, b = report("two_jobs.json")["jobs"]
    parsed = parse_fio(text("two_jobs.json"))
    agg = parsed.metrics

    assert list(parsed.jobs) == ["a", "b"]
    expect_direction(parsed.jobs["a"], "read", a["read"])
    expect_direction(parsed.jobs["b"], "read", b["read"])

    ra, rb = a["read"], b["read"]
    assert agg["read_iops"] == (pytest.approx(ra["iops"] + rb["iops"]), "IO/s")
    assert agg["read_bw_kib"][0] == pytest.approx((ra["bw_bytes"] + rb["bw_bytes"]) / 1024)
    assert agg["read_io_kib"][0] == pytest.approx((ra["io_bytes"] + rb["io_bytes"]) / 1024)
    weighted = (ra["clat_ns"]["mean"] * ra["total_ios"] + rb["clat_ns"]["mean"] * rb["total_ios"]) / (
        ra["total_ios"] + rb["total_ios"]
    )
    assert agg["read_clat_mean_us"][0] == pytest.approx(weighted / 1000)
    assert agg["read_runtime_ms"] == (max(ra["runtime"], rb["runtime"]), "ms")
    for suffix, key in PERCENTILE_KEYS.items():
        expected = max(ra["clat_ns"]["percentile"][key], rb["clat_ns"]["percentile"][key]) / 1000
        assert agg[f"read_clat_{suffix}_us"] == (expected, US)
    assert agg["read_clat_max_us"] == (max(ra["clat_ns"]["max"], rb["clat_ns"]["max"]) / 1000, US)


def test_two_jobs_fixture_takes_maxima_from_different_jobs():
    # Guards the aggregation test above against passing by taking the first job's value.
    a, b = report("two_jobs.json")["jobs"]
    agg = parse_fio(text("two_jobs.json")).metrics

    assert agg["read_clat_p99_us"][0] == b["read"]["clat_ns"]["percentile"]["99.000000"] / 1000
    assert agg["read_clat_p99_us"][0] > a["read"]["clat_ns"]["percentile"]["99.000000"] / 1000
    assert agg["read_clat_max_us"][0] == a["read"]["clat_ns"]["max"] / 1000
    assert agg["read_clat_max_us"][0] > b["read"]["clat_ns"]["max"] / 1000


def test_aggregate_does_not_depend_on_job_order():
    data = report("two_jobs.json")
    forward = parse_fio(json.dumps(data)).metrics
    data["jobs"].reverse()

    backward = parse_fio(json.dumps(data)).metrics

    assert backward == forward


def test_duplicate_job_names_are_made_unique_in_order():
    first, second = report("numjobs2_same_name.json")["jobs"]
    parsed = parse_fio(text("numjobs2_same_name.json"))

    assert list(parsed.jobs) == ["dup", "dup#2"]
    assert parsed.jobs["dup"]["write_iops"][0] == first["write"]["iops"]
    assert parsed.jobs["dup#2"]["write_iops"][0] == second["write"]["iops"]
    assert [j["name"] for j in parsed.extra["jobs"]] == ["dup", "dup#2"]
    assert parsed.extra["jobs"][1]["jobname"] == "dup"


def test_unique_name_skips_a_name_already_taken():
    data = report("numjobs2_same_name.json")
    data["jobs"] = [dict(data["jobs"][0], jobname=n) for n in ("x", "x#2", "x")]

    parsed = parse_fio(json.dumps(data))

    assert list(parsed.jobs) == ["x", "x#2", "x#3"]


def test_jobs_in_different_directions_each_keep_their_own_metrics():
    reader = report("randread_4k_libaio.json")["jobs"][0]
    writer = report("numjobs2_same_name.json")["jobs"][0]
    data = report("randread_4k_libaio.json")
    data["jobs"] = [reader, writer]

    parsed = parse_fio(json.dumps(data))

    assert set(parsed.jobs["randread-4k"]) == READ_METRICS
    assert set(parsed.jobs["dup"]) == WRITE_METRICS
    assert set(parsed.metrics) == READ_METRICS | WRITE_METRICS
    assert parsed.metrics["write_iops"][0] == writer["write"]["iops"]
    assert parsed.metrics["read_iops"][0] == reader["read"]["iops"]


# --- missing values -------------------------------------------------------------


def test_missing_percentile_is_omitted():
    data = report("randread_4k_libaio.json")
    del data["jobs"][0]["read"]["clat_ns"]["percentile"]["99.900000"]

    parsed = parse_fio(json.dumps(data))

    assert "read_clat_p99_9_us" not in parsed.metrics
    assert "read_clat_p99_9_us" not in parsed.jobs["randread-4k"]
    assert "read_clat_p99_us" in parsed.metrics


def test_percentile_missing_in_one_job_is_omitted_from_aggregate_only():
    data = report("two_jobs.json")
    del data["jobs"][0]["read"]["clat_ns"]["percentile"]["99.900000"]

    parsed = parse_fio(json.dumps(data))

    assert "read_clat_p99_9_us" not in parsed.metrics
    assert "read_clat_p99_9_us" not in parsed.jobs["a"]
    assert "read_clat_p99_9_us" in parsed.jobs["b"]


def test_mean_missing_in_one_job_is_omitted_from_aggregate_only():
    data = report("two_jobs.json")
    data["jobs"][0]["read"]["clat_ns"]["mean"] = None

    parsed = parse_fio(json.dumps(data))

    assert "read_clat_mean_us" not in parsed.metrics
    assert "read_clat_mean_us" not in parsed.jobs["a"]
    assert parsed.jobs["b"]["read_clat_mean_us"] == (data["jobs"][1]["read"]["clat_ns"]["mean"] / 1000, US)
    assert "read_clat_max_us" in parsed.metrics


def test_no_latency_metrics_when_fio_recorded_no_samples():
    data = report("randread_4k_libaio.json")
    clat = data["jobs"][0]["read"]["clat_ns"]
    data["jobs"][0]["read"]["clat_ns"] = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    assert clat["N"] > 0

    parsed = parse_fio(json.dumps(data))

    assert set(parsed.metrics) == {"read_iops", "read_bw_kib", "read_io_kib", "read_runtime_ms"}


def test_bare_nan_from_fio_is_read_as_missing():
    raw = text("randread_4k_libaio.json")
    raw = raw.replace('"bw_agg" : 97.443766', '"bw_agg" : -nan')
    raw = raw.replace('"99.000000" : 104960', '"99.000000" : nan')
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)

    parsed = parse_fio(raw)

    assert "read_clat_p99_us" not in parsed.metrics
    assert parsed.metrics["read_clat_p95_us"] == (94.72, US)
    assert parsed.metrics["read_iops"][0] == pytest.approx(52216.783217)


# --- text around the JSON -------------------------------------------------------


def test_note_printed_before_json_is_skipped_and_kept():
    raw = text("note_preamble.json")
    assert raw.startswith("note: both iodepth")
    job = report("note_preamble.json")["jobs"][0]

    parsed = parse_fio(raw)

    expect_direction(parsed.metrics, "read", job["read"])
    assert parsed.extra["notes"] == [raw.splitlines()[0]]


def test_text_after_json_is_ignored_and_kept():
    job = report("randread_4k_libaio.json")["jobs"][0]
    raw = text("randread_4k_libaio.json") + "fio: file hash not empty on exit\n"

    parsed = parse_fio(raw)

    assert parsed.metrics["read_iops"][0] == job["read"]["iops"]
    assert parsed.extra["notes"] == ["fio: file hash not empty on exit"]


def test_status_interval_output_uses_the_final_report():
    interim_first, _, final = reports("status_interval.json")
    parsed = parse_fio(text("status_interval.json"))

    expect_direction(parsed.metrics, "read", final["jobs"][0]["read"])
    assert parsed.metrics["read_io_kib"][0] > interim_first["jobs"][0]["read"]["io_bytes"] / 1024
    assert parsed.extra["interim_reports"] == 2


def test_bytes_input_is_decoded():
    parsed = parse_fio(text("randread_4k_libaio.json").encode())

    assert parsed.metrics["read_iops"][0] == pytest.approx(52216.783217)


# --- extra, registry, metric catalogue -------------------------------------------


def test_extra_holds_version_timestamp_and_job_timing():
    data = report("two_jobs.json")
    parsed = parse_fio(text("two_jobs.json"))

    assert parsed.extra["fio_version"] == "fio-3.33"
    assert parsed.extra["timestamp_ms"] == data["timestamp_ms"]
    runtimes = [job["job_runtime"] for job in data["jobs"]]
    # fio 3.33 reports no job start: both jobs of group 0 are placed to end at the
    # report's timestamp, each lasting its own runtime (an estimate, marked as such).
    group_start = data["timestamp_ms"] - max(runtimes)
    assert parsed.extra["jobs"] == [
        {"name": "a", "groupid": 0, "runtime_ms": runtimes[0],
         "start_est_ms": group_start, "end_est_ms": group_start + runtimes[0]},
        {"name": "b", "groupid": 0, "runtime_ms": runtimes[1],
         "start_est_ms": group_start, "end_est_ms": group_start + runtimes[1]},
    ]
    assert "notes" not in parsed.extra
    assert "interim_reports" not in parsed.extra
    json.dumps(parsed.extra)


def test_job_start_from_newer_fio_gives_start_and_end():
    data = report("randread_4k_libaio.json")
    data["jobs"][0]["job_start"] = 1_700_000_000_000

    parsed = parse_fio(json.dumps(data))

    timing = parsed.extra["jobs"][0]
    assert timing["start_ms"] == 1_700_000_000_000
    assert timing["end_ms"] == 1_700_000_000_000 + data["jobs"][0]["job_runtime"]


def test_registry_maps_fio_role_to_parser():
    assert PARSERS["workload_fio"] is parse_fio


def test_metric_catalogue_lists_every_name_with_its_unit():
    assert set(FIO_METRICS) == READ_METRICS | WRITE_METRICS
    assert FIO_METRICS["read_iops"] == "IO/s"
    assert FIO_METRICS["write_bw_kib"] == "KiB/s"
    assert FIO_METRICS["read_io_kib"] == "KiB"
    assert FIO_METRICS["write_clat_p99_9_us"] == "\u00b5s"
    assert FIO_METRICS["read_runtime_ms"] == "ms"


@pytest.mark.parametrize(
    "name",
    [
        "randread_4k_libaio.json",
        "read_64k_psync.json",
        "randrw_4k_mix70.json",
        "two_jobs.json",
        "numjobs2_same_name.json",
        "note_preamble.json",
        "status_interval.json",
    ],
)
def test_every_emitted_metric_is_catalogued_with_the_same_unit(name):
    parsed = parse_fio(text(name))

    for metrics in [parsed.metrics, *parsed.jobs.values()]:
        assert metrics
        for metric, (value, unit) in metrics.items():
            assert FIO_METRICS[metric] == unit
            assert isinstance(value, float)


# --- errors ---------------------------------------------------------------------


def parse_error(raw: Any) -> str:
    with pytest.raises(ParseError) as caught:
        parse_fio(raw)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("raw", [text("empty.json"), "", "  \n\t\n", None])
def test_empty_output(raw):
    assert parse_error(raw) == "fio printed no output"


def test_truncated_json():
    raw = text("truncated.json")
    assert 0 < len(raw) < len(text("randread_4k_libaio.json"))

    message = parse_error(raw)

    assert message.startswith("fio output is not valid JSON: ")
    assert "line " in message


def test_truncated_final_report_is_not_replaced_by_an_interim_one():
    raw = text("status_interval.json")
    assert parse_error(raw[: len(raw) - 200]).startswith("fio output is not valid JSON: ")


def test_invalid_json_error_counts_lines_of_the_whole_output():
    message = parse_error("warning one\nwarning two\n{\n  \"jobs\" : [,]\n}\n")

    assert message.startswith("fio output is not valid JSON: ")
    assert "(line 4, column 13)" in message


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"fio version" : "fio-3.33"}', "fio JSON has no 'jobs' list"),
        ('{"jobs" : {"jobname" : "a"}}', "fio JSON has no 'jobs' list"),
        ('{"jobs" : []}', "fio JSON has an empty 'jobs' list"),
    ],
)
def test_json_without_jobs(raw, fragment):
    assert parse_error(raw) == fragment


def test_failed_job_names_job_code_and_fio_description():
    message = parse_error(text("job_error_enotdir.json"))

    assert message == (
        "fio job 'broken' failed with error 20 "
        "(file:filesetup.c:455, func=fstat, error=Not a directory)"
    )


def test_failed_job_from_stdout_only_names_job_and_code():
    assert parse_error(json_only("job_error_enotdir.json")) == "fio job 'broken' failed with error 20"


def test_several_failed_jobs_are_counted():
    data = report("two_jobs.json")
    data["jobs"][0]["error"] = 5
    data["jobs"][1]["error"] = 28

    assert parse_error(json.dumps(data)) == "fio job 'a' failed with error 5; 1 more job(s) failed"


def test_tool_error_without_json_quotes_fio_message():
    assert parse_error(text("tool_error_bad_option.json")) == "fio printed no JSON: fio: failed parsing rw=bogus"


def test_tool_error_stdout_only_quotes_first_line():
    stdout_only = text("tool_error_bad_option.json").split("\n", 1)[1]
    assert not stdout_only.startswith("fio:")

    message = parse_error(stdout_only)

    assert message == "fio printed no JSON: valid values: read       Sequential read"


def test_tool_error_prefers_fio_error_line_over_earlier_text():
    stderr_line, stdout_part = text("tool_error_bad_option.json").split("\n", 1)

    message = parse_error(stdout_part + stderr_line + "\n")

    assert message == "fio printed no JSON: fio: failed parsing rw=bogus"


def test_tool_error_line_is_truncated_to_200_characters():
    message = parse_error("fio: " + "x" * 500 + "\nsecond line\n")

    assert message == "fio printed no JSON: fio: " + "x" * 195 + "..."


def test_non_text_input():
    assert parse_error(42) == "fio output must be text, got int"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d["jobs"].__setitem__(0, 7), "jobs[0] is not an object"),
        (lambda d: d["jobs"][0].pop("jobname"), "jobs[0] has no 'jobname'"),
        (lambda d: d["jobs"][0].__setitem__("error", "EIO"), "job 'randread-4k' has a non-integer 'error'"),
        (lambda d: d["jobs"][0].__setitem__("read", [1, 2]), "job 'randread-4k' read is not an object"),
        (lambda d: d["jobs"][0]["read"].pop("iops"), "job 'randread-4k' read.iops is missing"),
        (lambda d: d["jobs"][0]["read"].__setitem__("runtime", "1s"), "read.runtime is missing or not a number"),
        (lambda d: d["jobs"][0]["read"].__setitem__("total_ios", True), "read.total_ios is missing or not a number"),
        (lambda d: d["jobs"][0]["read"].pop("io_bytes") and d["jobs"][0]["read"].pop("io_kbytes"), "read.io_kbytes"),
        (lambda d: d["jobs"][0]["read"].__setitem__("clat_ns", "fast"), "read.clat_ns is not an object"),
        (lambda d: d["jobs"][0]["read"]["clat_ns"].__setitem__("mean", "x"), "read.clat_ns.mean is not a number"),
        (lambda d: d["jobs"][0]["read"]["clat_ns"].__setitem__("percentile", [1]), "percentile is not an object"),
        (
            lambda d: d["jobs"][0]["read"]["clat_ns"]["percentile"].__setitem__("99.000000", {}),
            "percentile.99.000000 is not a number",
        ),
    ],
)
def test_malformed_job_raises_parse_error(mutate, fragment):
    data = report("randread_4k_libaio.json")
    mutate(data)

    assert fragment in parse_error(json.dumps(data))


def test_unknown_percentile_keys_are_ignored():
    data = report("randread_4k_libaio.json")
    data["jobs"][0]["read"]["clat_ns"]["percentile"]["bogus"] = "x"

    assert parse_fio(json.dumps(data)).metrics["read_clat_p50_us"] == (66.048, US)


# --- job files: groups and the stonewall sanity check (the fio seed) ------------------


def run_dir_with_job_file(tmp_path: Path, name: str) -> Path:
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "job.fio").write_text((FIXTURES / name).read_text())
    return tmp_path


def test_seed_job_file_warns_that_both_jobs_ran_at_once(tmp_path):
    parsed = parse_fio(text("seed_stonewall_first.json"), {},
                       run_dir_with_job_file(tmp_path, "seed_stonewall_first.fio"))

    assert len(parsed.warnings) == 1
    warning = parsed.warnings[0]
    assert "'zufaelliglesen' sets stonewall, which has no effect on the first job" in warning
    assert "'zufaelliglesen' and 'sequentielllesen' ran at the same time" in warning
    # One group holding both jobs: its figures are their sum.
    assert list(parsed.groups) == ["0"]
    assert parsed.groups["0"]["read_iops"][0] == pytest.approx(
        sum(j["read"]["iops"] for j in report("seed_stonewall_first.json")["jobs"]))


def test_stonewall_on_each_job_is_quiet_and_reported_per_group(tmp_path):
    parsed = parse_fio(text("stonewall_each.json"), {}, run_dir_with_job_file(tmp_path, "stonewall_each.fio"))

    assert parsed.warnings == []
    assert list(parsed.groups) == ["0", "1", "2"]
    jobs = report("stonewall_each.json")["jobs"]
    assert parsed.groups["1"]["read_iops"][0] == jobs[1]["read"]["iops"]
    assert set(k.split("_")[0] for k in parsed.groups["2"]) == {"write"}
    # Estimated timing: one group after the other, ending at the report's timestamp.
    timing = parsed.extra["jobs"]
    assert timing[0]["end_est_ms"] <= timing[1]["start_est_ms"] <= timing[2]["start_est_ms"]
    assert timing[2]["end_est_ms"] == report("stonewall_each.json")["timestamp_ms"]


def test_new_group_without_stonewall_warns_of_parallel_groups(tmp_path):
    parsed = parse_fio(text("new_group_parallel.json"), {}, run_dir_with_job_file(tmp_path, "new_group_parallel.fio"))

    assert len(parsed.warnings) == 1
    assert "'writer' starts a new reporting group (new_group) without stonewall" in parsed.warnings[0]


def test_without_the_job_file_no_intent_is_guessed():
    assert parse_fio(text("seed_stonewall_first.json")).warnings == []


def test_job_file_intent_parser():
    from benchmatrix.workloads.fio import job_file_intent

    jobs = job_file_intent("; comment\n[global]\nnumjobs=2\n[a]\nwait_for_previous\n[b]\nstonewall=0\n"
                           "[global]\nstonewall\n[c]\nnew_group\n")
    assert [(j.name, j.stonewall, j.new_group, j.numjobs) for j in jobs] == [
        ("a", True, False, 2), ("b", False, False, 2), ("c", True, True, 2)]
    assert jobs[0].stonewall_in_section and not jobs[2].stonewall_in_section


def test_mostly_walled_job_file_flags_the_job_without_stonewall():
    from benchmatrix.workloads.fio import concurrency_warnings, job_file_intent

    intent = job_file_intent("[a]\n[b]\nstonewall\n[c]\nstonewall\n[d]\n")
    warnings = concurrency_warnings(intent, [])
    assert warnings == ["fio job 'd' has no stonewall while most jobs of the job file do, so it ran at the same "
                        "time as 'c'; add stonewall to 'd' if they were meant to run one after another."]


def test_reported_job_times_that_overlap_across_groups_warn():
    from benchmatrix.workloads.fio import concurrency_warnings

    jobs = [{"name": "a", "groupid": 0, "start_ms": 0, "end_ms": 100},
            {"name": "b", "groupid": 1, "start_ms": 50, "end_ms": 150}]
    assert concurrency_warnings([], jobs) == [
        "fio groups 0 and 1 overlapped in time (jobs 'a' and 'b'), although groups are meant to run one after another."]
