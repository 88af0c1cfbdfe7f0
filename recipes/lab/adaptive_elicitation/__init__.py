"""The adaptive_elicitation study: what reproduces the paper's tables beside the recipe."""
