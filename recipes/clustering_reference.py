"""SDCIB (Lou et al., ICML 2025) under the reference code's protocol and under this project's, on
the same runs: encoders ``1024, 1024, 1024, 128``, 40 epochs at Adam 1e-4, batch 32, ten seeds;
each run scored after every epoch. The reference reports, per group of ten runs, the maximum over
runs of the score at each run's epoch of least training loss; this project the last epoch's
score, mean ± std over seeds. Both are tabled for SDCIB, its last-layer ablation and k-means on
the joined views (``ReferenceProtocolStudy``). No grid: the recipe is its study, whose every
field can be overridden, e.g.::

    python recipes/clustering_reference.py --studies.reference.max_epochs=20
    python recipes/clustering_reference.py --config recipes/clustering_reference_full.yaml
"""

import torch

from lab import run_study_recipe


def main(args=None):
    torch.set_num_threads(1)  # batches of 32 through MLPs: one thread per process
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
