"""game.py against OpenSpiel as a peer: the infosets, their keys, legal actions and own-sequence
trees, the terminal histories (walked here with pyspiel states), ``load_game``'s refusals,
``check_policy`` and the ``TabularPolicy`` round trip."""

from __future__ import annotations

import pytest

pyspiel = pytest.importorskip("pyspiel")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from open_spiel.python import policy as os_policy  # noqa: E402
from open_spiel.python.algorithms import expected_game_score  # noqa: E402

from lightning_info.methods.efg_last_iterate import functional as F  # noqa: E402
from lightning_info.methods.efg_last_iterate.game import (  # noqa: E402
    game_tree,
    load_game,
    to_tabular_policy,
)


def random_policy(tree, seed: int) -> torch.Tensor:
    """A random distribution over each infoset's legal actions."""
    gen = torch.Generator().manual_seed(seed)
    raw = torch.rand(tree.legal.shape, generator=gen, dtype=torch.float64) + 0.05
    raw = torch.where(tree.legal, raw, torch.zeros_like(raw))
    return raw / raw.sum(1, keepdim=True)


def walk_terminals(game, tree, policy: torch.Tensor):
    """Every terminal history of ``game`` by a plain recursive walk of pyspiel states:
    ``(chance reach, reach of both players under policy, last sequence of each, returns)``."""
    index = {key: x for x, key in enumerate(tree.keys)}
    table = policy.numpy()
    out = []

    def visit(state, chance, reach, last):
        if state.is_terminal():
            out.append((chance, reach, tuple(last), tuple(state.returns())))
            return
        if state.is_chance_node():
            for outcome, prob in state.chance_outcomes():
                visit(state.child(outcome), chance * prob, reach, last)
            return
        player = state.current_player()
        x = index[state.information_state_string(player)]
        for action in state.legal_actions():
            seen = list(last)
            seen[player] = x * tree.num_actions + action
            visit(state.child(action), chance, reach * table[x, action], seen)

    visit(game.new_initial_state(), 1.0, 1.0, [-1, -1])
    return out


# ------------------------------------------------------------------------------------ infosets
def test_kuhn_sizes_and_keys_match_openspiel(kuhn):
    game = pyspiel.load_game("kuhn_poker")
    table = os_policy.TabularPolicy(game)
    assert kuhn.num_infosets == 12 and kuhn.num_actions == 2
    assert len(kuhn.terminal_chance) == 30
    assert len(kuhn.keys) == len(set(kuhn.keys))
    assert set(kuhn.keys) == set(table.state_lookup)
    assert kuhn.utility_range == (-2.0, 2.0)
    # Legal actions and acting player per key, as OpenSpiel has them.
    for x, key in enumerate(kuhn.keys):
        row = table.state_lookup[key]
        assert kuhn.legal[x].tolist() == [bool(v) for v in table.legal_actions_mask[row]]
        assert int(kuhn.player[x]) == table.states[row].current_player()


def test_kuhn_players_per_key(kuhn):
    # Kuhn keys: the card, then the public actions; player 0 acts at "c" and "cpb", player 1
    # at "cp" and "cb".
    for x, key in enumerate(kuhn.keys):
        expected = 0 if len(key) in (1, 3) else 1
        assert int(kuhn.player[x]) == expected, key


