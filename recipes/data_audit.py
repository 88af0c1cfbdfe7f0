"""Data-audit recipe: (1) a HELM-style train-test overlap report between offline text corpora
with planted contamination, (2) fragment-extraction attacks (PRISM) on tiny causal LMs trained
locally on synthetic records, for several target epoch counts. Both are studies: no grid.

Every field of ``recipes/data_audit.yaml`` can be overridden, e.g.::

    python recipes/data_audit.py --studies.prism.target_epochs='[1, 8]' --studies.overlap.n=9
    python recipes/data_audit.py --studies.prism=null --trainer.logger=false
"""

import torch

from lab import run_study_recipe


def main(args=None):
    torch.set_num_threads(1)  # tiny models: one thread is fastest
    return run_study_recipe(__file__, args)


if __name__ == "__main__":
    main()
