"""The filter that turns Ansible's gathered facts into the host's description in
facts.json (benchmatrix.host.knobs.host_metadata): tasks/prepare.yml and the one call's
first batch on a new host (run_known_batch.yml) describe a host in the same words."""

from benchmatrix.host.knobs import host_metadata


class FilterModule:
    """Ansible's entry point for ``bmx_host_metadata``."""

    def filters(self):
        return {"bmx_host_metadata": host_metadata}
