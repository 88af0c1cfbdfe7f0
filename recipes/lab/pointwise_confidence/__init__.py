"""The pointwise_confidence study: what reproduces the paper's tables beside the recipe."""
