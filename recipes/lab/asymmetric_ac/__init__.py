"""The asymmetric_ac study: what reproduces the paper's tables beside the recipe."""
