#!/usr/bin/env python3
"""What ansible-playbook's own polling costs while a wave's hosts wait on their batch.

While a task runs, the free strategy looks for results every ``internal_poll_interval``
seconds, each look a pass over every host of the call. This runs one task (``sleep``)
on 1 and on 16 local-connection hosts at once, strategy free, under each interval, and
reports ansible-playbook's own CPU seconds (its workers excluded: their module runs are
the same whatever the interval), rounds interleaved, medians.

    .venv/bin/python bench/poll_interval.py                 # 0.01 and 0.05, 3 rounds, 10 s
    .venv/bin/python bench/poll_interval.py --intervals 0.001,0.01,0.05 --rounds 5

Writes bench/results/poll_interval.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, table, temp_dir, write_result  # noqa: E402

#: Prints the process's own CPU seconds as it exits (only ansible-playbook's main process:
#: a worker leaves through os._exit, which skips atexit).
SITECUSTOMIZE = """\
import atexit, os, resource, sys
if os.path.basename(sys.argv[0] if sys.argv else "") == "ansible-playbook":
    _pid = os.getpid()
    def _own_cpu():
        if os.getpid() == _pid:
            r = resource.getrusage(resource.RUSAGE_SELF)
            sys.stderr.write("OWN_CPU %.3f\\n" % (r.ru_utime + r.ru_stime))
    atexit.register(_own_cpu)
"""

PLAYBOOK = """\
- name: Wait on every host at once
  hosts: all
  strategy: free
  gather_facts: false
  tasks:
    - name: Wait as a batch does
      ansible.builtin.command: sleep {seconds}
      changed_when: false
"""


def own_cpu(tmp: Path, interval: str, hosts: int) -> float:
    cfg = tmp / f"ansible-{interval}.cfg"
    cfg.write_text(f"[defaults]\ninternal_poll_interval = {interval}\nforks = {hosts}\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(cfg), "PYTHONPATH": str(tmp / "site"),
           "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp")}
    bindir = Path(sys.executable).parent
    res = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(tmp / "inventory.yml"), str(tmp / "wait.yml"),
                          "--limit", "h1" if hosts == 1 else "all"], env=env, capture_output=True, text=True,
                         check=False)
    line = next((x for x in res.stderr.splitlines() if x.startswith("OWN_CPU ")), None)
    if res.returncode != 0 or line is None:
        raise RuntimeError(f"ansible-playbook failed ({res.returncode}): {res.stdout[-1000:]}{res.stderr[-1000:]}")
    return float(line.split()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--intervals", default="0.01,0.05", help="internal_poll_interval values, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10, help="how long each task waits")
    args = ap.parse_args()
    intervals = args.intervals.split(",")
    with temp_dir("bmx-bench-poll-") as tmp:
        (tmp / "site").mkdir()
        (tmp / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (tmp / "wait.yml").write_text(PLAYBOOK.format(seconds=args.seconds))
        (tmp / "inventory.yml").write_text(
            f"all:\n  vars: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n"
            "  hosts:\n" + "".join(f"    h{i}: {{}}\n" for i in range(1, 17)))
        got: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            for interval in intervals:
                for hosts in (1, 16):
                    got.setdefault((interval, hosts), []).append(own_cpu(tmp, interval, hosts))
            print(f"round {r + 1} of {args.rounds} done", flush=True)
    rows = [[interval, f"{median(got[(interval, 1)]):.2f}", f"{median(got[(interval, 16)]):.2f}",
             f"{median(got[(interval, 16)]) - median(got[(interval, 1)]):+.2f}"] for interval in intervals]
    print(f"\nansible-playbook's own CPU seconds, one task of {args.seconds} s, medians of {args.rounds} rounds")
    print(table(["internal_poll_interval", "1 host", "16 hosts", "16 - 1"], rows))
    write_result("poll_interval", {"args": vars(args), "own_cpu_s": {f"{i}/{h}": v for (i, h), v in got.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
