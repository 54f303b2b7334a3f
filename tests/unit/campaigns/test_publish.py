"""``bmx publish``: the static site (benchmatrix.campaigns.publish).

Campaign directories are built synthetically (campaign.json, summary.csv, runs.csv,
report.md); the browser test adds a real report.html rendered by
:func:`benchmatrix.report.render.render_report` and opens every page in headless Chromium.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pandas as pd
import pytest

from benchmatrix.campaigns.publish import CSP, SITE_MARKER, publish
from benchmatrix.errors import BenchmatrixError
from benchmatrix.report.render import format_number

ROOT = Path(__file__).resolve().parents[3]
#: CSS pixels of a phone's viewport (an iPhone 12-15).
PHONE_WIDTH = 390


def make_campaign(path: Path, cid: str, created: str, means: dict[str, float], *, label: str = "",
                  cv: float = 0.01, seed: int = 0, runs: bool = True, warnings: int = 0,
                  metric: str = "tps", unit: str = "tx/s") -> None:
    """A campaign directory: campaign.json, summary.csv (one row per cell), runs.csv, report.md,
    analysis.json (the warnings collect kept).

    ``means`` maps a cell id ``tN_mode`` to its true level; the campaign mean gets
    ``cv`` noise (the campaign-to-campaign variation the step test works on).
    """
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    meta = {"id": cid, "created_at": created}
    if label:
        meta["label"] = label
    (path / "campaign.json").write_text(json.dumps(meta))
    rows = []
    for cell, level in means.items():
        threads, mode = cell[1:].split("_")
        mean = level * rng.normal(1, cv)
        rows.append({"cell_id": cell, "threads": int(threads), "mode": mode, "metric": metric, "unit": unit,
                     "n": 5, "mean": mean, "median": mean, "min": mean * 0.98, "max": mean * 1.02,
                     "sd": mean * 0.01, "cv": 0.01, "ci_low": mean * 0.99, "ci_high": mean * 1.01,
                     "ci_method": "t"})
    pd.DataFrame(rows).to_csv(path / "summary.csv", index=False)
    if runs:
        run_rows = []
        for i, cell in enumerate(means):
            for rep in range(2):
                run_rows.append({"run_id": f"{cell}-r{rep}", "cell_id": cell, "host": "bench1" if rep else "bench2",
                                 "attempt": 1, "status": "failed" if (i, rep) == (0, 0) else "ok"})
        run_rows.append({"run_id": f"{next(iter(means))}-r0", "cell_id": next(iter(means)), "host": "bench2",
                         "attempt": 2, "status": "ok"})                       # the failed run's re-run
        run_rows.append({"run_id": "lost", "cell_id": next(iter(means)), "host": "bench1", "attempt": 1,
                         "status": "timeout"})
        pd.DataFrame(run_rows).to_csv(path / "runs.csv", index=False)
    (path / "report.md").write_text("# report\n\n## Warnings\n\n"
                                    + "".join(f"> **Warning: w{i}**\n> text\n\n" for i in range(warnings))
                                    + "> **Note: a notice**\n")
    checks = [{"check": "cv", "title": f"w{i}", "message": "text", "severity": "warning"} for i in range(warnings)]
    checks.append({"check": "missing", "title": "a notice", "message": "text", "severity": "notice"})
    (path / "analysis.json").write_text(json.dumps({"units": {metric: unit}, "checks": {"warnings": checks}}))


CELLS = {"t1_on": 1000.0, "t1_off": 800.0, "t2_on": 1900.0, "t2_off": 1500.0}


def history_results(root: Path, k_before: int = 4, k_after: int = 4) -> Path:
    """results/ with experiment ``scan``: k_before + k_after campaigns; cell t2_on steps
    up 8 % from campaign ``k_before`` on, the other cells stay flat.

    The noise is seeded: each flat series has a 5 % chance of a false alarm under any
    seed, and these seeds give none (the calibration itself is tested in
    test_changepoint.py)."""
    exp = root / "results" / "scan"
    k_all = k_before + k_after
    for k in range(k_all):
        levels = dict(CELLS)
        if k >= k_before:
            levels["t2_on"] *= 1.08
        where = exp if k == k_all - 1 else exp / "campaigns" / f"c{k:02d}"
        make_campaign(where, f"c{k:02d}aaaaaaaa", f"2026-0{1 + k // 28}-{1 + k % 28:02d}T10:00:00+00:00",
                      levels, label=f"week{k}", seed=300 + k, warnings=k % 2)
    return root / "results"


def test_history_shows_a_planted_step_and_none_in_flat_cells(tmp_path):
    results = history_results(tmp_path)
    counts = publish(results, tmp_path / "site")
    assert counts == {"experiments": 1, "campaigns": 8, "steps": 1}
    steps = pd.read_csv(tmp_path / "site" / "scan" / "steps.csv")
    assert list(steps["cell_id"]) == list(CELLS)              # the summaries' order, not sorted ids
    found = steps[steps["detected"]]
    assert list(found["cell_id"]) == ["t2_on"]
    row = found.iloc[0]
    assert row["step_campaign"] == "week4"
    assert row["relative_low_pct"] < row["relative_pct"] < row["relative_high_pct"] and 5 < row["relative_pct"] < 11
    assert steps.set_index("cell_id").loc[["t1_on", "t1_off", "t2_off"], "detected"].eq(False).all()
    page = (tmp_path / "site" / "scan" / "history.html").read_text()
    table = page[page.index('id="step-table"'):page.index("</table>", page.index('id="step-table"'))]
    assert table.count("<tr>") == 2                     # the header and the one step
    assert "threads=2 mode=on" in table and "week4" in table and re.search(r"\+[5-9]\.\d %|\+10\.\d %", table)
    assert "Holm's adjustment runs across the 4 series tested" in page
    means = page[page.index('<table class="means">'):]
    means = means[:means.index("</table>")]
    assert means.count("<tr>") == 1 + 4 and means.count("<br>") == 4 * 8    # every cell in every campaign
    first = pd.read_csv(tmp_path / "site" / "scan" / "history.csv").iloc[0]
    assert f"{format_number(first['mean'])}<br>" in means and "week7</th>" in means
    assert page.count("<svg") == 1                      # one plot per metric, inline
    history = pd.read_csv(tmp_path / "site" / "scan" / "history.csv")
    assert len(history) == 8 * 4 and list(history["campaign_label"].unique()) == [f"week{k}" for k in range(8)]


def test_flat_history_shows_no_step(tmp_path):
    exp = tmp_path / "results" / "flat"
    for k in range(5):
        make_campaign(exp / "campaigns" / f"c{k}" if k < 4 else exp, f"f{k}", f"2026-02-0{k + 1}T00:00:00Z",
                      CELLS, seed=7 + k)
    publish(tmp_path / "results", tmp_path / "site")
    page = (tmp_path / "site" / "flat" / "history.html").read_text()
    assert 'id="no-steps"' in page and 'id="step-table"' not in page
    assert not pd.read_csv(tmp_path / "site" / "flat" / "steps.csv")["detected"].any()


def test_a_cell_missing_from_some_campaigns_is_tested_on_those_it_has(tmp_path):
    exp = tmp_path / "results" / "gaps"
    for k in range(5):
        cells = dict(CELLS)
        if k == 2:
            del cells["t1_on"]                     # not measured in one campaign
        if k >= 3:
            cells["t2_off"] = 1500.0 * 1.3          # a step...
        if k < 3:
            del cells["t2_off"]                    # ... in a cell new since campaign 3: 2 campaigns only
        make_campaign(exp / "campaigns" / f"c{k}" if k < 4 else exp, f"g{k}", f"2026-04-0{k + 1}T00:00:00Z",
                      cells, seed=40 + k)
    publish(tmp_path / "results", tmp_path / "site")
    steps = pd.read_csv(tmp_path / "site" / "gaps" / "steps.csv").set_index("cell_id")
    assert steps.loc["t1_on", "campaigns"] == 4 and steps.loc["t1_on", "tested"]
    assert steps.loc["t2_off", "campaigns"] == 2 and not steps.loc["t2_off", "tested"]
    assert not steps.loc["t2_off", "detected"] and steps.loc[["t1_off", "t2_on"], "tested"].all()
    page = (tmp_path / "site" / "gaps" / "history.html").read_text()
    assert re.search(r"threads=2 mode=off</td><td>tps</td><td class=\"num\">2</td>.*?insufficient data", page,
                     flags=re.S)


def test_two_campaigns_get_a_history_without_a_step_test(tmp_path):
    exp = tmp_path / "results" / "pair"
    make_campaign(exp / "campaigns" / "a", "a1", "2026-01-01T00:00:00Z", CELLS)
    make_campaign(exp, "b2", "2026-01-02T00:00:00Z", {**CELLS, "t1_on": 2000.0})
    publish(tmp_path / "results", tmp_path / "site")
    page = (tmp_path / "site" / "pair" / "history.html").read_text()
    assert "Too few campaigns for the step test (2; it needs 3)" in page
    assert not pd.read_csv(tmp_path / "site" / "pair" / "steps.csv")["tested"].any()


def test_index_and_experiment_page_list_campaigns_with_their_counts(tmp_path):
    results = history_results(tmp_path, 1, 1)
    one = results / "single"
    make_campaign(one, "s1", "2026-03-01T08:30:00Z", {"t1_on": 1.0}, runs=False)
    (one / "hosts" / "db1").mkdir(parents=True)
    (results / "scan" / "compare" / "week0_vs_week1").mkdir(parents=True)
    (results / "scan" / "compare" / "week0_vs_week1" / "compare.html").write_text("<html><body>cmp</body></html>")
    (results / "scan" / "compare" / "week0_vs_week1" / "compare.csv").write_text("metric\n")
    (results / "scan" / "report.html").write_text("<html><body>report</body></html>")
    publish(results, tmp_path / "site")
    site = tmp_path / "site"
    index = (site / "index.html").read_text()
    rows = re.findall(r"<tr><td><a href=\"(\w+)/index.html\">.*?</tr>", index, flags=re.S)
    assert rows == ["scan", "single"]
    scan_row = re.search(r"<tr><td><a href=\"scan/index.html\">.*?</tr>", index, flags=re.S).group(0)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", scan_row, flags=re.S)]
    # experiment, campaigns, latest, date, hosts, cells, runs ok, failed, warnings, history, comparisons
    assert cells == ["scan", "2", "week1", "2026-01-02 10:00 UTC", "bench1, bench2", "4", "8", "1", "1",
                     "history", "1"]
    single = re.search(r"<tr><td><a href=\"single/index.html\">.*?</tr>", index, flags=re.S).group(0)
    assert "db1" in single and "one campaign" in single and "2026-03-01 08:30 UTC" in single
    exp_page = (site / "scan" / "index.html").read_text()
    assert exp_page.index("week1") < exp_page.index("week0")          # newest first
    assert 'href="campaigns/c01aaaaaaaa/report.html"' in exp_page
    assert 'href="compare/week0_vs_week1/compare.html"' in exp_page
    for f in ("summary.csv", "runs.csv"):
        assert f'href="campaigns/c00aaaaaaaa/{f}" download' in exp_page
        assert (site / "scan" / "campaigns" / "c00aaaaaaaa" / f).read_bytes() == \
            (results / "scan" / "campaigns" / "c00" / f).read_bytes()
    assert (site / "scan" / "compare" / "week0_vs_week1" / "compare.html").is_file()
    assert not (site / "single" / "history.html").exists()


def test_publish_replaces_its_own_site_and_refuses_other_directories(tmp_path):
    results = history_results(tmp_path, 1, 2)
    site = tmp_path / "site"
    publish(results, site)
    (site / "stale.html").write_text("old")
    with pytest.raises(BenchmatrixError, match=r"holds 1 file\(s\) bmx publish did not write \(stale.html\)"):
        publish(results, site)                                     # never deleted without a word
    said: list[str] = []
    publish(results, site, replace=True, say=said.append)
    assert said == ["removed 1 file(s) bmx publish did not write: stale.html"]
    assert (site / SITE_MARKER).is_file() and not (site / "stale.html").exists()
    other = tmp_path / "docs"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(BenchmatrixError, match="not empty and not a site bmx publish wrote"):
        publish(results, other)
    assert (other / "keep.txt").read_text() == "mine"
    (results / "scan" / "summary.csv").write_text('cell_id,metric,mean\n"t1_on,tps\n')
    with pytest.raises(BenchmatrixError, match=r"results/scan/summary.csv: not a readable CSV table"):
        publish(results, site)
    assert (site / "index.html").is_file()                        # the earlier site is intact
    with pytest.raises(BenchmatrixError, match="must lie outside the results directory"):
        publish(results, results / "site")
    with pytest.raises(BenchmatrixError, match="no experiment with a campaign"):
        publish(tmp_path / "docs", tmp_path / "site2")
    assert not list(tmp_path.glob(".site*"))                   # no build directory left behind


def test_bmx_publish_command(tmp_path):
    results = history_results(tmp_path, 2, 1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "publish", "--to", str(tmp_path / "site"),
                           "--results", str(results)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 experiment(s), 3 campaign(s)" in done.stdout and str(tmp_path / "site" / "index.html") in done.stdout
    bad = subprocess.run([sys.executable, "-m", "benchmatrix.cli", "publish", "--to", str(tmp_path / "s2"),
                          "--results", str(tmp_path / "nothing")], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "no results directory" in bad.stderr


# ------------------------------------------------------------------ the site in a browser

class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.urls.append(value)


def crawl(site: Path) -> tuple[set[Path], list[str]]:
    """Every HTML file reachable from index.html, and every link that does not resolve."""
    seen, todo, broken = set(), [site / "index.html"], []
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for url in parser.urls:
            parts = urlsplit(url)
            if parts.scheme in ("data",) or (not parts.scheme and not parts.path):   # data: or #anchor
                continue
            if parts.scheme or parts.netloc or parts.path.startswith("/"):
                broken.append(f"{page.relative_to(site)}: not relative: {url}")
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if site.resolve() not in target.parents or not target.is_file():
                broken.append(f"{page.relative_to(site)}: {url}")
            elif target.suffix == ".html":
                todo.append(target)
    return seen, broken


#: A laptop's viewport width, beside the phone's.
LAPTOP_WIDTH = 1366
#: The smallest computed font size of any visible HTML element that holds text, in px (a
#: plot's SVG text is scaled with its picture: PLOT_SCALE checks that instead).
SMALLEST_TEXT_PX = ("Math.min(...[...document.body.querySelectorAll('*')].filter(e => e.offsetParent !== null"
                    " && !e.closest('svg') && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))"
                    ".map(e => parseFloat(getComputedStyle(e).fontSize)), 99)")
#: The smallest ratio of a plot's drawn width to its own (viewBox) width: below 0.8 its labels shrink.
PLOT_SCALE = ("Math.min(...[...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width"
              " / (s.viewBox.baseVal.width || s.getBoundingClientRect().width)), 1)")


@pytest.mark.slow
def test_site_in_headless_chromium(tmp_path):
    from browser import DevTools, chromium_binary
    from browser import campaign as report_campaign

    binary = chromium_binary()
    (tmp_path / "render").mkdir()
    report_html = report_campaign(tmp_path / "render")          # a real, self-contained report
    results = history_results(tmp_path, 3, 3)
    for d in [results / "scan", *(results / "scan" / "campaigns").iterdir()]:
        (d / "report.html").write_bytes(report_html.read_bytes())
    (results / "scan" / "runs_long.parquet").write_bytes(b"PAR1")
    cmp_dir = results / "scan" / "compare" / "week4_vs_week5"
    cmp_dir.mkdir(parents=True)
    (cmp_dir / "compare.html").write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>c</title></head>"
                                          "<body><a href='compare.csv'>csv</a></body></html>")
    (cmp_dir / "compare.csv").write_text("metric\n")
    site = tmp_path / "site"
    publish(results, site)

    pages, broken = crawl(site)
    assert not broken, broken
    names = {p.relative_to(site).as_posix() for p in pages}
    assert {"index.html", "scan/index.html", "scan/history.html", "scan/compare/week4_vs_week5/compare.html",
            "scan/campaigns/c05aaaaaaaa/report.html"} <= names, names
    for page in site.rglob("*.html"):
        text = page.read_text()
        # Nothing that could be fetched: the only URLs are SVG/XML namespace names.
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", text))
        assert all(u.startswith("http://www.w3.org/") for u in urls), (page, urls)
    ours = ["index.html", "scan/index.html", "scan/history.html"]
    for name in ours:
        assert f'http-equiv="Content-Security-Policy" content="{CSP}"' in html.unescape((site / name).read_text())

    browser = DevTools(binary, tmp_path / "profile")
    try:
        session = browser.page_session()
        browser.send("Emulation.setDeviceMetricsOverride", {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1,
                                                            "mobile": True}, session=session)

        def evaluate(expr: str):
            res = browser.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session)
            return res["result"].get("value")

        widths = {}
        for name in sorted(names):
            browser.events.clear()
            browser.send("Page.navigate", {"url": (site / name).as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired")
            if name in ours:
                # Phone width: the page itself never scrolls sideways (wide tables scroll in their box).
                # (Compared with 390 itself: a mobile viewport widens to content that overflows it.)
                widths[name] = evaluate("document.documentElement.scrollWidth")
            if name == "scan/history.html":
                assert evaluate("document.querySelectorAll('#step-table tbody tr').length") == 1
                assert evaluate("document.querySelector('figure svg').getBoundingClientRect().width") <= PHONE_WIDTH
                shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session, timeout=60)
                assert len(shot["data"]) > 10_000
            if name == "index.html":
                assert evaluate("document.querySelectorAll('#experiments tbody tr').length") == 1
            events = list(browser.events)
            requests = [e["params"]["request"]["url"] for e in events
                        if e.get("method") == "Network.requestWillBeSent"]
            remote = [u for u in requests if not u.startswith(("file:", "data:", "about:"))]
            assert not remote, (name, remote)
            errors = [e["params"] for e in events
                      if e.get("method") == "Runtime.exceptionThrown"
                      or (e.get("method") == "Runtime.consoleAPICalled"
                          and e["params"].get("type") in ("error", "assert"))
                      or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")]
            assert not errors, (name, errors)
        # A laptop: the site's own pages neither scroll sideways nor shrink their text below 12 px.
        browser.send("Emulation.setDeviceMetricsOverride", {"width": LAPTOP_WIDTH, "height": 768,
                                                            "deviceScaleFactor": 1, "mobile": False}, session=session)
        laptop = {}
        for name in ours:
            browser.events.clear()
            browser.send("Page.navigate", {"url": (site / name).as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired")
            laptop[name] = (evaluate("document.documentElement.scrollWidth"), evaluate(SMALLEST_TEXT_PX),
                            evaluate(PLOT_SCALE))
    finally:
        browser.close()
    assert widths and all(w <= PHONE_WIDTH for w in widths.values()), widths
    assert all(w <= LAPTOP_WIDTH and px >= 12 and scale >= 0.8 for w, px, scale in laptop.values()), laptop


# ------------------------------------------------------------------ scale

@pytest.mark.slow
def test_publish_100_campaigns_of_1000_cells_in_under_a_minute(tmp_path):
    rng = np.random.default_rng(5)
    exp = tmp_path / "results" / "big"
    cells = [f"c{i:04d}" for i in range(1000)]
    base = rng.uniform(100, 10000, len(cells))
    for k in range(100):
        path = exp if k == 99 else exp / "campaigns" / f"k{k:03d}"
        path.mkdir(parents=True, exist_ok=True)
        (path / "campaign.json").write_text(
            json.dumps({"id": f"k{k:03d}", "created_at": f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}Z"}))
        mean = base * rng.normal(1, 0.01, len(cells))
        if k >= 50:
            mean[7] *= 1.2                                   # one planted step
        pd.DataFrame({"cell_id": cells, "size": np.arange(1000), "metric": "iops", "unit": "IO/s", "n": 5,
                      "mean": mean, "ci_low": mean * 0.99, "ci_high": mean * 1.01}).to_csv(path / "summary.csv",
                                                                                        index=False)
    start = time.perf_counter()
    counts = publish(tmp_path / "results", tmp_path / "site")
    elapsed = time.perf_counter() - start
    assert counts["campaigns"] == 100
    assert elapsed < 60, elapsed
    steps = pd.read_csv(tmp_path / "site" / "big" / "steps.csv")
    assert "c0007" in set(steps.loc[steps["detected"], "cell_id"])
    assert steps["detected"].mean() < 0.1                    # about alpha of the flat cells
    assert "More than 50 cells or 30 campaigns" in (tmp_path / "site" / "big" / "history.html").read_text()


# ------------------------------------------------------------------ campaigns as bmx run leaves them

REAL_SPEC = """\
name: e2e_publish
description: two campaigns for the site
inventory: config/inventory/test.yml
factors:
  bs: [4k, 64k]
