#!/usr/bin/env python3
"""Snakemake entry point of rule 'run_batch'; the logic is benchmatrix.execute.batch.run_batch."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("run_batch", sys.argv[1:]))
