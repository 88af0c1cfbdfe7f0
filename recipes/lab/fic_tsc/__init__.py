"""The fic_tsc study: what reproduces the paper's tables beside the recipe."""
