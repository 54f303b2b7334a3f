#!/usr/bin/env python3
"""Snakemake entry point of rule 'plan'; the logic is benchmatrix.execute.rules.plan."""
import sys

from benchmatrix.execute.rules import entry

sys.exit(entry("plan", sys.argv[1:]))