workload:
  role: workload_fio
  vars: {rw: read, bs: "{{ bs }}", ioengine: psync, size: 8m, runtime: 300ms, time_based: 1}
  timeout: 60
replicates: 2
warmup: 1
order: {strategy: random, seed: 3}
"""


def test_publish_two_campaigns_as_bmx_run_leaves_them(tmp_path, capsys):
    """Two campaigns of a fio experiment as ``bmx run --campaign`` leaves them, made by
    tests/campaign_factory.py (synthetic results: plan, records, every table and the
    reports through the package's own writers and collect; no Snakemake or Ansible), the
    first kept in campaigns/ID/ by the second's label."""
    from campaign_factory import Campaign, make_experiment

    from benchmatrix import cli

    made = make_experiment(tmp_path / "project", REAL_SPEC, name="e2e_publish", render=True, seed=3,
                           metrics={"read_iops": "IO/s", "read_bw_kib": "KiB/s"},
                           campaigns=[Campaign(label="first"), Campaign(label="second")])
    first_id, second_id = made.ids
    assert made.campaign_dir(0) == made.exp / "campaigns" / first_id

    site = tmp_path / "site"
    assert cli.main(["publish", "--to", str(site), "--results", str(made.root / "results")]) == 0
    out, err = capsys.readouterr()
    assert "1 experiment(s), 2 campaign(s)" in out, out + err
    index = (site / "index.html").read_text()
    row = re.search(r"<tr><td><a href=\"e2e_publish/index.html\">.*?</tr>", index, flags=re.S).group(0)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
    assert cells[1] == "2" and cells[2] == "second" and cells[4] == "localhost"   # the latest, by its label
    assert cells[5:8] == ["2", "6", "0"]                     # 2 cells; 2 x (2 + 1 warm-up) runs ok, none failed
    for cid in (first_id, second_id):
        for f in ("report.html", "summary.csv", "runs.csv", "runs_long.parquet"):
            assert (site / "e2e_publish" / "campaigns" / cid / f).is_file(), (cid, f)
    history = pd.read_csv(site / "e2e_publish" / "history.csv")
    assert set(history["campaign"]) == {first_id, second_id} and set(history["bs"]) == {"4k", "64k"}
    assert len(history) == 2 * 2 * history["metric"].nunique()          # campaigns x cells x metrics
    assert "Too few campaigns for the step test" in (site / "e2e_publish" / "history.html").read_text()
    _, broken = crawl(site)
    assert not broken, broken
