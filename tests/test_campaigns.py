"""Finding and naming campaigns (benchmatrix.campaigns)."""

from __future__ import annotations

import json

import pytest

from benchmatrix.campaigns import find_campaign, list_campaigns
from benchmatrix.errors import BenchmatrixError


def _make(path, **meta):
    path.mkdir(parents=True, exist_ok=True)
    (path / "campaign.json").write_text(json.dumps(meta))


def test_campaigns_are_listed_oldest_first_with_the_current_one_last(tmp_path):
    exp = tmp_path / "results" / "x"
    _make(exp, id="cur000000000", created_at="2026-03-01T00:00:00+00:00")
    _make(exp / "campaigns" / "b", id="bbb111111111", created_at="2026-02-01T00:00:00+00:00", label="kernel-6.6")
    _make(exp / "campaigns" / "a", id="aaa222222222", created_at="2026-01-01T00:00:00+00:00")
    (exp / "campaigns" / "junk").mkdir()
    found = list_campaigns(exp)
    assert [c.id for c in found] == ["aaa222222222", "bbb111111111", "cur000000000"]
    assert [c.current for c in found] == [False, False, True]
    assert found[1].name == "kernel-6.6" and found[0].name == "aaa222222222"


def test_a_campaign_is_found_by_id_prefix_label_or_directory(tmp_path):
    exp = tmp_path / "x"
    _make(exp, id="cur000000000")
    _make(exp / "campaigns" / "b", id="bbb111111111", label="before")
    assert find_campaign(exp, "bbb111111111").label == "before"
    assert find_campaign(exp, "before").id == "bbb111111111"
    assert find_campaign(exp, "cur").current
    assert find_campaign(exp, str(exp / "campaigns" / "b")).id == "bbb111111111"
    with pytest.raises(BenchmatrixError, match="no campaign 'zzz'; campaigns: bbb111111111 \\(before\\), cur000000000"):
        find_campaign(exp, "zzz")


def test_an_ambiguous_prefix_is_refused(tmp_path):
    exp = tmp_path / "x"
    _make(exp / "campaigns" / "a", id="ab1")
    _make(exp / "campaigns" / "b", id="ab2")
    with pytest.raises(BenchmatrixError, match="names 2 campaigns"):
        find_campaign(exp, "ab")
