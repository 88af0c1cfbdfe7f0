"""Clustering recipe: SDCIB on multi-view data, and CMV-ND hop views of an attribute-missing graph.

The grid trains SDCIB and its last-layer ablation on sklearn's digits seen through three views
and on synthetic shared-latent views, over five seeds; the ``views`` study puts k-means on the
joined views next to them (same data, same seeds), and the ``graph`` study clusters an
attribute-missing stochastic block model: k-means on mean-imputed attributes, on SIGN views and
on CMV-ND views, and SDCIB on the CMV-ND views. Any LightningCLI flag overrides
``recipes/clustering.yaml``, e.g.::

    python recipes/clustering.py --trainer.max_epochs=20 --studies.graph=null
"""

from pathlib import Path

import torch

from lab import ComparisonCLI
from lightning_info import SDCIB, ClusteringViewsDataModule


def main(args=None):
    torch.set_num_threads(1)  # small MLPs on small views: one thread is fastest
    cli = ComparisonCLI(
        SDCIB,
        ClusteringViewsDataModule,
        links={"data.view_dims": "model.view_dims", "data.num_classes": "model.num_clusters"},
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    cli.run()
    return cli


if __name__ == "__main__":
    main()
