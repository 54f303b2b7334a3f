#!/usr/bin/env python3
"""Snakemake entry point of rule 'collect'; the logic is benchmatrix.tasks.collect."""
import sys

from benchmatrix.tasks import entry

sys.exit(entry("collect", sys.argv[1:]))
