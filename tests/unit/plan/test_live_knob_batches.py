"""Batches across live-knob settings (issue 23): with ``order.batch_live_knobs`` (on unless
a spec says false) a batch may span settings of knobs of cost class ``none`` (the batch
runner sets them between runs); a change of a ``restart`` or ``reboot`` knob still cuts the
batch. With ``batch_live_knobs: false`` batches break at every knob change."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmatrix.plan.design import make_plan
from benchmatrix.spec.load import Spec, load_spec

FACTORS = {"ra": [0, 4096], "lay": ["a", "b"], "bs": ["4k", "64k"]}
LIVE = {"ra": {"role": "knob_sysctl", "cost": "none", "vars": {"knob_sysctl_key": "vm.x"}}}
COSTLY = {"lay": {"role": "knob_sysctl", "cost": "restart", "vars": {"knob_sysctl_key": "vm.y"}}}


def make_spec(directory: Path, factors: dict, *, knobs: dict, replicates: int = 3, switch: bool | None = None,
              name: str = "spec.yaml") -> Spec:
    """A spec; ``switch`` is written as ``order.batch_live_knobs`` when given."""
    order = {"strategy": "random", "seed": 7, **({"batch_live_knobs": switch} if switch is not None else {})}
    doc = {"name": "plan_test", "factors": factors, "knobs": knobs, "replicates": replicates, "warmup": 1,
           "workload": {"role": "workload_command", "vars": {"argv": ["echo"] + ["{{ %s }}" % f for f in factors]}},
           "order": order}
    (directory / name).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return load_spec(directory / name)


def _batches(runs):
    out: dict[str, list] = {}
    for r in runs:
        out.setdefault(r.batch, []).append(r)
    return list(out.values())


def test_live_knob_settings_share_a_batch_by_default(tmp_path):
    for switch, name in ((None, "default.yaml"), (True, "on.yaml")):
        spec = make_spec(tmp_path, FACTORS, knobs=LIVE, replicates=4, switch=switch, name=name)
        assert spec.batch_live_knobs is True
        runs = make_plan(spec, ["h1"], max_runs=1000)
        assert len({r.factors["ra"] for r in runs}) == 2
        assert len(_batches(runs)) == 1  # one Ansible call for the whole random order


def test_with_the_switch_off_batches_break_at_every_knob_change(tmp_path):
    spec = make_spec(tmp_path, FACTORS, knobs=LIVE, replicates=4, switch=False)
    assert spec.batch_live_knobs is False
    for batch in _batches(make_plan(spec, ["h1"], max_runs=1000)):
        assert len({r.factors["ra"] for r in batch}) == 1


def test_costly_knobs_still_cut_batches_with_the_switch(tmp_path):
    spec = make_spec(tmp_path, FACTORS, knobs={**LIVE, **COSTLY}, replicates=4, switch=True)
    assert spec.batch_live_knobs is True
    batches = _batches(make_plan(spec, ["h1"], max_runs=1000))
    assert all(len({r.factors["lay"] for r in b}) == 1 for b in batches)
    assert any(len({r.factors["ra"] for r in b}) == 2 for b in batches)
    # Consecutive batches differ in the costly knob (the live one never cuts).
    assert all(a[-1].factors["lay"] != b[0].factors["lay"] for a, b in zip(batches, batches[1:]))


def test_the_switch_is_in_the_schema_and_keeps_other_specs_digests(tmp_path):
    plain = make_spec(tmp_path, FACTORS, knobs=LIVE)
    off = make_spec(tmp_path, FACTORS, knobs=LIVE, switch=False, name="off.yaml")
    assert plain.batch_live_knobs is True and off.batch_live_knobs is False and off.digest != plain.digest
    # An absent switch adds nothing to the canonical spec: existing campaigns keep their digest.
    assert "batch_live_knobs" not in plain.data["order"]
