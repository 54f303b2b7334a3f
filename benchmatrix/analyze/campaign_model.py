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
from benchmatrix.errors import BenchmatrixError

#: Degrees of freedom the prior ``report.campaign_sd`` is worth: as much as an estimate
#: from nine campaigns of one series. Chosen with the default SD (2.5 %) by the Monte
#: Carlo of docs/report.md ("Calibration"): with 4 (and 2 %) one more unchanged campaign
#: in a one-cell history changed the gate's exit in 7-10 % of cases, as each campaign
#: moved the pooled variance and its t quantile; 8 keeps that under 5 % and still lets
#: a history of 16 cells (tens of degrees of freedom) dominate. Lighter tails are paid
#: for by the larger default SD, which keeps unchanged pairs on a machine that moves
#: by 3 % under 5 % false alarms.
PRIOR_DOF = 8.0
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


# ---------------------------------------------------------------- choosing the history

#: Host state that must be the same for a campaign to count in another's history, and
#: that compare names when A and B differ in it (``env_*`` columns of runs.csv; kernel
#: from the host's facts).
HOST_STATE_FIELDS = ("kernel", "governor", "turbo", "thp", "mitigations", "numa_nodes")
#: Two campaigns' loads before their runs are comparable within this factor ...
LOAD_FACTOR = 2.0
#: ... where a load below this many per CPU counts as this much: a host with half its
#: CPUs idle is not crowded, and its load (0.05 against 0.4, or a shared CI machine's
#: 0.3 against 0.9) wobbles by factors that mean nothing.
LOAD_FLOOR_PER_CPU = 0.5
#: A host is busy when its load before the runs exceeds this many per CPU (or the other
#: side's by :data:`LOAD_FACTOR`).
BUSY_PER_CPU = 1.0
#: ``--history`` rules besides a count and a list of labels.
HISTORY_RULES = ("auto", "none")


@dataclass(frozen=True)
class CampaignSummary:
    """What the choice of a history needs of one campaign (loaded by compare.py).

    Attributes:
        key: The campaign id.
        name: How it is shown (its label, else its id).
        spec_digest: campaign.json's ``spec_digest`` ("" when unknown: not checked).
        hosts: Host -> field of :data:`HOST_STATE_FIELDS` -> its value as text ("" unknown).
        load: Host -> median load average before its runs (NaN unknown).
        cpus: Host -> CPUs (NaN unknown).
        level: The campaign's level against A (median over its series of the log ratio,
            or relative difference, of its mean to A's); NaN when unknown.
    """

    key: str
    name: str
    spec_digest: str = ""
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)
    cpus: dict[str, float] = field(default_factory=dict)
    level: float = float("nan")


@dataclass(frozen=True)
class History:
    """The campaigns a comparison's campaign variance is estimated from.

    Attributes:
        rule: The rule that chose them (``auto``, ``none``, a count, or ``labels``).
        used: Keys of the campaigns used, oldest first.
        left_out: ``(key, why)`` for each candidate left out, oldest first.
    """

    rule: str
    used: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...] = ()


def _floor(s: CampaignSummary, host: str) -> float:
    cpus = s.cpus.get(host, float("nan"))
    return LOAD_FLOOR_PER_CPU * cpus if math.isfinite(cpus) and cpus > 0 else LOAD_FLOOR_PER_CPU


def _num(x: float) -> str:
    return f"{x:.3g}"


def _loads_differ(a: CampaignSummary, c: CampaignSummary, host: str) -> bool:
    la, lc = a.load.get(host, float("nan")), c.load.get(host, float("nan"))
    if not (math.isfinite(la) and math.isfinite(lc)):
        return False
    floor = max(_floor(a, host), _floor(c, host))
    return max(la, lc, floor) / max(min(la, lc), floor) > LOAD_FACTOR


def host_state_changes(a: CampaignSummary, b: CampaignSummary) -> list[tuple[str, str, str, str]]:
    """``(host, field, A's value, B's value)`` for each field of :data:`HOST_STATE_FIELDS`
    that differs on a host both ran on, and ``load_before`` where the loads before the
    runs lie more than :data:`LOAD_FACTOR` apart. A value unknown on a side is no change."""
    out = []
    for host in sorted(set(a.hosts) & set(b.hosts)):
        for f in HOST_STATE_FIELDS:
            va, vb = a.hosts[host].get(f, ""), b.hosts[host].get(f, "")
            if va and vb and va != vb:
                out.append((host, f, va, vb))
        if _loads_differ(a, b, host):
            out.append((host, "load_before", _num(a.load[host]), _num(b.load[host])))
    return out


def busy_hosts(a: CampaignSummary, b: CampaignSummary) -> list[str]:
    """One line per host that was busy before one side's runs: its load above
    :data:`BUSY_PER_CPU` per CPU, or above :data:`LOAD_FACTOR` times the other side's."""
    out = []
    for host in sorted(set(a.load) & set(b.load)):
        for this, other in ((a, b), (b, a)):
            mine, theirs = this.load[host], other.load.get(host, float("nan"))
            if not math.isfinite(mine):
                continue
            cpus = this.cpus.get(host, float("nan"))
            per_cpu = mine / cpus if math.isfinite(cpus) and cpus > 0 else float("nan")
            beyond = math.isfinite(theirs) and mine > LOAD_FACTOR * max(theirs, _floor(this, host))
            if beyond or (math.isfinite(per_cpu) and per_cpu > BUSY_PER_CPU):
                shown = f" ({_num(per_cpu)} per CPU)" if math.isfinite(per_cpu) else ""
                out.append(f"busy host: {host} had load {_num(mine)}{shown} before {this.name}'s runs against "
                           f"{_num(theirs)} before {other.name}'s: its differences may be the load's")
    return out


