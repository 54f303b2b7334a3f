#!/usr/bin/env python3
"""Snakemake entry point of rule 'plan'; the logic is benchmatrix.tasks.plan."""
import sys

from benchmatrix.tasks import entry

sys.exit(entry("plan", sys.argv[1:]))
