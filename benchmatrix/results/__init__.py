"""Results on disk: run records and their columns, run states, and exports."""
