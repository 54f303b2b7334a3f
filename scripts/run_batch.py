#!/usr/bin/env python3
"""Snakemake entry point of rule 'run_batch'; the logic is benchmatrix.execute.rules.run_batch."""
import sys

from benchmatrix.execute.rules import entry

sys.exit(entry("run_batch", sys.argv[1:]))
