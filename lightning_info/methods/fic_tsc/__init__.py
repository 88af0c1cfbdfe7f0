"""FIC-TSC: the Fisher-information constraint for time-series classification (Chen et al.).

See README.md in this folder."""

from lightning_info.methods.fic_tsc.callback import FisherConstraint, Lookahead
from lightning_info.methods.fic_tsc.datamodule import (
    UCRUEADataModule,
    available_bundled_datasets,
    load_bundled_dataset,
)
from lightning_info.methods.fic_tsc.functional import (
    constrain_fisher_trace_,
    empirical_fisher_trace,
    fisher_penalty,
)
from lightning_info.methods.fic_tsc.module import InceptionTimeClassifier
from lightning_info.methods.fic_tsc.monitor_callback import FisherMonitor
from lightning_info.methods.fic_tsc.networks import (
    InceptionModule,
    InceptionTime,
    inception_kernel_sizes,
)
from lightning_info.methods.fic_tsc.penalty import (
    FisherPenalty,
    FisherPenaltyMixin,
    double_backward_attention,
)

__all__ = [
    "Lookahead",
    "UCRUEADataModule",
    "available_bundled_datasets",
    "load_bundled_dataset",
    "FisherConstraint",
    "FisherMonitor",
    "FisherPenalty",
    "FisherPenaltyMixin",
    "InceptionModule",
    "InceptionTime",
    "InceptionTimeClassifier",
    "constrain_fisher_trace_",
    "double_backward_attention",
    "empirical_fisher_trace",
    "fisher_penalty",
    "inception_kernel_sizes",
]
