"""A corpus of bad specs for ``bmx validate`` (issue 13 items 1 and 2).

Several hundred specs, generated from a seeded generator plus the hand-written cases
of the issue, are each validated in-process through the CLI's ``main``: every one
must exit 2 with only ``FILE:LINE: message`` lines on stderr, no traceback, and
within a second of CPU time. A SIGALRM guard turns a hang into a failure naming the
case instead of a stuck test run.
"""

from __future__ import annotations

import random
import re
import signal
import time

import pytest

from benchmatrix.cli import main

SEED = 13
BASE = """\
name: t
factors:
  a: [1, 2]
  b: [x, y]
workload:
  role: workload_command
  vars:
    argv: [echo, "{{ a }}", "{{ b }}"]
"""
# Mapping keys of BASE where a new key may be put (indentation, line after which to insert).
MAPPINGS = [("", 8), ("  ", 4), ("  ", 8), ("    ", 8)]
RESERVED = ["seq", "host", "run_id", "cell_id", "status", "attempt", "duration_s", "metric"]


def _metric(name: str) -> str:
    return BASE.replace("  vars:", f"  metrics:\n    {name}: {{regex: 'v=(?P<value>[0-9]+)', unit: x}}\n  vars:")


def _templ(expr: str) -> str:
    return BASE.replace('"{{ b }}"', '"' + expr + '"')


