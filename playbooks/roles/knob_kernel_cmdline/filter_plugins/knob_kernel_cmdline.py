"""Filters of the knob_kernel_cmdline role.

A parameter's *state* on a kernel command line is ``absent`` (not on the line),
``present`` (a flag without a value, such as ``nosmt``) or its value (``off`` for
``mitigations=off``). When a parameter appears more than once, the last one counts, as
for most parameters in the kernel's own parser.

``knob_kernel_cmdline_state``: the state of a parameter on a line.

``knob_kernel_cmdline_edit``: the line with the parameter put into a state. A parameter
already on the line keeps its place (later duplicates are dropped); a new one goes at
the end; ``absent`` removes it. Every other word stays as it was, so putting the
parameter back into its original state gives the original line back (whitespace
normalized to single spaces; a removed parameter that sat in the middle of the line
comes back at its end).

``knob_kernel_cmdline_grub``: the command line held by one variable of a shell-syntax
boot loader file (/etc/default/grub), or why the role cannot edit it safely.

``knob_kernel_cmdline_want``: the state a factor level asks for (through the knob's
``levels`` map), or why it is not a valid state.

``knob_kernel_cmdline_actual``: a state read back, spelled as the level asked for when
it means that state, else as the level that means it, else as the state itself.
"""

import re

_PARAMETER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# A state must stay one word of the command line and one shell word inside double quotes.
_UNSAFE = re.compile(r"[\s\"'$`\\]")


def _matches(word, parameter):
    return word == parameter or word.startswith(parameter + "=")


def knob_kernel_cmdline_state(line, parameter):
    """'quiet nosmt', 'nosmt' -> 'present'; 'mitigations=off', 'mitigations' -> 'off'."""
    found = [w for w in str(line or "").split() if _matches(w, parameter)]
    if not found:
        return "absent"
    name, sep, value = found[-1].partition("=")
    return value if sep else "present"


def knob_kernel_cmdline_edit(line, parameter, state):
    """The line with ``parameter`` in ``state`` (absent, present or a value)."""
    word = parameter if state == "present" else f"{parameter}={state}"
    out, placed = [], False
    for w in str(line or "").split():
        if not _matches(w, parameter):
            out.append(w)
        elif not placed:
            placed = True
            if state != "absent":
                out.append(word)
    if not placed and state != "absent":
        out.append(word)
    return " ".join(out)


def knob_kernel_cmdline_grub(text, variable):
    """{found, line, error} for ``variable`` in the file's ``text`` (the last assignment wins)."""
    found = re.findall(rf"^[ \t]*{re.escape(variable)}=(.*?)[ \t]*$", str(text or ""), flags=re.MULTILINE)
    if not found:
        return {"found": False, "line": "", "error": ""}
    raw = found[-1]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        value = raw[1:-1]
        inner_unsafe = "'" if raw[0] == "'" else "\"$`\\"
    else:
        value, inner_unsafe = raw, "\"'$`\\ \t#;"
    if any(c in value for c in inner_unsafe):
        return {"found": True, "line": value,
                "error": f"{variable}={raw} is not a plain quoted list of words (quotes, $, ` or \\ inside); "
                         "edit it by hand into the form VAR=\"word word\""}
    return {"found": True, "line": value, "error": ""}


def knob_kernel_cmdline_want(value, levels, parameter):
    """{state, error}: the state the level ``value`` asks for."""
    value = "" if value is None else str(value)
    booleans = [k for k in (levels or {}) if isinstance(k, bool)]
    levels = {str(k): v for k, v in (levels or {}).items()}
    state = str(levels.get(value, value))
    if booleans:
        return {"state": state, "error": f"knob_kernel_cmdline_levels has the key(s) {booleans}: YAML reads bare "
                                         "on/off/yes/no as booleans; quote them (\"on\": absent)"}
    if not _PARAMETER.match(str(parameter or "")):
        return {"state": state, "error": f"'{parameter}' is not a kernel parameter name "
                                         "(set knob_kernel_cmdline_parameter in the knob's vars)"}
    if state == "" or _UNSAFE.search(state):
        return {"state": state, "error": f"'{value}' is not a state of {parameter}: use absent, present or one "
                                         "word without spaces, quotes, $, ` or \\ (or map the level in "
                                         "knob_kernel_cmdline_levels)"}
    return {"state": state, "error": ""}


def knob_kernel_cmdline_actual(state, value, levels):
    """The state read back, in the spelling of the level that means it."""
    value = "" if value is None else str(value)
    levels = {str(k): str(v) for k, v in (levels or {}).items()}
    if levels.get(value, value) == state:
        return value
    return next((level for level, meant in levels.items() if meant == state), state)


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"knob_kernel_cmdline_state": knob_kernel_cmdline_state,
                "knob_kernel_cmdline_edit": knob_kernel_cmdline_edit,
                "knob_kernel_cmdline_grub": knob_kernel_cmdline_grub,
                "knob_kernel_cmdline_want": knob_kernel_cmdline_want,
                "knob_kernel_cmdline_actual": knob_kernel_cmdline_actual}
