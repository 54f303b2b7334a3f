"""One derivation of cell labels and of metric units (issue 14), and the layout's names."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmatrix import layout
from benchmatrix.campaigns.export import to_bmf
from benchmatrix.campaigns.publish import _cell_labels as site_labels
from benchmatrix.layout import FAILED_STATES, Status
from benchmatrix.report.render import format_value
from benchmatrix.report.terminal import compare_table
from benchmatrix.results.tables import metric_units
from benchmatrix.spec.matrix import Cell

LEVELS = {"ht": True, "cores": 4.0, "bs": "64k"}


def test_a_cell_has_one_label_everywhere():
    label = "ht=true cores=4 bs=64k"
    assert layout.cell_label(LEVELS.items()) == label
    assert Cell("c1", LEVELS).label() == label                      # the spec's cells and the report
    summary = pd.DataFrame({"cell_id": ["c1"], "ht": [np.bool_(True)], "cores": [np.float64(4.0)], "bs": ["64k"],
                            "metric": ["tps"], "mean": [10.0], "ci_low": [9.0], "ci_high": [11.0]})
    assert list(to_bmf(summary, list(LEVELS))) == [label]          # the exported benchmark names
    long = summary[["cell_id", *LEVELS]]
    assert site_labels(long, {"cell_id"}).to_dict() == {"c1": label}   # the published site
    record = {"metric": "tps", "cell_id": "c1", "host": "h1", "mean_a": 1.0, "mean_b": 2.0, "rel_diff_pct": 100.0,
              "ci_low_adj_pct": 50.0, "ci_high_adj_pct": 150.0, "verdict": "better", "unit": "", **LEVELS}
    assert f" {label} " in compare_table([record], list(LEVELS))     # bmx compare's terminal table


def test_level_text_is_the_report_filter_and_shows_missing_values():
    assert format_value is layout.level_text
    for value, text in [(np.bool_(False), "false"), (3.0, "3"), (np.float32(2.5), "2.5"), (None, "–"),
                        (float("nan"), "–"), (pd.NA, "–"), (pd.NaT, "–"), ("NaT-ish", "NaT-ish"), (7, "7")]:
        assert layout.level_text(value) == text, value


def test_the_site_takes_one_unit_per_metric_by_the_one_rule(tmp_path):
    """The history's unit of a metric is metric_units' over the campaigns' summaries: the
    newest campaign that names a unit wins; one without a unit does not blank it."""
    from benchmatrix.campaigns.publish import CampaignPage, build_history
    from benchmatrix.campaigns.store import Campaign

    pages = []
    for k, unit in enumerate(["us", "ms", None]):
        summary = pd.DataFrame({"cell_id": ["c1"], "metric": ["lat"], "unit": [unit], "n": [5], "mean": [1.0 + k],
                                "sd": [0.1], "ci_low": [0.9 + k], "ci_high": [1.1 + k]})
        campaign = Campaign(id=f"c{k}", path=tmp_path / f"c{k}", started_at=f"2026-01-0{k + 1}T00:00:00+00:00")
        pages.append(CampaignPage(campaign, f"c{k}", summary=summary))
    steps = build_history(pages, plots=False).steps
    assert steps["unit"].tolist() == ["ms"]


def test_metric_units_measured_wins_declared_fills_in():
    declared = {"tps": {"unit": "tx/s"}, "lat": {"unit": "ms"}, "bare": None}
    summary = pd.DataFrame({"metric": ["lat", "lat"], "unit": ["us", "us"]})
    units = metric_units(declared, {"tps": "", "extra": "MiB"}, summary)
    assert units == {"tps": "tx/s", "lat": "us", "bare": "", "extra": "MiB"}
    assert metric_units(None) == {}


def test_statuses_and_columns_are_named_once():
    assert layout.STATUSES == ("ok", "failed", "timeout", "unreachable", "invalid", "interrupted")
    assert FAILED_STATES == ("failed", "timeout", "unreachable", "invalid") and Status.OK == "ok"
    assert layout.RUN_COLUMNS[:len(layout.PLAN_COLUMNS)] == layout.PLAN_COLUMNS
    assert layout.comparison_columns(["level", "rw"], host=True)[4:6] == ["host", "by_level"]
