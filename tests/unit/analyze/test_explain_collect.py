"""What moved with it, end to end through the tables: collect's derive_tables computes
moved_with.csv, write_tables/read_tables keep it, findings.json's findings carry it and
the terminal prints the top counters under each finding (issue 37, items 1 and 2).

Results are synthetic: the quickstart spec with seeded runs and planted counters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from unit.report.test_report import make_plan, ok_runs

from benchmatrix import layout
from benchmatrix.analyze.stats import summarize
from benchmatrix.analyze.tables import derive_tables
from benchmatrix.report import terminal
from benchmatrix.report.render import FINDING_SECTIONS, _environment, findings_digest, render_report, report_context
from benchmatrix.results.tables import read_tables, write_tables
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
UNITS = {"read_iops": "IO/s", "read_bw_kib": "KiB/s", "read_clat_mean_us": "us", "read_clat_p99_us": "us",
         "disk_loop0_read_mib_s": "MiB/s", "disk_loop0_read_await_ms": "ms", "cpu_busy_pct": "%"}


def campaign(seed: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """plan and runs of the quickstart spec: bandwidth triples with iodepth 8; the
    device's MiB/s follows it run by run, the await and CPU counters do not move."""
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    plan = make_plan(spec, replicates=5, warmup=0)
    rng = np.random.default_rng(seed)
    runs = ok_runs(plan, duration_s=1.0)
    scale = runs["bs"].map({"4k": 1.0, "64k": 8.0}) * runs["iodepth"].map({1: 1.0, 8: 3.0})
    runs["read_bw_kib"] = 80_000.0 * scale * np.exp(rng.normal(0, 0.03, len(runs)))
    runs["read_iops"] = runs["read_bw_kib"] / 4
    runs["read_clat_mean_us"] = 40.0 * np.exp(rng.normal(0, 0.03, len(runs)))
    runs["read_clat_p99_us"] = runs["read_clat_mean_us"] * 2.5
    runs["disk_loop0_read_mib_s"] = runs["read_bw_kib"] / 1024 * np.exp(rng.normal(0, 0.003, len(runs)))
    runs["disk_loop0_read_await_ms"] = 0.2 * np.exp(rng.normal(0, 0.05, len(runs)))
    runs["cpu_busy_pct"] = 30.0 * np.exp(rng.normal(0, 0.05, len(runs)))
    return plan, runs


@pytest.fixture(scope="module")
def collected():
    spec = load_spec(ROOT / "config" / "experiments" / "quickstart.yaml")
    plan, runs = campaign()
    return spec, plan, runs, derive_tables(spec, plan, runs, UNITS)


def test_collect_lists_the_counter_that_moved_with_each_bandwidth_finding(collected):
    _, _, _, tables = collected
    found = tables.comparisons[tables.comparisons["verdict"] == "better"]
    bandwidth = [i for i, m in enumerate(tables.comparisons["metric"]) if m == "read_bw_kib"]
    assert len(found) and set(bandwidth) <= set(found.index)
    moved = tables.moved_with
    assert set(moved["comparison"]) >= set(bandwidth)
    for position in bandwidth:
        rows = moved[moved["comparison"] == position]
        assert rows["counter"].tolist() == ["disk_loop0_read_mib_s"]      # await and CPU did not move
        assert 150 < rows["rel_diff_pct"].iloc[0] < 250 and rows["correlation"].iloc[0] > 0.9


def test_moved_with_csv_is_written_and_read_back(collected, tmp_path):
    _, _, _, tables = collected
    written = write_tables(tmp_path, tables)
    assert tmp_path / layout.MOVED_WITH in written
    back = read_tables(tmp_path).moved_with
    assert back["counter"].tolist() == tables.moved_with["counter"].tolist()
    assert back["comparison"].tolist() == tables.moved_with["comparison"].tolist()


def test_findings_json_and_the_terminal_name_what_moved_with_each_finding(collected, tmp_path):
    spec, plan, runs, tables = collected
    summary = summarize(runs, spec.factor_names, UNITS)
    context = report_context(spec, plan, runs, summary, {}, with_plots=False, tables=tables)
    digest = json.loads(json.dumps(findings_digest(context, tmp_path)))
    bandwidth = [f for f in digest["findings"] if f["metric"] == "read_bw_kib"]
    assert bandwidth and all(f["moved_with"][0]["counter"] == "disk_loop0_read_mib_s" for f in bandwidth)
    first = bandwidth[0]["moved_with"][0]
    assert first["ci_low_pct"] > 0 and first["mean_level"] > first["mean_baseline"] and first["unit"] == "MiB/s"
    text = terminal.findings_text(digest)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("read_bw_kib") or "read_bw_kib" in ln)
    assert lines[at + 1].strip().startswith("moved with it: disk_loop0_read_mib_s ")
    assert "caused" not in text


