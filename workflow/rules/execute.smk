# Execution: one job per batch, chained per host in plan order; the host's first batch
# also prepares it (facts.json, the batch runner's install) in the same Ansible call.


# plan.csv is a param, not an input: re-planning must not re-run unchanged batches
# (their ids stay the same); the checkpoint still orders plan before every batch.
rule run_batch:
    input:
        previous=FN.previous_marker,
    output:
        "results/{experiment}/batches/{batch}.done",
    log:
        "results/{experiment}/logs/batches/{batch}.log",
    # `bmx run --hosts-parallel N` declares host_slots=N: at most N hosts busy at once.
    resources:
        host_slots=1,
    params:
        py=PY,
        spec=config["spec"],
        plan="results/{experiment}/plan.csv",
    shell:
        "{params.py} scripts/run_batch.py --spec {params.spec:q} --plan {params.plan:q}"
        " --batch {wildcards.batch:q} --marker {output:q} --log {log:q} 2>> {log:q}"


# Campaign end: each host's knobs go back to their baseline after its last batch
# (a no-op without knobs). The input is the last marker, so an extended plan restores
# again after its new batches.
rule restore_host:
    input:
        FN.last_marker,
    output:
        "results/{experiment}/hosts/{host}/restored.json",
    log:
        "results/{experiment}/logs/hosts/{host}.restore.log",
    params:
        py=PY,
        spec=config["spec"],
    shell:
        "{params.py} scripts/restore_host.py --spec {params.spec:q} --host {wildcards.host:q}"
        " --out {output:q} 2> {log:q}"
