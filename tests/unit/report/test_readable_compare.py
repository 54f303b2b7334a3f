"""Issue 38, item 6: compare.html and compare.md in human units, sorted by effect, with the
unbounded rule, and compare.html's verdict on a 390 px phone's screen (headless Chromium,
tests/browser.py).

The comparison is synthetic: compare.csv's own columns (compare_columns) with a small, a
large and an unbounded effect; the statistics are not under test here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from benchmatrix.campaigns.compare import CampaignComparison, compare_columns, write_comparison
from benchmatrix.campaigns.store import Campaign

PHONE_WIDTH = 390


def _comparison(tmp_path: Path, long_names: bool = False) -> CampaignComparison:
    """Three rows of compare.csv, as compare_frames lays them out: a small, a large and
    an unbounded effect, in that (unsorted) order."""
    cols = compare_columns(["x"])
    rows = []
    for i, (rel, lo, hi, verdict) in enumerate([(2.0, -1.0, 5.0, "inconclusive"), (-40.0, -45.0, -35.0, "worse"),
                                                 (12.0, -100.0, 8213105.8, "inconclusive")]):
        cell = f"c{i}"
        rows.append({"cell_id": cell, "x": ("a-rather-long-level-name-" * 3 if long_names else "") + str(i),
                     "host": "h1", "metric": "read_bw_kib", "unit": "KiB/s", "better": "higher", "n_a": 5, "n_b": 5,
                     "mean_a": 81_067.0 * (i + 1), "mean_b": 81_067.0 * (i + 1) * (1 + rel / 100),
                     "rel_diff_pct": rel, "ci_low_pct": lo, "ci_high_pct": hi, "ci_low_adj_pct": lo,
                     "ci_high_adj_pct": hi, "p_value": 0.01, "p_value_unadjusted": 0.01, "df": 8.0,
                     "verdict": verdict, "environment": "", "scale": "log", "threshold_pct": 5.0,
                     "detectable_pct": 9.0, "basis": "prior", "campaign_sd_pct": 1.0})
    table = pd.DataFrame(rows).reindex(columns=cols)
    return CampaignComparison(Campaign("aaa", tmp_path / "a"), Campaign("bbb", tmp_path / "b"), table,
                              factor_names=["x"], family=["read_bw_kib"])


def _cells_rows(page: str) -> list[str]:
    body = page.split('id="cells"')[1].split("</tbody>")[0]
    return re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1], flags=re.S)


def test_compare_pages_are_in_human_units_sorted_by_effect_with_the_unbounded_rule(tmp_path):
    paths = write_comparison(_comparison(tmp_path), tmp_path / "out")
    page = paths["compare.html"].read_text()
    rows = _cells_rows(page)
    assert [re.search(r"x=(\d)", r).group(1) for r in rows] == ["1", "2", "0"]      # |effect| 40, 12, 2
    assert "81,067" not in page and "79.17 MiB/s" in page
    assert "8213105" not in page and "unbounded" in rows[1]
    md = paths["compare.md"].read_text()
    assert "81,067" not in md and "8213105" not in md
    md_rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "x=" in ln]
    assert [re.search(r"x=(\d)", r).group(1) for r in md_rows] == ["1", "2", "0"]


def test_the_compare_pages_verdict_is_on_screen_at_390_px(tmp_path):
    from browser import DevTools, chromium_binary

    binary = chromium_binary()
    page = write_comparison(_comparison(tmp_path, long_names=True), tmp_path / "out")["compare.html"]
    browser = DevTools(binary, tmp_path / "profile")
    try:
        session = browser.page_session()
        browser.send("Emulation.setDeviceMetricsOverride", {"width": PHONE_WIDTH, "height": 844,
                                                            "deviceScaleFactor": 1, "mobile": True}, session=session)
        browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        res = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": """
            Array.from(document.querySelectorAll('#cells tbody tr')).map(tr => {
              const v = tr.querySelector('.verdict').getBoundingClientRect();
              return [v.left, v.right, v.width, tr.querySelector('.verdict').innerText];
            })"""}, session=session)
        boxes = res["result"]["value"]
    finally:
        browser.close()
    assert len(boxes) == 3
    for left, right, width, text in boxes:
        assert width > 0 and left >= 0 and right <= PHONE_WIDTH, boxes
        assert text.strip() in ("worse", "inconclusive")
