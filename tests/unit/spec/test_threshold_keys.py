"""report.threshold's metric keys for built-in workloads (issue 35, item 8, follow-up).

A per-metric threshold under a misspelt key silently left its metric at the default.
The spec's own metric names (``report.metrics``, declared ``metrics``) were checked
already; here the names come from the workload descriptors (each parser's catalogue
and patterns, :func:`benchmatrix.workloads.metric_names`) and the collected counters,
so ``bmx validate`` refuses a key no metric of a built-in workload can have.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_spec import BASE, write

from benchmatrix.cli import main
from benchmatrix.errors import ParseError, SpecErrors
from benchmatrix.spec.load import load_spec
from benchmatrix.workloads import WORKLOADS, metric_names, parse_counters

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def spec_of(tmp_path: Path, role: str, threshold: str, extra: str = "") -> Path:
    return write(tmp_path, BASE.replace("workload_command", role) + extra + f"report:\n  threshold: {threshold}\n")


def refused(path: Path) -> str:
    """The one error line load_spec gives ``path`` with the workloads' metric names."""
    with pytest.raises(SpecErrors) as info:
        load_spec(path, metric_names=metric_names)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("role, key, hint", [
    ("workload_fio", "read_clat_p99", "did you mean 'read_clat_p99_us'?"),
    ("workload_fio", "read_bw_kb", "did you mean 'read_bw_kib'?"),
    ("workload_pgbench", "tsp", "did you mean 'tps'?"),
    ("workload_stress_ng", "bogo_ops_per_sec", "did you mean 'bogo_ops_per_s'?"),
    ("workload_sysbench", "latency_p95", "did you mean 'latency_p95_ms'?"),
    ("workload_sysbench", "event_per_s", "did you mean 'events_per_s'?"),
])
def test_a_key_no_metric_of_a_builtin_workload_matches_is_refused(tmp_path, role, key, hint):
    path = spec_of(tmp_path, role, f"{{default: 5%, {key}: 20%}}")
    line = refused(path)
    assert line.startswith(f"{path}:10: report.threshold names '{key}', which no metric of {role} can be"), line
    assert line.endswith(hint), line


@pytest.mark.parametrize("role, key", [
    ("workload_fio", "write_clat_p99_9_us"),
    ("workload_fio", "read_iops"),
    ("workload_pgbench", "latency_avg_ms"),
    ("workload_stress_ng", "max_rss_kib"),
    ("workload_sysbench", "latency_p95_ms"),
    ("workload_sysbench", "latency_p99_9_ms"),  # --percentile=99.9: a patterned name
    ("workload_sysbench", "transactions_per_s"),
])
def test_a_key_the_workload_can_produce_is_taken(tmp_path, role, key):
    report = load_spec(spec_of(tmp_path, role, f"{{{key}: 20%}}"), metric_names=metric_names).report
    assert report.threshold_for(key) == 0.2


def test_counters_the_spec_collects_are_metrics_too(tmp_path):
    taken = spec_of(tmp_path, "workload_fio", "{disk_nvme0n1_util_pct: 20%, disk_read_await_ms: 10%}",
                    "collect: [disk]\n")
    report = load_spec(taken, metric_names=metric_names).report
    assert report.threshold_for("disk_nvme0n1_util_pct") == 0.2
    # cpu counters are not collected here: a cpu key names nothing the runs will hold.
    line = refused(spec_of(tmp_path, "workload_fio", "{cpu_busy_pct: 20%}", "collect: [disk]\n"))
    assert "'cpu_busy_pct', which no metric of workload_fio can be" in line
    assert load_spec(spec_of(tmp_path, "workload_fio", "{cpu_busy_pct: 20%}", "collect: [cpu]\n"),
                     metric_names=metric_names).report.threshold_for("cpu_busy_pct") == 0.2


def test_declared_metrics_with_counters_are_checked(tmp_path):
    declared = ("  metrics:\n    tps: {regex: 't=(?P<value>[0-9]+)', unit: tx/s}\n  vars:")
    text = BASE.replace("  vars:", declared) + "collect: [cpu]\nreport:\n  threshold: {cpu_busy_pct: 5%, tsp: 20%}\n"
    line = refused(write(tmp_path, text))
    assert ":13: report.threshold names 'tsp', which is no metric of the report" in line, line
    assert line.endswith("did you mean 'tps'?"), line
    ok = text.replace("tsp", "tps")
    assert load_spec(write(tmp_path, ok), metric_names=metric_names).report.threshold_for("tps") == 0.2


