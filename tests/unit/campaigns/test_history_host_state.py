"""The site's history page says where the host state changed between campaigns and
names a busy host (issue 33, item 3), on synthetic campaigns (tests/campaign_factory.py)."""

from __future__ import annotations

import pandas as pd
from campaign_factory import Campaign, make_experiment

from benchmatrix.campaigns.publish import publish


def test_the_history_page_names_the_host_state_that_changed(tmp_path):
    made = make_experiment(tmp_path, campaigns=[
        Campaign(label="base"), Campaign(label="same"), Campaign(label="thp", host_env={"thp": "always"}),
        Campaign(label="busy", host_env={"thp": "always"})], seed=3)
    runs = pd.read_csv(made.exp / "runs.csv")
    runs["env_load_before"] = 6.0  # the factory draws 0-0.3: made busy here (2 CPUs)
    runs.to_csv(made.exp / "runs.csv", index=False)
    publish(made.root / "results", tmp_path / "site")
    page = (tmp_path / "site" / "synth" / "history.html").read_text()
    assert "Host state changes" in page
    assert "thp madvise -&gt; always" in page or "thp madvise → always" in page
    # Nothing changed from base to same: no line for it.
    assert "<tr><td>same</td>" not in page.split("Host state changes", 1)[1].split("</table>", 1)[0]
    assert "busy host: localhost had load 6" in page and "before busy&#39;s runs" in page
