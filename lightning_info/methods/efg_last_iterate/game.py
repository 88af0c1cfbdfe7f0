"""A two-player zero-sum OpenSpiel game flattened into arrays: its infosets (the policy table's
rows), each player's tree of sequences, its histories (for sampling episodes) and its terminal
histories (for exact best responses).

:func:`game_tree` walks the OpenSpiel game once (``pyspiel``, the ``games`` extra) and returns a
:class:`GameTree`. Conventions used throughout the method:

- infoset ``x`` is a row of an ``(X, A)`` table (``A`` = the game's distinct actions); its
  information-state string is ``keys[x]``, as OpenSpiel's ``TabularPolicy`` names its rows;
- the sequence ``(x, a)`` has the flat index ``x * A + a``; ``parent_sequence[x]`` is the
  acting player's previous sequence (``-1``: ``x`` is one of the player's roots), so each
  player's infosets form a tree (perfect recall) and ``depth[x]`` is the player's own number of
  earlier decisions;
- a history is a row of ``child`` (``-1``: no such action or outcome); decision histories name
  their infoset, chance histories their outcome probabilities in ``chance_prob``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from lightning_info.core.optional import require_extra
from lightning_info.core.validation import require_real_floating

__all__ = ["GameTree", "game_tree", "load_game", "to_tabular_policy"]

TERMINAL, CHANCE, DECISION = 0, 1, 2


def load_game(game):
    """A ``pyspiel.Game`` from a name (``"kuhn_poker"``, ``"leduc_poker"``,
    ``"liars_dice(numdice=1)"``, any ``pyspiel.load_game`` string) or a game, checked to be a
    sequential two-player zero-sum game with information-state strings."""
    pyspiel = require_extra("pyspiel", "games", "The extensive-form game solvers")
    if isinstance(game, str):
        game = pyspiel.load_game(game)
    if not isinstance(game, pyspiel.Game):
        raise TypeError(
            f"`game` must be a pyspiel.Game or a game string such as 'kuhn_poker', "
            f"got {type(game).__name__}."
        )
    kind = game.get_type()
    name = kind.short_name
    if game.num_players() != 2:
        raise ValueError(f"{name} has {game.num_players()} players: the solvers need two.")
    utility = pyspiel.GameType.Utility
    if kind.utility not in (utility.ZERO_SUM, utility.CONSTANT_SUM):
        raise ValueError(f"{name} is {kind.utility}: the solvers need a zero-sum game.")
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(
            f"{name} is simultaneous-move: load it with pyspiel.load_game_as_turn_based first."
        )
    if kind.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
        raise ValueError(f"{name} samples its chance outcomes: the solvers need explicit ones.")
    if not kind.provides_information_state_string:
        raise ValueError(f"{name} provides no information-state strings to key its infosets.")
    return game


class Layer(NamedTuple):
    """The infosets at one depth: all of them, those with a parent sequence and its index,
    and the players' roots and their players."""

    infosets: torch.Tensor
    inner: torch.Tensor
    inner_parent: torch.Tensor
    roots: torch.Tensor
    root_player: torch.Tensor


