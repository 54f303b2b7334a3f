"""Tests of the sysbench parser against real sysbench 1.0.20 output (tests/fixtures/sysbench)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmatrix.errors import ParseError
from benchmatrix.workloads import PARSERS, parse_sysbench

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysbench"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_registry():
    assert PARSERS["workload_sysbench"] is parse_sysbench


def test_cpu():
    parsed = parse_sysbench(text("cpu.txt"))
    m = parsed.metrics

    assert parsed.extra["test"] == "cpu" and parsed.extra["threads"] == 2
    assert parsed.extra["version"] == "1.0.20"
    assert m["events_per_s"][1] == "events/s" and m["events_per_s"][0] > 0
    assert m["latency_min_ms"][0] <= m["latency_avg_ms"][0] <= m["latency_p95_ms"][0] <= m["latency_max_ms"][0]
    assert m["total_time_s"][1] == "s"
    assert parsed.extra["fairness"]["events"]["avg"] * 2 == m["events"][0]


def test_memory():
    m = parse_sysbench(text("memory.txt")).metrics
    assert m["transferred_mib"] == (1024.0, "MiB")
    assert m["mib_per_s"][1] == "MiB/s" and m["ops_per_s"][1] == "op/s"
    assert m["ops"][0] == m["events"][0]


def test_fileio():
    m = parse_sysbench(text("fileio_rndrw.txt")).metrics
    assert {"reads_per_s", "writes_per_s", "fsyncs_per_s", "read_mib_per_s", "written_mib_per_s"} <= set(m)
    assert m["reads_per_s"][0] > m["writes_per_s"][0] > 0


def test_oltp_read_only():
    parsed = parse_sysbench(text("oltp_read_only.txt"))
    m = parsed.metrics

    assert parsed.extra["test"] == "oltp"
    assert m["transactions_per_s"][1] == "tx/s" and m["queries_per_s"][1] == "q/s"
    assert m["queries"][0] == m["reads"][0] + m["writes"][0] + m["other_queries"][0]
    assert m["writes"][0] == 0
    assert m["errors"] == (0.0, "q") and m["reconnects"] == (0.0, "count")
    assert m["events"][0] == m["transactions"][0]


def test_percentile_follows_the_option():
    m = parse_sysbench(text("oltp_read_write_p99.txt")).metrics
    assert "latency_p99_ms" in m and "latency_p95_ms" not in m
    assert m["errors"][0] > 0  # ignored deadlocks of the read-write mix


def test_report_interval_lines_are_ignored():
    m = parse_sysbench(text("oltp_point_select_report_interval.txt")).metrics
    assert m["queries"][0] == m["transactions"][0]  # one point select per transaction


def parse_error(raw) -> str:
    with pytest.raises(ParseError) as caught:
        parse_sysbench(raw)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("raw", [text("empty.txt"), "", None])
def test_empty(raw):
    assert parse_error(raw) == "sysbench printed no output"


def test_truncated():
    assert "no general statistics" in parse_error(text("truncated.txt"))


def test_connection_failure_reports_sysbench_fatal_line():
    message = parse_error(text("connection_failed.txt"))
    assert message.startswith("sysbench failed: Connection to database failed")


def test_unknown_test():
    assert "Cannot find benchmark 'nosuchtest'" in parse_error(text("unknown_test.txt"))
