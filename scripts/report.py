#!/usr/bin/env python3
"""Snakemake entry point of rule 'report'; the logic is benchmatrix.execute.rules.report."""
import sys

from benchmatrix.execute.rules import entry

sys.exit(entry("report", sys.argv[1:]))