@dataclass
class GameTree:
    """The arrays of one game (module docstring). Tensors are CPU ``int64`` / ``float64``
    / ``bool``; :meth:`to` moves them."""

    name: str
    num_actions: int
    utility_range: tuple[float, float]
    keys: list[str]
    player: torch.Tensor  # (X,) acting player of each infoset
    legal: torch.Tensor  # (X, A) legal actions
    parent_sequence: torch.Tensor  # (X,) flat index of the player's previous sequence, or -1
    depth: torch.Tensor  # (X,) the player's own number of earlier decisions
    kind: torch.Tensor  # (N,) TERMINAL / CHANCE / DECISION
    node_infoset: torch.Tensor  # (N,) infoset of a decision history, else -1
    child: torch.Tensor  # (N, C) child history per action / chance outcome, -1 if none
    chance_prob: torch.Tensor  # (N, C) outcome probabilities of chance histories
    returns: torch.Tensor  # (N, 2) payoffs of terminal histories (0 elsewhere)
    terminal_chance: torch.Tensor  # (Z,) chance's reach of each terminal history
    terminal_sequence: torch.Tensor  # (Z, 2) each player's last sequence there, or -1
    terminal_returns: torch.Tensor  # (Z, 2)
    path_length: int  # the most histories on a root-to-terminal path, the root excluded
    layers: list[Layer] = field(default_factory=list)  # infosets by depth
    step_child: torch.Tensor | None = None  # (N, C) child; a terminal and unused slots: itself
    step_sequence: torch.Tensor | None = None  # (N, C) the flat sequence of a decision's action
    step_column: torch.Tensor | None = None  # (N,) the acting player, 2 at other histories

    def __post_init__(self) -> None:
        if not self.layers:
            for d in range(int(self.depth.max()) + 1):
                infosets = torch.nonzero(self.depth == d).flatten()
                parent = self.parent_sequence[infosets]
                roots = infosets[parent < 0]
                self.layers.append(
                    Layer(
                        infosets,
                        infosets[parent >= 0],
                        parent[parent >= 0],
                        roots,
                        self.player[roots],
                    )
                )
        if self.step_child is None:
            nodes = torch.arange(len(self.kind))[:, None]
            self.step_child = torch.where(self.child >= 0, self.child, nodes)
            decision = self.kind == DECISION
            base = self.node_infoset.clamp(min=0) * self.num_actions
            slots = torch.arange(self.child.shape[1])
            self.step_sequence = torch.where(decision[:, None], base[:, None] + slots, 0)
            self.step_column = torch.where(decision, self.player[self.node_infoset.clamp(min=0)], 2)

    @property
    def num_infosets(self) -> int:
        return len(self.keys)

    def to(self, device: torch.device | str) -> GameTree:
        moved = {
            name: value.to(device) if isinstance(value, torch.Tensor) else value
            for name, value in self.__dict__.items()
        }
        moved["layers"] = [Layer(*(t.to(device) for t in layer)) for layer in self.layers]
        return GameTree(**moved)

    def uniform_policy(self) -> torch.Tensor:
        """The uniform policy over each infoset's legal actions, ``(X, A)``."""
        legal = self.legal.to(torch.float64)
        return legal / legal.sum(1, keepdim=True)

    def check_policy(self, policy: torch.Tensor) -> torch.Tensor:
        """``policy`` if it is a real floating ``(X, A)`` table of distributions over legal
        actions."""
        require_real_floating(policy, "policy")
        expected = (self.num_infosets, self.num_actions)
        if tuple(policy.shape) != expected:
            raise ValueError(f"a policy of {self.name} is {expected}, got {tuple(policy.shape)}.")
        if not torch.isfinite(policy).all() or (policy < 0).any():
            raise ValueError("the policy holds negative or non-finite probabilities.")
        if (policy[~self.legal] != 0).any():
            raise ValueError("the policy puts probability on illegal actions.")
        if not torch.allclose(policy.sum(1), torch.ones_like(policy[:, 0]), atol=1e-9):
            raise ValueError("every row of the policy must sum to 1.")
        return policy


