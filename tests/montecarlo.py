"""Shared pieces of the seeded Monte Carlo tests of the statistics."""

from __future__ import annotations

import os

from scipy import stats as sps


def scaled(sims: int) -> int:
    """``sims`` times BMX_MC_SCALE (default 1): the suite runs few draws, a thorough
    check (``BMX_MC_SCALE=10 pytest tests/unit/analyze``) many; the figures in
    docs/report.md come from such runs."""
    return sims * max(1, int(os.environ.get("BMX_MC_SCALE", "1") or 1))


def upper(sims: int, rate: float = 0.05) -> float:
    """The largest share of ``sims`` draws that a true ``rate`` gives in 99.9 % of suites:
    a calibrated method passes with almost any seed, one that doubles the rate fails."""
    return sps.binom.ppf(0.9995, sims, rate) / sims
