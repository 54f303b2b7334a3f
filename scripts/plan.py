#!/usr/bin/env python3
"""Snakemake entry point of rule 'plan'; the logic is benchmatrix.execute.planning.plan."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("plan", sys.argv[1:]))
