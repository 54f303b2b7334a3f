"""stress-ng: the argv builder of the workload_stress_ng role (:mod:`.argv`) and the parser
of its YAML report with its metric catalogue (:mod:`.parse`); :data:`WORKLOAD` describes the role."""

from benchmatrix.workloads.base import Workload
from benchmatrix.workloads.stress_ng.parse import STRESS_NG_METRICS, parse_stress_ng

WORKLOAD = Workload(
    role="workload_stress_ng", summary="stress-ng stressors (cpu, vm, io, ...); its YAML metrics report",
    parse=parse_stress_ng, argv="benchmatrix.workloads.stress_ng.argv", binary="stress-ng",
    metrics=STRESS_NG_METRICS, directions=((r"^bogo_ops_per_s", "higher"),), install_once=True)

__all__ = ["STRESS_NG_METRICS", "WORKLOAD", "parse_stress_ng"]
