"""Tests of the pgbench parser against real pgbench 15 output (tests/fixtures/pgbench)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmatrix.errors import ParseError
from benchmatrix.workloads import PARSERS, PGBENCH_METRICS, parse_pgbench

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pgbench"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def line_value(name: str, prefix: str) -> str:
    """The rest of the first line of a fixture that starts with ``prefix``."""
    for line in text(name).splitlines():
        if line.startswith(prefix):
            return line[len(prefix):]
    raise AssertionError(f"{name} has no line {prefix!r}")


def test_registry():
    assert PARSERS["workload_pgbench"] is parse_pgbench


def test_select_only_with_per_statement_latencies():
    parsed = parse_pgbench(text("select_only_r.txt"))
    m = parsed.metrics

    assert m["tps"] == (float(line_value("select_only_r.txt", "tps = ").split()[0]), "tx/s")
    assert m["latency_avg_ms"] == (float(line_value("select_only_r.txt", "latency average = ").split()[0]), "ms")
    assert m["transactions"][0] == float(line_value("select_only_r.txt",
                                                    "number of transactions actually processed: "))
    assert m["failed_transactions"] == (0.0, "tx") and m["failed_pct"] == (0.0, "%")
    assert m["initial_connection_ms"][1] == "ms"
    assert "latency_stddev_ms" not in m  # pgbench prints it only with -P or -R
    assert set(k for k in m if k.startswith("stmt")) == {"stmt1_latency_ms", "stmt2_latency_ms"}
    assert list(parsed.jobs) == ["builtin: select only"]
    assert parsed.extra["clients"] == 2 and parsed.extra["threads"] == 2
    assert parsed.extra["scaling_factor"] == 1 and parsed.extra["duration_s"] == 2
    assert parsed.extra["tps_basis"] == "without initial connection time"
    statements = parsed.extra["statements"]
    assert [s["text"] for s in statements] == ["\\set aid random(1, 100000 * :scale)",
                                                "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"]
    assert all(s["failures"] == 0 for s in statements)
    json.dumps(parsed.extra)


def test_tpcb_like_has_eleven_statements():
    parsed = parse_pgbench(text("tpcb_like_r.txt"))

    assert len(parsed.extra["statements"]) == 11
    assert parsed.extra["statements"][-1]["text"] == "END;"
    assert parsed.metrics["stmt11_latency_ms"][0] == parsed.extra["statements"][-1]["latency_ms"]
    assert parsed.extra["transaction_type"] == "builtin: TPC-B (sort of)"


def test_two_weighted_scripts_with_think_time():
    parsed = parse_pgbench(text("two_scripts_think_time.txt"))
    m = parsed.metrics

    assert list(parsed.jobs) == ["ro_think.sql", "point.sql"]
    assert m["latency_stddev_ms"][1] == "ms"
    # The think time (\sleep 20 ms) is part of the first script's latency.
    assert m["script1_latency_avg_ms"][0] > 20.0 > m["script2_latency_avg_ms"][0]
    assert m["script1_tps"][0] + m["script2_tps"][0] == pytest.approx(m["tps"][0], rel=0.01)
    assert m["script1_transactions"][0] + m["script2_transactions"][0] == pytest.approx(m["transactions"][0], rel=0.01)
    assert m["script1_stmt3_latency_ms"][0] == pytest.approx(20.0, abs=1.0)
    assert parsed.jobs["ro_think.sql"]["stmt3_latency_ms"] == m["script1_stmt3_latency_ms"]
    assert [s["weight"] for s in parsed.extra["scripts"]] == [3.0, 1.0]
    assert [s["script"] for s in parsed.extra["statements"]] == [1, 1, 1, 2, 2]
    assert "stmt1_latency_ms" not in m  # with several scripts, statements carry the script number


def test_serialization_failures_and_retries():
    parsed = parse_pgbench(text("serialization_failures.txt"))
    m = parsed.metrics

    failed, pct = line_value("serialization_failures.txt", "number of failed transactions: ").split()
    assert m["failed_transactions"] == (float(failed), "tx")
    assert m["failed_pct"] == (float(pct.strip("(%)")), "%")
    assert m["serialization_failures"][0] == float(failed)
    assert m["deadlock_failures"][0] == 0
    assert m["retried_transactions"][0] > 0 and m["retries"][1] == "count"
    assert parsed.extra["max_tries"] == 2
    update_branches = parsed.extra["statements"][8]
    assert update_branches["text"].startswith("UPDATE pgbench_branches")
    assert update_branches["failures"] > 0 and update_branches["retries"] > 0


def test_script_of_weight_zero_has_no_made_up_figures():
    parsed = parse_pgbench(text("weight_zero.txt"))
    assert parsed.metrics["script2_tps"] == (0.0, "tx/s")
    assert "failed_pct" not in parsed.jobs["ro_think.sql"] and "latency_avg_ms" not in parsed.jobs["ro_think.sql"]
    assert parsed.metrics["script1_tps"] == parsed.metrics["tps"]


def test_reconnect_each_transaction():
    parsed = parse_pgbench(text("reconnect_each_tx.txt"))

    assert parsed.extra["tps_basis"] == "including reconnection times"
    assert parsed.metrics["transactions"][0] == 100
    assert "average_connection_ms" in parsed.metrics and "initial_connection_ms" not in parsed.metrics
    assert parsed.extra["transactions_per_client"] == 50


def test_rate_limit_lines():
    m = parse_pgbench(text("rate_limit.txt")).metrics

    assert {"skipped_transactions", "late_transactions", "lag_avg_ms", "lag_max_ms", "latency_stddev_ms"} <= set(m)
    assert m["lag_max_ms"][0] >= m["lag_avg_ms"][0]


def test_pgbench_13_spelling_of_tps_lines():
    # pgbench 13 and older print two tps lines (format from its documentation).
    old = ("transaction type: <builtin: select only>\nnumber of transactions actually processed: 1000\n"
           "latency average = 0.500 ms\ntps = 1990.5 (including connections establishing)\n"
           "tps = 2000.25 (excluding connections establishing)\n")
    m = parse_pgbench(old).metrics
    assert m["tps"] == (2000.25, "tx/s") and m["tps_incl_conn"] == (1990.5, "tx/s")


@pytest.mark.parametrize("name", ["select_only_r.txt", "tpcb_like_r.txt", "two_scripts_think_time.txt",
                                  "serialization_failures.txt", "reconnect_each_tx.txt", "rate_limit.txt"])
def test_every_fixed_metric_has_its_catalogued_unit(name):
    for metric, (value, unit) in parse_pgbench(text(name)).metrics.items():
        base = metric.split("_", 1)[1] if metric.startswith("script") else metric
        if "stmt" in metric:
            assert unit == "ms"
        else:
            assert PGBENCH_METRICS[base] == unit, metric
        assert isinstance(value, float)


# --- malformed output -------------------------------------------------------------


def parse_error(raw, run_dir=None) -> str:
    with pytest.raises(ParseError) as caught:
        parse_pgbench(raw, {}, run_dir)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("raw", [text("empty.txt"), "", "   \n", None])
def test_empty_output(raw):
    assert parse_error(raw).startswith("pgbench printed no output")


def test_truncated_report():
    assert "the report stops early" in parse_error(text("truncated.txt"))


def test_aborted_run_names_the_reason_from_stderr(tmp_path):
    (tmp_path / "stderr").write_text(text("aborted.stderr"))
    message = parse_error(text("aborted.txt"), tmp_path)
    assert "no 'tps = ...' line" in message
    assert "division by zero" in message


def test_connection_refused_has_empty_stdout(tmp_path):
    (tmp_path / "stderr").write_text(text("connection_refused.stderr"))
    message = parse_error(text("connection_refused.txt"), tmp_path)
    assert message.startswith("pgbench printed no output")
    assert "connection to server" in message


def test_tool_error_message_instead_of_a_report():
    assert "not a pgbench report" in parse_error(text("connection_refused.stderr"))


def test_garbage_number_is_a_parse_error():
    broken = text("select_only_r.txt").replace("tps = ", "tps = 1.2.3", 1)
    assert "no 'tps = ...' line" in parse_error(broken)
