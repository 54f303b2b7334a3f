#!/usr/bin/env python3
"""Snakemake entry point of rule 'report'; the logic is benchmatrix.tasks.report."""
import sys

from benchmatrix.tasks import entry

sys.exit(entry("report", sys.argv[1:]))
