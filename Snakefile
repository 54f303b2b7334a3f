"""benchmatrix workflow: spec -> plan -> batches on hosts -> collect -> report.

Run it with `bmx run SPEC`, or `snakemake --cores 1 --config spec=SPEC`.
The logic lives in the benchmatrix package; this file is the table of contents.
"""

import sys

from benchmatrix.execute import snakefile as bmx


configfile: "config/config.yaml"


# Validation: a bad spec stops here with FILE:LINE messages and exit status 2.
SPEC = bmx.spec_from_config(config)
# Under `bmx run`: stop this Snakemake and its jobs when bmx dies, even by SIGKILL.
bmx.die_with_bmx(SPEC)
# No pandas import for recording the jobs' params (strings and numbers): 0.45 CPU-s.
bmx.params_without_pandas()
PY = sys.executable
FN = bmx.InputFunctions(checkpoints, SPEC)


wildcard_constraints:
    experiment=bmx.name_pattern(SPEC),
    batch=bmx.BATCH_PATTERN,
    host=r"[A-Za-z0-9][A-Za-z0-9._-]*",


# One lock for every way in: a plain `snakemake` takes results/NAME/.bmx.lock like `bmx run`.
onstart:
    bmx.hold_experiment_lock(SPEC)


# Whatever failed, no host stays reconfigured: restore every host a batch touched.
onerror:
    bmx.on_error(SPEC)


include: "workflow/rules/plan.smk"
include: "workflow/rules/execute.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        expand("results/{experiment}/report.html", experiment=SPEC.name),
