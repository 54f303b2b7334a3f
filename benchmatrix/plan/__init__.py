"""Planning: the run order (split-plot design, costs, batches), replicate power and re-run rounds."""
