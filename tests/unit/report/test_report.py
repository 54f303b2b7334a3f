"""Tests of benchmatrix.report.render: both report files from the quickstart spec and
synthetic runs.

Drawing the plots is most of a render's time: the tests that read the report's text
render it without plots (:func:`texts`, ``report_context(with_plots=False)`` through the
built-in templates, as render_report renders them); the module's renders with plots are
``default_report`` and the tests of the files written (atomic writes, a failed render,
user templates).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
import pytest

from benchmatrix import layout
from benchmatrix.analyze.stats import summarize
from benchmatrix.analyze.tables import derive_tables
from benchmatrix.report import render as report
from benchmatrix.report.render import format_number, format_percent, render_report, report_context
from benchmatrix.results import records as results
from benchmatrix.results.tables import read_tables, write_tables
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
UNITS = {"read_iops": "IO/s", "read_bw_kib": "KiB/s", "read_clat_mean_us": "us", "read_clat_p99_us": "us"}
HOST_FACTS = {"localhost": {"hostname": "bench1", "cpu_model": "Test CPU 3000", "cpu_count": 8,
                            "memory_mb": 16000, "kernel": "6.8.0", "fio_version": "fio-3.36"}}


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")


def make_plan(spec, replicates: int | None = None, warmup: int | None = None) -> pd.DataFrame:
    """Each cell: warm-up runs, then the measured replicates, cell after cell (the spec's
    counts unless given)."""
    warmups = spec.data["warmup"] if warmup is None else warmup
    measured = spec.data["replicates"] if replicates is None else replicates
    rows = []
    for cell in spec.cells:
        for i in range(warmups + measured):
            warm = i < warmups
            rows.append({"seq": len(rows) + 1, "host": "localhost", "run_id": f"{cell.cell_id}-{i}",
                         "cell_id": cell.cell_id, "replicate": 0 if warm else i - warmups + 1,
                         "warmup": "true" if warm else "false", "control": "false", "visit": 1,
                         "batch": 1, "attempt": 1, **cell.factors})
    return pd.DataFrame(rows)


def ok_runs(plan: pd.DataFrame, duration_s: float = 1.05) -> pd.DataFrame:
    """Every planned run executed once, ok, two seconds apart, without metrics."""
    runs = plan.copy()
    start = pd.Timestamp("2025-03-01T10:00:00Z") + pd.to_timedelta(np.arange(len(runs)) * 2, unit="s")
    runs["status"] = "ok"
    runs["reason"] = ""
    runs["started_at"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    runs["ended_at"] = (start + pd.Timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    runs["duration_s"] = duration_s
    return runs


def make_runs(plan: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Every planned run executed once, ok, with plausible fio numbers."""
    rng = np.random.default_rng(seed)
    runs = ok_runs(plan)
    runs["read_iops"] = rng.normal(20000.0, 500.0, len(runs))
    runs["read_bw_kib"] = runs["read_iops"] * 4
    runs["read_clat_mean_us"] = rng.normal(48.0, 2.0, len(runs))
    runs["read_clat_p99_us"] = rng.normal(120.0, 9.0, len(runs))
    return runs


def texts(spec, plan, runs, summary, host_facts=HOST_FACTS, tables=None):
    """report.html and report.md as render_report renders them with the built-in
    templates, without plots and without writing a file."""
    context = report_context(spec, plan, runs, summary, host_facts, tables=tables, with_plots=False)
    env = report._environment()
    html, md = (env.get_template(name).render(context) for name in report.TEMPLATES)
    return html, md


def render(spec, plan, runs, host_facts=HOST_FACTS):
    """The report's texts (no plots) of these runs, summarized as collect does."""
    return texts(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), host_facts)


def render_files(spec, plan, runs, out_dir, host_facts=HOST_FACTS):
    """render_report itself: report.html, report.md, plots/ and findings.json in ``out_dir``."""
    summary = summarize(runs, spec.factor_names, UNITS)
    html_path, md_path = render_report(spec, plan, runs, summary, host_facts, out_dir)
    return html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")


