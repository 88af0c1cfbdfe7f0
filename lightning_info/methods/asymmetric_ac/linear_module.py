"""The linear (tabular) natural actor-critic of Lambrechts, Ernst & Mahajan (ICML 2025) as a
LightningModule: one training step is one actor-critic round of
:mod:`~lightning_info.methods.asymmetric_ac.functional`.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import (
    require_bool,
    require_fraction,
    require_int,
    require_positive,
)
from lightning_info.methods.asymmetric_ac.exact import (
    agent_state_chain,
    critic_error,
    evaluate_policy,
)
from lightning_info.methods.asymmetric_ac.functional import (
    SGDSettings,
    m_step_td,
    npg_direction,
    softmax_policy,
)
from lightning_info.methods.asymmetric_ac.tabular_pomdp import TabularPOMDP, t_maze

# the options live in checkpoints' hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals([SGDSettings])

_CRITIC_SGD = SGDSettings(num_steps=1000)


class LinearAsymmetricActorCritic(pl.LightningModule):
    """Softmax-linear actor on window agent states with an asymmetric or symmetric linear critic.

    Each training step of round ``t``:

    1. ``Q_beta`` = averaged projected m-step TD of ``pi_theta`` with one-hot features
       ``phi(s, z, a)`` (asymmetric) or ``phi(z, a)`` (symmetric), :func:`m_step_td`;
    2. ``w`` = natural-gradient direction fitted to ``Â = Q_beta - sum_a' pi Q_beta``,
       :func:`npg_direction`;
    3. ``theta <- theta + eta w``: an SGD step (learning rate ``eta``) on the surrogate loss
       ``-<theta, w>``, whose gradient is ``-w``. Under DDP the gradients, hence the directions
       of the ranks (each samples its own transitions), are averaged; ``global_step`` counts
       rounds, so ``max_steps`` works.

    The exact value ``J(pi_t)`` (``linear/value``), the critic's error against the exact
    ``Q^{pi_t}(s, z, a)`` (``linear/critic_error``) and the aliasing floor of any ``(z, a)``
    critic (``linear/aliasing_floor``) are logged every round. Sampling is seeded by
    ``(seed, round, rank)``, so a resumed run continues exactly.

    Args:
        pomdp: the tabular POMDP; ``None`` builds the T-maze ``t_maze(1, 1.0, penalty=-0.5)``
            (:func:`~lightning_info.methods.asymmetric_ac.tabular_pomdp.t_maze`).
        window: agent state = the last ``window`` observations.
        asymmetric: critic features ``phi(s, z, a)`` (else ``phi(z, a)``).
        gamma: discount factor.
        td_steps: ``m`` of the m-step TD target.
        critic: the projected averaged SGD of the critic (and of ``w``); by default 1,000 steps
            of batches of 64 at step size 0.5.
        actor_step_size: ``eta``.
        steps_per_epoch: length of the step-counting dataloader.
        seed: seeds all sampling.
    """

    def __init__(
        self,
        pomdp: TabularPOMDP | None = None,
        window: int = 1,
        asymmetric: bool = True,
        gamma: float = 0.9,
        td_steps: int = 1,
        critic: SGDSettings = _CRITIC_SGD,
        actor_step_size: float = 1.0,
        steps_per_epoch: int = 10,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["pomdp"])
        self.automatic_optimization = False
        if pomdp is None:
            pomdp = t_maze(1, 1.0, penalty=-0.5)
        self.chain = agent_state_chain(pomdp, require_int(window, "window", 1))
        asymmetric = require_bool(asymmetric, "asymmetric")
        self.kind = "asymmetric" if asymmetric else "symmetric"
        self.gamma = require_fraction(gamma, "gamma")
        self.td_steps = require_int(td_steps, "td_steps", 1)
        if not isinstance(critic, SGDSettings):
            raise TypeError(f"`critic` must be an SGDSettings, got {type(critic).__name__}.")
        self.settings = critic
        self.actor_step_size = require_positive(actor_step_size, "actor_step_size")
        self.steps_per_epoch = require_int(steps_per_epoch, "steps_per_epoch", 1)
        self.seed = require_int(seed, "seed", 0)
        shape = (self.chain.num_agent_states, self.chain.num_actions)
        self.theta = nn.Parameter(torch.zeros(shape, dtype=torch.float64))

    def policy(self) -> np.ndarray:
        """``pi_theta(a | z)`` as an ``(n_z, A)`` array (rows follow ``chain.agent_states``)."""
        return softmax_policy(self.theta.detach().cpu().numpy())

    def value(self) -> float:
        """Exact ``J(pi_theta)``."""
        return evaluate_policy(self.chain, self.policy(), self.gamma).value

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD([self.theta], lr=self.actor_step_size)

    def train_dataloader(self) -> DataLoader:
        return ResumableDataLoader(
            range(self.steps_per_epoch), trainer=self.trainer, batch_size=None
        )

    def training_step(self, batch: Any, batch_idx: int) -> None:
        entropy = [self.seed, self.global_step, self.global_rank]
        rng = np.random.default_rng(np.random.SeedSequence(entropy))
        policy = self.policy()
        evaluation = evaluate_policy(self.chain, policy, self.gamma)
        q_hat = m_step_td(
            self.chain, policy, self.gamma, self.kind, rng, self.td_steps, self.settings
        )
        direction = npg_direction(self.chain, policy, self.gamma, q_hat, rng, self.settings)
        w = torch.as_tensor(direction, dtype=self.theta.dtype, device=self.theta.device)
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(-(self.theta * w).sum())
        optimizer.step()
        self.log("linear/value", evaluation.value)
        self.log("linear/critic_error", critic_error(self.chain, evaluation, q_hat))
        self.log("linear/aliasing_floor", evaluation.aliasing_floor)