def test_a_command_without_declared_metrics_has_the_metrics_bmx_times(tmp_path):
    # Without declared metrics, bmx times the command (issue 38, item 3): those are its names.
    path = spec_of(tmp_path, "workload_command", "{wall_s: 20%}")
    assert load_spec(path, metric_names=metric_names).report.threshold_for("wall_s") == 0.2
    path = spec_of(tmp_path, "workload_command", "{whatever_it_prints: 20%}")
    with pytest.raises(SpecErrors, match="which no metric of workload_command can be"):
        load_spec(path, metric_names=metric_names)


def test_bmx_validate_refuses_the_key_with_file_and_line(tmp_path, capsys):
    path = spec_of(tmp_path, "workload_pgbench", "{tsp: 20%}")
    # pgbench's own variables: bmx validate refuses argv for it (an unknown workload variable)
    path.write_text(path.read_text().replace('argv: [echo, "{{ a }}", "{{ b }}"]', 'clients: "{{ a }}"'))
    assert main(["validate", str(path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{path}:10: report.threshold names 'tsp', which no metric of workload_pgbench can be "
                   "(metrics: average_connection_ms, deadlock_failures, failed_pct, failed_transactions, "
                   "initial_connection_ms, lag_avg_ms, lag_max_ms, late_transactions, latency_avg_ms, "
                   "latency_stddev_ms, retried_transactions, retries, serialization_failures, "
                   "skipped_transactions, tps, tps_incl_conn, transactions, stmtN_latency_ms, scriptK_METRIC); "
                   "did you mean 'tps'?"]


def _parsed_names(role: str) -> set[str]:
    """Every metric name the role's parser gives for the real outputs of tests/fixtures."""
    parse = WORKLOADS[role].parse
    names: set[str] = set()
    for path in sorted((FIXTURES / role.removeprefix("workload_")).rglob("*")):
        if not path.is_file():
            continue
        try:
            parsed = parse(path.read_text(errors="replace"))
        except (ParseError, ValueError, TypeError, KeyError):
            continue
        names |= set(parsed.metrics)
        for job in parsed.jobs.values():
            names |= set(job)
    return names


@pytest.mark.parametrize("role", ["workload_fio", "workload_pgbench", "workload_stress_ng", "workload_sysbench"])
def test_every_metric_the_parser_gives_is_one_the_descriptor_names(role):
    names = _parsed_names(role)
    assert len(names) >= 5, names  # the fixtures are real outputs with metrics
    known = metric_names(role, [])
    assert known.complete
    assert sorted(n for n in names if not known.matches(n)) == []


def test_every_counter_metric_is_one_the_counters_name():
    names: set[str] = set()
    for path in sorted((FIXTURES / "counters").glob("*.json")):
        try:
            names |= set(parse_counters(path.read_text()).metrics)
        except ParseError:
            continue
    assert any(n.startswith("disk_") for n in names) and any(n.startswith("cpu_") for n in names), names
    known = metric_names("workload_own", ["cpu", "disk"])  # a project's own role: its names are its output's
    assert not known.complete
    assert sorted(n for n in names if not known.matches(n)) == []


def test_bmx_run_refuses_the_key_before_anything_is_written(tmp_path, monkeypatch, capsys):
    # bmx run validates too: a campaign started without bmx validate must not run hours on the default.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BMX_PROJECT_DIR", str(tmp_path))
    path = spec_of(tmp_path, "workload_fio", "{read_clat_p99: 20%}")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:10: report.threshold names 'read_clat_p99', which no metric of workload_fio"), err
    assert err.count("\n") == 1 and not (tmp_path / "results").exists()


def test_a_misspelt_campaign_sd_key_is_refused_like_a_threshold_key(tmp_path):
    # report.campaign_sd's per-metric keys (issue 33) left a misspelt metric at the prior's default.
    path = write(tmp_path, BASE.replace("workload_command", "workload_fio")
                 + "report:\n  campaign_sd: {default: 2%, read_bw_kb: 1%}\n")
    line = refused(path)
    assert "report.campaign_sd names 'read_bw_kb'" in line and "did you mean 'read_bw_kib'?" in line
    ok = write(tmp_path, BASE.replace("workload_command", "workload_fio")
               + "report:\n  campaign_sd: {default: 2%, read_bw_kib: 1%}\n")
    assert load_spec(ok, metric_names=metric_names).report.campaign_sd_for("read_bw_kib") == pytest.approx(0.01)
