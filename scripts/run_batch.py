#!/usr/bin/env python3
"""Snakemake entry point of rule 'run_batch'; the logic is benchmatrix.tasks.run_batch."""
import sys

from benchmatrix.tasks import entry

sys.exit(entry("run_batch", sys.argv[1:]))
