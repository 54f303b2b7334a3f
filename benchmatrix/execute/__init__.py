"""Execution on the controller: Snakemake rule bodies, the Snakefile's helpers, the ansible-runner boundary,
hosts and the experiment lock."""
