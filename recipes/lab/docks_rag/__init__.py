"""The docks_rag study: what reproduces the paper's tables beside the recipe."""
