"""Spec key report.campaign_sd: the prior campaign-to-campaign SD of bmx compare (issue 33, item 1)."""

from __future__ import annotations

import pytest
from test_spec import BASE, assert_one_error, write

from benchmatrix.spec.load import DEFAULT_CAMPAIGN_SD, campaign_sd_fraction, load_spec


def test_default_and_given_campaign_sd_globally_or_per_metric(tmp_path):
    report = load_spec(write(tmp_path, BASE)).report
    assert report.campaign_sd == DEFAULT_CAMPAIGN_SD == 0.025 and report.campaign_sd_for("x") == 0.025
    report = load_spec(write(tmp_path, BASE + "report:\n  campaign_sd: 1%\n")).report
    assert report.campaign_sd_for("x") == pytest.approx(0.01)
    report = load_spec(write(tmp_path, BASE + "report:\n  campaign_sd: {default: 0.5%, p99: 0.05}\n")).report
    assert (report.campaign_sd_for("x"), report.campaign_sd_for("p99")) == pytest.approx((0.005, 0.05))
    # 0 says campaigns do not move at all: allowed, the history still refines it.
    assert load_spec(write(tmp_path, BASE + "report:\n  campaign_sd: 0%\n")).report.campaign_sd == 0.0


@pytest.mark.parametrize("value", ["150%", "2", "-1%", "'lots'"])
def test_a_campaign_sd_that_is_no_percentage_is_refused_at_its_line(tmp_path, value):
    assert_one_error(write(tmp_path, BASE + f"report:\n  alpha: 0.05\n  campaign_sd: {value}\n"), 11,
                     "report.campaign_sd")


def test_a_per_metric_campaign_sd_is_refused_at_its_own_line(tmp_path):
    assert_one_error(write(tmp_path, BASE + "report:\n  campaign_sd:\n    default: 1%\n    p99: 200%\n"), 12,
                     "report.campaign_sd.p99", "campaign SD '200%'")


def test_campaign_sd_fraction():
    assert campaign_sd_fraction("1.5%") == pytest.approx(0.015) and campaign_sd_fraction(0.03) == 0.03
    with pytest.raises(ValueError, match="write a percentage such as 2%"):
        campaign_sd_fraction("1")
