"""The cacti study: what reproduces the paper's tables beside the recipe."""