def _not_comparable(a: CampaignSummary, c: CampaignSummary) -> str:
    """Why ``c`` may not count in ``a``'s history ("" when it may)."""
    if a.spec_digest and c.spec_digest and a.spec_digest != c.spec_digest:
        return f"spec digest {c.spec_digest} (A {a.spec_digest})"
    changes = host_state_changes(a, c)
    return "; ".join(f"{f} {vc} on {h} (A {va})" for h, f, va, vc in changes)


def _step_side(a: CampaignSummary, kept: list[CampaignSummary], prior_sd: float | None = None,
               alpha: float = 0.05) -> tuple[list[CampaignSummary], list[tuple[str, str]]]:
    """``kept`` cut to A's side of the last step its levels show, repeatedly (after one
    step is cut off, the rest is tested again), and the campaigns cut off. The step test
    counts the prior campaign SD as :data:`PRIOR_DOF` degrees of freedom beside the
    levels' own scatter (:func:`benchmatrix.analyze.changepoint.detect_change`): on their
    own scatter alone, two campaigns at 2x and A rest on 1 degree of freedom and the step
    went unseen. ``prior_sd``: ``report.campaign_sd``'s default when None."""
    from benchmatrix.analyze.changepoint import MIN_CAMPAIGNS, detect_change
    from benchmatrix.spec.load import DEFAULT_CAMPAIGN_SD

    prior_sd = DEFAULT_CAMPAIGN_SD if prior_sd is None else prior_sd

    out: list[tuple[str, str]] = []
    while True:
        finite = [s for s in kept if math.isfinite(s.level)]
        if len(finite) < MIN_CAMPAIGNS or a not in finite:
            return kept, out
        step = detect_change([s.level for s in finite], None, prior_sd * prior_sd, PRIOR_DOF)
        if step.p_step > alpha or step.index is None:
            return kept, out
        at = finite[step.index]
        before, after = finite[:step.index], finite[step.index:]
        side = after if finite.index(a) >= step.index else before
        cut = [s for s in finite if s not in side]
        size = float(np.mean([s.level for s in after]) - np.mean([s.level for s in before]))
        # Levels are log ratios (or relative differences) to A: expm1 reads as a change.
        out += [(s.key, f"the other side of a step at {at.name} ({math.expm1(size) * 100:+.0f} %)") for s in cut]
        kept = [s for s in kept if s not in cut]


def select_history(a: CampaignSummary, candidates: list[CampaignSummary],
                   rule: str | int | list[str] = "auto", prior_sd: float | None = None) -> History:
    """The campaigns whose variation a comparison of B against A is estimated from.

    Args:
        a: Campaign A (it is among ``candidates`` when it counts).
        candidates: Every campaign of the experiment but B, oldest first.
        rule: ``auto``: the campaigns comparable with A (same spec digest, the same
            :data:`HOST_STATE_FIELDS` and loads within :data:`LOAD_FACTOR`), of those
            the ones on A's side of the last step their levels show
            (:func:`benchmatrix.analyze.changepoint.detect_change`, its step test); ``none``: no
            campaign (the prior alone); a count N: the N most recent comparable ones;
            a list of labels or ids: those campaigns.
        prior_sd: The prior campaign SD the step test counts (``report.campaign_sd``;
            its default when None).

    Returns:
        The :class:`History`. An outlying campaign among those used is still left out
        by :func:`model`.

    Raises:
        BenchmatrixError: a label names no candidate, or a count below 0.
    """
    if rule == "none":
        return History("none", (), tuple((c.key, "--history none") for c in candidates))
    if isinstance(rule, list):
        names = {n: [c for c in candidates if n in (c.key, c.name)] for n in rule}
        unknown = [n for n, hits in names.items() if not hits]
        if unknown:
            known = ", ".join(c.name for c in candidates) or "none"
            raise BenchmatrixError(f"--history: no campaign {', '.join(map(repr, unknown))} besides B; "
                                   f"campaigns: {known}")
        chosen = {c.key for hits in names.values() for c in hits}
        return History("labels", tuple(c.key for c in candidates if c.key in chosen),
                       tuple((c.key, "not named in --history") for c in candidates if c.key not in chosen))
    left: list[tuple[str, str]] = []
    kept = []
    for c in candidates:
        why = "" if c is a else _not_comparable(a, c)
        if why:
            left.append((c.key, f"not comparable: {why}"))
        else:
            kept.append(c)
    if isinstance(rule, int) and not isinstance(rule, bool):
        if rule < 0:
            raise BenchmatrixError(f"--history {rule}: a count of campaigns is 0 or more")
        older = kept[:len(kept) - rule] if rule else kept
        left += [(c.key, f"--history {rule}: older") for c in older]
        kept = kept[len(kept) - rule:] if rule else []
        name = str(rule)
    elif rule == "auto":
        kept, cut = _step_side(a, kept, prior_sd)
        left += cut
        name = "auto"
    else:
        raise BenchmatrixError(f"--history {rule!r}: use auto, none, a count or labels separated by commas")
    order = {c.key: i for i, c in enumerate(candidates)}
    return History(name, tuple(c.key for c in kept), tuple(sorted(left, key=lambda kv: order[kv[0]])))


def parse_history(text: str) -> str | int | list[str]:
    """``--history``'s value: ``auto``, ``none``, a count, or labels separated by commas.

    Raises:
        BenchmatrixError: an empty value.
    """
    text = text.strip()
    if text in HISTORY_RULES:
        return text
    if text.isdigit():
        return int(text)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise BenchmatrixError(f"--history {text!r}: use auto, none, a count or campaign labels separated by commas")
    return names
