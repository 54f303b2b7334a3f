"""The project's config/config.yaml, read in one place into a typed :class:`ProjectConfig`.

Snakemake reads the same file as its ``configfile`` (``spec``, and ``--config``
overrides); the package reads the keys that size batches, slices, leases and
estimates here, each checked with the file and line of a bad value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmatrix.errors import SpecError, SpecErrors
from benchmatrix.spec.load import COST_CLASSES, DEFAULT_COST_SECONDS
from benchmatrix.spec.yamlload import load_located

#: The project's configuration file, relative to the project directory.
CONFIG_FILE = Path("config") / "config.yaml"
#: Default upper bound on runs per batch, whatever their expected durations (issue 34:
#: 1000 before; a batch's few seconds of fixed cost then came back every 1000 short runs,
#: 3 ms a run, and time slices bound a batch's Ansible call anyway).
DEFAULT_BATCH_MAX_RUNS = 10000
#: Default seconds of expected workload time per batch (config.yaml's batch_max_seconds).
DEFAULT_BATCH_MAX_SECONDS = 300.0
#: Default seconds one batch (one Ansible call) adds to a campaign, for estimates.
DEFAULT_BATCH_OVERHEAD_SECONDS = 3.0
#: Default seconds of a campaign's fixed start and end (plan job, preparing and
#: restoring the hosts, collect, report, Snakemake's start), for estimates: measured
#: on a 4-run local campaign (docs/spec.md "Costs").
DEFAULT_CAMPAIGN_OVERHEAD_SECONDS = 16.0
#: Default seconds the batch runner goes on without hearing from its controller.
DEFAULT_LEASE_SECONDS = 300.0


@dataclass(frozen=True)
class ProjectConfig:
    """config/config.yaml's settings, defaults filled in (config/config.yaml documents each).

    Attributes:
        path: The file read (it may not exist: then every default holds).
        batch_max_runs: Most runs in one batch.
        batch_max_seconds: Seconds of expected workload time per batch, and the time
            slice after which a batch's results come back.
        runner_lease_seconds: The controller's lease on a running batch (0: no lease).
        cost_seconds: Default seconds of a knob change per cost class (estimates only).
        batch_overhead_seconds: Fixed seconds each batch adds (estimates only; the
            experiment's earlier campaigns' figure wins: :mod:`benchmatrix.plan.measured_costs`).
        campaign_overhead_seconds: Fixed seconds of a campaign's start and end
            (estimates only; the earlier campaigns' figure wins, likewise).
        given: The keys the file sets.
    """

    path: Path
    batch_max_runs: int = DEFAULT_BATCH_MAX_RUNS
    batch_max_seconds: float = DEFAULT_BATCH_MAX_SECONDS
    runner_lease_seconds: float = DEFAULT_LEASE_SECONDS
    cost_seconds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_COST_SECONDS))
    batch_overhead_seconds: float = DEFAULT_BATCH_OVERHEAD_SECONDS
    campaign_overhead_seconds: float = DEFAULT_CAMPAIGN_OVERHEAD_SECONDS
    given: frozenset[str] = frozenset()


def project_config(project_dir: str | Path) -> ProjectConfig:
    """The configuration of the project at ``project_dir`` (its config/config.yaml)."""
    return read_config(Path(project_dir) / CONFIG_FILE)


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value < float("inf")


def read_config(config_path: str | Path) -> ProjectConfig:
    """Read and check a config.yaml; a missing file or key means the defaults.

    Raises:
        SpecErrors: a malformed entry, as ``FILE:LINE: message``.
    """
    path = Path(config_path)
    if not path.is_file():
        return ProjectConfig(path=path)
    try:
        doc = load_located(path)
    except SpecError as exc:
        raise SpecErrors([exc]) from None
    data = doc.data if isinstance(doc.data, dict) else {}
    out: dict[str, Any] = {"cost_seconds": dict(DEFAULT_COST_SECONDS)}
    errs = []
    given = data.get("cost_seconds")
    if given is not None and not isinstance(given, dict):
        errs.append(doc.error(("cost_seconds",), "cost_seconds must be a mapping "
                                                 "{none: S, restart: S, reboot: S} of seconds"))
    for cls, secs in (given or {}).items() if isinstance(given, dict) else ():
        if cls not in COST_CLASSES:
            errs.append(doc.error(("cost_seconds", cls), f"cost_seconds: unknown cost class '{cls}' "
                                                         f"(classes: {', '.join(COST_CLASSES)})"))
        elif not _seconds(secs):
            errs.append(doc.error(("cost_seconds", cls), f"cost_seconds.{cls} must be a number of seconds >= 0, "
                                                         f"not {secs!r}"))
        else:
            out["cost_seconds"][cls] = float(secs)
    # key -> (is the value good, the message's requirement, the converter)
    checks = {
        "batch_overhead_seconds": (_seconds, "a number of seconds >= 0", float),
        "campaign_overhead_seconds": (_seconds, "a number of seconds >= 0", float),
        "batch_max_runs": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                           "a whole number >= 1", int),
        "batch_max_seconds": (lambda v: _seconds(v) and v > 0, "a number of seconds > 0", float),
        "runner_lease_seconds": (_seconds, "a number of seconds >= 0 (0 turns the lease off)", float),
    }
    for key, (good, requirement, convert) in checks.items():
        value = data.get(key)
        if value is None:
            continue
        if good(value):
            out[key] = convert(value)
        else:
            errs.append(doc.error((key,), f"{key} must be {requirement}, not {value!r}"))
    if errs:
        raise SpecErrors(errs)
    return ProjectConfig(path=path, given=frozenset(k for k in data if k in out), **out)
