#!/usr/bin/env python3
"""The floor of the fixed stack: what a campaign costs at least before benchmatrix does anything.

A `bmx run` is Snakemake starting jobs, and a campaign on one host needs at least
three of them after Snakemake's own start: the plan (Python with pandas), one batch
(Python, ansible-runner, ansible-playbook over the host's connection, one task that
starts the runs) and the report (Python with pandas, Jinja2 and matplotlib). Each
part is measured here alone, in its smallest form, in fresh processes, in the same
run, interleaved by round, medians of the rounds:

  python        ``python -c pass``: an interpreter's start and exit;
  snakemake     a one-rule workflow (touch one file) through ``python -m snakemake``:
                Snakemake's start, one trivial job, its exit;
  plan floor    ``import pandas``: the least a job that reads or writes a table costs;
  report floor  ``import pandas, jinja2`` and matplotlib's Figure: the least the report
                job costs before it reads a record or draws a line;
  ansible 0     ansible-runner and a playbook with no task (gather_facts off) on
                localhost, connection local, in a fresh Python: an Ansible call's start;
  ansible 1     the same with one command task (``true``): the least a batch call costs.

The quickstart's floor is snakemake + plan floor + ansible 1 + report floor: the
campaign's fixed cost cannot go under it with this stack (bmx's own start, the host's
facts and the runner's install come on top). CPU seconds (user + system, the process
and its children) are printed beside the wall seconds: on a controller with many
hosts, that is what each host's Ansible call costs.

    bench/floor.py               # 5 rounds (about 1 minute)
    bench/floor.py --quick       # smoke run: 1 round

Writes bench/results/floor.json (or floor_quick.json).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, median, run_measured, table, temp_dir, write_result  # noqa: E402

SNAKEFILE = """\
rule all:
    output:
        "done.txt",
    log:
        "all.log",
    shell:
        "touch {output} 2> {log}"
"""

PLAYBOOK = """\
---
- name: The smallest call
  hosts: localhost
  gather_facts: false
  tasks: {tasks}
"""

ONE_TASK = """
    - name: Start nothing
      ansible.builtin.command: "true"
      changed_when: false
"""

INVENTORY = ('all:\n  hosts:\n    localhost:\n      ansible_connection: local\n'
             '      ansible_python_interpreter: "{{ ansible_playbook_python }}"\n')

RUNNER = """\
import os, sys, ansible_runner
# ansible-playbook sits beside this interpreter (benchmatrix.execute.ansible does the same).
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.makedirs(sys.argv[1], exist_ok=True)
r = ansible_runner.run(private_data_dir=sys.argv[1], project_dir=sys.argv[2], playbook=sys.argv[3],
                       inventory=sys.argv[4], quiet=True, ident="call", rotate_artifacts=1)
sys.exit(0 if r.status == "successful" and r.rc == 0 else 1)
"""

REPORT_IMPORTS = "import pandas, jinja2, matplotlib; matplotlib.use('Agg'); import matplotlib.figure"


def parts(tmp: Path) -> dict[str, list[str]]:
    """Each part's argv; the files they need are written under ``tmp``."""
    (tmp / "sm").mkdir()
    (tmp / "sm" / "Snakefile").write_text(SNAKEFILE)
    proj = tmp / "ansible"
    proj.mkdir()
    (proj / "none.yml").write_text(PLAYBOOK.format(tasks="[]"))
    (proj / "one.yml").write_text(PLAYBOOK.format(tasks=ONE_TASK))
    (tmp / "inventory.yml").write_text(INVENTORY)
    (tmp / "runner.py").write_text(RUNNER)
    ansible = [PY, str(tmp / "runner.py"), str(tmp / "data"), str(proj)]
    return {
        "python": [PY, "-c", "pass"],
        "snakemake": [PY, "-m", "snakemake", "--cores", "1", "--snakefile", str(tmp / "sm" / "Snakefile"),
                      "--directory", str(tmp / "sm"), "--forceall", "--quiet"],
        "plan floor": [PY, "-c", "import pandas"],
        "report floor": [PY, "-c", REPORT_IMPORTS],
        "ansible 0": [*ansible, "none.yml", str(tmp / "inventory.yml")],
        "ansible 1": [*ansible, "one.yml", str(tmp / "inventory.yml")],
    }


def measure(rounds: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with temp_dir("bmx-floor-") as tmp:
        argvs = parts(tmp)
        per: dict[str, list[dict[str, float]]] = {k: [] for k in argvs}
        for _ in range(rounds):
            order = list(argvs)
            rng.shuffle(order)
            for name in order:
                res = run_measured(argvs[name], cwd=tmp, output=tmp / f"{name}.out")
                if res["rc"] != 0:
                    raise RuntimeError(f"{name} failed: {(tmp / f'{name}.out').read_text()[-2000:]}")
                per[name].append({"wall_s": res["wall_s"], "cpu_s": res["user_s"] + res["sys_s"]})
    out = {k: {"wall_s": median(r["wall_s"] for r in v), "cpu_s": median(r["cpu_s"] for r in v),
               "rounds": len(v)} for k, v in per.items()}
    floor = ("snakemake", "plan floor", "ansible 1", "report floor")
    return {"parts": out, "quickstart_floor": {"parts": list(floor), "wall_s": sum(out[k]["wall_s"] for k in floor),
                                               "cpu_s": sum(out[k]["cpu_s"] for k in floor)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smoke run: one round")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    data = measure(1 if args.quick else args.rounds, args.seed)
    print(table(["part", "wall s (median)", "CPU s (median)"],
                [[k, f"{v['wall_s']:.2f}", f"{v['cpu_s']:.2f}"] for k, v in data["parts"].items()]))
    q = data["quickstart_floor"]
    print(f"\nquickstart floor ({' + '.join(q['parts'])}): {q['wall_s']:.2f} s wall, {q['cpu_s']:.2f} CPU-s")
    path = write_result("floor_quick" if args.quick else "floor", data)
    print(f"wrote {path}")
    print(json.dumps({"quickstart_floor_s": round(q["wall_s"], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
