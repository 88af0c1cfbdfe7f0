"""Search-and-score causal discovery for ancestral graphs (Lagrange & Isambert, ICML 2025)."""
