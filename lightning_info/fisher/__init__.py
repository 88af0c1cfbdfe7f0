"""Fisher-information methods: the FIC-TSC constraint and penalty."""

from lightning_info.fisher.constraint import FisherConstraint
from lightning_info.fisher.functional import (
    constrain_fisher_trace_,
    empirical_fisher_trace,
    fisher_penalty,
)
from lightning_info.fisher.penalty import FisherPenalty, FisherPenaltyMixin

__all__ = [
    "FisherConstraint",
    "FisherPenalty",
    "FisherPenaltyMixin",
    "constrain_fisher_trace_",
    "empirical_fisher_trace",
    "fisher_penalty",
]
