"""Code that runs on the hosts, standard library only: the batch runner copied there and the
knob backends (:mod:`benchmatrix.host.knobs`, Ansible's bmx_knob module). The controller
imports only ``knobs``, for the backends' declarations; both modules import nothing else
of benchmatrix."""
