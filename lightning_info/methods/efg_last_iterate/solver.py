"""``TabularSolver``: one learner's state (the log-policy table, the episodes played, the rates)
and its update on a batch of episodes, shared by the LightningModule, the study and the
benchmark.

Episode ``j`` (counted over the whole run) draws its randomness from
:func:`~lightning_info.methods.efg_last_iterate.functional.episode_uniforms` keyed by
``(seed, j)``, so the run is a function of its seed: split a batch over ranks, sum their loss
estimates, and the update is the one a single process makes on the whole batch.
"""

from __future__ import annotations

import torch

from lightning_info.core.validation import require_finite, require_int
from lightning_info.methods.efg_last_iterate import functional as F
from lightning_info.methods.efg_last_iterate.game import GameTree

__all__ = ["DEFAULT_RATES", "TabularSolver", "resolve_rates"]

DEFAULT_RATES = {
    "virtual_transition": {"eta": 1.0, "gamma": 0.05, "tau": 0.1},
    "ix_omd": {"eta": 0.01, "gamma": 5e-4, "tau": 0.0},
    "balanced_omd": {"eta": 0.01, "gamma": 5e-4, "tau": 0.0},
}
"""Each method's base rates (the method card says how they were chosen)."""


def resolve_rates(
    method: str, eta: float | None, gamma: float | None, tau: float | None
) -> tuple[float, float, float]:
    """``(eta, gamma, tau)`` with ``None`` replaced by the method's defaults; raises for an
    unknown method, a NaN or infinite rate, or a rate out of range."""
    if method not in F.METHODS:
        raise ValueError(f"`method` must be one of {F.METHODS}, got {method!r}.")
    given = {"eta": eta, "gamma": gamma, "tau": tau}
    rates = {
        name: DEFAULT_RATES[method][name] if value is None else require_finite(value, name)
        for name, value in given.items()
    }
    if rates["eta"] <= 0 or rates["gamma"] < 0 or rates["tau"] < 0:
        raise ValueError(
            f"need eta > 0, gamma >= 0, tau >= 0; got {rates['eta']}, {rates['gamma']}, "
            f"{rates['tau']}."
        )
    if rates["tau"] > 0 and method != "virtual_transition":
        raise ValueError(f"{method} has no regulariser: leave `tau` at 0.")
    return float(rates["eta"]), float(rates["gamma"]), float(rates["tau"])


class TabularSolver:
    """A two-player learner under bandit feedback (see the module docstring).

    Args:
        tree: the game (:func:`~lightning_info.methods.efg_last_iterate.game.game_tree`).
        method: one of :data:`~lightning_info.methods.efg_last_iterate.functional.METHODS`.
        eta, gamma, tau: base step size, implicit exploration and regularisation
            (``None``: :data:`DEFAULT_RATES`); the schedules are
            :class:`~lightning_info.methods.efg_last_iterate.functional.SolverRates`'.
        seed: keys every episode's randomness.
    """

    def __init__(
        self,
        tree: GameTree,
        method: str = "virtual_transition",
        eta: float | None = None,
        gamma: float | None = None,
        tau: float | None = None,
        seed: int = 0,
    ) -> None:
        eta, gamma, tau = resolve_rates(method, eta, gamma, tau)
        self.tree, self.method, self.seed = tree, method, require_int(seed, "seed", 0)
        self.rates = F.SolverRates(tree, method, eta, gamma, tau)
        self.log_policy = torch.log(tree.uniform_policy())
        self.episodes = 0

    def to(self, device: torch.device | str) -> TabularSolver:
        """Move the game, the rates and the policy table to ``device`` (in place)."""
        device = torch.device(device)
        if self.log_policy.device != device:
            self.tree = self.tree.to(device)
            self.rates.to(device)
            self.log_policy = self.log_policy.to(device)
        return self

    @property
    def policy(self) -> torch.Tensor:
        """The last iterate, an ``(X, A)`` table."""
        return self.log_policy.exp()

    def _rates(self) -> F.Rates:
        return self.rates.at(self.episodes + 1)

    def loss_sum(self, episode_ids: torch.Tensor) -> torch.Tensor:
        """The summed implicit-exploration estimates of the episodes ``episode_ids``, played
        with the current policy."""
        uniforms = F.episode_uniforms(self.seed, episode_ids, self.tree.path_length)
        episodes = F.sample_episodes(self.tree, self.policy, uniforms, validate_args=False)
        log_plan = F.log_sequence_plan(self.tree, self.log_policy)
        return F.implicit_exploration_losses(
            self.tree, episodes, log_plan, self._rates().gamma, validate_args=False
        )

    def apply(self, loss_sum: torch.Tensor, episodes: int, *, validate_args: bool = True) -> None:
        """Update on the summed estimates of the next ``episodes`` (``>= 1``) episodes;
        ``validate_args``: refuse a NaN or infinite ``loss_sum``
        (:func:`~lightning_info.methods.efg_last_iterate.functional.solver_update`)."""
        self.log_policy = F.solver_update(
            self.tree,
            self.log_policy,
            loss_sum,
            self._rates(),
            self.rates.weight,
            episodes,
            validate_args=validate_args,
        )
        self.episodes += episodes

    def step(self, batch_size: int) -> None:
        """Play the next ``batch_size`` (``>= 1``) episodes and update once."""
        batch_size = require_int(batch_size, "batch_size", 1)
        ids = torch.arange(self.episodes, self.episodes + batch_size)
        self.apply(self.loss_sum(ids), batch_size, validate_args=False)

    def nash_conv(self) -> float:
        """NashConv of the last iterate."""
        return F.nash_conv(self.tree, self.policy)
