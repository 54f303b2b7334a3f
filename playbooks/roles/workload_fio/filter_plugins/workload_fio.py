"""Filter ``workload_fio_argv``: a batch's runs -> the same runs with fio's argv.

Every workload variable becomes one ``--key=value`` argument, so a value can never
become a second option or shell text. Options benchmatrix owns (output format and
destination) cannot be overridden.
"""

import re

from ansible.errors import AnsibleFilterError

_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
_OWNED = {"output", "output_format", "output-format", "eta", "eta_newline", "status_interval"}


def _value(key, value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        text = str(value)
        if "\n" in text or "\x00" in text:
            raise AnsibleFilterError(f"workload_fio: value of '{key}' contains a newline or NUL")
        return text
    raise AnsibleFilterError(f"workload_fio: value of '{key}' must be a string, number or boolean, "
                             f"not {type(value).__name__}")


def fio_argv(run_vars, binary="fio", default_filename="benchmatrix-fio.dat"):
    """fio's argv for one run's variables (a dict)."""
    argv = [binary, "--output-format=json", "--eta=never"]
    if "name" not in run_vars:
        argv.append("--name=benchmatrix")
    if "filename" not in run_vars and "directory" not in run_vars:
        argv.append(f"--filename={default_filename}")
    for key in run_vars:
        value = run_vars[key]
        if not isinstance(key, str) or not _KEY.match(key):
            raise AnsibleFilterError(f"workload_fio: '{key}' is not a fio option name")
        if key in _OWNED:
            raise AnsibleFilterError(f"workload_fio: option '{key}' is set by benchmatrix and cannot be changed")
        argv.append(f"--{key}" if value is None else f"--{key}={_value(key, value)}")
    return argv


def workload_fio_argv(runs, binary="fio", default_filename="benchmatrix-fio.dat"):
    """Add ``argv`` to every run and drop its ``vars``."""
    out = []
    for run in runs:
        item = {k: v for k, v in run.items() if k != "vars"}
        item["argv"] = fio_argv(run.get("vars") or {}, binary, default_filename)
        out.append(item)
    return out


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self):
        return {"workload_fio_argv": workload_fio_argv}
