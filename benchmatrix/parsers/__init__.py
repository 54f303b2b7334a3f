"""Parsers that turn a workload's raw output into metrics.

Each parser takes the text the workload printed and returns a :class:`Parsed`, or
raises :class:`benchmatrix.errors.ParseError`. :data:`PARSERS` maps a workload role
name to its parser.
"""

from __future__ import annotations

from typing import Callable

from benchmatrix.parsers.base import Parsed
from benchmatrix.parsers.fio import FIO_METRICS, parse_fio

PARSERS: dict[str, Callable[[str], Parsed]] = {"workload_fio": parse_fio}

__all__ = ["FIO_METRICS", "PARSERS", "Parsed", "parse_fio"]
