"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) opens
it with no console error and no network request, shows tables, warnings and plots,
and takes a screenshot.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so the test needs
no extra Python package and no open port.
"""

from __future__ import annotations

import base64

import pytest
from browser import DevTools, campaign, chromium_binary

pytestmark = pytest.mark.slow


def test_html_report_in_headless_chromium(tmp_path):
    binary = chromium_binary()
    html = campaign(tmp_path)
    browser = DevTools(binary, tmp_path / "profile")
    try:
        session = browser.page_session()
        browser.send("Page.navigate", {"url": html.as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")

        def evaluate(expr: str):
            res = browser.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session)
            return res["result"].get("value")

        # Every embedded SVG plot decoded (an image that failed to load has no natural width).
        assert evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        plots = evaluate("document.querySelectorAll('#plots figure img').length")
        assert plots >= 4, plots
        assert evaluate("document.querySelectorAll('table.metric').length") == 2
        assert evaluate("document.querySelectorAll('table.pivot').length") == 1
        assert evaluate("document.querySelector('#comparisons table tbody').rows.length") == 12
        warnings = evaluate("Array.from(document.querySelectorAll('.warn')).map(w => w.dataset.check)")
        assert warnings[0] == "drift" and "failed" in warnings, warnings
        assert evaluate("document.querySelector('#warnings figure img') !== null")   # the control plot
        assert "read_ahead_kb=4096 vs 0" in evaluate("document.querySelector('#findings').innerText")
        assert "compare:" in evaluate("document.querySelector('#spec pre').innerText")

        metrics = browser.send("Page.getLayoutMetrics", session=session)
        height = int(metrics["cssContentSize"]["height"])
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                       "clip": {"x": 0, "y": 0, "width": 1280, "height": height,
                                                                "scale": 1}}, session=session, timeout=60)
        png = tmp_path / "report.png"
        png.write_bytes(base64.b64decode(shot["data"]))
        assert png.stat().st_size > 50_000
        events = list(browser.events)
    finally:
        browser.close()

    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    assert requests, "the page load itself should be seen"
    remote = [u for u in requests if not u.startswith(("file:", "data:", "about:"))]
    assert not remote, remote
    errors = [e["params"] for e in events
              if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")]
    assert not errors, errors


#: Visible text smaller than this (CSS px) is hard to read on a phone.
MIN_FONT_PX = 12
#: A plot may be shrunk to this share of its natural width (its 9 pt text then stays above 9.5 px).
MIN_PLOT_SCALE = 0.8

_LAYOUT = """(() => {
  // Shown now: not inside a closed <details> (checkVisibility sees its hidden content).
  const visible = e => e.checkVisibility({checkVisibilityCSS: true}) && e.getClientRects().length > 0;
  const texts = Array.from(document.querySelectorAll('body *')).filter(e => visible(e) &&
      Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim()));
  const small = texts.filter(e => parseFloat(getComputedStyle(e).fontSize) < %d)
      .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 40));
  const plots = Array.from(document.querySelectorAll('#plots figure img')).map(i =>
      ({name: i.closest('figure').id, scale: i.getBoundingClientRect().width / i.naturalWidth,
        top: Math.round(i.getBoundingClientRect().top + window.scrollY)}));
  const order = ['findings', 'warnings'].map(id => document.getElementById(id).getBoundingClientRect().top);
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, small, plots,
          findingsFirst: order[0] < order[1],
          warningsOpen: document.querySelectorAll('details.warn[open]').length,
          warnings: document.querySelectorAll('details.warn').length,
          orderOpen: document.querySelector('#order details').open,
          hostRows: Array.from(document.querySelectorAll('#hosts table.kv tr')).map(r => r.cells[0].innerText)};
})()""" % MIN_FONT_PX


def test_report_reads_on_a_phone_and_a_laptop(tmp_path):
    binary = chromium_binary()
    html = campaign(tmp_path)
    browser = DevTools(binary, tmp_path / "profile")
    pages = {}
    try:
        for width in (390, 1366):
            session = browser.page_session()
            browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 844,
                                                                 "deviceScaleFactor": 1, "mobile": width < 600},
                         session=session)
            browser.events.clear()  # wait for this tab's load, not the previous one's
            browser.send("Page.navigate", {"url": html.as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired")
            res = browser.send("Runtime.evaluate", {"expression": _LAYOUT, "returnByValue": True}, session=session)
            pages[width] = res["result"]["value"]
            height = int(browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"])
            shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                           "clip": {"x": 0, "y": 0, "width": width, "height": height,
                                                                    "scale": 1}}, session=session, timeout=60)
            png = tmp_path / f"report_{width}.png"
            png.write_bytes(base64.b64decode(shot["data"]))
            assert png.stat().st_size > 20_000
    finally:
        browser.close()
    for width, page in pages.items():
        # No sideways scrolling of the page: wide tables scroll inside their own box. (A phone
        # widens its layout viewport to content that overflows: innerWidth says so too.)
        assert page["innerWidth"] == width and page["scrollWidth"] <= width, (width, page)
        assert not page["small"], (width, page["small"])
        assert all(p["scale"] >= MIN_PLOT_SCALE for p in page["plots"]), (width, page["plots"])
        # Two levels of a numeric factor (read_ahead_kb 0, 4096): dots with intervals, not a line.
        names = [p["name"] for p in page["plots"]]
        assert "plot-dots_read_bw_kib" in names and not any(n.startswith("plot-lines_") for n in names), names
        assert page["findingsFirst"] and page["warnings"] >= 2 and page["warningsOpen"] == 0, (width, page)
        assert page["orderOpen"] is False and page["hostRows"] == ["hostname", "kernel"], (width, page)
    # One plot per row on a phone, side by side on a laptop.
    rows = {w: len({p["top"] for p in page["plots"]}) for w, page in pages.items()}
    assert rows[390] == len(pages[390]["plots"]) and rows[1366] < len(pages[1366]["plots"]), rows