class _Walker:
    """One depth-first walk of an OpenSpiel game that fills the arrays of a GameTree."""

    def __init__(self, game) -> None:
        self.num_actions = game.num_distinct_actions()
        self.width = max(self.num_actions, game.max_chance_outcomes())
        self.index: dict[str, int] = {}
        self.keys: list[str] = []
        self.player: list[int] = []
        self.legal: list[list[int]] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.kind: list[int] = []
        self.node_infoset: list[int] = []
        self.children: list[list[tuple[int, int, float]]] = []
        self.returns: list[tuple[float, float]] = []
        self.terminals: list[tuple[float, int, int, float, float]] = []
        self.path_length = 0

    def infoset(self, state, player: int, last: list[int], depth: int) -> int:
        key = state.information_state_string(player)
        if key not in self.index:
            self.index[key] = len(self.keys)
            self.keys.append(key)
            self.player.append(player)
            self.legal.append(state.legal_actions(player))
            self.parent.append(last[player])
            self.depth.append(depth)
        x = self.index[key]
        if self.parent[x] != last[player]:
            raise ValueError(
                f"infoset {key!r} is reached after two different own sequences: "
                "the game lacks perfect recall."
            )
        return x

    def walk(self, state, last: list[int], depths: list[int], chance: float, length: int) -> int:
        node = len(self.kind)
        self.kind.append(TERMINAL)
        self.node_infoset.append(-1)
        self.children.append([])
        self.returns.append((0.0, 0.0))
        self.path_length = max(self.path_length, length)
        if state.is_terminal():
            payoff = tuple(float(r) for r in state.returns())
            self.returns[node] = payoff
            self.terminals.append((chance, last[0], last[1], *payoff))
            return node
        if state.is_chance_node():
            self.kind[node] = CHANCE
            for slot, (outcome, prob) in enumerate(state.chance_outcomes()):
                child = self.walk(state.child(outcome), last, depths, chance * prob, length + 1)
                self.children[node].append((slot, child, prob))
            return node
        player = state.current_player()
        x = self.infoset(state, player, last, depths[player])
        self.kind[node] = DECISION
        self.node_infoset[node] = x
        for action in state.legal_actions(player):
            seen = list(last)
            seen[player] = x * self.num_actions + action
            deeper = list(depths)
            deeper[player] += 1
            child = self.walk(state.child(action), seen, deeper, chance, length + 1)
            self.children[node].append((action, child, 1.0))
        return node

    def tree(self, game) -> GameTree:
        self.walk(game.new_initial_state(), [-1, -1], [0, 0], 1.0, 0)
        nodes, actions = len(self.kind), self.num_actions
        child = torch.full((nodes, self.width), -1, dtype=torch.long)
        chance_prob = torch.zeros(nodes, self.width, dtype=torch.float64)
        for node, row in enumerate(self.children):
            for slot, target, prob in row:
                child[node, slot] = target
                if self.kind[node] == CHANCE:
                    chance_prob[node, slot] = prob
        legal = torch.zeros(len(self.keys), actions, dtype=torch.bool)
        for x, moves in enumerate(self.legal):
            legal[x, moves] = True
        terminals = torch.tensor(self.terminals, dtype=torch.float64)
        low, high = float(game.min_utility()), float(game.max_utility())
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(
                f"{game} gives the utility range [{low}, {high}]; the solvers scale losses by "
                "it and need finite bounds with min_utility < max_utility."
            )
        payoffs = terminals[:, 3:5]
        if not bool(torch.isfinite(payoffs).all()) or bool(
            ((payoffs < low) | (payoffs > high)).any()
        ):
            raise ValueError(
                f"{game} returns payoffs outside its utility range [{low}, {high}] (or NaN) at "
                "a terminal history; fix the game's returns()."
            )
        return GameTree(
            name=str(game),
            num_actions=actions,
            utility_range=(low, high),
            keys=self.keys,
            player=torch.tensor(self.player),
            legal=legal,
            parent_sequence=torch.tensor(self.parent),
            depth=torch.tensor(self.depth),
            kind=torch.tensor(self.kind),
            node_infoset=torch.tensor(self.node_infoset),
            child=child,
            chance_prob=chance_prob,
            returns=torch.tensor(self.returns, dtype=torch.float64),
            terminal_chance=terminals[:, 0].contiguous(),
            terminal_sequence=terminals[:, 1:3].long(),
            terminal_returns=terminals[:, 3:5].contiguous(),
            path_length=self.path_length,
        )


@functools.lru_cache(maxsize=8)
def _cached_tree(name: str) -> GameTree:
    return _Walker(load_game(name)).tree(load_game(name))


def game_tree(game) -> GameTree:
    """The :class:`GameTree` of an OpenSpiel game or game string (walked once per process for
    a string: Leduc takes 0.1-0.2 s, Liar's Dice about 5 s)."""
    if isinstance(game, str):
        return _cached_tree(game)
    return _Walker(load_game(game)).tree(game)


def to_tabular_policy(tree: GameTree, policy: torch.Tensor, game):
    """OpenSpiel's ``TabularPolicy`` of ``game`` holding ``policy`` (rows matched by key), e.g.
    for ``open_spiel.python.algorithms.exploitability.nash_conv``."""
    from open_spiel.python.policy import TabularPolicy

    policy = tree.check_policy(policy)
    table = TabularPolicy(load_game(game))
    unknown = [key for key in tree.keys if key not in table.state_lookup]
    if unknown or table.action_probability_array.shape[1] != tree.num_actions:
        raise ValueError(
            f"`game` is not the game of `tree` ({tree.name}): their infosets or actions differ; "
            "pass the game the tree was built from."
        )
    rows = torch.tensor([table.state_lookup[key] for key in tree.keys])
    array = np.zeros_like(table.action_probability_array)
    array[rows.numpy()] = policy.cpu().numpy()
    table.action_probability_array = array
    return table
