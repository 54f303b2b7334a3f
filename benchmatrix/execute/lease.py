"""The controller's lease on a running batch: a thread renews it while the batch runs and keeps
what the runner reported finished for bmx status.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmatrix import layout
from benchmatrix.errors import (
    BenchmatrixError,
)
from benchmatrix.execute.ansible import run_playbook
from benchmatrix.files import atomic_write
from benchmatrix.layout import exp_dir_of
from benchmatrix.results.campaign import campaign_id
from benchmatrix.results.records import iso
from benchmatrix.spec.config import project_config
from benchmatrix.spec.load import Spec


@contextmanager
def lease(spec: Spec, project_dir: Path, host: str, batch: str) -> Iterator[threading.Event]:
    """Renew the controller's lease on the batch while it runs on ``host``.

    The batch runner stops before its next run once the lease is older than
    ``runner_lease_seconds``: when the whole controller is gone (machine lost, every
    process killed), nothing is left measuring on the host for hours. A thread renews
    it every quarter lease through a small playbook; a failed renewal is retried. The
    runner takes the lease itself as it starts (the manifest's ``lease_seconds``), so
    the first renewal comes a quarter lease after the runner's start: a batch shorter
    than that costs no second ansible-playbook at all (on many hosts at once, half the
    batches' Ansible processes, memory and CPU), and neither does a call's wait for a
    start slot nor the host's preparation in its first batch.

    Yields:
        The event to set when the runner starts (``run_playbook``'s ``on_started``);
        until it is set, nothing is renewed.
    """
    started = threading.Event()
    seconds = project_config(project_dir).runner_lease_seconds
    if not seconds:
        yield started
        return
    exp = exp_dir_of(project_dir, spec)
    stop = threading.Event()

    def renew() -> None:
        started.wait()  # also set as the batch ends, so a runner that never started frees the thread
        while not stop.wait(seconds / 4):
            try:
                result = run_playbook(
                    "renew_lease.yml", project_dir=Path(project_dir) / "playbooks",
                    inventory=spec.inventory_path(project_dir), host=host,
                    extravars={"bmx_host": host, "bmx_experiment": spec.name,
                               "bmx_campaign": campaign_id(exp), "batch_runner_batch": batch,
                               "batch_runner_lease_seconds": int(max(seconds, 1))},
                    log=layout.ansible_log(exp, f"lease-{batch}"), timeout=int(seconds) + 60)
                if not stop.is_set():  # the batch's own results may be in already
                    save_progress(exp, batch, host, result.payload("bmx_progress"))
            except (BenchmatrixError, OSError):
                pass  # e.g. the batch's directory is not made yet: the next renewal comes soon

    thread = threading.Thread(target=renew, name=f"lease-{batch}", daemon=True)
    thread.start()
    try:
        yield started
    finally:
        stop.set()
        started.set()


def save_progress(exp: Path, batch: str, host: str, slurped: dict[str, Any] | None) -> None:
    """Keep what the runner reported finished (``batches/BATCH.progress`` on the host) as
    ``results/NAME/batches/BATCH.progress.json``, for ``bmx status`` while the batch runs.

    The file goes when the batch's marker is written (its records are then in place).
    """
    import base64

    if not slurped or not slurped.get("content"):
        return
    finished = []
    for line in base64.b64decode(slurped["content"]).decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line the runner is still writing
        if isinstance(item, dict) and "run_id" in item:
            finished.append(item)
    atomic_write(layout.progress_path(exp, batch),
                 json.dumps({"batch": batch, "host": host, "read_at": iso(time.time()), "finished": finished}) + "\n")
