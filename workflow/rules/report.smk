# Collect every record into the campaign's tables and render the reports from them:
# one job (one Python and Snakemake job start per campaign), data flowing one way.


rule collect:
    input:
        FN.all_markers,
        FN.restore_markers,
    output:
        runs="results/{experiment}/runs.csv",
        summary="results/{experiment}/summary.csv",
        summary_by_host="results/{experiment}/summary_by_host.csv",
        comparisons="results/{experiment}/comparisons.csv",
        record_notes="results/{experiment}/record_notes.csv",
        moved_with="results/{experiment}/moved_with.csv",
        analysis="results/{experiment}/analysis.json",
        runs_long="results/{experiment}/runs_long.parquet",
        html="results/{experiment}/report.html",
        md="results/{experiment}/report.md",
        findings="results/{experiment}/findings.json",
        plots=directory("results/{experiment}/plots"),
    log:
        "results/{experiment}/logs/collect.log",
    params:
        py=PY,
        spec=config["spec"],
        plan="results/{experiment}/plan.csv",
    shell:
        "{params.py} scripts/collect.py --spec {params.spec:q} --plan {params.plan:q} > {log:q} 2>&1"
