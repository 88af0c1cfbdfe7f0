"""The ancestral_search study: what reproduces the paper's tables beside the recipe."""
