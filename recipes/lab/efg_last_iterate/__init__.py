"""The efg_last_iterate study: what reproduces the paper's tables beside the recipe."""
