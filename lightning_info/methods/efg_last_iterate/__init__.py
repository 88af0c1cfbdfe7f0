"""Last-iterate learning in two-player zero-sum extensive-form games under bandit feedback
(Zhao, Cheng, Dong, Wang & Li, ICML 2025): OpenSpiel games as arrays, the virtual-transition
OMD learner and its baselines IX-OMD and Balanced OMD, exact NashConv, the
``LastIterateSolver`` LightningModule and ``GameEpisodesDataModule`` (see README.md).
"""

from lightning_info.methods.efg_last_iterate.datamodule import GameEpisodesDataModule
from lightning_info.methods.efg_last_iterate.functional import (
    METHODS,
    nash_conv,
    virtual_transition,
)
from lightning_info.methods.efg_last_iterate.game import GameTree, game_tree, to_tabular_policy
from lightning_info.methods.efg_last_iterate.module import LastIterateSolver
from lightning_info.methods.efg_last_iterate.solver import DEFAULT_RATES, TabularSolver

__all__ = [
    "DEFAULT_RATES",
    "METHODS",
    "GameEpisodesDataModule",
    "GameTree",
    "LastIterateSolver",
    "TabularSolver",
    "game_tree",
    "nash_conv",
    "to_tabular_policy",
    "virtual_transition",
]
