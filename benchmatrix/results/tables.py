"""The tables collect writes under ``results/NAME/``, read back for the report and export.

Collect (:func:`benchmatrix.execute.rules.collect`) computes every table once and
writes it; everything downstream reads them here and computes none of them again.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmatrix.results import layout


def read_table(exp: str | Path, name: str, **kwargs) -> pd.DataFrame:
    """One CSV table of ``exp`` (an empty frame when the file is missing or empty)."""
    path = Path(exp) / name
    return pd.read_csv(path, **kwargs) if path.is_file() and path.stat().st_size else pd.DataFrame()


def load_tables(exp: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """plan, runs and summary tables of an experiment directory (empty when missing)."""
    return read_table(exp, layout.PLAN), read_table(exp, layout.RUNS), read_table(exp, layout.SUMMARY)
