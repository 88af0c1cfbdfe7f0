"""The prodiff study: what reproduces the paper's tables beside the recipe."""
