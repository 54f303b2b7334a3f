# Plan: expand the matrix and order the runs of every host (results/NAME/plan.csv).
# The digest of the spec's content and of reruns.csv is a param, so editing the spec or
# asking for re-runs re-plans, and nothing else does.
checkpoint plan:
    output:
        "results/{experiment}/plan.csv",
    log:
        "results/{experiment}/logs/plan.log",
    params:
        py=PY,
        spec=config["spec"],
        digest=FN.plan_digest,
        batch_max_runs=config["batch_max_runs"],
        batch_max_seconds=config.get("batch_max_seconds", 300),
    shell:
        "{params.py} scripts/plan.py --spec {params.spec:q} --out {output:q}"
        " --batch-max-runs {params.batch_max_runs}"
        " --batch-max-seconds {params.batch_max_seconds} > {log:q} 2>&1"
