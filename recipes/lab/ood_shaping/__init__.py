"""The ood_shaping study: what reproduces the paper's tables beside the recipe."""
