"""Imputation recipe: CACTI (Gorla et al., ICML 2025) against the column mean, KNN and
IterativeImputer, and its ablation without context tokens, on scikit-learn's bundled tables under
simulated MCAR / MAR / MNAR missingness, over seeds. No grid: the recipe is its study, whose
every field can be overridden, e.g.::

    python recipes/cacti.py --studies.imputation.max_epochs=100 --studies.imputation.workers=1
    python recipes/cacti.py --studies.imputation.model='{"embed_dim": 64, "encoder_depth": 10}'

``model`` holds CACTI's settings (``build_cacti``): the network's ``embed_dim``,
``encoder_depth``, ``decoder_depth``, ``num_heads``, ``mlp_ratio``, AdamW's ``lr``,
``weight_decay``, ... and ``copy_probability``.
"""

import torch

from lab import run_study_recipe


def main(args=None):
    torch.set_num_threads(1)  # small transformers on small tables: one thread per process
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
