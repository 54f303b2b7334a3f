"""The model of campaign-to-campaign variation: how much an unchanged experiment's
level moves from one campaign to the next (a reboot, the day's load, a shifting SAN).

Pure: it reads per-campaign statistics and returns numbers; loading campaigns and
writing outputs stay in :mod:`benchmatrix.campaigns.compare`.

The campaign variance ``σ²`` of a metric (on the log scale for a positive metric, else
relative to the level) is the conjugate normal, scaled-inverse-χ² update of a prior
(Gelman et al., *Bayesian Data Analysis*, 3rd ed., section 3.3): the prior says
campaigns vary with SD ``s0`` (``report.campaign_sd``) worth ``ν0`` degrees of freedom
(:data:`PRIOR_DOF`), and the experiment's own comparable campaigns estimate ``s²``
with ``ν`` degrees of freedom (:func:`benchmatrix.analyze.verdict.campaign_variance`,
the method of moments of the one-way random-effects model). The pooled value

    σ² = (ν0 · s0² + ν · s²) / (ν0 + ν),   on ν0 + ν degrees of freedom,

is what every comparison across campaigns adds to its runs' noise. No history means
"campaigns vary about s0"; a few campaigns move it part of the way without collapsing
it to 0 (one degree of freedom from two campaigns is 0 in 44 % of draws) or blowing
it up; many campaigns dominate it.

A campaign whose level sits far from the others' (a step, a busy host) would count the
step as "campaigns wobble" and blind every later comparison: before the estimate, each
campaign's offset (the median over its series of its mean's deviation from the
series' median across campaigns) is compared with the others' by a median/MAD rule,
and a campaign more than :data:`OUTLIER_CUTOFF` robust SDs away is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmatrix.analyze.verdict import campaign_variance

#: Degrees of freedom the prior ``report.campaign_sd`` is worth: as much as an estimate
#: from five campaigns of one series. Chosen by the Monte Carlo of docs/report.md
#: ("Calibration"): 4 keeps a one-cell comparison with two earlier campaigns from
#: trusting their one-degree-of-freedom estimate, and lets a history of 16 cells
#: (tens of degrees of freedom) dominate.
PRIOR_DOF = 4.0
#: A campaign whose offset lies more than this many robust SDs from the median offset
#: is left out of the estimate (with a normal campaign effect, 1 in about 1.7 million).
OUTLIER_CUTOFF = 5.0
#: Fewest campaigns among which one can be judged outlying (of two, neither can).
MIN_FOR_OUTLIERS = 3
#: MAD to standard deviation for normal data.
_MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class CampaignVariance:
    """The campaign-to-campaign variance of one metric.

    Attributes:
        variance: The pooled variance (log scale, or relative for a difference-scale
            metric): what each campaign's mean moves by.
        dof: Its degrees of freedom (prior plus estimate).
        prior_sd: The prior's SD ``s0`` (a fraction).
        prior_dof: The prior's degrees of freedom ``ν0``.
        campaigns: Campaigns the estimate used (0 when none could be used).
        dropped: Positions (in the history given) of campaigns left out as outlying.
        estimate: The history's own estimate ``s²`` (NaN without one).
        estimate_dof: Its degrees of freedom ``ν`` (0 without one).
    """

    variance: float
    dof: float
    prior_sd: float
    prior_dof: float = PRIOR_DOF
    campaigns: int = 0
    dropped: tuple[int, ...] = field(default_factory=tuple)
    estimate: float = float("nan")
    estimate_dof: float = 0.0

    @property
    def sd_pct(self) -> float:
        """The pooled campaign-to-campaign SD in percent of the level."""
        return math.sqrt(self.variance) * 100.0 if math.isfinite(self.variance) else float("nan")

    @property
    def kind(self) -> str:
        """``prior`` when no history refined the prior, else ``pooled``."""
        return "pooled" if self.estimate_dof > 0 else "prior"


def pool(prior_sd: float, prior_dof: float, estimate: float, dof: float) -> tuple[float, float]:
    """The scaled-inverse-χ² update: ``((ν0 s0² + ν s²) / (ν0 + ν), ν0 + ν)``.

    Without an estimate (``dof`` 0 or ``estimate`` NaN) the prior alone. A prior of no
    degrees of freedom gives the estimate alone.
    """
    if not dof or not math.isfinite(estimate):
        return prior_sd * prior_sd, prior_dof
    total = prior_dof + dof
    return (prior_dof * prior_sd * prior_sd + dof * estimate) / total, total


def campaign_offsets(per_campaign: list[pd.DataFrame], relative: bool = False) -> np.ndarray:
    """Each campaign's offset: the median over its series of (its mean - the series'
    median across campaigns), divided by the series' level where ``relative``.

    Args:
        per_campaign: One frame per campaign, indexed by series, with column ``mean``.
        relative: The means are on the difference scale.

    Returns:
        One offset per campaign (NaN for a campaign with no series in common).
    """
    means = pd.concat([f["mean"] for f in per_campaign], axis=1, keys=range(len(per_campaign)))
    center = means.median(axis=1, skipna=True)
    dev = means.sub(center, axis=0)
    if relative:
        with np.errstate(divide="ignore", invalid="ignore"):
            dev = dev.div(center.abs(), axis=0)
    dev = dev.replace([np.inf, -np.inf], np.nan)
    return dev.median(axis=0, skipna=True).to_numpy(dtype="float64")


def outlying(offsets: np.ndarray, floor: float) -> np.ndarray:
    """True for the campaigns whose offset lies beyond :data:`OUTLIER_CUTOFF` robust SDs
    from the median offset. The robust SD is 1.4826 times the offsets' MAD, but at least
    ``floor`` (the prior's SD), so that a few campaigns that happen to agree closely do
    not make an ordinary one look outlying. Fewer than :data:`MIN_FOR_OUTLIERS`: none."""
    offsets = np.asarray(offsets, dtype="float64")
    have = np.isfinite(offsets)
    out = np.zeros(len(offsets), dtype=bool)
    if have.sum() < MIN_FOR_OUTLIERS:
        return out
    center = float(np.median(offsets[have]))
    scale = max(_MAD_TO_SD * float(np.median(np.abs(offsets[have] - center))), floor)
    if scale <= 0:
        return out
    out[have] = np.abs(offsets[have] - center) > OUTLIER_CUTOFF * scale
    return out


def model(per_campaign: list[pd.DataFrame], prior_sd: float, prior_dof: float = PRIOR_DOF,
          relative: bool = False) -> CampaignVariance:
    """The campaign-to-campaign variance of one metric from its prior and its history.

    Args:
        per_campaign: The history, one frame per campaign (indexed by series: a cell on
            a host), with columns ``count``, ``mean`` and ``var`` on the comparison's
            scale (log values for a positive metric).
        prior_sd: ``s0``, the prior's campaign SD (a fraction of the level).
        prior_dof: ``ν0``.
        relative: The metric is on the difference scale (spreads relative to the level).

    Returns:
        The pooled :class:`CampaignVariance`.
    """
    frames = [f for f in per_campaign if len(f)]
    positions = [i for i, f in enumerate(per_campaign) if len(f)]
    dropped: tuple[int, ...] = ()
    if len(frames) >= MIN_FOR_OUTLIERS:
        out = outlying(campaign_offsets(frames, relative), prior_sd)
        dropped = tuple(p for p, o in zip(positions, out) if o)
        frames = [f for f, o in zip(frames, out) if not o]
    estimate, dof = campaign_variance(frames, relative=relative)
    variance, total = pool(prior_sd, prior_dof, estimate, dof)
    return CampaignVariance(variance, total, prior_sd, prior_dof, len(frames) if dof else 0, dropped,
                            estimate if dof else float("nan"), float(dof))
