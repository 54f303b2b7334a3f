"""The extravars file every Ansible call gets: libyaml's emitter (fast for batches of
1000 runs) must write what the pure-Python one did: strings with template syntax
tagged !unsafe, every other string still a string, whatever it looks like."""

from __future__ import annotations

import yaml

from benchmatrix.execute.ansible import _Dumper, _Unsafe

VALUES = ["{{ x }}", "- {{x}}", ": {{x}}", "#{{x}}", "{{ x }}: y", "a # {{x}}", " {{x}} ", "{% if %}",
          "{#c#}", "on", "12", "null", "", "'{{x}}'", '"{{x}}"', "{{x}}\n", "\t{{x}}", "? {{x}}", "| {{x}}",
          "*{{x}}", "{{x}} #", "x\n\n{{y}}", "\u00e9{{x}}", "yes", "1e3", "~"]


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", lambda loader, node: ("unsafe", loader.construct_scalar(node)))


def test_extravars_round_trip_with_unsafe_tags_only_on_template_syntax():
    assert issubclass(_Dumper, getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    text = yaml.dump({"v": _Unsafe.wrap(VALUES)}, Dumper=_Dumper, default_flow_style=False, sort_keys=False)
    back = yaml.load(text, Loader=_Loader)["v"]
    for value, got in zip(VALUES, back, strict=True):
        if any(m in value for m in ("{{", "{%", "{#")):
            assert got == ("unsafe", value)
        else:
            assert got == value
