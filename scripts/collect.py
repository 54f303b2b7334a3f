#!/usr/bin/env python3
"""Snakemake entry point of rule 'collect'; the logic is benchmatrix.execute.rules.collect."""
import sys

from benchmatrix.execute.rules import entry

sys.exit(entry("collect", sys.argv[1:]))
