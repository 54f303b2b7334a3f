"""The report's modules import cheaply: scipy and matplotlib only where they are used.

Every collect job (the last job of every campaign) imports the report; scipy.stats
alone costs about 0.7 s and matplotlib about 0.4 s, which a campaign without plots or
without the tests that need them should not pay (issue 15 row c, the quickstart's
fixed cost).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _loaded_after(statement: str) -> list[str]:
    code = (f"import json, sys\n{statement}\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=True)
    return json.loads(out.stdout)


def test_importing_the_report_loads_neither_scipy_nor_matplotlib():
    loaded = _loaded_after("import benchmatrix.report.render")
    assert "benchmatrix" in loaded  # the import happened in this interpreter
    assert "scipy" not in loaded
    assert "matplotlib" not in loaded