def test_own_sequence_trees(kuhn, leduc):
    for tree in (kuhn, leduc):
        parent = tree.parent_sequence
        for x in range(tree.num_infosets):
            p = int(parent[x])
            if p < 0:
                assert int(tree.depth[x]) == 0
                continue
            y, a = divmod(p, tree.num_actions)
            assert bool(tree.legal[y, a])
            assert int(tree.player[y]) == int(tree.player[x])
            assert int(tree.depth[y]) == int(tree.depth[x]) - 1
    # Kuhn by hand: player 0 acts again only after passing and facing a bet.
    for x, key in enumerate(kuhn.keys):
        if key.endswith("pb"):
            assert kuhn.keys[int(kuhn.parent_sequence[x]) // 2] == key[0]
            assert int(kuhn.parent_sequence[x]) % 2 == 0  # the pass
        else:
            assert int(kuhn.parent_sequence[x]) == -1
    assert int((kuhn.player[kuhn.depth == 0] == 0).sum()) == 3
    assert int((kuhn.player[kuhn.depth == 0] == 1).sum()) == 6


def test_leduc_sizes_and_keys(leduc):
    game = pyspiel.load_game("leduc_poker")
    table = os_policy.TabularPolicy(game)
    assert leduc.num_infosets == 936 and leduc.num_actions == 3
    assert set(leduc.keys) == set(table.state_lookup)
    rows = [table.state_lookup[key] for key in leduc.keys]
    assert torch.equal(leduc.legal, torch.from_numpy(table.legal_actions_mask[rows] > 0))
    assert leduc.player.tolist() == [table.states[row].current_player() for row in rows]


# ---------------------------------------------------------------------------------- terminals
@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_terminals_match_a_walk_of_the_game(name, kuhn, leduc):
    tree = kuhn if name == "kuhn_poker" else leduc
    game = pyspiel.load_game(name)
    walked = walk_terminals(game, tree, tree.uniform_policy())
    # Chance's reach alone sums to the number of terminal action paths per deal (Kuhn: pp, pbp,
    # pbb, bp, bb); weighted by the players' reach, it is a distribution over terminals.
    if name == "kuhn_poker":
        assert float(tree.terminal_chance.sum()) == pytest.approx(5.0, abs=1e-12)
    for seed in (0, 1):
        reach = [c * r for c, r, _, _ in walk_terminals(game, tree, random_policy(tree, seed))]
        assert sum(reach) == pytest.approx(1.0, abs=1e-12)
    assert len(walked) == len(tree.terminal_chance)
    # The same multiset of (chance reach, last sequences, returns).
    ours = sorted(
        (round(float(c), 14), int(s[0]), int(s[1]), float(r[0]), float(r[1]))
        for c, s, r in zip(tree.terminal_chance, tree.terminal_sequence, tree.terminal_returns)
    )
    theirs = sorted(
        (round(c, 14), last[0], last[1], float(ret[0]), float(ret[1])) for c, _, last, ret in walked
    )
    assert ours == theirs


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
@pytest.mark.parametrize("which", ["uniform", "random"])
def test_expected_returns_match_brute_force_and_openspiel(name, which, kuhn, leduc):
    tree = kuhn if name == "kuhn_poker" else leduc
    game = pyspiel.load_game(name)
    policy = tree.uniform_policy() if which == "uniform" else random_policy(tree, 3)
    walked = walk_terminals(game, tree, policy)
    brute = np.zeros(2)
    for chance, reach, _, ret in walked:
        brute += chance * reach * np.asarray(ret)
    ours = F.expected_returns(tree, policy).numpy()
    np.testing.assert_allclose(ours, brute, rtol=0, atol=1e-12)
    table = to_tabular_policy(tree, policy, game)
    peer = expected_game_score.policy_value(game.new_initial_state(), [table, table])
    np.testing.assert_allclose(ours, peer, rtol=0, atol=1e-12)
    if name == "kuhn_poker" and which == "uniform":
        np.testing.assert_allclose(ours, [0.125, -0.125], atol=1e-12)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_parents_and_depths_match_a_walk_of_the_game(name, kuhn, leduc):
    """At every decision state, the infoset's parent is the actor's last sequence so far and
    its depth the actor's number of earlier decisions."""
    tree = kuhn if name == "kuhn_poker" else leduc
    index = {key: x for x, key in enumerate(tree.keys)}
    seen = set()

    def visit(state, last, decisions):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for outcome, _ in state.chance_outcomes():
                visit(state.child(outcome), last, decisions)
            return
        player = state.current_player()
        x = index[state.information_state_string(player)]
        seen.add(x)
        assert int(tree.player[x]) == player
        assert int(tree.parent_sequence[x]) == last[player]
        assert int(tree.depth[x]) == decisions[player]
        for action in state.legal_actions():
            deeper = list(last), list(decisions)
            deeper[0][player] = x * tree.num_actions + action
            deeper[1][player] += 1
            visit(state.child(action), *deeper)

    visit(pyspiel.load_game(name).new_initial_state(), [-1, -1], [0, 0])
    assert seen == set(range(tree.num_infosets))


def test_path_length_is_the_longest_history(kuhn):
    # Kuhn: two deals, then pass, bet, call/fold.
    assert kuhn.path_length == 5


# --------------------------------------------------------------------------------- load_game
def test_load_game_accepts_two_player_zero_sum():
    game = load_game("kuhn_poker")
    assert game.num_players() == 2
    assert load_game(game) is game


def test_load_game_refuses_three_players():
    with pytest.raises(ValueError, match="3 players"):
        load_game("kuhn_poker(players=3)")
    with pytest.raises(ValueError, match="two"):
        game_tree(pyspiel.load_game("kuhn_poker(players=3)"))


def test_load_game_refuses_general_sum():
    # The turn-based prisoner's dilemma is sequential, two-player and general-sum.
    game = pyspiel.load_game_as_turn_based("matrix_pd")
    assert game.get_type().dynamics == pyspiel.GameType.Dynamics.SEQUENTIAL
    with pytest.raises(ValueError, match="zero-sum"):
        load_game(game)
    with pytest.raises(ValueError, match="zero-sum"):
        load_game("matrix_pd")


def test_load_game_refuses_simultaneous_moves():
    with pytest.raises(ValueError, match="simultaneous"):
        load_game("matrix_rps")
    # The advice works: the turn-based version loads.
    turn_based = pyspiel.load_game_as_turn_based("matrix_rps")
    assert load_game(turn_based) is turn_based


# ------------------------------------------------------------------------------ check_policy
def test_check_policy_accepts_distributions(kuhn, leduc):
    for tree in (kuhn, leduc):
        policy = random_policy(tree, 0)
        assert tree.check_policy(policy) is policy
        assert tree.check_policy(tree.uniform_policy()) is not None


def test_check_policy_refuses_wrong_shapes(kuhn):
    with pytest.raises(ValueError, match=r"\(12, 2\)"):
        kuhn.check_policy(torch.full((12, 3), 1 / 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(12, 2\)"):
        kuhn.check_policy(torch.full((11, 2), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError):
        kuhn.check_policy(torch.full((24,), 0.5, dtype=torch.float64))


def test_check_policy_refuses_negative_and_non_finite(kuhn):
    policy = kuhn.uniform_policy().clone()
    policy[3] = torch.tensor([1.5, -0.5], dtype=torch.float64)  # sums to 1
    with pytest.raises(ValueError, match="negative"):
        kuhn.check_policy(policy)
    policy = kuhn.uniform_policy().clone()
    policy[3, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        kuhn.check_policy(policy)


def test_check_policy_refuses_mass_on_illegal_actions(leduc):
    illegal = (~leduc.legal).nonzero()
    assert len(illegal) > 0
    x, a = (int(v) for v in illegal[0])
    policy = leduc.uniform_policy().clone()
    policy[x] = 0.0
    policy[x, a] = 1.0  # a distribution, but on an illegal action
    with pytest.raises(ValueError, match="illegal"):
        leduc.check_policy(policy)


def test_check_policy_refuses_rows_not_summing_to_one(kuhn):
    policy = kuhn.uniform_policy().clone()
    policy[5] = torch.tensor([0.5, 0.6], dtype=torch.float64)
    with pytest.raises(ValueError, match="sum to 1"):
        kuhn.check_policy(policy)
    policy[5] = torch.tensor([0.0, 0.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="sum to 1"):
        kuhn.check_policy(policy)


# ------------------------------------------------------------------------- to_tabular_policy
@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_to_tabular_policy_round_trip(name, kuhn, leduc):
    tree = kuhn if name == "kuhn_poker" else leduc
    policy = random_policy(tree, 7)
    table = to_tabular_policy(tree, policy, name)
    assert len(table.state_lookup) == tree.num_infosets
    for x, key in enumerate(tree.keys):
        row = table.action_probability_array[table.state_lookup[key]]
        np.testing.assert_array_equal(row, policy[x].numpy())
    # OpenSpiel reads the same probabilities back through its policy interface.
    state = pyspiel.load_game(name).new_initial_state()
    while state.is_chance_node():
        state.apply_action(state.chance_outcomes()[0][0])
    x = tree.keys.index(state.information_state_string())
    probs = table.action_probabilities(state)
    for action in state.legal_actions():
        assert probs[action] == float(policy[x, action])


def test_to_tabular_policy_checks_the_policy(kuhn):
    with pytest.raises(ValueError):
        to_tabular_policy(kuhn, torch.ones(12, 2, dtype=torch.float64), "kuhn_poker")


# --------------------------------------------------------------------------------- placement
def test_tree_to_moves_every_tensor(kuhn):
    moved = kuhn.to("meta")
    tensors = {k: v for k, v in moved.__dict__.items() if isinstance(v, torch.Tensor)}
    assert len(tensors) >= 15
    for name, value in tensors.items():
        assert value.device.type == "meta", name
        original = getattr(kuhn, name)
        assert value.shape == original.shape and value.dtype == original.dtype, name
    assert len(moved.layers) == len(kuhn.layers)
    for layer in moved.layers:
        assert all(t.device.type == "meta" for t in layer)
    # Moving back to the CPU is a copy of the original arrays.
    back = kuhn.to("cpu")
    assert back.keys == kuhn.keys
    for name in tensors:
        assert torch.equal(getattr(back, name), getattr(kuhn, name)), name