def collected(spec, plan, runs, out_dir, host_facts=HOST_FACTS):
    """What collect does, from frames: every table derived once and written, the
    reports' texts (no plots) from those same tables. Returns (html, md)."""
    plan.to_csv(out_dir / layout.PLAN, index=False)          # the plan rule's output
    tables = derive_tables(spec, plan, runs, UNITS, records=[])
    write_tables(out_dir, tables)
    return texts(spec, plan, runs, tables.summary, host_facts, tables=tables)


@pytest.fixture(scope="module")
def default_report(spec, tmp_path_factory):
    """The report of the plain case (every planned run once, ok; HOST_FACTS), rendered
    with its plots once, over an old report.md, for the tests that only read it: a
    render takes seconds. Returns its directory and the HTML and Markdown texts."""
    out_dir = tmp_path_factory.mktemp("default_report")
    (out_dir / "report.md").write_text("old")
    plan = make_plan(spec)
    html, md = render_files(spec, plan, make_runs(plan), out_dir)
    return out_dir, html, md


def md_line(md: str, *needles: str) -> str:
    """The single Markdown table line in the results that contains all needles."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|") and all(n in ln for n in needles)]
    assert lines, needles
    return lines[0]


def test_both_reports_name_every_cell(spec):
    plan = make_plan(spec)
    silent = spec.cells[-1].cell_id          # a cell with no run at all yet
    runs = make_runs(plan)
    runs = runs[runs["cell_id"] != silent]
    # A cell added to the matrix after planning is in neither plan nor runs.
    unplanned = spec.cells[-2].cell_id
    plan = plan[plan["cell_id"] != unplanned]
    runs = runs[runs["cell_id"] != unplanned]
    html, md = render(spec, plan, runs)
    for cell in spec.cells:
        assert cell.cell_id in html and cell.cell_id in md, cell
        # The cell's row in the Cells table shows its factor levels.
        line = md_line(md, cell.cell_id, "|")
        assert all(f"| {level} |" in line for level in cell.factors.values()), line
        assert re.search(rf"<tr[^>]*>(<td>[^<]*</td>)*<td class=\"id\">{cell.cell_id}</td>", html)
    # The silent cell appears in each metric table with n = 0.
    iops = md.split("### read_iops")[1].split("###")[0]
    assert re.search(rf"\| 0 \| – \| \*\*–\*\* \|.*`{silent}`", iops)


def test_title_and_design_facts(spec, default_report):
    _, html, md = default_report
    for text in (html, md):
        assert "quickstart" in text
        assert spec.data["description"] in text
        assert spec.digest in text
        assert "quickstart.yaml" in text
        assert "random, seed 42" in text
        assert "3 measured per cell, 1 warm-up" in text
    assert md.startswith("# quickstart\n")
    assert "<title>quickstart" in html


def test_metric_headers_carry_units(spec, default_report):
    _, html, md = default_report
    for header in ("Max (IO/s)", "Avg (IO/s)", "Min (IO/s)", "Median (IO/s)", "95% CI (IO/s)",
                   "Avg (MiB/s)", "Avg (µs)", "CV %"):
        assert header in html and header in md, header
    # Shown in the unit that reads best: about 80,000 KiB/s is 78.1 MiB/s.
    assert "Avg (KiB/s)" not in html and "78." in md
    # The spec's report.metrics are shown in its order.
    positions = [md.index(f"### {m}") for m in spec.data["report"]["metrics"]]
    assert positions == sorted(positions)


def test_known_values_are_formatted(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    cell = spec.cells[0].cell_id
    measured = (runs["cell_id"] == cell) & (runs["warmup"] == "false")
    runs.loc[measured, "read_iops"] = [10.0, 12.0, 14.0]
    runs.loc[(runs["cell_id"] == cell) & (runs["warmup"] == "true"), "read_iops"] = 9999.0
    html, md = render(spec, plan, runs)
    iops = md.split("### read_iops")[1].split("###")[0]
    # n, Max, Avg, Min, Median, CV %, CI: IOPS are positive, so the modified Cox interval of the mean
    # from the log values (Student's t: 12 ± 4.968 = 7.032 – 16.97).
    assert "| 3 | 14.00 | **12.00** | 10.00 | 12.00 | 16.7 | 7.900 – 18.40 |" in md_line(iops, cell)
    assert '<td class="num avg">12.00</td>' in html


def test_partial_notice_when_runs_pending_or_failed(spec):
    plan = make_plan(spec)
    runs = make_runs(plan).iloc[:-4].copy()     # the last four runs have not run yet
    html, md = render(spec, plan, runs)
    assert "partial results: 4 of 32 runs pending, 0 failed" in html
    assert "partial results: 4 of 32 runs pending, 0 failed" in md

    runs = make_runs(plan)
    runs.loc[runs.index[5], ["status", "reason"]] = ["timeout", "killed after 60 s"]
    html, md = render(spec, plan, runs)
    assert "partial results: 0 of 32 runs pending, 1 failed" in html
    assert "partial results: 0 of 32 runs pending, 1 failed" in md


def test_no_partial_notice_when_complete(default_report):
    _, html, md = default_report
    assert "partial results" not in html
    assert "partial results" not in md
    assert "24 of 24 measured runs done; 0 failed, 0 pending." in md


def test_failed_runs_table_and_recovered_attempts(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    failed = runs.iloc[[2]].copy()
    runs.loc[runs.index[2], ["status", "reason"]] = ["failed", "exit code 1"]
    runs.loc[runs.index[2], list(UNITS)] = np.nan
    # r7 failed once and then succeeded on attempt 2: listed, but not counted as failed.
    retry = runs.iloc[[7]].copy()
    runs.loc[runs.index[7], ["status", "reason"]] = ["unreachable", "ssh: connect timed out"]
    retry["attempt"] = 2
    runs = pd.concat([runs, retry], ignore_index=True)
    html, md = render(spec, plan, runs)
    assert "## Failed runs" in md and "<h2>Failed runs</h2>" in html
    run_id = failed["run_id"].iloc[0]
    line = md_line(md.split("## Failed runs")[1], run_id)
    assert "| failed | exit code 1 |" in line
    assert spec.cells[0].label() in line
    recovered = md_line(md.split("## Failed runs")[1], retry["run_id"].iloc[0])
    assert "| ok | `runs/" in recovered and "unreachable" in recovered
    assert "0 of 32 runs pending, 1 failed" in md


def test_no_failed_section_without_failures(default_report):
    _, html, md = default_report
    assert "Failed runs" not in md and "Failed runs" not in html


def test_executed_order_follows_start_time(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    # Reverse the start times: the last planned run started first.
    runs["started_at"] = runs["started_at"].iloc[::-1].to_numpy()
    html, md = render(spec, plan, runs)
    section = md.split("## Executed order")[1]
    ids = re.findall(r"^\| \d+ \| localhost \| `([^`]+)`", section, flags=re.M)
    assert ids == runs["run_id"].iloc[::-1].tolist()
    assert "32 run attempts in start order" in section
    first = md_line(section, ids[0])
    assert spec.cells[-1].label() in first
    warm = md_line(section, f"{spec.cells[0].cell_id}-0")
    assert "| yes |  | ok |" in warm          # warm-up flagged, not control


def test_host_facts_table(spec):
    facts = {"hostA": {"kernel": "6.1", "cpu_model": "Alpha <fast>"}, "hostB": {"kernel": "5.15"}}
    plan = make_plan(spec)
    html, md = render(spec, plan, make_runs(plan), host_facts=facts)
    section = md.split("## Hosts")[1].split("## ")[0]
    assert "| host | cpu_model | kernel |" in section
    assert "| hostA | Alpha &lt;fast> | 6.1 |" in section
    assert "| hostB | – | 5.15 |" in section
    # localhost runs the plan but has no facts: listed with gaps.
    assert "| localhost | – | – |" in section
    assert "<td>Alpha &lt;fast&gt;</td>" in html


def test_html_is_self_contained(default_report):
    _, html, _ = default_report
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    assert "<style>" in html
    assert html.lstrip().lower().startswith("<!doctype html>")


def test_user_text_is_escaped_in_html_and_kept_in_markdown(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    runs.loc[runs.index[3], ["status", "reason"]] = ["failed", "<script>alert(1)</script> | rc=2"]
    html, md = render(spec, plan, runs)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | rc=2" in html
    # Markdown: no HTML escaping, but the pipe must not split the table cell.
    assert "&lt;script>alert(1)&lt;/script> \\| rc=2" in md


def test_templates_use_strict_undefined(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    context = report_context(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), HOST_FACTS,
                             with_plots=False)
    env = report._environment()
    assert env.undefined is jinja2.StrictUndefined
    for name in ("report.html.j2", "report.md.j2"):
        env.get_template(name).render(context)
        broken = {k: v for k, v in context.items() if k != "progress"}
        with pytest.raises(jinja2.UndefinedError):
            env.get_template(name).render(broken)


def test_report_before_any_run(spec):
    plan = make_plan(spec)
    empty = pd.DataFrame()
    html, md = texts(spec, plan, empty, summarize(empty, spec.factor_names, UNITS), {})
    assert "partial results: 32 of 32 runs pending, 0 failed" in md
    assert "No measured results yet." in md
    assert "No runs executed yet." in md
    assert all(c.cell_id in md and c.cell_id in html for c in spec.cells)


def test_unlisted_and_missing_metrics_are_mentioned(spec):
    plan = make_plan(spec)
    runs = make_runs(plan).drop(columns=["read_clat_mean_us"])
    runs["write_iops"] = 5.0
    summary = summarize(runs, spec.factor_names, {**UNITS, "write_iops": "IO/s"})
    _, md = texts(spec, plan, runs, summary)
    assert "### write_iops" not in md
    assert "Also in summary.csv: write_iops." in md
    assert "No values yet for: read_clat_mean_us." in md


def test_all_summary_metrics_when_spec_lists_none(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    summary = summarize(runs, spec.factor_names, UNITS)
    data = {**spec.data, "report": {"metrics": [], "compare": None}}
    bare = type(spec)(spec.path, data, spec.digest, spec.cells, spec.knobs)
    _, md = texts(bare, plan, runs, summary)
    for metric in UNITS:
        assert f"### {metric} (" in md


def test_cells_unknown_to_the_spec_are_still_named(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    stray = runs.iloc[[1, 2]].copy()
    stray["cell_id"] = "cdeadbeef00"
    stray["run_id"] = ["old-1", "old-2"]
    stray["bs"] = "1m"
    runs = pd.concat([runs, stray], ignore_index=True)
    html, md = render(spec, plan, runs)
    assert "cdeadbeef00" in html
    assert "| 1m |" in md_line(md, "`cdeadbeef00`", "| 2 |")


def test_writes_atomically_and_replaces(default_report):
    out_dir, _, md = default_report      # rendered over an old report.md
    # The report writes no table: collect computed and wrote them.
    assert sorted(p.name for p in out_dir.iterdir()) == ["findings.json", "plots", "report.html", "report.md"]
    assert not [p for p in (out_dir / "plots").iterdir() if not p.name.endswith(".svg")]
    assert (out_dir / "report.md").read_text() == md != "old"


def test_failed_render_keeps_the_old_report(spec, tmp_path, monkeypatch):
    plan = make_plan(spec)
    (tmp_path / "report.html").write_text("previous")

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(RuntimeError):
        render_files(spec, plan, make_runs(plan), tmp_path)
    assert (tmp_path / "report.html").read_text() == "previous"
    # No temporary file is left behind (an empty plots/ directory may be).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "plots") == ["report.html"]
    assert not list((tmp_path / "plots").glob("*")) if (tmp_path / "plots").exists() else True


@pytest.mark.parametrize("value, text", [
    (123456.7, "123,457"), (12.3456, "12.35"), (0.012345, "0.01235"), (999.96, "1,000"),
    (1000.0, "1,000"), (0, "0"), (-42.0, "-42.00"), (float("nan"), "–"), (None, "–"),
    (2.5e-7, "2.500e-07"),
])
def test_format_number(value, text):
    assert format_number(value) == text


def test_format_percent():
    assert format_percent(0.16667) == "16.7"
    assert format_percent(float("nan")) == "–"


# ----------------------------------------------------------------- analysis sections

def compare_spec(spec, **report_keys):
    data = {**spec.data, "report": {**spec.data["report"],
                                    "compare": {"factor": "iodepth", "baseline": 1, "by": ["rw"]}, **report_keys}}
    return type(spec)(spec.path, data, spec.digest, spec.cells, spec.knobs)


def test_findings_comparisons_and_csv(spec, tmp_path):
    plan = make_plan(spec)
    runs = make_runs(plan)
    deep = runs["iodepth"] == 8
    runs.loc[deep, "read_iops"] *= 1.5          # a real effect of iodepth on throughput
    cmp_spec = compare_spec(spec)
    html, md = collected(cmp_spec, plan, runs, tmp_path)
    findings = md.split("## Summary of findings")[1].split("\n## ")[0]
    assert "- iodepth=8 vs 1: +" in findings and "read_iops at rw=randread [Holm-adjusted CI +" in findings
    assert "– better (p" in findings
    table = pd.read_csv(tmp_path / "comparisons.csv")
    assert list(table.columns[:5]) == ["metric", "factor", "level", "baseline", "rw"]
    iops = table[table["metric"] == "read_iops"]
    assert set(iops["verdict"]) == {"better"} and set(iops["analysis"]) == {"welch"}
    assert iops["rel_diff_pct"].between(40, 60).all()
    assert "<h2>Comparisons</h2>" in html and "Analysis: welch" in md


def test_pivot_table_like_the_mbrc_seed(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    piv_spec = compare_spec(spec, tables=[{"rows": "bs", "columns": ["rw"], "metric": "read_iops"}])
    _, md = texts(piv_spec, plan, runs, summarize(runs, spec.factor_names, UNITS))
    section = md.split("### read_iops by bs and rw (IO/s)")[1].split("###")[0]
    assert "| bs | | rw=randread | rw=read |" in section
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    assert [ln.split("|")[2].strip() for ln in lines[2:8]] == ["Max", "Avg", "Min", "Max", "Avg", "Min"]
    eff = runs[runs["warmup"] == "false"]
    expected = eff[(eff["bs"] == "4k") & (eff["rw"] == "randread")]["read_iops"].max()
    assert format_number(expected) in lines[2]


def test_warnings_for_failures_and_drift_sit_at_the_top(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    runs.loc[runs.index[3], ["status", "reason"]] = ["failed", "exit status 2"]
    html, md = render(spec, plan, runs)
    warnings_md = md.split("## Warnings")[1].split("\n## ")[0]
    assert "**Warning: 1 run(s) failed**" in warnings_md and "exit status 2" in warnings_md
    assert md.index("## Warnings") < md.index("## Results")
    assert 'data-check="failed"' in html


def test_executed_order_is_capped_for_huge_campaigns(spec, monkeypatch):
    monkeypatch.setattr(report, "ORDER_HEAD", 5)
    monkeypatch.setattr(report, "ORDER_TAIL", 3)
    plan = make_plan(spec)
    runs = make_runs(plan)
    html, md = render(spec, plan, runs)
    section = md.split("## Executed order")[1].split("\n## ")[0]
    ids = re.findall(r"^\| \d+ \| localhost \| `([^`]+)`", section, flags=re.M)
    assert ids == runs["run_id"].iloc[:5].tolist() + runs["run_id"].iloc[-3:].tolist()
    assert "24 run attempts omitted" in section
    assert "first 5 and last 3 shown" in section


def test_plots_are_files_for_markdown_and_inline_for_html(default_report):
    tmp_path, html, md = default_report
    files = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert "order.svg" in files and "latency.svg" in files
    # iodepth, the only numeric factor, has two levels: dots with intervals, no line.
    assert any(f.startswith("dots_") for f in files) and not any(f.startswith("lines_") for f in files)
    for name in files:
        assert f"](plots/{name})" in md
        assert (tmp_path / "plots" / name).read_text().startswith("<svg")
    assert html.count('src="data:image/svg+xml;base64,') == len(files)
    assert "plots/" not in html


def test_user_templates_override_and_add_outputs(spec, tmp_path):
    tdir = tmp_path / "templates"
    tdir.mkdir()
    (tdir / "report.md.j2").write_text(
        '{% extends "builtin/report.md.j2" %}{% block spec %}custom spec block for {{ name }}\n{% endblock %}')
    (tdir / "summary.txt.j2").write_text("{{ name }}: {{ progress.ok_measured }} runs\n")
    plan = make_plan(spec)
    runs = make_runs(plan)
    out = tmp_path / "out"
    render_report(spec, plan, runs, summarize(runs, spec.factor_names, UNITS), HOST_FACTS, out,
                  template_dir=tdir)
    md = (out / "report.md").read_text()
    assert md.rstrip().endswith("custom spec block for quickstart")
    assert "## Results" in md                      # the rest of the built-in template stays
    assert (out / "summary.txt").read_text() == "quickstart: 24 runs\n"


def test_spec_text_is_shown_verbatim(spec, default_report):
    _, html, md = default_report
    text = Path(spec.path).read_text()
    assert text in md
    assert "read_iops, read_bw_kib" in html.split('id="spec"')[1]


# ----------------------------------------------------------------- several hosts

HOSTS = ["h1", "h2", "h3"]


def host_plan(spec, hosts=HOSTS) -> pd.DataFrame:
    """Every host runs the whole plan (hosts_mode: replicate)."""
    parts = []
    for host in hosts:
        part = make_plan(spec)
        part["host"] = host
        part["run_id"] = host + "-" + part["run_id"]
        parts.append(part)
    plan = pd.concat(parts, ignore_index=True)
    plan["seq"] = range(1, len(plan) + 1)
    return plan


def host_runs(plan: pd.DataFrame) -> pd.DataFrame:
    runs = make_runs(plan)
    runs.loc[runs["host"] == "h2", "read_iops"] *= 1.3      # h2 is much faster
    runs.loc[runs["iodepth"] == 8, "read_iops"] *= 1.5      # a real effect on every host
    return runs


def hosts_spec(spec, mode):
    cmp = compare_spec(spec)
    cmp.data["hosts_mode"] = mode
    return cmp


def test_replicate_hosts_get_per_host_tables_in_both_formats(spec, tmp_path):
    plan = host_plan(spec)
    runs = host_runs(plan)
    facts = {h: HOST_FACTS["localhost"] for h in HOSTS}
    cmp = hosts_spec(spec, "replicate")
    html, md = collected(cmp, plan, runs, tmp_path, facts)
    section = md.split("## Results per host")[1].split("\n## ")[0]
    assert "3 hosts: h1, h2, h3 (hosts_mode: replicate)" in section
    assert "### read_iops (IO/s) per host" in section
    table = section.split("### read_iops (IO/s) per host")[1].split("**Hosts compared")[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "`" in ln]
    assert len(rows) == 8 * 3                                   # every cell on every host
    assert [ln.split("|")[4].strip() for ln in rows[:3]] == HOSTS
    assert rows[0].split("|")[1].strip() == "randread" and rows[1].split("|")[1].strip() == ""
    compared = section.split("**Hosts compared: read_iops**")[1].split("###")[0]
    assert "| rw | bs | iodepth | h1 | h2 | h3 | spread % | p (hosts) | cell_id |" in compared
    assert "**" in compared.split("cell_id |")[1]             # the 30 % host offset is flagged
    assert "| Hosts | h1, h2, h3 (hosts_mode: replicate) |" in md
    warnings_md = md.split("## Warnings")[1].split("\n## ")[0]
    assert "hosts disagree in" in warnings_md
    findings = md.split("## Summary of findings")[1].split("\n## ")[0]
    for host in HOSTS:
        assert f"read_iops at rw=randread on {host} [Holm-adjusted CI +" in findings
    assert "| metric | iodepth | host | rw |" in md
    csv = pd.read_csv(tmp_path / "comparisons.csv")
    assert list(csv.columns[:6]) == ["metric", "factor", "level", "baseline", "host", "rw"]
    assert sorted(csv["host"].unique()) == HOSTS
    # HTML: the same tables.
    per_host = html.split('<section id="per-host">')[1].split("</section>")[0]
    for host in HOSTS:
        assert f"<td>{host}</td>" in per_host and f'<th class="num">{host}</th>' in per_host
    assert '<a href="#per-host">Per host</a>' in html
    assert "<th>host</th>" in html.split('<section id="comparisons">')[1]


def test_partition_hosts_are_blocks_in_the_report(spec, tmp_path):
    plan = host_plan(spec)
    runs = host_runs(plan)
    _, md = collected(hosts_spec(spec, "partition"), plan, runs, tmp_path)
    assert "(hosts_mode: partition). The runs of each cell were spread over the hosts" in md
    assert "**Analysis: blocked_by_host**" in md
    assert "read_iops at rw=randread on all hosts [Holm-adjusted CI +" in md
    csv = pd.read_csv(tmp_path / "comparisons.csv")
    assert set(csv["host"]) == {"all"} and set(csv["analysis"]) == {"blocked_by_host"}
    iops = csv[csv["metric"] == "read_iops"]
    assert set(iops["verdict"]) == {"better"} and iops["rel_diff_pct"].between(40, 60).all()


def test_summary_by_host_csv_has_rows_only_for_several_hosts(spec, tmp_path):
    plan = host_plan(spec)
    runs = host_runs(plan)
    write_tables(tmp_path, derive_tables(compare_spec(spec), plan, runs, UNITS))
    table = pd.read_csv(tmp_path / layout.SUMMARY_BY_HOST)
    assert list(table.columns[:2]) == ["cell_id", "host"] and sorted(table["host"].unique()) == HOSTS
    assert len(table) == 8 * 3 * 4                               # cells x hosts x metrics
    assert set(table.loc[table["metric"] == "read_iops", "unit"]) == {"IO/s"}
    single = make_plan(spec)
    write_tables(tmp_path, derive_tables(compare_spec(spec), single, make_runs(single), UNITS))
    # Always written (a Snakemake output of collect): one host leaves only the header.
    table = pd.read_csv(tmp_path / layout.SUMMARY_BY_HOST)
    assert table.empty and list(table.columns[:2]) == ["cell_id", "host"]
    assert "host" not in pd.read_csv(tmp_path / "comparisons.csv").columns


def test_report_from_the_tables_on_disk_is_the_report_collect_renders(spec, tmp_path):
    # bmx report re-renders from what collect wrote; nothing is recomputed, and the
    # comparisons' explanations and notes come back from analysis.json.
    plan = make_plan(spec)
    runs = make_runs(plan)
    runs.loc[runs["iodepth"] == 8, "read_iops"] *= 1.5
    cmp_spec = compare_spec(spec)
    _, first = collected(cmp_spec, plan, runs, tmp_path)
    tables = read_tables(tmp_path)
    assert tables.units["read_iops"] == "IO/s" and tables.analysis["explanations"]
    # (That a render writes no table: test_writes_atomically_and_replaces.)
    _, md = texts(cmp_spec, tables.plan, tables.runs, tables.summary, tables=tables)
    stamp = re.compile(r"Generated .*")
    assert stamp.sub("", md) == stamp.sub("", first)


def test_single_host_report_has_no_per_host_section(spec):
    plan = make_plan(spec)
    runs = make_runs(plan)
    html, md = render(compare_spec(spec), plan, runs)
    assert "Results per host" not in md and 'id="per-host"' not in html
    assert "hosts_mode" not in md.split("## Spec")[0]
    assert " on localhost" not in md.split("## Spec")[0]
    assert "| metric | iodepth | rw | n |" in md


def test_intervals_beside_verdicts_are_holm_adjusted_and_descriptive_metrics_labelled(spec, tmp_path):
    # read_iops is primary (Holm's family, verdicts, adjusted intervals); read_bw_kib,
    # a rescaling of it, is descriptive: unadjusted interval, verdict "descriptive".
    plan = make_plan(spec)
    runs = make_runs(plan)
    runs.loc[runs["iodepth"] == 8, ["read_iops", "read_bw_kib"]] *= 1.5
    cmp_spec = compare_spec(spec, metrics=["read_iops", "read_bw_kib"], primary=["read_iops"])
    html, md = collected(cmp_spec, plan, runs, tmp_path)
    table = pd.read_csv(tmp_path / "comparisons.csv")
    iops, bw = table[table["metric"] == "read_iops"], table[table["metric"] == "read_bw_kib"]
    assert set(iops["verdict"]) == {"better"} and set(bw["verdict"]) == {"descriptive"}
    assert (iops["ci_low_adj_pct"] <= iops["ci_low_pct"]).all() and bw["ci_low_adj_pct"].isna().all()
    assert bw["p_value"].isna().all() and bw["p_value_unadjusted"].notna().all()
    findings = md.split("## Summary of findings")[1].split("\n## ")[0]
    sentences = [ln for ln in findings.splitlines() if ln.startswith("- ")]
    assert any("read_iops at rw=randread [Holm-adjusted CI +" in ln for ln in sentences)
    assert not any("read_bw_kib" in ln for ln in sentences)        # no verdict, so no finding
    assert "2 comparison(s) of descriptive metrics (read_bw_kib)" in findings
    row = iops.iloc[0]
    for text in (md.split("## Comparisons")[1], html.split('<section id="comparisons">')[1]):
        assert "Holm-adjusted" in text and "descriptive" in text
        assert f"{row['ci_low_adj_pct']:+.1f} – {row['ci_high_adj_pct']:+.1f}" in text
        b = bw.iloc[0]
        assert f"{b['ci_low_pct']:+.1f} – {b['ci_high_pct']:+.1f} (95%, unadjusted)" in text


def test_too_few_runs_are_inconclusive_with_a_report_warning(spec, tmp_path):
    # Two runs per side and no effect: the report says inconclusive, never
    # "no difference", and warns why.
    plan = make_plan(spec)
    runs = make_runs(plan)
    runs = runs[runs["replicate"] != 3]
    cmp_spec = compare_spec(spec, metrics=["read_clat_mean_us"],
                            compare={"factor": "iodepth", "baseline": 1, "by": ["rw", "bs"]})
    html, md = collected(cmp_spec, plan, runs, tmp_path)
    table = pd.read_csv(tmp_path / "comparisons.csv")
    assert set(table["verdict"]) == {"inconclusive"}
    warnings_md = md.split("## Warnings")[1].split("\n## ")[0]
    assert "Too few runs to decide" in warnings_md and "only 2 runs" in warnings_md
    assert "Too few runs to decide" in html.split('<section id="warnings">')[1].split("</section>")[0]
    # The findings come first, the warnings right after them.
    assert md.index("## Summary of findings") < md.index("## Warnings") < md.index("## Design")
    assert "4 inconclusive" in md.split("## Summary of findings")[1]


def test_warnings_are_computed_by_collect_and_read_back_for_a_re_render(spec, tmp_path):
    """collect computes the checks (warnings, drift and host tables) and keeps them in
    analysis.json; a re-render from the tables on disk shows the same report, and the
    report module calls no check of its own (issue 26)."""
    import ast

    plan = host_plan(spec)
    runs = host_runs(plan)
    runs.loc[runs.index[3], ["status", "reason"]] = ["failed", "exit status 2"]
    facts = {h: HOST_FACTS["localhost"] for h in HOSTS}
    cmp = hosts_spec(spec, "replicate")
    tables = derive_tables(cmp, plan, runs, UNITS, records=[])
    checks = tables.checks
    assert {w["check"] for w in checks.warnings} >= {"failed", "hosts"}
    assert checks.host_differences is not None and len(checks.host_differences)
    write_tables(tmp_path, tables)
    back = read_tables(tmp_path)
    assert back.checks.warnings == json.loads(json.dumps(checks.warnings, default=str))
    assert back.checks.control_runs == checks.control_runs
    assert list(back.checks.host_differences.columns) == list(checks.host_differences.columns)

    memory = report_context(cmp, plan, runs, tables.summary, facts, tables=tables, with_plots=False)
    disk = report_context(cmp, back.plan, back.runs, back.summary, facts, tables=back, with_plots=False)
    for key in ("warnings", "notices", "drift_detected"):
        assert disk[key] == memory[key], key
    assert disk["by_host"]["compared"] == memory["by_host"]["compared"]

    tree = ast.parse(Path(report.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "benchmatrix.analyze.sanity" not in imported