def test_the_terminal_prints_the_first_three_counters_of_a_finding_in_one_line():
    moved = [{"counter": f"disk_d{i}_reads_s", "text": f"disk_d{i}_reads_s {i} → {i * 2} IO/s (+100 %)"}
             for i in range(1, 6)]
    digest = {"configured": True, "total": 1, "counts": {"better": 1}, "warnings": [],
              "findings": [{"sentence": "size=2 vs 1: +100% v – better", "verdict": "better", "moved_with": moved},
                           {"sentence": "size=4 vs 1: +300% v – better", "verdict": "better", "moved_with": []}],
              "report": {"html": "r.html", "md": "r.md"}}
    lines = terminal.findings_text(digest).splitlines()
    assert lines[2] == ("    moved with it: disk_d1_reads_s 1 → 2 IO/s (+100 %), disk_d2_reads_s 2 → 4 IO/s (+100 %), "
                        "disk_d3_reads_s 3 → 6 IO/s (+100 %)")
    assert lines[3].startswith("  size=4 vs 1") and "moved with" not in lines[4]


@pytest.fixture(scope="module")
def rendered(collected, tmp_path_factory):
    spec, plan, runs, tables = collected
    out = tmp_path_factory.mktemp("report")
    summary = summarize(runs, spec.factor_names, UNITS)
    render_report(spec, plan, runs, summary, {}, out, tables=tables)
    return out


def test_the_report_gives_each_finding_a_section_with_its_counters_and_a_plot(collected, rendered):
    # report.md: a section per finding that moved a counter, its sentence, the counters'
    # table and the plot of the metric against the first counter, run by run.
    _, _, _, tables = collected
    md = (rendered / layout.REPORT_MD).read_text()
    assert "## What moved with each finding" in md
    part = md.split("## What moved with each finding")[1].split("\n## ")[0]
    bandwidth = [s for s in part.split("\n### ")[1:] if "read_bw_kib" in s.splitlines()[0]]
    assert bandwidth, part[:3000]
    first = bandwidth[0]
    assert "| disk_loop0_read_mib_s |" in first and "MiB/s" in first and "caused" not in part
    image = first.split("](")[1].split(")")[0]
    assert image.startswith("plots/moved_with_") and image.endswith(".svg")
    svg = (rendered / image).read_text()
    assert svg.startswith("<svg") and "disk_loop0_read_mib_s" in svg and "read_bw_kib" in svg
    # At most FINDING_SECTIONS sections, each of a finding that lists counters.
    sections = part.split("\n### ")[1:]
    assert 0 < len(sections) <= FINDING_SECTIONS
    assert len(sections) <= len(set(tables.moved_with["comparison"]))
    # report.html: the same sections, the plot embedded.
    html = (rendered / layout.REPORT_HTML).read_text()
    section = html.split('<section id="moved-with">')[1].split("</section>")[0]
    assert section.count("<h3>") == len(sections)
    assert "disk_loop0_read_mib_s" in section and 'src="data:image/svg+xml;base64,' in section


def test_a_report_without_counters_has_no_moved_with_section(collected):
    spec, plan, runs, tables = collected
    bare = runs.drop(columns=[c for c in runs.columns if c.startswith(("disk_", "cpu_"))])
    units = {k: v for k, v in UNITS.items() if not k.startswith(("disk_", "cpu_"))}
    summary = summarize(bare, spec.factor_names, units)
    context = report_context(spec, plan, bare, summary, {}, with_plots=False,
                             tables=derive_tables(spec, plan, bare, units))
    assert context["explained"] == []
    assert "What moved with each finding" not in _environment().get_template("report.md.j2").render(context)
    assert 'id="moved-with"' not in _environment().get_template("report.html.j2").render(context)


def test_the_report_s_findings_name_what_moved_with_each(rendered):
    # The summary of findings: under each sentence, the first three counters in words, as
    # the terminal prints them.
    md = (rendered / layout.REPORT_MD).read_text()
    summary = md.split("## Summary of findings")[1].split("\n## ")[0]
    lines = summary.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("- ") and "read_bw_kib" in ln)
    assert lines[at + 1].strip().startswith("moved with it: disk_loop0_read_mib_s "), lines[at:at + 2]
    html = (rendered / layout.REPORT_HTML).read_text()
    findings = html.split('<section id="findings">')[1].split("</section>")[0]
    assert 'class="moved">moved with it: disk_loop0_read_mib_s ' in findings
