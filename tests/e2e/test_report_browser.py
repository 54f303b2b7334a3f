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
