"""A host new to the controller takes its first batch in one call (issue 34, item 1):
the batch job builds its commands with the role variables another host of the project
published (``execute.prepare.any_role_vars``), and the call checks them on the host
(tests/unit/host/test_batch_call.py, tests/e2e/test_waves_e2e.py)."""

from __future__ import annotations

import json

from benchmatrix import layout
from benchmatrix.execute.prepare import any_role_vars, role_var_names, save_role_vars

ROLE = "workload_fio"


def _vars(directory: str) -> dict:
    return {name: directory if name == "workload_fio_directory" else "" for name in role_var_names(ROLE)}


def test_the_first_host_in_name_order_with_complete_role_variables_lends_them(tmp_path):
    assert any_role_vars(tmp_path, ROLE) is None  # a project's first campaign: run_batch.yml
    save_role_vars(tmp_path, "hb", ROLE, _vars("/b"))
    save_role_vars(tmp_path, "hc", ROLE, _vars("/c"))
    # ha's cache has facts but no role variables (an older benchmatrix), and another role's.
    ha = layout.host_cache_path(tmp_path, "ha", ROLE)
    ha.parent.mkdir(parents=True)
    ha.write_text(json.dumps({"fingerprint": "x", "facts": {"hostname": "ha"}}))
    save_role_vars(tmp_path, "aa", "workload_command", {"bmx_workload_path": "/x"})
    assert any_role_vars(tmp_path, ROLE) == _vars("/b")
    # An incomplete set (a role that gained a build variable since) lends nothing.
    save_role_vars(tmp_path, "hb", ROLE, {"workload_fio_directory": "/b"})
    assert any_role_vars(tmp_path, ROLE) == _vars("/c")
