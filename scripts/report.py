#!/usr/bin/env python3
"""Snakemake entry point of rule 'report'; the logic is benchmatrix.execute.collect.report."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("report", sys.argv[1:]))
