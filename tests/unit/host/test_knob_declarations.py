"""Each knob backend's declared options (benchmatrix/host/knobs.py) against its role:
meta/argument_specs.yml lists the same variables with the same types, defaults and
descriptions, and defaults/main.yml falls back to the same literals. The backend is the
one copy; these tests keep the role's documentation of it true."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from benchmatrix.host.knobs import BACKENDS

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "playbooks" / "roles"


def role_defaults(role: str) -> dict:
    """defaults/main.yml: each variable's literal fallback (``... | default(LITERAL) }}``), or
    its value when it is no template; variables computed from others are left out."""
    data = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    out = {}
    for name, text in data.items():
        if not (isinstance(text, str) and "{{" in text):
            out[name] = text
            continue
        found = re.search(r"\| default\(([^()]*)\)\s*}}$", text.strip())
        head = text.split("default(", 1)[0].replace(f"bmx_knob.vars.{name} |", "")
        if found and "|" not in head:
            out[name] = jinja_literal(found.group(1))
    return out


def jinja_literal(text: str):
    """A Jinja literal as Python: strings, numbers, lists and dicts as Python writes them,
    true/false as YAML does (a YAML load would fold a string's newlines)."""
    try:
        return ast.literal_eval(text.replace("\n", "\\n"))
    except (ValueError, SyntaxError):
        return yaml.safe_load(text)


def argument_options(role: str) -> dict:
    data = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    return data["argument_specs"]["main"]["options"]


def test_every_knob_role_has_a_backend_and_every_backend_a_role():
    roles = {p.name for p in ROLES.iterdir() if p.name.startswith("knob_")}
    assert roles == set(BACKENDS)


@pytest.mark.parametrize("role", sorted(BACKENDS))
def test_argument_specs_are_the_declared_options(role):
    cls = BACKENDS[role]
    spec = argument_options(role)
    value = spec.pop(f"{role}_value")
    assert value["type"] == "str" and value["required"] is True
    declared = {o.name: o for o in cls.options}
    assert list(spec) == list(declared), "same variables, in the same order"
    for name, entry in spec.items():
        o = declared[name]
        description = entry["description"]
        assert (" ".join(description) if isinstance(description, list) else description) == o.description, name
        assert entry["type"] == o.type, name
        assert entry.get("elements") == o.elements, name
        assert bool(entry.get("required")) == o.required, name
        if not o.required:
            assert entry.get("default") == o.default, name


@pytest.mark.parametrize("role", sorted(BACKENDS))
def test_role_defaults_are_the_declared_defaults(role):
    cls = BACKENDS[role]
    found = role_defaults(role)
    data = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    assert set(data) == {f"{role}_value"} | {o.name for o in cls.options}
    for o in cls.options:
        if o.name in found and not o.derived:
            assert found[o.name] == ("" if o.required else o.default), o.name
    assert cls.defaults == {o.name: "" if o.required else o.default for o in cls.options if not o.derived}


@pytest.mark.parametrize(("type_", "good", "bad"), [
    ("str", ["x", 3, "{{ a }}"], [True, [1], {"a": 1}]),
    ("path", ["/sys"], [3, [], None]),
    ("int", [256, "256", "{{ n }}"], ["lots", 1.5, True]),
    ("bool", [True, "yes", "off"], ["maybe", 1.0]),
    ("list", [["a"], "a,b"], [{"a": 1}, 3, [[1]]]),
    ("dict", [{"a": 1}], [[], "a"]),
])
def test_option_types(type_, good, bad):
    from benchmatrix.host.knobs import Option

    o = Option("v", type_, "a variable", default=None, elements="str" if type_ == "list" else None)
    assert [o.type_problem(v) for v in good] == [""] * len(good)
    problems = [o.type_problem(v) for v in bad]
    assert all(p.startswith(("v must be a ", "v must be an ")) for p in problems), problems


def test_register_refuses_a_second_backend_of_the_same_role():
    from benchmatrix.host import knobs

    before = dict(knobs.BACKENDS)

    class Twin(knobs.Backend):
        role = "knob_sysctl"

    with pytest.raises(ValueError, match="knob_sysctl.*registered twice"):
        knobs.register(Twin)
    # The first registration stays the backend of the role.
    assert knobs.BACKENDS == before and knobs.BACKENDS["knob_sysctl"] is knobs.Sysctl
