"""The smoothed_information study: what reproduces the paper's tables beside the recipe."""
