"""Fisher-information methods: the FIC-TSC constraint and penalty, FisherSFT selection."""

from lightning_info.fisher.constraint import FisherConstraint
from lightning_info.fisher.functional import (
    constrain_fisher_trace_,
    empirical_fisher_trace,
    fisher_penalty,
)
from lightning_info.fisher.penalty import FisherPenalty, FisherPenaltyMixin
from lightning_info.fisher.selection import (
    Selection,
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    random_select,
)
from lightning_info.fisher.subset import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
)
from lightning_info.fisher.subset_datamodule import FisherSubsetDataModule

__all__ = [
    "FisherConstraint",
    "FisherSubsetDataModule",
    "FisherSubsetSampler",
    "Selection",
    "fisher_greedy_select",
    "k_center_select",
    "load_selection",
    "log_det_objective",
    "random_select",
    "save_selection",
    "select_subset",
    "FisherPenalty",
    "FisherPenaltyMixin",
    "constrain_fisher_trace_",
    "empirical_fisher_trace",
    "fisher_penalty",
]
