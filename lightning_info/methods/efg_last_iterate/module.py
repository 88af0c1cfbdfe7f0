"""``LastIterateSolver``: an uncoupled two-player learner under bandit feedback as a
LightningModule whose training step is a batch of episodes and one update.

The game and the episode ids come from
:class:`~lightning_info.methods.efg_last_iterate.datamodule.GameEpisodesDataModule`. A step
plays its batch with the current policies, sums the implicit-exploration loss estimates
(:meth:`~lightning_info.methods.efg_last_iterate.solver.TabularSolver.loss_sum`), sums them
over the ranks with the strategy's ``reduce`` (every rank then applies the same update, so two
ranks of batch ``b`` equal one device of batch ``2b``), and updates the policy table in closed
form (:meth:`~lightning_info.methods.efg_last_iterate.solver.TabularSolver.apply`). The policy
table and the episodes played are buffers, so a checkpoint holds the whole state: the schedules
are functions of the episodes played and each episode's randomness of its id, and a resumed run
continues exactly. Every ``log_every_n_steps`` steps the last iterate's NashConv is logged
(``solver/nash_conv``, and ``solver/ne_gap``, NashConv over the payoff range).
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy, SingleDeviceStrategy
from torch import nn

from lightning_info.core.validation import require_int
from lightning_info.methods.efg_last_iterate.game import GameTree
from lightning_info.methods.efg_last_iterate.solver import TabularSolver, resolve_rates

__all__ = ["LastIterateSolver"]

GAME_KEY = "efg_last_iterate_game"
"""The checkpoint entry naming the game the policy table was trained on."""


class LastIterateSolver(pl.LightningModule):
    """Last-iterate learning in a two-player zero-sum game (module docstring).

    Args:
        method: ``"virtual_transition"`` (Zhao et al., 2025), ``"ix_omd"`` or
            ``"balanced_omd"``.
        eta, gamma, tau: base rates (``None``: the method's defaults,
            :data:`~lightning_info.methods.efg_last_iterate.solver.DEFAULT_RATES`).
        seed: keys the episodes' randomness.
        nash_conv_every: log the last iterate's NashConv every this many steps.
    """

    def __init__(
        self,
        method: str = "virtual_transition",
        eta: float | None = None,
        gamma: float | None = None,
        tau: float | None = None,
        seed: int = 0,
        nash_conv_every: int = 10,
    ) -> None:
        super().__init__()
        resolve_rates(method, eta, gamma, tau)  # refuses NaN or out-of-range rates here
        require_int(seed, "seed", 0)
        require_int(nash_conv_every, "nash_conv_every", 1)
        self.save_hyperparameters()
        self.automatic_optimization = False
        # Lightning counts steps by optimizer steps; the update is closed-form, so an empty
        # parameter's optimizer marks each update as one step.
        self.step_marker = nn.Parameter(torch.zeros(0))
        self.register_buffer("log_policy", torch.zeros(0, 0, dtype=torch.float64))
        self.register_buffer("episodes", torch.tensor(0))
        self.solver: TabularSolver | None = None

    # ----------------------------------------------------------------------------- setup
    def setup(self, stage: str) -> None:
        data = getattr(self.trainer, "datamodule", None)
        tree = getattr(data, "tree", None)
        if not isinstance(tree, GameTree):
            raise ValueError(
                "LastIterateSolver plays the game of its data module: fit it with a "
                "GameEpisodesDataModule(game=...)."
            )
        strategy = self.trainer.strategy
        if isinstance(strategy, DeepSpeedStrategy) or not isinstance(
            strategy, (SingleDeviceStrategy, DDPStrategy)
        ):
            raise RuntimeError(
                f"LastIterateSolver keeps the whole policy table on every rank; the "
                f"{type(strategy).__name__} strategy shards models. Use a single device or DDP."
            )
        hp = self.hparams
        self.solver = TabularSolver(tree, hp.method, hp.eta, hp.gamma, hp.tau, hp.seed)
        self.episodes_per_epoch = data.episodes_per_epoch
        if self.log_policy.numel() == 0:
            self.log_policy = self.solver.log_policy.clone()
        elif tuple(self.log_policy.shape) != (tree.num_infosets, tree.num_actions):
            raise ValueError(
                f"the policy table is {tuple(self.log_policy.shape)}, but {tree.name} needs "
                f"{(tree.num_infosets, tree.num_actions)}: it was trained on another game."
            )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD([self.step_marker], lr=0.0)

    @property
    def policy(self) -> torch.Tensor:
        """The last iterate, an ``(X, A)`` table in the game tree's infoset order."""
        return self.log_policy.exp()

    # ---------------------------------------------------------------------------- training
    def training_step(self, batch: Any, batch_index: int) -> None:
        (ids,) = batch
        solver = self.solver.to(self.device)
        solver.log_policy, solver.episodes = self.log_policy, int(self.episodes)
        first = self.current_epoch * self.episodes_per_epoch
        loss_sum = solver.loss_sum(ids.cpu() + first)
        played = torch.tensor(float(len(ids)), device=self.device)
        if self.trainer.world_size > 1:
            loss_sum = self.trainer.strategy.reduce(loss_sum, reduce_op="sum")
            played = self.trainer.strategy.reduce(played, reduce_op="sum")
        solver.apply(loss_sum, int(played), validate_args=False)
        self.log_policy.copy_(solver.log_policy)
        self.episodes.fill_(solver.episodes)
        self.optimizers().step()
        logs = {"solver/episodes": float(solver.episodes)}
        if self.global_step == 1 or self.global_step % self.hparams.nash_conv_every == 0:
            gap = solver.nash_conv()
            low, high = solver.tree.utility_range
            logs.update({"solver/nash_conv": gap, "solver/ne_gap": gap / (high - low)})
        self.log_dict(logs, prog_bar=True, on_step=True, on_epoch=False, batch_size=len(ids))

    # ------------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.solver is not None:
            checkpoint[GAME_KEY] = self.solver.tree.name

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # runs after setup and before the state is loaded: a table of another game is refused
        # here, before it replaces this game's table
        if self.solver is None:
            return
        tree = self.solver.tree
        saved = checkpoint.get("state_dict", {}).get("log_policy")
        shape = None if saved is None else tuple(saved.shape)
        name = checkpoint.get(GAME_KEY)
        expected = (tree.num_infosets, tree.num_actions)
        if (name is not None and name != tree.name) or (shape is not None and shape != expected):
            raise ValueError(
                f"the checkpoint is of {name or 'another game'} (policy table {shape}), but the "
                f"data module plays {tree.name} (table {expected}): resume it with "
                f"GameEpisodesDataModule(game={name or '<its game>'!r}), or start a new run."
            )

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # the table's size is the game's: take it from the state being loaded
        if prefix + "log_policy" in state_dict:
            self.log_policy = torch.zeros_like(state_dict[prefix + "log_policy"])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
