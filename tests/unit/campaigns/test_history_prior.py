"""compare's history choice steps by the spec's ``report.campaign_sd`` (issue 33, item 1),
not by the built-in default prior, on synthetic campaigns (tests/campaign_factory.py)."""

from __future__ import annotations

from campaign_factory import SPEC, Campaign, make_experiment

from benchmatrix.campaigns.compare import compare_campaigns
from benchmatrix.campaigns.store import list_campaigns


def test_the_history_is_cut_at_a_step_that_the_specs_campaign_sd_makes_clear(tmp_path):
    # Campaigns said to move by 0.5 %: two at the old level, then a 3 % step, then A and
    # B. On the default prior (2.5 %) a 3 % step among four campaigns is wobble
    # (p about 0.5); on the spec's 0.5 % it is a step, and the old two do not count.
    text = SPEC.format(name="prior") + "report:\n  campaign_sd: 0.5%\n"
    made = make_experiment(tmp_path, text, name="prior", cv=0.002, seed=3, campaigns=[
        Campaign(label="old1"), Campaign(label="old2"), Campaign(label="new1", shift=0.03),
        Campaign(label="A", shift=0.03), Campaign(label="B", shift=0.03)])
    by_label = {c.label: c for c in list_campaigns(made.exp)}
    result = compare_campaigns(by_label["A"], by_label["B"])
    names = result.history_names
    assert [names[k] for k in result.history.used] == ["new1", "A"]
    assert all("step" in why for _, why in result.history.left_out), result.history.left_out
