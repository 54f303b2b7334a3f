"""The typed view of a loaded spec: report settings, hosts mode, whole-plot factors and
the other keys analysis, report and execution read, with the schema's defaults."""

from __future__ import annotations

import copy
import dataclasses
import textwrap

import pytest

from benchmatrix.spec.load import (
    DEFAULT_ALPHA,
    DEFAULT_CV_THRESHOLD,
    DEFAULT_DRIFT_THRESHOLD,
    CompareSettings,
    ReportSettings,
    load_spec,
    schema,
)

MINIMAL = """\
name: t
factors:
  a: [1, 2]
workload:
  role: workload_command
  vars:
    argv: [echo, "{{ a }}"]
"""

FULL = """\
name: full
description: every key the view reads
hosts: web
hosts_mode: partition
allow_reboot: true
collect: [cpu, disk]
factors:
  smt: ["on", "off"]
  cores: [2, 4]
  bs: [4k, 64k]
knobs:
  smt: {role: knob_sysfs, cost: reboot}
  cores: {role: knob_sysfs, cost: {class: restart, seconds: 30}}
workload:
  role: workload_command
  vars:
    argv: [echo, "{{ bs }}"]
  metrics:
    tps: {regex: 'tps = (?P<value>[0-9.]+)', unit: tx/s, better: higher}
    lat_ms: {regex: 'lat = (?P<value>[0-9.]+)', unit: ms, better: lower}
before_run: [drop_caches]
replicates: 4
warmup: 2
order: {strategy: restricted, seed: 3}
report:
  metrics: [tps, lat_ms]
  primary: [tps]
  alpha: 0.01
  cv_threshold: 0.1
  drift_threshold: 0.02
  template_dir: templates
  tables:
    - {rows: cores, columns: bs, metric: tps}
  compare: {baseline: "on", factor: smt, by: [cores]}
"""


def load(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return load_spec(path)


def test_defaults_of_a_minimal_spec(tmp_path):
    spec = load(tmp_path, MINIMAL)
    assert spec.report == ReportSettings()
    assert spec.report == ReportSettings(metrics=(), primary=(), alpha=0.05, cv_threshold=0.05,
                                         drift_threshold=0.01, template_dir=None, tables=(), compare=None)
    assert spec.hosts_mode == "replicate"
    assert spec.hosts == "localhost"
    assert spec.description == ""
    assert (spec.replicates, spec.warmup) == (3, 0)
    assert spec.levels == {"a": [1, 2]}
    assert spec.declared_metrics == {}
    assert spec.before_run == [] and spec.collect == []
    assert spec.allow_reboot is False
    assert spec.whole_plot_factors() == []


def test_defaults_are_the_schema_defaults():
    props = schema()["properties"]["report"]["properties"]
    assert DEFAULT_ALPHA == props["alpha"]["default"]
    assert DEFAULT_CV_THRESHOLD == props["cv_threshold"]["default"]
    assert DEFAULT_DRIFT_THRESHOLD == props["drift_threshold"]["default"]


def test_a_full_spec(tmp_path):
    spec = load(tmp_path, FULL)
    assert spec.report == ReportSettings(
        metrics=("tps", "lat_ms"), primary=("tps",), alpha=0.01, cv_threshold=0.1, drift_threshold=0.02,
        template_dir="templates", tables=({"rows": "cores", "columns": "bs", "metric": "tps"},),
        compare=CompareSettings("smt", "on", ("cores",)))
    assert spec.report.compare.as_dict() == {"factor": "smt", "baseline": "on", "by": ["cores"]}
    assert spec.hosts_mode == "partition"
    assert spec.hosts == "web"
    assert spec.description == "every key the view reads"
    assert (spec.replicates, spec.warmup) == (4, 2)
    assert list(spec.levels) == ["smt", "cores", "bs"]
    assert spec.declared_metrics["lat_ms"]["unit"] == "ms"
    assert spec.before_run == ["drop_caches"] and spec.collect == ["cpu", "disk"]
    assert spec.allow_reboot is True
    # Planning order: reboot class first, then restart class.
    assert spec.whole_plot_factors() == ["smt", "cores"]


def test_zero_thresholds_are_kept(tmp_path):
    spec = load(tmp_path, MINIMAL + "report: {cv_threshold: 0, drift_threshold: 0}\n")
    assert (spec.report.cv_threshold, spec.report.drift_threshold) == (0.0, 0.0)


def test_the_view_is_frozen_and_follows_the_data(tmp_path):
    spec = load(tmp_path, FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.report.alpha = 0.2
    # A copy with changed data (the planner's alternative plans do this) sees the change.
    alt = dataclasses.replace(spec, data=copy.deepcopy(spec.data))
    alt.data["hosts_mode"] = "replicate"
    alt.data["report"]["compare"] = None
    assert alt.hosts_mode == "replicate" and alt.report.compare is None
    assert spec.hosts_mode == "partition" and spec.report.compare is not None


def test_report_settings_of_partial_mappings():
    assert ReportSettings.of(None) == ReportSettings()
    assert ReportSettings.of({"compare": {"factor": "a", "baseline": 1}}).compare == CompareSettings("a", 1, ())
