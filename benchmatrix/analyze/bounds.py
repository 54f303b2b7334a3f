"""The one rule for printing a relative interval's ends: a bound the data cannot pin
down prints as ``unbounded``, not as ``+8213105.8``.

Used by the findings sentences (:func:`benchmatrix.analyze.comparisons.sentence`), the
terminal, the report's tables, the compare pages and the site history (through
:mod:`benchmatrix.report.units`). Standard library only: the terminal imports it.
"""

from __future__ import annotations

import math
from typing import Any

#: A relative bound beyond ± this many percent (B more than 11 × A, or a difference
#: ten times the baseline) says only that the data cannot bound the change.
UNBOUNDED_PCT = 1000.0
#: A lower bound from -100 % up to this many percent means B could be about 0 × A: a
#: ratio's interval with no lower end (a difference's bound below -100 % is a number).
UNBOUNDED_LOW_PCT = -99.95
#: What such a bound prints as.
UNBOUNDED = "unbounded"


def pct_bound(value: Any, suffix: str = " %") -> str:
    """One end of a relative interval in percent: ``+4.2 %``, or ``unbounded`` when it
    is missing, infinite, beyond ±:data:`UNBOUNDED_PCT` or from -100 % up to
    :data:`UNBOUNDED_LOW_PCT`.

    Args:
        value: The bound, in percent (None, NaN and pandas' NA count as missing).
        suffix: Text after the number (``" %"``; ``""`` where the column says percent).
    """
    try:
        x = float(value)
    except (TypeError, ValueError):  # None, pd.NA, text
        return UNBOUNDED
    if not math.isfinite(x) or abs(x) > UNBOUNDED_PCT or -100.0 <= x <= UNBOUNDED_LOW_PCT:
        return UNBOUNDED
    return f"{x:+.1f}{suffix}"


def pct_interval(low: Any, high: Any, suffix: str = " %", sep: str | None = None) -> str:
    """A relative interval as ``[-3.1 %, +4.2 %]`` (or ``-3.1 % – +4.2 %`` with ``sep``
    `` – ``), each end by :func:`pct_bound`; an interval with neither end bounded is
    just ``unbounded``."""
    lo, hi = pct_bound(low, suffix), pct_bound(high, suffix)
    if lo == hi == UNBOUNDED:
        return UNBOUNDED
    return f"[{lo}, {hi}]" if sep is None else f"{lo}{sep}{hi}"
