#!/usr/bin/env python3
"""Snakemake entry point of rule 'prepare_host'; the logic is benchmatrix.execute.prepare.prepare_host."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("prepare_host", sys.argv[1:]))
