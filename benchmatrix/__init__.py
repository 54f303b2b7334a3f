"""benchmatrix: declarative, randomized benchmark campaigns on real hosts.

A YAML experiment spec (a matrix of factors) is expanded into cells, planned into
an ordered list of runs, executed through Snakemake and Ansible on real hosts, and
summarized in a report. See ``docs/`` and the README for the user guide.
"""

__version__ = "0.1.0"

#: Version of the ``record.json`` layout; bump when a field changes meaning.
RECORD_SCHEMA_VERSION = 1
