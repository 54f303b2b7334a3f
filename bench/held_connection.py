#!/usr/bin/env python3
"""Issue 34, item 5: a known host's batch started over the connection Ansible already holds.

Measured, not shipped. A known host's batch is one module call (``run_known_batch.yml``,
``bmx_batch``): what it costs the controller is mostly the call's start (ansible-runner,
ansible-playbook, the play, one worker fork, the module's transfer), not the batch. Once
an Ansible call has reached the host, its SSH master connection stays up for
``ControlPersist`` (60 s in playbooks/ansible.cfg); a later batch could be started over it
with a plain ``ssh -S SOCKET HOST python3 ...``, without Ansible. Each variant starts the
same small program on a namespace SSH host (tests/netns.py), ``python3 -c`` that prints
its argument: the batch runner's own work is the same in every variant, only the start
differs. Controller CPU seconds (user + system of the process and every child it waited
for) and wall seconds, interleaved by round, medians:

  ansible call      ansible-runner running a one-task playbook (``ansible.builtin.command``)
                    on the host, over its held master (the batch's call today, less its
                    module's own arguments);
  ssh, held master  ``ssh -o ControlPath=SOCKET -o ControlMaster=no`` to the master the
                    Ansible calls keep (the connection Ansible already holds);
  ssh, new          ``ssh`` without a master (a connection of its own each time).

    bench/held_connection.py               # root; 7 rounds (about 1 minute)
    bench/held_connection.py --quick       # 2 rounds

Writes bench/results/held_connection.json (or held_connection_quick.json).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import netns  # noqa: E402
from _common import PY, median, run_measured, table, temp_dir, write_result  # noqa: E402

PLAYBOOK = """\
---
- name: Start a program on the host
  hosts: h1
  gather_facts: false
  tasks:
    - name: Start it
      ansible.builtin.command: python3 -c "import sys; print(sys.argv[1])" started
      changed_when: false
"""

CALL = """\
import os, sys
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
import ansible_runner
r = ansible_runner.run(private_data_dir=sys.argv[1], project_dir=sys.argv[2], playbook="p.yml",
                       inventory=sys.argv[3], quiet=True, envvars={"ANSIBLE_CONFIG": sys.argv[4]})
sys.exit(0 if r.status == "successful" else 1)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="2 rounds (smoke run)")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    if netns.available():
        print(f"cannot build namespace hosts: {netns.available()}", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    with temp_dir("bmx-held-") as tmp, netns.NamespaceHosts(tmp / "net", 1) as net:
        inventory = tmp / "inv.yml"
        inventory.write_text(net.inventory())
        project = tmp / "project"
        project.mkdir()
        (project / "p.yml").write_text(PLAYBOOK)
        cfg = Path(__file__).resolve().parents[1] / "playbooks" / "ansible.cfg"
        ssh = ["ssh", "-i", str(net.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
        target = f"root@{net.addr['h1']}"
        program = ["python3", "-c", "'import sys; print(sys.argv[1])'", "started"]

        def ansible_call() -> list[str]:
            data = Path(tempfile.mkdtemp(dir=tmp))
            return net.ctl_cmd([PY, "-c", CALL, str(data), str(project), str(inventory), str(cfg)])

        def held() -> list[str]:
            socket = next(p for p in (net.workdir / "cp").iterdir() if p.is_socket())
            return net.ctl_cmd([*ssh, "-o", f"ControlPath={socket}", "-o", "ControlMaster=no", target, *program])

        def new() -> list[str]:
            return net.ctl_cmd([*ssh, "-o", "ControlMaster=no", "-o", "ControlPath=none", target, *program])

        variants = {"ansible call": ansible_call, "ssh, held master": held, "ssh, new": new}
        # The first Ansible call opens the master the others reuse (ControlPersist 60 s:
        # every round's Ansible call keeps it up).
        first = run_measured(ansible_call(), output=tmp / "first.out")
        if first["rc"] != 0:
            print("the first Ansible call failed:\n" + (tmp / "first.out").read_text(), file=sys.stderr)
            return 1
        got: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
        for _ in range(rounds):
            for name in rng.sample(list(variants), len(variants)):
                res = run_measured(variants[name]())
                if res["rc"] != 0:
                    print(f"{name}: exit status {res['rc']}", file=sys.stderr)
                    return 1
                got[name].append(res)
    rows = []
    result: dict[str, Any] = {"rounds": rounds, "variants": {}}
    base = median([r["user_s"] + r["sys_s"] for r in got["ansible call"]])
    for name, runs in got.items():
        cpu = median([r["user_s"] + r["sys_s"] for r in runs])
        wall = median([r["wall_s"] for r in runs])
        result["variants"][name] = {"cpu_s": cpu, "wall_s": wall,
                                    "rounds": [{"cpu_s": r["user_s"] + r["sys_s"], "wall_s": r["wall_s"]}
                                               for r in runs]}
        rows.append([name, f"{cpu:.3f}", f"{wall:.3f}", f"{cpu / base:.3f}"])
    print(table(["variant", "controller CPU-s", "wall s", "CPU vs the Ansible call"], rows))
    path = write_result("held_connection_quick" if args.quick else "held_connection", result)
    print(f"wrote {path}")
    print(json.dumps({k: round(v["cpu_s"], 3) for k, v in result["variants"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
