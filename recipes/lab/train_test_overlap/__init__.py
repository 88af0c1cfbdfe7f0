"""The train_test_overlap study: what reproduces the paper's tables beside the recipe."""
