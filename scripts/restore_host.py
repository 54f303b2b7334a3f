#!/usr/bin/env python3
"""Snakemake entry point of rule 'restore_host'; the logic is benchmatrix.execute.restore.restore_host."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("restore_host", sys.argv[1:]))
