"""The diffusion_fisher study: what reproduces the paper's tables beside the recipe."""
