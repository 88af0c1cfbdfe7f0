"""The pure core of last-iterate learning in two-player zero-sum extensive-form games under
bandit feedback (Zhao, Cheng, Dong, Wang & Li, ICML 2025), and its baselines IX-OMD (Kozuno et
al., 2021) and Balanced OMD (Bai et al., 2022), on the arrays of a
:class:`~lightning_info.methods.efg_last_iterate.game.GameTree`.

A policy is an ``(X, A)`` table; the solvers keep it as log-probabilities (``-inf`` at illegal
actions), so sequence-form plans and their logarithms never underflow. One update, for a batch
of episodes played with the current policy:

1. each episode ends with payoffs ``r``; player ``i``'s loss ``(u_max - r_i)/(u_max - u_min)``
   falls on its last sequence ``(x, a)`` and is divided by the implicit-exploration
   denominator ``mu_i(x, a) + gamma_x`` (:func:`implicit_exploration_losses`);
2. the virtual-transition method adds ``tau`` times the gradient of the negentropy of the
   occupancy ``q(x, a) = p*(x) mu(x, a)`` (:func:`negentropy_gradient`), at every sequence;
3. the closed-form OMD step with the dilated entropy of per-infoset step sizes ``eta_x``
   (:func:`dilated_omd_step`) runs bottom-up over each player's tree.

:class:`SolverRates` gives each method's ``eta_x``, ``gamma_x`` and ``tau`` at update ``k``.
:func:`nash_conv` is the exact exploitability of a policy by best response over the sequence
form, equal to OpenSpiel's ``exploitability.nash_conv`` and built once per game.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from lightning_info.core.validation import (
    require_finite,
    require_finite_tensor,
    require_indices,
    require_int,
    require_real_floating,
)
from lightning_info.methods.efg_last_iterate.game import DECISION, GameTree

__all__ = [
    "require_game_tree",
    "METHODS",
    "Episodes",
    "Rates",
    "SolverRates",
    "balanced_plan",
    "best_response_values",
    "dilated_omd_step",
    "episode_uniforms",
    "expected_returns",
    "implicit_exploration_losses",
    "log_sequence_plan",
    "nash_conv",
    "negentropy_gradient",
    "sample_episodes",
    "sequence_payoffs",
    "solver_update",
    "virtual_transition",
]

METHODS = ("virtual_transition", "ix_omd", "balanced_omd")
"""``virtual_transition``: the paper's method; ``ix_omd``: Kozuno et al.'s IX-OMD;
``balanced_omd``: Bai et al.'s Balanced OMD."""


# ------------------------------------------------------------------------------ sequence form
def log_sequence_plan(tree: GameTree, log_policy: torch.Tensor) -> torch.Tensor:
    """``log mu(x, a)``: the log realisation plan, ``mu(x, a) = mu(parent(x)) pi(a | x)``,
    top-down over each player's tree; ``-inf`` at illegal actions."""
    log_plan = log_policy.clone()
    flat = log_plan.view(-1)
    for layer in tree.layers[1:]:
        log_plan[layer.inner] += flat[layer.inner_parent][:, None]
    return log_plan


