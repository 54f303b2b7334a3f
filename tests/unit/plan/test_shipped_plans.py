"""The shipped examples' plans do not change by accident: plan.csv's text for each of
config/experiments/*.yaml, hashed. A change of the planner that means to change plans
updates these digests in the same commit and says so (docs/contracts.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from benchmatrix.execute.hosts import resolve_hosts
from benchmatrix.plan.design import make_plan, plan_csv_text, run_estimates
from benchmatrix.spec.config import DEFAULT_BATCH_MAX_RUNS, DEFAULT_BATCH_MAX_SECONDS
from benchmatrix.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[3]

#: example -> (SHA-256 of plan.csv's text, first 16 hex digits; runs), as of issue 26; issue 23 made
#: live knobs the default, so oltp_users and readahead_scan (cost-none knobs) are one batch a host.
PLANS = {
    "fragmentation_mbrc.yaml": ("d590407f7ab65af5", 80),
    "ht_cores.yaml": ("dacdbcf50df7b807", 125),
    "oltp_users.yaml": ("ad399a931a819224", 36),
    "quickstart.yaml": ("97129d20c15b0b29", 32),
    "readahead_scan.yaml": ("bef458818a6e85fd", 16),
    "until_decided.yaml": ("e6fc80d0ff748343", 16),
}


def test_every_shipped_example_is_pinned():
    assert sorted(p.name for p in (ROOT / "config" / "experiments").glob("*.yaml")) == sorted(PLANS)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_shipped_plan_is_unchanged(name, tmp_path):
    spec = load_spec(ROOT / "config" / "experiments" / name)
    hosts = resolve_hosts(spec.inventory_path(ROOT), spec.hosts)
    runs = make_plan(spec, hosts, DEFAULT_BATCH_MAX_RUNS, DEFAULT_BATCH_MAX_SECONDS, run_estimates(spec, tmp_path))
    digest = hashlib.sha256(plan_csv_text(runs, spec.factor_names).encode()).hexdigest()[:16]
    assert (digest, len(runs)) == PLANS[name]