def generated(rng: random.Random) -> dict[str, str]:
    """Bad specs by category; each is invalid by construction, whatever the draw."""
    out: dict[str, str] = {}

    def add(kind: str, text: str) -> None:
        out[f"{kind}_{sum(k.startswith(kind + '_') for k in out):02d}"] = text

    # A prefix that ends before 'workload:' lacks a required key; one that ends inside the
    # last line's flow list leaves it open (a prefix ending elsewhere may be valid).
    cuts = [*range(1, BASE.index("workload:")), *range(BASE.index("argv: [") + 7, len(BASE) - 2)]
    for _ in range(25):
        add("truncated", BASE[:rng.choice(cuts)])
    for _ in range(20):
        pos = rng.randrange(len(BASE))
        ch = chr(rng.choice([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, 0xFFFE]))
        add("control_char", BASE[:pos] + ch + BASE[pos:])
    for _ in range(15):
        depth = rng.choice([65, 100, 1000, 3000, 20000])
        if rng.random() < 0.5:
            nest = "[" * depth + "]" * depth
        else:
            nest = "{" + "k: {" * (depth - 1) + "k: 1" + "}" * depth
        add("deep", f"name: t\nfactors:\n  a: {nest}\nworkload: {{role: workload_x}}\n")
    for _ in range(8):
        width = rng.randint(3, 12)
        depth = 1
        while width ** depth <= 100_000:
            depth += 1
        lines = ["name: t", "x0: &x0 [" + ", ".join(["lol"] * width) + "]"]
        lines += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * width) + "]" for i in range(1, depth + 1)]
        add("alias_bomb", "\n".join(lines) + "\nfactors: {a: [1]}\nworkload: {role: workload_x}\n")
    for _ in range(8):
        anchor = rng.choice(["f", "loop", "x1"])
        add("self_alias", rng.choice([
            f"name: t\nfactors: &{anchor}\n  a: *{anchor}\nworkload: {{role: workload_x}}\n",
            f"name: t\nfactors:\n  a: &{anchor} [1, [2, *{anchor}]]\nworkload: {{role: workload_x}}\n",
            f"name: t\nworkload: &{anchor}\n  role: workload_x\n  <<: *{anchor}\nfactors: {{a: [1]}}\n",
        ]))
    for _ in range(20):
        indent, after = rng.choice(MAPPINGS)
        key = rng.choice(["1", "-3", "true", "off", "~", "0.5", "2020-01-01", "[a, b]", "{k: v}"])
        lines = BASE.splitlines()
        lines.insert(after, f"{indent}{'? ' + key if key[0] in '[{' else key + ':'} {'' if key[0] in '[{' else '1'}")
        add("bad_key", "\n".join(lines) + "\n")
    for _ in range(15):
        indent, after = rng.choice(MAPPINGS)
        lines = BASE.splitlines()
        key = {"": "name", "  ": "a", "    ": "argv"}[indent] if indent != "  " or after == 4 else "role"
        lines.insert(after, f"{indent}{key}: 1")
        add("duplicate_key", "\n".join(lines) + "\n")
    for _ in range(15):
        n = rng.randint(6, 30)
        k = rng.randint(max(2, int(100_000 ** (1 / n)) + 1), 12)
        factors = "".join(f"  f{i}: [{', '.join(map(str, range(k)))}]\n" for i in range(n))
        add("huge_matrix", f"name: t\nfactors:\n{factors}workload: {{role: workload_x}}\n")
    bad_numbers = [
        ("replicates", ["3.0", "2.5", "0", "-1", "1000000000000", "10001", ".inf", ".nan", "'3'", "true", "[3]"]),
        ("warmup", ["1.0", "-1", "1001", ".inf", ".nan", "'1'"]),
        ("order", ["{seed: 1.5}", "{visits: 2.0}", "{control_every: 0}", "{control_every: .inf}", "{strategy: fast}"]),
        ("report", ["{alpha: .nan}", "{cv_threshold: .inf}", "{drift_threshold: -.inf}", "{alpha: 0.7}"]),
    ]
    for _ in range(30):
        key, values = rng.choice(bad_numbers)
        add("bad_number", BASE + f"{key}: {rng.choice(values)}\n")
    for _ in range(10):
        value = rng.choice([".inf", ".nan", "-.inf", "0", "-5", "1000000", "10 s", "null"])
        add("bad_timeout", BASE.replace("  vars:", f"  timeout: {value}\n  vars:"))
    bad_names = ["a/b", "'../../x'", "'x..y'", "'..'", "1st", "'has space'", "'é'", "'-x'", "'.x'",
                 "'" + "m" * 65 + "'", *RESERVED, "a", "b"]
    for _ in range(30):
        add("bad_metric", _metric(rng.choice(bad_names)))
    for _ in range(10):
        name = rng.choice(bad_names).strip("'")
        add("bad_report_metric", BASE + f"report:\n  metrics: [ok_metric, '{name}']\n")
    bad_templates = ["{{ 'x' * 10**10 }}", "{{ [0] * 10**9 }}", "{{ 'x'|center(10**10) }}", "{{ 9 ** 99999 }}",
                     "{{ nope }}", "{{ a ", "{% for i in range(10**6) %}{% endfor %}", "{{ 100 // (a - 1) }}",
                     "{% macro m() %}{% endmacro %}", "{{ 'x'.ljust(10**9) }}", "{{ a.__class__ }}",
                     "{{ lipsum(10**9) }}"]
    for _ in range(25):
        add("bad_template", _templ(rng.choice(bad_templates)))
    for _ in range(15):
        add("bad_level", rng.choice([
            BASE.replace("a: [1, 2]", f"a: [{rng.choice(['1, 1.0', '4096, 4096.0', 'x, x', '.inf', '.nan'])}]"),
            BASE.replace("a: [1, 2]", "a: []"),
            BASE.replace("a: [1, 2]", f"a: [1, {rng.choice(['[2]', '{k: 2}', 'null'])}]"),
            BASE + f"include:\n  - {{a: 1.0{rng.choice(['', ', c: 3', ', b: [x]'])}}}\n",
        ]))
    knob = "knobs:\n  a: {role: knob_x, cost: restart}\n"
    bad_references = [
        knob + "order: {strategy: restricted, control: {a: [1], b: x}}\n",
        "order: {control: {a: {k: 1}, b: x}}\n",
        "order: {control: {a: 1}}\n",
        "exclude:\n  - {a: {x: 1}}\n",
        "exclude:\n  - {zz: 1}\n",
        "zip: [[a, zz]]\n",
        "zip: [[a, a]]\n",
        "report:\n  tables: [{rows: zz, metric: m}]\n",
        "report:\n  compare: {factor: a, baseline: 3}\n",
        "report:\n  compare: {factor: zz, baseline: 1}\n",
        "knobs:\n  zz: {role: knob_x}\n",
        knob + "order: {strategy: restricted, visits: 7}\n",
    ]
    for _ in range(15):
        add("bad_reference", BASE + rng.choice(bad_references))
    return out


