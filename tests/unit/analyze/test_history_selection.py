"""Which campaigns count in compare's history, and which host state changed (issue 33,
items 2 and 3): the pure rules of :mod:`benchmatrix.analyze.campaign_model`."""

from __future__ import annotations

import pytest

from benchmatrix.analyze.campaign_model import (
    CampaignSummary,
    busy_hosts,
    host_state_changes,
    select_history,
)
from benchmatrix.errors import BenchmatrixError

STATE = {"governor": "performance", "turbo": "off", "thp": "madvise", "mitigations": "auto", "numa_nodes": "1",
         "kernel": "6.1"}


def summary(key: str, level: float = 0.0, load: float = 0.1, digest: str = "d1", **state) -> CampaignSummary:
    return CampaignSummary(key=key, name=key, spec_digest=digest, hosts={"h1": {**STATE, **state}},
                           load={"h1": load}, cpus={"h1": 4.0}, level=level)


def test_auto_keeps_only_comparable_campaigns_and_says_why_the_others_are_out():
    a = summary("A")
    history = [summary("gov", governor="powersave"), summary("digest", digest="d2"), summary("busy", load=5.0),
               summary("ok1", load=0.2), summary("ok2", level=0.01), a]
    chosen = select_history(a, history, "auto")
    assert chosen.used == ("ok1", "ok2", "A")
    reasons = dict(chosen.left_out)
    assert "governor" in reasons["gov"] and "powersave" in reasons["gov"]
    assert "spec digest" in reasons["digest"]
    assert "load" in reasons["busy"]


def test_auto_keeps_only_a_side_of_the_last_step():
    # Three campaigns at twice the level, then a step down to A's level: the earlier
    # three are the other side of the step and do not count as "campaigns wobble".
    a = summary("A", level=0.0)
    history = [summary(f"old{i}", level=0.69 + 0.01 * (i % 2)) for i in range(3)]
    history += [summary("new1", level=0.01), summary("new2", level=-0.01), a]
    chosen = select_history(a, history, "auto")
    assert chosen.used == ("new1", "new2", "A")
    assert all("step" in why for _, why in chosen.left_out) and len(chosen.left_out) == 3


def test_a_history_without_a_step_is_kept_whole():
    a = summary("A")
    history = [summary(f"c{i}", level=0.01 * ((-1) ** i)) for i in range(5)] + [a]
    assert select_history(a, history, "auto").used == ("c0", "c1", "c2", "c3", "c4", "A")


def test_overrides_none_a_count_and_labels():
    a = summary("A")
    history = [summary("c1"), summary("gov", governor="powersave"), summary("c2"), summary("c3"), a]
    assert select_history(a, history, "none").used == ()
    # N: the N most recent comparable ones (the powersave campaign is not comparable).
    assert select_history(a, history, 3).used == ("c2", "c3", "A")
    assert select_history(a, history, ["c1", "gov"]).used == ("c1", "gov")
    with pytest.raises(BenchmatrixError, match="nope"):
        select_history(a, history, ["c1", "nope"])


def test_host_state_changes_name_each_field_and_a_load_out_of_range():
    a, b = summary("A"), summary("B", governor="powersave", thp="always")
    assert [(h, f) for h, f, _, _ in host_state_changes(a, b)] == [("h1", "governor"), ("h1", "thp")]
    # An ordinary wobble of the load is no change; 0.1 -> 6 is.
    assert host_state_changes(a, summary("B", load=0.2)) == []
    assert host_state_changes(a, summary("B", load=6.0)) == [("h1", "load_before", "0.1", "6")]


def test_a_busy_host_is_named_in_one_line():
    a, b = summary("A", load=0.2), summary("B", load=6.0)
    lines = busy_hosts(a, b)
    assert len(lines) == 1 and "h1" in lines[0] and "before B's runs" in lines[0] and "\n" not in lines[0]
    assert busy_hosts(a, summary("B", load=0.3)) == []
    # Busy on the baseline's side too: the comparison is as suspect.
    assert "before B's runs" in busy_hosts(b, a)[0]


def test_a_gap_in_a_host_state_column_is_no_change(tmp_path):
    # pandas reads a column with a gap as floats: numa_nodes 1.0 is the 1 of a campaign without one.
    import pandas as pd

    from benchmatrix.campaigns.compare import campaign_summary
    from benchmatrix.campaigns.store import Campaign

    c = Campaign("x", tmp_path)
    gap = campaign_summary(c, pd.DataFrame({"host": ["h1", "h1"], "env_numa_nodes": [1, None]}))
    whole = campaign_summary(c, pd.DataFrame({"host": ["h1", "h1"], "env_numa_nodes": [1, 1]}))
    assert gap.hosts["h1"]["numa_nodes"] == "1"
    assert host_state_changes(gap, whole) == []
