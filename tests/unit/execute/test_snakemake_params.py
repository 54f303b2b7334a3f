"""Snakemake records each job's params for the ``params`` rerun trigger; its check for a
pandas object imports pandas (about 0.45 CPU-s of every workflow, issue 34) although no
rule of benchmatrix has one. The Snakefile calls
:func:`benchmatrix.execute.snakefile.params_without_pandas` so that the check imports
nothing unless pandas is already loaded, and the trigger still works.

Real Snakemake on a one-rule workflow written here (two runs, about 3 s).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SNAKEFILE = """
import sys
from benchmatrix.execute.snakefile import params_without_pandas

params_without_pandas()

rule one:
    output: "out.txt"
    params: digest=config["digest"], runs=3
    shell: "echo {params.digest} > {output}"

onsuccess:
    open("pandas_loaded.txt", "w").write(str("pandas" in sys.modules))
"""


def _snakemake(tmp_path: Path, digest: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--rerun-triggers", "params",
         "--config", f"digest={digest}", "--quiet", "all"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return (tmp_path / "out.txt").read_text().strip()


def test_params_are_recorded_without_importing_pandas_and_still_trigger_a_rerun(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    assert _snakemake(tmp_path, "d1") == "d1"
    assert (tmp_path / "pandas_loaded.txt").read_text() == "False"
    # A changed param re-runs the job: the params were recorded, and compared.
    assert _snakemake(tmp_path, "d2") == "d2"
    assert (tmp_path / "pandas_loaded.txt").read_text() == "False"


def test_a_pandas_param_is_still_hashed_by_its_content():
    import pandas as pd
    from snakemake.persistence.file import FilePersistence

    from benchmatrix.execute.snakefile import params_without_pandas

    params_without_pandas()
    persistence = FilePersistence.__new__(FilePersistence)  # only its serializer is used
    one = persistence._serialize_param_pandas(pd.Series([1, 2, 3]))
    assert one == persistence._serialize_param_pandas(pd.Series([1, 2, 3]))
    assert one != persistence._serialize_param_pandas(pd.Series([1, 2, 4]))
    assert persistence._serialize_param_pandas("text") == repr("text")
