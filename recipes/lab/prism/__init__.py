"""The prism study: what reproduces the paper's tables beside the recipe."""
