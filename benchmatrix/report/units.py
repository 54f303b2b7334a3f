"""Human units for display: KiB/s shown as MiB/s or GiB/s, µs as ms or s.

One rule for the report's tables, the plots, the terminal and the site
(:func:`display_unit`): a metric's values are shown in the largest unit of the
same family in which a typical value is at least 1. Only what is shown changes:
runs.csv, summary.csv and the Parquet files keep the raw values and units.

Time units go through matplotlib's engineering formatter (the SI prefixes it
knows: ns, µs, ms, s); byte units have binary prefixes (KiB = 1024 B), which no
formatter in the dependencies knows, so their ladder is listed here.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from benchmatrix import layout
from benchmatrix.analyze.bounds import (  # noqa: F401 (the templates', terminal's and pages' names)
    UNBOUNDED,
    UNBOUNDED_LOW_PCT,
    UNBOUNDED_PCT,
    pct_bound,
    pct_interval,
)

#: Binary byte ladders: each unit and its size in the family's base unit.
_BYTES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_BYTE_FAMILIES = {suffix: [(f"{p}{suffix}", 1024.0 ** i) for i, p in enumerate(_BYTES)] for suffix in ("", "/s")}
#: Time units and their size in seconds; "us" is fio's spelling of µs.
_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}
#: Above this many seconds a time stays in s (minutes would need another format).
_TIME_TOP = 1.0


def is_missing(value: Any) -> bool:
    """None, NA, NaT or NaN."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    # NA and NaT exist only where pandas is loaded: a process that never imported it
    # (bmx run printing findings.json's numbers) holds neither, and skips its 0.45 CPU-s.
    pd = sys.modules.get("pandas")
    return pd is not None and (value is pd.NA or value is pd.NaT)


def format_number(value: Any) -> str:
    """About four significant digits, grouped thousands, never scientific for
    everyday magnitudes (``123,457``, ``12.35``, ``0.01235``); ``–`` when missing."""
    if is_missing(value):
        return layout.MISSING
    # numpy's scalars only where numpy is loaded (as pandas above).
    np = sys.modules.get("numpy")
    numeric = (int, float, np.integer, np.floating) if np is not None else (int, float)
    if isinstance(value, bool) or not isinstance(value, numeric):
        return str(value)
    x = float(value)
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    magnitude = abs(x)
    if magnitude >= 1e15 or magnitude < 1e-4:
        return f"{x:.3e}"
    if magnitude >= 1000:
        return f"{x:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(magnitude)))
    text = f"{x:.{decimals}f}"
    # 999.96 rounds up to four digits before the point; regroup it.
    return f"{float(text):,.0f}" if abs(float(text)) >= 1000 else text


#: The SI prefixes a time below one second is shown with, by power of ten.
_TIME_PREFIXES = {-9: "n", -6: "µ", -3: "m"}


def _si_power(x: float) -> int:
    """The power of ten (a multiple of 3, -30 to 30) of the SI prefix ``x > 0`` reads in.

    matplotlib's ``EngFormatter`` rule without importing matplotlib (about 0.4 s of a
    process that draws nothing): the power of the magnitude, one step up when the
    mantissa printed with six significant digits rounds to 1000 (999.9996 µ is 1 m).
    """
    power = min(max(math.floor(math.log10(x) / 3) * 3, -30), 30)
    if abs(float(format(x / 10.0 ** power, "g"))) >= 1000 and power < 30:
        power += 3
    return power


def display_unit(unit: str | None, typical: Any) -> tuple[str, float]:
    """The unit a value of ``unit`` reads best in, and the factor to multiply by.

    Args:
        unit: The recorded unit (``KiB/s``, ``us``, ``µs``, ``ms``, ``IO/s``...).
        typical: A typical magnitude of the values (e.g. the median of the means).

    Returns:
        ``(unit, factor)``: show ``value * factor`` in ``unit``; an unknown unit, a
        missing or zero typical value keeps ``(unit, 1.0)``.
    """
    unit = unit or ""
    try:
        x = abs(float(typical))
    except (TypeError, ValueError):
        return unit, 1.0
    if not math.isfinite(x) or x == 0:
        return unit, 1.0
    for ladder in _BYTE_FAMILIES.values():
        sizes = dict(ladder)
        if unit in sizes:
            base = x * sizes[unit]
            name, size = ladder[0]
            for cand, cand_size in ladder:
                if base >= cand_size:
                    name, size = cand, cand_size
            return name, _exact(sizes[unit] / size)
    if unit in _TIME:
        seconds = x * _TIME[unit]
        if seconds >= _TIME_TOP:
            return "s", _TIME[unit]
        # The SI prefix (n, µ, m) of the magnitude; any other magnitude in s.
        prefix = _TIME_PREFIXES.get(_si_power(seconds))
        scale = {"n": 1e-9, "µ": 1e-6, "m": 1e-3}.get(prefix, 1.0)
        return f"{prefix}s" if prefix else "s", _exact(_TIME[unit] / scale)
    return unit, 1.0


def _exact(factor: float) -> float:
    # 1e-6 / 1e-9 is 999.9999999999999 in binary floating point: shown values stay round.
    return float(f"{factor:.12g}")


def scaled(values: Any, unit: str | None) -> tuple[Any, str]:
    """``values`` (a number, a pandas Series or a numpy array) in their display unit,
    chosen from the median magnitude; returns ``(values, unit)``."""
    import numpy as np

    arr = np.asarray(values, dtype=float).ravel()
    finite = arr[np.isfinite(arr)]
    typical = float(np.median(np.abs(finite))) if finite.size else float("nan")
    shown, factor = display_unit(unit, typical)
    return values * factor if factor != 1.0 else values, shown


def quantity(value: Any, unit: str | None) -> str:
    """One value with its unit in the unit that reads best: ``1.23 GiB/s``, ``850 µs``."""
    if is_missing(value):
        return layout.MISSING
    shown, factor = display_unit(unit, value)
    try:
        number = format_number(float(value) * factor)
    except (TypeError, ValueError):
        return f"{value} {unit}".strip()
    return f"{number} {shown}".strip()
