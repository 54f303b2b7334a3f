"""Analysis: summary statistics, comparisons between levels, sanity checks and change points."""
