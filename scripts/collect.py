#!/usr/bin/env python3
"""Snakemake entry point of rule 'collect'; the logic is benchmatrix.execute.collect.collect."""
import sys

from benchmatrix.execute.entry import entry

sys.exit(entry("collect", sys.argv[1:]))