# The hand-written cases: the ones that gave tracebacks, hung or allocated.
HAND_WRITTEN = {
    "self_alias": "name: t\nfactors: &f\n  a: *f\nworkload: {role: workload_x}\n",
    "nested_2500": "name: t\nfactors:\n  a: " + "[" * 2500 + "]" * 2500 + "\nworkload: {role: workload_x}\n",
    "nul": BASE.replace("name: t", "name: t\x00"),
    "bel": BASE.replace("b: [x, y]", 'b: [x, "y\x07"]'),
    "mixed_keys": "name: t\nfactors:\n  b: [c]\n  1: [a]\nworkload: {role: workload_x}\n",
    "mixed_top_keys": BASE + "1: 2\n",
    "cells_1e20": "name: t\nfactors:\n" + "".join(f"  f{i}: [0,1,2,3,4,5,6,7,8,9]\n" for i in range(20))
                  + "workload: {role: workload_x}\n",
    "levels_200k": "name: t\nfactors:\n  a: [" + ",".join(map(str, range(200_000)))
                   + "]\nworkload: {role: workload_x}\n",
    "levels_150k_small": "name: t\nfactors:\n  a: [" + ",".join(["1"] * 150_000) + "]\nworkload: {role: workload_x}\n",
    "billion_laughs": "name: t\na0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
                      + "".join(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10))
                      + "factors: {a: [1]}\nworkload: {role: workload_x}\n",
    "alias_depth_chain": "name: t\n"
                         + "".join(f"d{i}: &d{i} " + "[" * 60 + (f"*d{i - 1}" if i else "1") + "]" * 60 + "\n"
                                   for i in range(30))
                         + "factors: {a: [1]}\nworkload: {role: workload_x}\n",
    "replicates_float": BASE + "replicates: 3.0\n",
    "warmup_float": BASE + "warmup: 1.0\n",
    "replicates_1e12": BASE + "replicates: 1000000000000\n",
    "timeout_inf": BASE.replace("  vars:", "  timeout: .inf\n  vars:"),
    "timeout_nan": BASE.replace("  vars:", "  timeout: .nan\n  vars:"),
    "metric_status": _metric("status"),
    "metric_seq": _metric("seq"),
    "metric_factor": _metric("a"),
    "metric_slash": _metric("a/b"),
    "metric_dotdot": _metric("'../../x'"),
    "template_10gb": _templ("{{ 'x' * 10**10 }}"),
    "template_one_cell": BASE.replace("a: [1, 2]", "a: [1, 0]").replace('"{{ a }}"', '"{{ 10 // a }}"'),
    "int_tag": BASE + "replicates: !!int abc\n",
}

CASES = {**{f"hand_{k}": v for k, v in HAND_WRITTEN.items()}, **generated(random.Random(SEED))}


class Hang(Exception):
    """Raised by the alarm when one case takes too long."""


def _alarm(signum, frame):
    raise Hang()


def test_corpus_is_large_and_base_is_valid(tmp_path, capsys):
    assert len(CASES) >= 200 + len(HAND_WRITTEN)
    path = tmp_path / "base.yaml"
    path.write_text(BASE)
    assert main(["validate", str(path)]) == 0  # every case is a mutation of a valid spec


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_spec_gets_a_clear_error_fast(name, tmp_path, capsys):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(CASES[name].encode("utf-8", "surrogatepass"))
    capsys.readouterr()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 20)  # wall clock: generous on a loaded machine
    start = time.process_time()
    try:
        rc = main(["validate", str(path)])
    except Hang:
        pytest.fail(f"{name}: bmx validate hangs")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    cpu = time.process_time() - start
    out, err = capsys.readouterr()
    assert rc == 2, (name, out, err)
    assert "Traceback" not in err and out == ""
    lines = err.splitlines()
    assert lines, name
    for line in lines:
        assert re.fullmatch(re.escape(str(path)) + r":\d+: \S.{0,500}", line), (name, line)
    assert cpu < 1.0, f"{name}: {cpu:.2f} s of CPU"
