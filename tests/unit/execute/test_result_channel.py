"""Results travel as typed data, never by task name (issue 26).

A playbook publishes what the controller needs with ``ansible.builtin.set_stats``
(``per_host: true``, ``aggregate: false``), one key per kind (``bmx_knobs``,
``bmx_facts``, ...); :func:`benchmatrix.execute.ansible.run_playbook` reads the
publications from the runner's events, validates each against its schema
(:data:`benchmatrix.execute.ansible.RESULT_SCHEMAS`) and hands them back through
``PlaybookResult.payload``. Renaming the publishing task changes nothing; a missing,
malformed or unknown payload raises :class:`~benchmatrix.errors.ResultChannelError`
naming the host and the playbook.
"""

from __future__ import annotations

import pytest

from benchmatrix.errors import AnsibleError, ResultChannelError
from benchmatrix.execute.ansible import RESULT_SCHEMAS, PlaybookResult, read_payloads, run_playbook

STATE = {"role": "knob_sysctl", "intended": "1", "actual": "1", "changed": True, "baseline": "0",
         "rebooted": False, "seconds": 0.01, "ok": True}

PLAY = """\
- name: Publish
  hosts: "{{ bmx_host }}"
  gather_facts: false
  tasks:
    - name: "{{ bmx_task_name }}"
      ansible.builtin.set_stats:
        data:
          bmx_knobs: "{{ bmx_payload }}"
        per_host: true
        aggregate: false
      when: bmx_payload is not none
"""


def _event(host: str, data: dict, per_host: bool = True, aggregate: bool = False) -> dict:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": "whatever", "res": {
        "changed": False, "ansible_stats": {"data": data, "per_host": per_host, "aggregate": aggregate}}}}


def test_payloads_come_from_the_publication_not_the_task_name():
    events = [{"event": "runner_on_ok", "event_data": {"host": "h1", "task": "Report knob states to benchmatrix",
                                                       "res": {"msg": {"x": STATE}}}},
              _event("h1", {"bmx_knobs": {"x": STATE}})]
    assert read_payloads(events, "run_batch.yml") == {"h1": {"bmx_knobs": {"x": STATE}}}


def test_the_last_publication_of_a_key_wins():
    later = dict(STATE, actual="0", ok=False)
    events = [_event("h1", {"bmx_knobs": {"x": STATE}}), _event("h1", {"bmx_knobs": {"x": later}})]
    assert read_payloads(events, "run_batch.yml")["h1"]["bmx_knobs"]["x"]["ok"] is False


@pytest.mark.parametrize("events, says", [
    ([_event("h1", {"bmx_knobs": {"x": {"role": "knob_sysctl"}}})], "bmx_knobs is malformed"),
    ([_event("h1", {"bmx_knobs": {"x": dict(STATE, ok="yes")}})], "'yes' is not of type 'boolean'"),
    ([_event("h1", {"bmx_knob": {"x": STATE}})], "unknown payload bmx_knob"),
    ([_event("h1", {"bmx_knobs": {"x": STATE}}, per_host=False)], "per_host: true"),
    ([_event("h1", {"bmx_knobs": {"x": STATE}}, aggregate=True)], "aggregate: false"),
])
def test_a_malformed_payload_names_the_host_and_the_playbook(events, says):
    with pytest.raises(ResultChannelError) as info:
        read_payloads(events, "run_batch.yml", log="logs/b1.log")
    msg = str(info.value)
    assert says in msg, msg
    assert msg.startswith("host h1: ") and "playbook run_batch.yml" in msg and "(log: logs/b1.log)" in msg
    assert len(msg.splitlines()) == 1
    assert isinstance(info.value, AnsibleError) and info.value.host == "h1"


def test_a_missing_payload_fails_loudly():
    result = PlaybookResult([], 0.1, "logs/b1.log", playbook="run_batch.yml", host="h1")
    with pytest.raises(ResultChannelError, match=r"^host h1: playbook run_batch.yml published no bmx_knobs"):
        result.payload("bmx_knobs")


def test_every_key_has_a_schema_and_no_task_name_is_looked_up():
    assert {"bmx_knobs", "bmx_facts", "bmx_check", "bmx_archive", "bmx_progress"} <= set(RESULT_SCHEMAS)
    assert not hasattr(PlaybookResult, "task_result")


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "playbooks"
    project.mkdir()
    (project / "play.yml").write_text(PLAY)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    return project, inventory


def _run(project, tmp_path, payload, task="Any name at all"):
    project, inventory = project
    return run_playbook("play.yml", project_dir=project, inventory=inventory, host="localhost",
                        extravars={"bmx_host": "localhost", "bmx_task_name": task},
                        data={"bmx_payload": payload}, log=tmp_path / "play.log")


@pytest.mark.slow
def test_a_real_playbook_publishes_through_set_stats(project, tmp_path):
    result = _run(project, tmp_path, {"level": STATE}, task="Renamed: the controller never sees this name")
    assert result.payload("bmx_knobs") == {"level": STATE}


@pytest.mark.slow
def test_a_real_playbook_with_a_malformed_or_missing_payload_fails(project, tmp_path):
    with pytest.raises(ResultChannelError, match=r"host localhost: playbook play.yml: bmx_knobs is malformed"):
        _run(project, tmp_path, {"level": {"role": "knob_sysctl"}})
    with pytest.raises(ResultChannelError, match=r"published no bmx_knobs"):
        _run(project, tmp_path, None).payload("bmx_knobs")


def _module_event(host: str, payloads: dict, event: str = "runner_on_ok") -> dict:
    return {"event": event, "event_data": {"host": host, "task": "whatever", "res": {
        "changed": True, "failed": event == "runner_on_failed", "bmx_payloads": payloads}}}


def test_the_one_call_module_returns_its_payloads_in_its_result_checked_alike():
    """bmx_batch (run_known_batch.yml) returns its payloads in its result: read from the
    module's ok or failed result, validated by the same schemas."""
    archive = {"in_place": False, "path": "/w/batches/b1.tar.gz", "content": "H4sI"}
    events = [_module_event("h1", {"bmx_knobs": {"x": STATE}, "bmx_archive": archive}),
              _module_event("h2", {"bmx_knobs": {"x": STATE}}, "runner_on_failed"),
              _module_event("h3", {"bmx_call": {"stale": "the host's fingerprint changed"}})]
    assert read_payloads(events, "run_known_batch.yml") == {
        "h1": {"bmx_knobs": {"x": STATE}, "bmx_archive": archive}, "h2": {"bmx_knobs": {"x": STATE}},
        "h3": {"bmx_call": {"stale": "the host's fingerprint changed"}}}
    with pytest.raises(ResultChannelError, match="bmx_archive is malformed"):
        read_payloads([_module_event("h1", {"bmx_archive": dict(archive, content=3)})], "run_known_batch.yml")
    with pytest.raises(ResultChannelError, match="unknown payload bmx_batch"):
        read_payloads([_module_event("h1", {"bmx_batch": {}})], "run_known_batch.yml")
