"""A corpus of bad specs for ``bmx validate`` (issue 13 items 1 and 2, issue 25 item 7).

Several hundred specs, generated from a seeded generator plus the hand-written cases
of the issues, are each validated through the CLI's ``main`` in a worker, a forked
child of the test process: every one must exit 2 with only ``FILE:LINE: message``
lines on stderr, no traceback, within a second of CPU time. A case still running
after :data:`HANG_SECONDS` fails and its worker is killed (a hang inside a C loop,
which no signal could interrupt, too); the worker may not grow its address space by
more than :data:`MAX_BYTES` (a MemoryError anywhere fails the case), and a case that
raises its peak memory by that much fails.

The suite runs seed :data:`SEED` (a few hundred cases, a few seconds). More::

    BMX_FUZZ_SEEDS=1,2,3 BMX_FUZZ_SCALE=5 pytest tests/unit/spec/test_validate_fuzz.py
    BMX_FUZZ_SEEDS=random pytest tests/unit/spec/test_validate_fuzz.py   # a new seed, printed

A failure names the seed and the case, and shows the spec's text.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import resource
import select
import signal
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from benchmatrix.campaigns.store import check_label
from benchmatrix.cli import main
from benchmatrix.errors import BenchmatrixError
from benchmatrix.spec.where import Where, WhereError

SEED = 13
#: A case running longer than this (wall clock) is a hang.
HANG_SECONDS = 5.0
#: Most memory a case may add to the process.
MAX_BYTES = 200 * 2**20


def _seeds() -> list[int]:
    """The seeds to run: :data:`SEED`, or those of ``BMX_FUZZ_SEEDS`` (``random``: a fresh one)."""
    given = os.environ.get("BMX_FUZZ_SEEDS", "").strip()
    if not given:
        return [SEED]
    if given == "random":
        seed = random.SystemRandom().randrange(1, 2**31)
        print(f"BMX_FUZZ_SEEDS={seed}")
        return [seed]
    return [int(x) for x in given.split(",") if x.strip()]


SEEDS = _seeds()
#: How many times the default number of cases each category generates.
SCALE = max(1, int(os.environ.get("BMX_FUZZ_SCALE", "1")))
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


def generated(rng: random.Random, scale: int = 1) -> dict[str, str]:
    """Bad specs by category; each is invalid by construction, whatever the draw.

    Each category draws ``scale`` times its default number of cases.
    """
    out: dict[str, str] = {}
    counts: dict[str, int] = {}

    def add(kind: str, text: str) -> None:
        counts[kind] = counts.get(kind, 0) + 1
        out[f"{kind}_{counts[kind] - 1:02d}"] = text

    def times(n: int) -> range:
        return range(n * scale)

    # A prefix that ends before 'workload:' lacks a required key; one that ends inside the
    # last line's flow list leaves it open (a prefix ending elsewhere may be valid).
    cuts = [*range(1, BASE.index("workload:")), *range(BASE.index("argv: [") + 7, len(BASE) - 2)]
    for _ in times(25):
        add("truncated", BASE[:rng.choice(cuts)])
    for _ in times(20):
        pos = rng.randrange(len(BASE))
        ch = chr(rng.choice([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, 0xFFFE]))
        add("control_char", BASE[:pos] + ch + BASE[pos:])
    for _ in times(15):
        depth = rng.choice([65, 100, 1000, 3000, 20000])
        if rng.random() < 0.5:
            nest = "[" * depth + "]" * depth
        else:
            nest = "{" + "k: {" * (depth - 1) + "k: 1" + "}" * depth
        add("deep", f"name: t\nfactors:\n  a: {nest}\nworkload: {{role: workload_x}}\n")
    for _ in times(8):
        width = rng.randint(3, 12)
        depth = 1
        while width ** depth <= 100_000:
            depth += 1
        lines = ["name: t", "x0: &x0 [" + ", ".join(["lol"] * width) + "]"]
        lines += [f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * width) + "]" for i in range(1, depth + 1)]
        add("alias_bomb", "\n".join(lines) + "\nfactors: {a: [1]}\nworkload: {role: workload_x}\n")
    for _ in times(8):
        anchor = rng.choice(["f", "loop", "x1"])
        add("self_alias", rng.choice([
            f"name: t\nfactors: &{anchor}\n  a: *{anchor}\nworkload: {{role: workload_x}}\n",
            f"name: t\nfactors:\n  a: &{anchor} [1, [2, *{anchor}]]\nworkload: {{role: workload_x}}\n",
            f"name: t\nworkload: &{anchor}\n  role: workload_x\n  <<: *{anchor}\nfactors: {{a: [1]}}\n",
        ]))
    for _ in times(20):
        indent, after = rng.choice(MAPPINGS)
        key = rng.choice(["1", "-3", "true", "off", "~", "0.5", "2020-01-01", "[a, b]", "{k: v}"])
        lines = BASE.splitlines()
        lines.insert(after, f"{indent}{'? ' + key if key[0] in '[{' else key + ':'} {'' if key[0] in '[{' else '1'}")
        add("bad_key", "\n".join(lines) + "\n")
    for _ in times(15):
        indent, after = rng.choice(MAPPINGS)
        lines = BASE.splitlines()
        key = {"": "name", "  ": "a", "    ": "argv"}[indent] if indent != "  " or after == 4 else "role"
        lines.insert(after, f"{indent}{key}: 1")
        add("duplicate_key", "\n".join(lines) + "\n")
    for _ in times(15):
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
    for _ in times(30):
        key, values = rng.choice(bad_numbers)
        add("bad_number", BASE + f"{key}: {rng.choice(values)}\n")
    for _ in times(10):
        value = rng.choice([".inf", ".nan", "-.inf", "0", "-5", "1000000", "10 s", "null"])
        add("bad_timeout", BASE.replace("  vars:", f"  timeout: {value}\n  vars:"))
    bad_names = ["a/b", "'../../x'", "'x..y'", "'..'", "1st", "'has space'", "'é'", "'-x'", "'.x'",
                 "'" + "m" * 65 + "'", *RESERVED, "a", "b"]
    for _ in times(30):
        add("bad_metric", _metric(rng.choice(bad_names)))
    for _ in times(10):
        name = rng.choice(bad_names).strip("'")
        add("bad_report_metric", BASE + f"report:\n  metrics: [ok_metric, '{name}']\n")
    bad_templates = ["{{ 'x' * 10**10 }}", "{{ [0] * 10**9 }}", "{{ 'x'|center(10**10) }}", "{{ 9 ** 99999 }}",
                     "{{ nope }}", "{{ a ", "{% for i in range(10**6) %}{% endfor %}", "{{ 100 // (a - 1) }}",
                     "{% macro m() %}{% endmacro %}", "{{ 'x'.ljust(10**9) }}", "{{ a.__class__ }}",
                     "{{ lipsum(10**9) }}"]
    for _ in times(25):
        add("bad_template", _templ(rng.choice(bad_templates)))
    for _ in times(15):
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
    for _ in times(15):
        add("bad_reference", BASE + rng.choice(bad_references))
    # Issue 25 item 5: names that pass a pattern with '$' or that hurt as paths or text.
    bad_bits = ["\\n", "\\r", "\\t", "\\u202e", "\\u2066", "\\u200f", "\\x1b", "/x", "\\\\x"]
    for _ in times(15):
        bit = rng.choice(bad_bits)
        where = rng.choice(["name", "factor", "metric", "role"])
        if where == "name":
            add("bad_name", BASE.replace("name: t", f'name: "t{bit}"'))
        elif where == "factor":
            add("bad_name", BASE.replace("  b: [x, y]", f'  "b{bit}": [x, y]').replace("{{ b }}", "b"))
        elif where == "metric":
            add("bad_name", _metric(f'"m{bit}"'))
        else:
            add("bad_name", BASE.replace("role: workload_command", f'role: "workload_command{bit}"'))
    for _ in times(5):
        add("bad_name", BASE.replace("name: t", f"name: {rng.choice(['.', '..', '.t', 'x' * 65, '-t'])!r}"))
    # YAML 1.1 reads these in another base without a word.
    for _ in times(10):
        number = rng.choice(["017", "010", "0755", "00", "-012", "1:30", "2:00:00", "0_17"])
        add("other_base", rng.choice([BASE + f"replicates: {number}\n", BASE + f"warmup: {number}\n",
                                      BASE.replace("a: [1, 2]", f"a: [1, {number}]")]))
    # Issue 25 item 4: nesting that made Jinja's parser or compiler recurse to a traceback.
    for _ in times(15):
        depth = rng.choice([21, 65, 500, 3000])
        add("deep_template", _templ(rng.choice([
            "{{ " + "[" * depth + "]" * depth + " }}",
            "{{ " + "(" * depth + "a" + ")" * depth + " }}",
            "{{ a" + "|string" * max(depth, 65) + " }}",
            "{{ " + "not " * max(depth, 65) + "a }}",
            "{{ a" + " ~ a" * max(depth, 65) + " }}",
            "{% if a %}" * depth + "x" + "{% endif %}" * depth,
            "{% for i in [1] %}" * depth + "x" + "{% endfor %}" * depth,
        ])))
    # Issue 25 item 3: values whose text is huge although they are built from small ones.
    n = lambda: rng.choice([2000, 10000, 100000])  # noqa: E731 -- a draw, n() * n() >= 4e6
    for _ in times(25):
        k, m = n(), n()
        value = rng.choice([f"[1] * {k}", f"['x' * {min(k, 1000)}] * {k}", f"range({min(k, 100000)})|list"])
        expr = rng.choice([
            f"[{value}] * {m}", f"({value},) * {m}", f"[[{value}] * {m}]|join",
            f"{{}}.fromkeys(range({m}), 'x' * {k * 50})",
            f"('x\\n' * {k})|indent({m})", f"('x\\n' * {k})|indent('y' * {m})",
            f"('x ' * {k})|wordwrap(1)|indent({m})",
            f"'%{m}s' * {k} % ((1,) * {k})", f"('%{m}s' * {k})|format(*range({k}))",
            f"'%(q)s' * {k} % {{'q': 'x' * {m}}}",
            f"(2 ** 4000) * (2 ** {m})",
        ])
        sink = rng.choice(["{{ X }}", "{{ X|tojson }}", "{{ X|string|length }}", "{{ 'a' ~ X }}",
                           "{{ X == X }}", "{{ X|length }}", "{% for v in [X] %}{{ v }}{% endfor %}"])
        add("huge_template", _templ(sink.replace("X", f"({expr})")))
    # Issue 35 item 8: accepted, and then meant something else. Drawn last, so that the
    # draws of the categories above stay as they were.
    for _ in times(10):
        number = rng.choice(["0x1F", "0b101", "1_000", "-0x1", "1_0", "0x0", "1:30.5", "0.0_5"])
        add("not_decimal", rng.choice([BASE + f"replicates: {number}\n", BASE + f"warmup: {number}\n",
                                       BASE.replace("a: [1, 2]", f"a: [1, {number}]")]))
    for _ in times(10):
        metric = rng.choice(["read_bw_kib", "p99_ms", "tps"])
        typo = rng.choice([metric[:-1], metric + "s", metric.replace("_", ""), "zzz", metric.upper()])
        add("threshold_key", BASE + f"report:\n  metrics: [{metric}]\n  threshold: {{default: 5%, {typo}: 10%}}\n")
    for _ in times(10):
        value = rng.choice(["'1e-320'", "'\u0665%'", "'1_0%'", "0.0000000001", "'0%'", "'100%'", "''", "'inf'",
                            "'\uff15%'", "'5 %%'"])
        add("bad_threshold", BASE + rng.choice([f"report:\n  threshold: {value}\n",
                                                f"report:\n  threshold: {{default: {value}}}\n"]))
    for _ in times(10):
        budget = rng.choice(["''", "' '", "inf", "nan", "0h", "0s", "-1h", "9999h", "'\u0663h'", "1_0m",
                             "'" + "9" * 400 + "s'"])
        add("bad_budget", BASE + "report:\n  compare: {factor: b, baseline: x}\n"
                                 f"replicates: {{min: 2, max: 4, until: decided, budget: {budget}}}\n")
    for _ in times(10):
        bit = rng.choice(["\\e[2J", "\\x1b]0;t\\x07", "\\u202e", "\\u2066", "\\t", "\\n", "\\x9b", "\\u200f"])
        add("control_level", rng.choice([
            BASE.replace("b: [x, y]", f'b: [x, "y{bit}"]'),
            BASE + f'include:\n  - {{a: 3, b: "z{bit}"}}\n',
            BASE + f'order:\n  control: {{a: 1, b: "{bit}y"}}\n',
        ]))
    for _ in times(10):
        twins = rng.choice(["9007199254740993, 9007199254740992.0", "9007199254740992.0, 9007199254740993",
                            "100000000000000000001, 100000000000000000000.0", "4097, 4097.0",
                            "9007199254740993, 9007199254740992, 0.5"])
        add("float_twin_level", BASE.replace("a: [1, 2]", f"a: [{twins}]"))
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
    # Issue 25: each gave a traceback, ~1 GB, 40 s of CPU, or validated a harmful name.
    "name_newline": BASE.replace("name: t", 'name: "t\\n"'),
    "factor_newline": BASE.replace("  b: [x, y]", '  "b\\n": [x, y]').replace("{{ b }}", "b"),
    "metric_newline": _metric('"val\\n"'),
    "replicates_octal": BASE + "replicates: 017\n",
    "template_brackets_500": _templ("{{ " + "[" * 500 + "]" * 500 + " }}"),
    "template_filters_3000": _templ("{{ a" + "|string" * 3000 + " }}"),
    "template_list_as_text": _templ("{{ [[1] * 100000] * 100000 }}"),
    "template_dict_as_text": _templ("{{ {}.fromkeys(range(100000), 'x' * 1000000) }}"),
    "template_percent_widths": _templ("{{ '%1000000s' * 1000 % ((1,) * 1000) }}"),
    "template_indent_lines": _templ("{{ ('x\\n' * 500000)|indent(1000000) }}"),
    "template_wordwrap_indent": _templ("{{ ('x ' * 500000)|wordwrap(1)|indent(1000) }}"),
    # Issue 35 item 8: each validated and then meant something else.
    "replicates_hex": BASE + "replicates: 0x1F\n",
    "threshold_typo": BASE + "report:\n  metrics: [read_bw_kib]\n  threshold: {default: 5%, read_bw_kb: 10%}\n",
    "threshold_subnormal": BASE + "report:\n  threshold: '1e-320'\n",
    "budget_empty": BASE + "report:\n  compare: {factor: b, baseline: x}\n"
                           "replicates: {min: 2, max: 4, until: decided, budget: ''}\n",
    "level_esc": BASE.replace("b: [x, y]", 'b: [x, "\\e[2J\\u202ey"]'),
    "level_2p53": BASE.replace("a: [1, 2]", "a: [9007199254740993, 9007199254740992.0]"),
}

CASES = {f"hand_{k}": v for k, v in HAND_WRITTEN.items()}
SEED_OF: dict[str, int | None] = dict.fromkeys(CASES)
for _seed in SEEDS:
    for _name, _text in generated(random.Random(_seed), SCALE).items():
        CASES[f"s{_seed}_{_name}"] = _text
        SEED_OF[f"s{_seed}_{_name}"] = _seed


def _vm_bytes() -> int:
    """The process's virtual memory size (Linux), 0 when unknown."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _validate(path: str) -> dict:
    """In the worker: ``bmx validate path``: rc, out, err, cpu (s), grew_kib (peak memory growth)."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out, err = io.StringIO(), io.StringIO()
    start = time.process_time()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc: object = main(["validate", path])
        except BaseException:  # noqa: BLE001 -- what the test is looking for
            rc = "exception"
            traceback.print_exc(file=err)
    return {"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "cpu": time.process_time() - start,
            "grew_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0}


def _serve(requests: int, replies: int) -> None:
    """The worker's loop: a path per line in, a JSON result per line out, within
    :data:`MAX_BYTES` more address space than it started with."""
    vm = _vm_bytes()
    if vm:
        resource.setrlimit(resource.RLIMIT_AS, (vm + MAX_BYTES, resource.getrlimit(resource.RLIMIT_AS)[1]))
    with os.fdopen(requests, "r") as lines:
        for line in lines:
            try:
                result = _validate(line.rstrip("\n"))
            except BaseException as exc:  # noqa: BLE001 -- e.g. MemoryError building the result
                result = {"rc": "harness", "out": "", "err": repr(exc), "cpu": 0.0, "grew_kib": 0}
            data = (json.dumps(result) + "\n").encode()
            while data:
                data = data[os.write(replies, data):]


class Worker:
    """A forked child of the test process that validates one spec after another.

    Forking once per case costs more than the validation; one worker serves every
    case and is replaced after a case that hangs (it is killed) or kills it.
    """

    def __init__(self) -> None:
        self.pid = 0
        self.buffer = b""

    def _start(self) -> None:
        req_r, self.requests = os.pipe()
        self.replies, res_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.requests)
            os.close(self.replies)
            try:
                _serve(req_r, res_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(res_w)
        self.buffer = b""

    def stop(self) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            os.close(self.requests)
            os.close(self.replies)
            self.pid = 0

    def validate(self, path: Path) -> dict:
        """``bmx validate path`` in the worker; ``{"hang": True}`` past :data:`HANG_SECONDS`."""
        if not self.pid:
            self._start()
        os.write(self.requests, (str(path) + "\n").encode())
        deadline = time.monotonic() + HANG_SECONDS
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                self.stop()
                return {"hang": True}
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:
                self.stop()
                return {"rc": "died", "out": "", "err": "the worker died", "cpu": 0.0, "grew_kib": 0}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    # Validate a good spec first, so that the worker (forked from this process) has
    # imported what validation imports lazily: otherwise the first case a pytest-xdist
    # process runs is charged for the imports (0.3-0.4 s of CPU, a second on a slow machine).
    base = tmp_path_factory.mktemp("warm") / "base.yaml"
    base.write_text(BASE)
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["validate", str(base)]) == 0
    w = Worker()
    yield w
    w.stop()


def test_corpus_is_large_and_base_is_valid(tmp_path, capsys):
    assert len(CASES) >= 300 + len(HAND_WRITTEN)
    path = tmp_path / "base.yaml"
    path.write_text(BASE)
    assert main(["validate", str(path)]) == 0  # every case is a mutation of a valid spec


def test_generator_is_seeded():
    assert generated(random.Random(7)) == generated(random.Random(7)) != generated(random.Random(8))


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_spec_gets_a_clear_error_fast(name, tmp_path, worker):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(CASES[name].encode("utf-8", "surrogatepass"))
    seed = SEED_OF[name]
    case = (f"{'hand-written' if seed is None else f'seed {seed}'}, case {name} (again: "
            f"BMX_FUZZ_SEEDS={seed or SEED} pytest {Path(__file__).name} -k {name}); "
            f"spec: {CASES[name][:400]!r}")
    res = worker.validate(path)
    assert not res.get("hang"), f"hangs (> {HANG_SECONDS:g} s): {case}"
    rc, out, err = res["rc"], res["out"], res["err"]
    assert "Traceback" not in err and "MemoryError" not in err and "RecursionError" not in err, f"{err}\n{case}"
    assert rc == 2 and out == "", f"exit {rc}, {out!r} {err!r}: {case}"
    lines = err.splitlines()
    assert lines, case
    for line in lines:
        assert re.fullmatch(re.escape(str(path)) + r":\d+: \S.{0,500}", line), f"{line!r}: {case}"
    assert res["cpu"] < 1.0, f"{res['cpu']:.2f} s of CPU: {case}"
    assert res["grew_kib"] * 1024 < MAX_BYTES, f"grew by {res['grew_kib'] // 1024} MiB: {case}"


# ---------------------------------------------------------------- names and --where, in process

def generated_labels(rng: random.Random, scale: int = 1) -> list[str]:
    """Campaign labels that must be refused: each breaks the name rule, whatever the draw."""
    bad = [".", "..", "/", "\n", "\r", "\t", "\x00", "\x1b[31m", "\u202e", "\u2066", "\u200e", "\\"]
    labels = []
    for _ in range(30 * scale):
        piece = rng.choice(bad)
        where = rng.randrange(3)
        word = "".join(rng.choice("abc-_ 19é") for _ in range(rng.randint(1, 8))).strip() or "a"
        labels.append({0: piece + word, 1: word + piece + word, 2: word + piece}[where]
                      if piece not in (".", "..") else piece + (word if where else ""))
    labels += ["x" * rng.randint(101, 5000) for _ in range(3 * scale)]
    return labels


LABELS = [(seed, label) for seed in SEEDS for label in generated_labels(random.Random(seed), SCALE)]


def test_bad_labels_are_one_line_errors():
    for seed, label in LABELS:
        with pytest.raises(BenchmatrixError) as info:
            check_label(label)
        msg = str(info.value)
        assert "\n" not in msg and len(msg) < 300 and msg.isprintable(), f"seed {seed}, label {label!r}: {msg!r}"


def generated_wheres(rng: random.Random, scale: int = 1) -> list[str]:
    """``--where`` expressions nested or long past the language's bounds."""
    out = []
    for _ in range(30 * scale):
        depth = rng.choice([51, 200, 1000, 5000, 100_000])
        out.append(rng.choice([
            "not " * depth + "a == 1",
            "(" * max(depth, 250) + "a == 1" + ")" * max(depth, 250),  # fewer parentheses nest no node
            "-" * depth + "1 == a",
            " and ".join(["a == 1"] * max(depth, 300)),  # flat, but longer than 2000 characters
            "a in [" + "[" * depth + "]" * depth + "]",
            "a == 1 " + "or (a == 1 " * min(depth, 1000) + ")" * min(depth, 1000),
        ]))
    return out


WHERES = [(seed, expr) for seed in SEEDS for expr in generated_wheres(random.Random(seed), SCALE)]


def test_deep_wheres_are_one_line_errors():
    for seed, expr in WHERES:
        try:
            Where(expr, ["a"])
        except WhereError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400, f"seed {seed}: {expr[:200]!r}"
        else:
            pytest.fail(f"seed {seed}: accepted {expr[:200]!r}")
