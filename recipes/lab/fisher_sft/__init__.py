"""The fisher_sft study: what reproduces the paper's tables beside the recipe."""
