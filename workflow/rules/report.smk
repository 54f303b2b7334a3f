# Collect every record into runs.csv and summary.csv, then render the reports.


rule collect:
    input:
        FN.all_markers,
        FN.restore_markers,
    output:
        runs="results/{experiment}/runs.csv",
        summary="results/{experiment}/summary.csv",
    log:
        "results/{experiment}/logs/collect.log",
    params:
        py=PY,
        spec=config["spec"],
        plan="results/{experiment}/plan.csv",
    shell:
        "{params.py} scripts/collect.py --spec {params.spec:q} --plan {params.plan:q}"
        " --runs {output.runs:q} --summary {output.summary:q} > {log:q} 2>&1"


rule report:
    input:
        runs="results/{experiment}/runs.csv",
        summary="results/{experiment}/summary.csv",
    output:
        html="results/{experiment}/report.html",
        md="results/{experiment}/report.md",
    log:
        "results/{experiment}/logs/report.log",
    params:
        py=PY,
        spec=config["spec"],
    shell:
        "{params.py} scripts/report.py --spec {params.spec:q} > {log:q} 2>&1"
