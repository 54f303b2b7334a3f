"""Filters of tasks/knobs.yml and check_host.yml that ask the knob backends
(benchmatrix.host.knobs, on the controller) instead of naming knobs in the playbooks:
``bmx_knob_services`` (the roles to run before the knob call) and
``bmx_knob_setting_names`` (which host variables the knob call gets as settings)."""

from benchmatrix.host.knobs import services, setting_names


class FilterModule:
    """Ansible's entry point for the filters above."""

    def filters(self):
        return {"bmx_knob_services": services, "bmx_knob_setting_names": setting_names}