def _check_table(
    tensor: object, name: str, shape: tuple[int, ...], dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Raise unless ``tensor`` is a real floating tensor of ``shape`` (and ``dtype``, when
    given). Checks metadata only, so it never synchronises with the device."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"`{name}` must be a tensor of shape {shape}, got {type(tensor).__name__}.")
    require_real_floating(tensor, name)
    if tuple(tensor.shape) != shape:
        raise ValueError(f"`{name}` must have shape {shape}, got {tuple(tensor.shape)}.")
    if dtype is not None and tensor.dtype != dtype:
        raise TypeError(
            f"`{name}` has dtype {tensor.dtype} but the policy has {dtype}; convert it with "
            f"`.to({dtype})`."
        )
    return tensor


def _terminal_plans(tree: GameTree, plan: torch.Tensor) -> torch.Tensor:
    """``(Z, 2)``: each player's realisation plan of its last sequence at every terminal."""
    seq = tree.terminal_sequence
    values = plan.flatten()[seq.clamp(min=0)]
    return torch.where(seq >= 0, values, torch.ones_like(values))


def sequence_payoffs(tree: GameTree, plan: torch.Tensor, payoff: torch.Tensor):
    """Each player's payoff as a linear function of its own plan, given the other's:
    ``L_i(s) = sum_{z: s_i(z) = s} p_c(z) mu_{-i}(s_{-i}(z)) payoff_i(z)``.

    Returns the ``(X, A)`` table of ``L`` at every sequence (``L_i`` at player ``i``'s rows)
    and the ``(2,)`` part of each player's payoff at terminals it never acted before.
    ``plan`` is ``(X, A)`` and ``payoff`` ``(Z, 2)``, both of one floating dtype.
    """
    require_game_tree(tree)
    shape = (tree.num_infosets, tree.num_actions)
    _check_table(plan, "plan", shape)
    _check_table(payoff, "payoff", (len(tree.terminal_chance), 2), plan.dtype)
    reach = _terminal_plans(tree, plan)
    table = torch.zeros(plan.numel(), dtype=plan.dtype, device=plan.device)
    empty = torch.zeros(2, dtype=plan.dtype, device=plan.device)
    for i in (0, 1):
        weight = tree.terminal_chance * reach[:, 1 - i] * payoff[:, i]
        seq = tree.terminal_sequence[:, i]
        acted = seq >= 0
        table.index_add_(0, seq[acted], weight[acted])
        empty[i] = weight[~acted].sum()
    return table.view_as(plan), empty


def best_response_values(tree: GameTree, policy: torch.Tensor) -> torch.Tensor:
    """``(2,)``: each player's best-response value against the other's ``policy``,
    ``max_mu <mu, L_i>`` over player ``i``'s treeplex, by backward induction over its tree:
    ``V(x) = max_a [L(x, a) + sum_{x' in Child(x, a)} V(x')]``. ``policy`` must be a table of
    distributions over legal actions (probabilities, not logits)."""
    require_game_tree(tree)
    tree.check_policy(policy)
    plan = torch.where(tree.legal, policy, torch.zeros_like(policy))
    plan = log_sequence_plan(tree, torch.log(plan)).exp()
    table, empty = sequence_payoffs(tree, plan, tree.terminal_returns.to(plan.dtype))
    q = table.masked_fill(~tree.legal, -math.inf)
    best = torch.empty(len(q), dtype=q.dtype, device=q.device)
    values = empty.clone()
    for layer in reversed(tree.layers):
        best[layer.infosets] = q[layer.infosets].max(1).values
        q.view(-1).index_add_(0, layer.inner_parent, best[layer.inner])
        values.index_add_(0, layer.root_player, best[layer.roots])
    return values


def expected_returns(tree: GameTree, policy: torch.Tensor) -> torch.Tensor:
    """``(2,)``: each player's expected payoff when both play ``policy``, a table of
    distributions over legal actions (probabilities, not logits)."""
    require_game_tree(tree)
    tree.check_policy(policy)
    plan = log_sequence_plan(tree, torch.log(policy)).exp()
    reach = _terminal_plans(tree, plan).prod(1) * tree.terminal_chance
    return reach @ tree.terminal_returns.to(plan.dtype)


def require_game_tree(tree: object) -> GameTree:
    """Return ``tree``, or raise unless it is a :class:`GameTree` (a game's name is not one)."""
    if not isinstance(tree, GameTree):
        raise TypeError(
            f"`tree` must be a GameTree (see game_tree('kuhn_poker')), got {type(tree).__name__}."
        )
    return tree


def nash_conv(tree: GameTree, policy: torch.Tensor) -> float:
    """``sum_i [max_{pi_i'} u_i(pi_i', pi_{-i}) - u_i(pi)]``: OpenSpiel's ``nash_conv`` of a
    tabular policy (0 exactly at a Nash equilibrium), computed in float64."""
    require_game_tree(tree)
    policy = tree.check_policy(policy).to(torch.float64)
    return float((best_response_values(tree, policy) - expected_returns(tree, policy)).sum())


# ---------------------------------------------------------------------------------- episodes
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _splitmix64(z: np.ndarray) -> np.ndarray:
    z = z + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def episode_uniforms(seed: int, episode_ids: torch.Tensor, length: int) -> torch.Tensor:
    """``(B, length)`` uniforms on ``[0, 1)``, a pure function of ``(seed, episode id, step)``.

    A counter-based stream (SplitMix64 of the key), vectorised over episodes: an episode is the
    same wherever it is sampled, so two ranks of ``b`` episodes draw what one rank of ``2b``
    draws and a resumed run continues the uninterrupted one. (numpy's counter-based ``Philox``
    needs one generator object per key, which costs more than the episodes themselves.)

    ``seed`` is an int ``>= 0`` and ``episode_ids`` integer ids ``>= 0`` (a negative id would
    wrap around to another episode's stream; a float or bool id is refused, not truncated).
    """
    seed = require_int(seed, "seed", 0)
    length = require_int(length, "length", 0)
    if isinstance(episode_ids, torch.Tensor):
        episode_ids = episode_ids.cpu()
    episode_ids = require_indices(episode_ids, "episode_ids")
    with np.errstate(over="ignore"):
        ids = episode_ids.numpy().astype(np.uint64)
        key = _splitmix64(_splitmix64(np.uint64(seed) ^ np.uint64(_MIX1)) ^ ids)
        steps = np.arange(length, dtype=np.uint64)
        bits = _splitmix64(key[:, None] * np.uint64(_GOLDEN) + steps[None, :])
    return torch.from_numpy((bits >> np.uint64(11)).astype(np.float64) * 2.0**-53)


@dataclass
class Episodes:
    """A batch of sampled episodes: each player's last sequence (``-1``: it never acted) and
    the payoffs, ``(B, 2)`` each."""

    last_sequence: torch.Tensor
    returns: torch.Tensor


def sample_episodes(
    tree: GameTree, policy: torch.Tensor, uniforms: torch.Tensor, *, validate_args: bool = True
) -> Episodes:
    """Play ``B`` episodes at once from the root with ``policy`` and chance's probabilities,
    taking step ``t``'s action by inverting the cumulative distribution at ``uniforms[:, t]``
    (an action of probability 0 is never taken; a finished episode stays at its terminal).

    With ``validate_args`` (the default) ``policy`` is checked to be a table of distributions
    over legal actions and ``uniforms`` to lie in ``[0, 1)`` (a NaN would take the first action
    silently), at the cost of a few synchronising reductions; the solver, whose policy and
    uniforms are valid by construction, passes ``False``."""
    if uniforms.dim() != 2 or uniforms.shape[1] < tree.path_length:
        raise ValueError(
            f"`uniforms` must be (B, >= {tree.path_length}): episodes of {tree.name} need "
            f"{tree.path_length} uniforms each, got shape {tuple(uniforms.shape)}."
        )
    if validate_args:
        tree.check_policy(policy)
        require_real_floating(uniforms, "uniforms")
        if uniforms.numel() and not bool(((uniforms >= 0) & (uniforms < 1)).all()):
            raise ValueError(
                "`uniforms` must lie in [0, 1) (no NaN); draw them with episode_uniforms or "
                "torch.rand."
            )
    batch, width = uniforms.shape[0], tree.child.shape[1]
    padded = torch.nn.functional.pad(policy, (0, width - policy.shape[1]))
    decision = (tree.kind == DECISION)[:, None]
    probs = torch.where(decision, padded[tree.node_infoset.clamp(min=0)], tree.chance_prob)
    cumulative = probs.cumsum(1)
    cumulative[tree.kind == 0] = 1.0  # a terminal takes slot 0, which loops to itself
    node = torch.zeros(batch, dtype=torch.long, device=policy.device)
    last = torch.full((batch, 3), -1, dtype=torch.long, device=policy.device)
    rows = torch.arange(batch, device=policy.device)
    uniforms = uniforms.to(policy.device)
    for t in range(tree.path_length):
        here = cumulative[node]
        action = (here <= uniforms[:, t : t + 1] * here[:, -1:]).sum(1)
        last[rows, tree.step_column[node]] = tree.step_sequence[node, action]
        node = tree.step_child[node, action]
    return Episodes(last_sequence=last[:, :2], returns=tree.returns[node])


def implicit_exploration_losses(
    tree: GameTree,
    episodes: Episodes,
    log_plan: torch.Tensor,
    gamma: torch.Tensor,
    *,
    validate_args: bool = True,
) -> torch.Tensor:
    """``(X, A)``: the sum over episodes of the implicit-exploration loss estimates
    ``l_i / (mu_i(x, a) + gamma_x)`` at each player's last sequence ``(x, a)``, with the loss
    ``l_i = (u_max - r_i) / (u_max - u_min)`` (Kozuno et al., 2021, eq. 3).

    With ``validate_args`` (the default) the episodes' payoffs must be finite and their last
    sequences indices of the game's sequences (or -1), at the cost of a few synchronising
    reductions; the solver, whose episodes come from the game itself, passes ``False``."""
    if validate_args:
        _check_episodes(tree, episodes)
    low, high = tree.utility_range
    loss = (high - episodes.returns) / (high - low)
    total = torch.zeros(log_plan.numel(), dtype=log_plan.dtype, device=log_plan.device)
    for i in (0, 1):
        seq = episodes.last_sequence[:, i]
        acted = seq >= 0
        seq = seq[acted]
        plan = log_plan.flatten()[seq].exp()
        total.index_add_(0, seq, loss[acted, i] / (plan + gamma[seq // tree.num_actions]))
    return total.view_as(log_plan)


def _check_episodes(tree: GameTree, episodes: Episodes) -> None:
    """Raise unless ``episodes`` holds ``(B, 2)`` finite payoffs and ``(B, 2)`` integer last
    sequences in ``[-1, X * A)``."""
    returns, last = episodes.returns, episodes.last_sequence
    batch = returns.shape[0] if returns.dim() else -1
    if returns.shape != (batch, 2) or last.shape != (batch, 2):
        raise ValueError(
            f"`episodes.returns` and `episodes.last_sequence` must both be (B, 2), got "
            f"{tuple(returns.shape)} and {tuple(last.shape)}."
        )
    require_real_floating(returns, "episodes.returns")
    require_finite_tensor(returns, "episodes.returns")
    if last.is_floating_point() or last.dtype == torch.bool:
        raise TypeError(
            f"`episodes.last_sequence` must hold integer sequence indices, got dtype {last.dtype}."
        )
    size = tree.num_infosets * tree.num_actions
    if last.numel() and (int(last.min()) < -1 or int(last.max()) >= size):
        raise ValueError(
            f"`episodes.last_sequence` must hold sequence indices in [0, {size}) or -1 (the "
            f"player never acted), got values in [{int(last.min())}, {int(last.max())}]."
        )


# ------------------------------------------------------------------------- regulariser weights
def virtual_transition(tree: GameTree) -> torch.Tensor:
    """``(X,)``: the cumulative virtual transition ``p*(x)`` of each infoset.

    ``c(x) = 1`` at an infoset with no later own infoset, ``d(x, a) = sum_{x' in Child(x, a)}
    c(x')``, ``c(x) = max_a d(x, a)``; ``p*(x') = p*(x) c(x') / d(x, a)`` for ``x'`` in
    ``Child(x, a)``, and ``p*(x_1) = c(x_1) / sum c`` over the player's roots. So every
    ``Child(x, a)`` receives a distribution (``sum p*(x') = p*(x)``) and each player's roots one
    (the reference leaves the transition unnormalised).
    """
    require_game_tree(tree)
    c = torch.ones(tree.num_infosets, dtype=torch.float64, device=tree.depth.device)
    d = torch.zeros(c.numel() * tree.num_actions, dtype=c.dtype, device=c.device)
    for layer in reversed(tree.layers):
        best = d.view(-1, tree.num_actions)[layer.infosets].max(1).values
        c[layer.infosets] = torch.where(best > 0, best, torch.ones_like(best))
        d.index_add_(0, layer.inner_parent, c[layer.inner])
    roots = torch.zeros(2, dtype=c.dtype, device=c.device)
    for layer in tree.layers:
        roots.index_add_(0, layer.root_player, c[layer.roots])
    p = torch.zeros_like(c)
    for layer in tree.layers:
        p[layer.roots] = c[layer.roots] / roots[layer.root_player]
        above = p[layer.inner_parent // tree.num_actions] / d[layer.inner_parent]
        p[layer.inner] = c[layer.inner] * above
    return p


def balanced_plan(tree: GameTree) -> torch.Tensor:
    """``(X,)``: Balanced OMD's ``mu*_{1:h}(x)`` for an infoset ``x`` at depth ``h``: the plan
    of the layer-``h`` balanced exploration policy, which takes ``a`` at an ancestor ``y`` with
    probability ``N_h(y, a) / N_h(y)`` (``N_h``: the layer-``h`` sequences below) and is uniform
    at ``x`` (Bai et al., 2022, Algorithm 1)."""
    require_game_tree(tree)
    depths, actions = len(tree.layers), tree.num_actions
    legal_count = tree.legal.sum(1).to(torch.float64)
    below = torch.zeros(depths, tree.num_infosets, dtype=torch.float64, device=legal_count.device)
    below_seq = torch.zeros(
        depths, tree.num_infosets * actions, dtype=torch.float64, device=legal_count.device
    )
    for h in reversed(range(depths)):
        layer = tree.layers[h]
        below[h, layer.infosets] = legal_count[layer.infosets]
        deeper = below_seq.view(depths, -1, actions)[h + 1 :, layer.infosets].sum(2)
        below[h + 1 :, layer.infosets] = deeper
        below_seq.index_add_(1, layer.inner_parent, below[:, layer.inner])
    ratio = torch.ones_like(below)  # prod over ancestors of N_h(y, a) / N_h(y)
    for layer in tree.layers:
        y = layer.inner_parent // actions
        ratio[:, layer.inner] = ratio[:, y] * below_seq[:, layer.inner_parent] / below[:, y]
    return ratio[tree.depth, torch.arange(tree.num_infosets)] / legal_count


def negentropy_gradient(tree: GameTree, log_plan: torch.Tensor, weight: torch.Tensor):
    """``(X, A)``: the gradient of ``sum_{x, a} q log q`` with ``q(x, a) = weight(x) mu(x, a)``
    at every legal sequence, ``weight(x) (log(weight(x) mu(x, a)) + 1)``; 0 at illegal ones.
    ``log_plan`` is ``(X, A)`` and ``weight`` ``(X,)`` (positive), of one floating dtype."""
    require_game_tree(tree)
    _check_table(log_plan, "log_plan", (tree.num_infosets, tree.num_actions))
    _check_table(weight, "weight", (tree.num_infosets,), log_plan.dtype)
    log_weight = torch.log(weight)[:, None]
    gradient = weight[:, None] * (log_weight + log_plan + 1.0)
    return torch.where(tree.legal, gradient, torch.zeros_like(gradient))


# ------------------------------------------------------------------------------------ update
def dilated_omd_step(
    tree: GameTree, log_policy: torch.Tensor, losses: torch.Tensor, eta: torch.Tensor
) -> torch.Tensor:
    """One OMD step on the linear loss ``<mu, losses>`` with the dilated entropy
    ``sum_x mu(parent(x)) KL(pi(.|x) || pi_k(.|x)) / eta_x`` as the Bregman divergence,
    in closed form, bottom-up over each player's tree (Kozuno et al., 2021, Algorithm 1):

        logit(x, a) = log pi_k(a|x) - eta_x (losses(x, a) - sum_{x' in Child(x, a)} V(x')),
        V(x) = log sum_a exp(logit(x, a)) / eta_x,     log pi_{k+1}(.|x) = logit(x, .) - eta_x V(x).

    An infoset whose subtree has zero loss keeps its policy. Returns the new log-policy.
    ``log_policy`` and ``losses`` are ``(X, A)`` and ``eta`` ``(X,)``, all of one floating dtype
    (shapes and dtypes are checked without synchronising with the device).
    """
    require_game_tree(tree)
    shape = (tree.num_infosets, tree.num_actions)
    _check_table(log_policy, "log_policy", shape)
    _check_table(losses, "losses", shape, log_policy.dtype)
    _check_table(eta, "eta", (tree.num_infosets,), log_policy.dtype)
    adjusted = losses.clone()
    value = torch.empty(len(losses), dtype=losses.dtype, device=losses.device)
    new = torch.empty_like(log_policy)
    for layer in reversed(tree.layers):
        x = layer.infosets
        logit = log_policy[x] - eta[x][:, None] * adjusted[x]
        log_z = torch.logsumexp(logit, 1)
        new[x] = logit - log_z[:, None]
        value[x] = log_z / eta[x]
        adjusted.view(-1).index_add_(0, layer.inner_parent, -value[layer.inner])
    return new


@dataclass(frozen=True)
class Rates:
    """One update's ``eta_x`` and ``gamma_x`` (``(X,)`` each) and regulariser weight ``tau``."""

    eta: torch.Tensor
    gamma: torch.Tensor
    tau: float


class SolverRates:
    """Each method's rates at update ``k = 1, 2, ...`` (the reference's tuned defaults are in
    the method card):

    - ``virtual_transition``: ``eta_x = eta k^(-5/8) / p*(x)``, ``gamma_x = gamma k^(-3/8)``,
      ``tau_k = tau k^(-1/8)`` (the paper's schedules; the dilated entropy is weighted by the
      virtual transition, so its step at ``x`` is divided by ``p*(x)``);
    - ``ix_omd``: ``eta_x = eta``, ``gamma_x = gamma``;
    - ``balanced_omd``: ``eta_x = eta mu*(x)``, ``gamma_x = gamma mu*(x)``
      (:func:`balanced_plan`).
    """

    def __init__(self, tree: GameTree, method: str, eta: float, gamma: float, tau: float = 0.0):
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
        eta, gamma = require_finite(eta, "eta"), require_finite(gamma, "gamma")
        tau = require_finite(tau, "tau")
        if eta <= 0 or gamma < 0 or tau < 0:
            raise ValueError(f"need eta > 0, gamma >= 0, tau >= 0; got {eta}, {gamma}, {tau}.")
        self.method, self.eta, self.gamma, self.tau = method, eta, gamma, tau
        ones = torch.ones(tree.num_infosets, dtype=torch.float64, device=tree.depth.device)
        if method == "virtual_transition":
            self.weight = virtual_transition(tree)
            self.eta_x, self.gamma_x = eta / self.weight, gamma * ones
        elif method == "balanced_omd":
            self.weight = balanced_plan(tree)
            self.eta_x, self.gamma_x = eta * self.weight, gamma * self.weight
        else:
            self.weight = ones
            self.eta_x, self.gamma_x = eta * ones, gamma * ones

    def to(self, device: torch.device | str) -> SolverRates:
        """Move the per-infoset tables to ``device`` (in place)."""
        self.weight, self.eta_x, self.gamma_x = (
            t.to(device) for t in (self.weight, self.eta_x, self.gamma_x)
        )
        return self

    def at(self, k: int) -> Rates:
        if self.method != "virtual_transition":
            return Rates(self.eta_x, self.gamma_x, 0.0)
        return Rates(self.eta_x * k**-0.625, self.gamma_x * k**-0.375, self.tau * k**-0.125)


def solver_update(
    tree: GameTree,
    log_policy: torch.Tensor,
    loss_sum: torch.Tensor,
    rates: Rates,
    weight: torch.Tensor,
    episodes: int = 1,
    *,
    validate_args: bool = True,
) -> torch.Tensor:
    """The new log-policy after one update on a batch of ``episodes`` episodes played with
    ``log_policy``: ``loss_sum`` is the sum of their implicit-exploration estimates
    (:func:`implicit_exploration_losses`), and the virtual-transition regulariser, when
    ``rates.tau`` is positive, enters once per episode,
    ``losses = loss_sum + episodes tau grad sum q log q`` with ``q = weight mu``. The batch
    stands for ``episodes`` per-episode updates made with the policy held fixed; with one
    episode it is the paper's update exactly.

    ``episodes`` is an int ``>= 1`` and ``rates`` a :class:`Rates` with a finite ``tau >= 0``.
    With ``validate_args`` (the default) ``loss_sum`` must be a finite table of ``log_policy``'s
    shape, ``rates.eta`` positive and finite and ``weight`` positive, at the cost of a few
    synchronising reductions; the training step, whose estimates come from the game, passes
    ``False``."""
    episodes = require_int(episodes, "episodes", 1)
    if not isinstance(rates, Rates):
        raise TypeError(
            f"`rates` must be a Rates (from SolverRates.at(k)), got {type(rates).__name__}."
        )
    tau = require_finite(rates.tau, "rates.tau")
    if tau < 0:
        raise ValueError(f"`rates.tau` must be >= 0, got {tau}.")
    if tuple(loss_sum.shape) != tuple(log_policy.shape):
        raise ValueError(
            f"`loss_sum` must be an {tuple(log_policy.shape)} table like the policy, got "
            f"{tuple(loss_sum.shape)}."
        )
    if validate_args:
        require_real_floating(loss_sum, "loss_sum")
        require_finite_tensor(loss_sum, "loss_sum")
        if isinstance(rates.eta, torch.Tensor) and not bool(
            (torch.isfinite(rates.eta) & (rates.eta > 0)).all()
        ):
            raise ValueError("`rates.eta` must be positive and finite at every infoset.")
        if tau > 0 and isinstance(weight, torch.Tensor) and not bool((weight > 0).all()):
            raise ValueError("`weight` must be positive at every infoset (p*(x) or mu*(x)).")
    losses = loss_sum
    if rates.tau > 0:
        log_plan = log_sequence_plan(tree, log_policy)
        losses = losses + episodes * rates.tau * negentropy_gradient(tree, log_plan, weight)
    return dilated_omd_step(tree, log_policy, losses, rates.eta)
