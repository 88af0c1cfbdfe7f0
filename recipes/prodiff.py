"""Trajectory-imputation recipe: ProDiff (Bu et al., ICML 2025) against linear and great-circle
interpolation, and its ablation without prototypes, on the synthetic city at two window
lengths, over seeds. No grid: the recipe is its study, whose every field can be overridden,
e.g.::

    python recipes/prodiff.py --studies.trajectories.max_epochs=200
    python recipes/prodiff.py --studies.trajectories.synthetic='{"left_side_probability": 0.5}'

The prototype ablation across gap lengths and data scale, with the prototype diagnostics, is a
separate config on top of this one (its one-sided study alone: 23 min on 2 CPU cores)::

    python recipes/prodiff.py --config recipes/prodiff_gaps.yaml
"""

import torch

from lab import run_study_recipe


def main(args=None):
    torch.set_num_threads(1)  # small networks on small windows: one thread per process
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
