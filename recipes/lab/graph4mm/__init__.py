"""The graph4mm study: what reproduces the paper's tables beside the recipe."""
