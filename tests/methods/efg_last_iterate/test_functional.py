"""functional.py against oracles: OpenSpiel's NashConv, Kuhn's closed-form equilibria, brute-force
best responses over pure strategies, plans computed by following ``parent_sequence`` by hand,
exact terminal probabilities for the sampler and the loss estimates (Monte Carlo within standard
errors), the docstrings' definitions of ``p*`` and ``mu*`` recomputed recursively, autograd for
the negentropy gradient and a numerical proximal solve for the OMD step."""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import pytest

pyspiel = pytest.importorskip("pyspiel")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from lightning_info.methods.efg_last_iterate import functional as F  # noqa: E402
from lightning_info.methods.efg_last_iterate.game import to_tabular_policy  # noqa: E402


def tree_of(name, kuhn, leduc):
    return kuhn if name == "kuhn_poker" else leduc


def random_policy(tree, seed: int, zeros: float = 0.0) -> torch.Tensor:
    """A random distribution over each infoset's legal actions; with ``zeros`` > 0, that
    fraction of legal actions gets probability 0 (each row keeps at least one action)."""
    gen = torch.Generator().manual_seed(seed)
    raw = torch.rand(tree.legal.shape, generator=gen, dtype=torch.float64) + 0.05
    if zeros:
        drop = torch.rand(tree.legal.shape, generator=gen) < zeros
        first = tree.legal.to(torch.int8).argmax(1)
        drop[torch.arange(len(drop)), first] = False
        raw = torch.where(drop, torch.zeros_like(raw), raw)
    raw = torch.where(tree.legal, raw, torch.zeros_like(raw))
    return raw / raw.sum(1, keepdim=True)


def hand_plan(tree, policy: torch.Tensor) -> np.ndarray:
    """``mu(x, a)``: the product of the actor's probabilities along its own sequence, by
    following ``parent_sequence`` up to the root."""
    pol = policy.numpy()
    plan = np.zeros(pol.shape)
    for x in range(tree.num_infosets):
        for a in range(tree.num_actions):
            prob, y, b = 1.0, x, a
            while True:
                prob *= pol[y, b]
                parent = int(tree.parent_sequence[y])
                if parent < 0:
                    break
                y, b = divmod(parent, tree.num_actions)
            plan[x, a] = prob
    return plan


def children_of(tree) -> dict[int, list[int]]:
    """Flat sequence index -> the infosets whose parent it is."""
    children = defaultdict(list)
    for x in range(tree.num_infosets):
        if int(tree.parent_sequence[x]) >= 0:
            children[int(tree.parent_sequence[x])].append(x)
    return children


def kuhn_policy(kuhn, bet: dict[str, float]) -> torch.Tensor:
    """A Kuhn table from each key's probability of action 1 (bet / call)."""
    policy = torch.empty(12, 2, dtype=torch.float64)
    for x, key in enumerate(kuhn.keys):
        policy[x] = torch.tensor([1.0 - bet[key], bet[key]], dtype=torch.float64)
    return policy


def kuhn_equilibrium(kuhn, alpha: float) -> torch.Tensor:
    # Card 0 = J, 1 = Q, 2 = K. Player 0 at "c" and "cpb"; player 1 at "cp" and "cb".
    bet = {
        "0": alpha,
        "1": 0.0,
        "2": 3 * alpha,
        "0pb": 0.0,
        "1pb": alpha + 1 / 3,
        "2pb": 1.0,
        "0p": 1 / 3,
        "1p": 0.0,
        "2p": 1.0,
        "0b": 0.0,
        "1b": 1 / 3,
        "2b": 1.0,
    }
    return kuhn_policy(kuhn, bet)


# ----------------------------------------------------------------------------------- NashConv
def openspiel_nash_conv(tree, policy, name):
    game = pyspiel.load_game(name)
    return exploitability.nash_conv(game, to_tabular_policy(tree, policy, game))


@pytest.mark.parametrize(
    ("name", "reported"), [("kuhn_poker", 0.916667), ("leduc_poker", 4.747222)]
)
def test_nash_conv_of_uniform_matches_openspiel(name, reported, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    ours = F.nash_conv(tree, tree.uniform_policy())
    assert ours == pytest.approx(openspiel_nash_conv(tree, tree.uniform_policy(), name), abs=1e-9)
    assert ours == pytest.approx(reported, abs=1e-6)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nash_conv_of_random_policies_matches_openspiel(name, seed, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    policy = random_policy(tree, seed, zeros=0.3 if seed == 2 else 0.0)
    ours = F.nash_conv(tree, policy)
    assert ours > 0.01
    assert ours == pytest.approx(openspiel_nash_conv(tree, policy, name), abs=1e-9)


def test_nash_conv_checks_the_policy(kuhn):
    with pytest.raises(ValueError):
        F.nash_conv(kuhn, torch.ones(12, 2, dtype=torch.float64))


@pytest.mark.parametrize("alpha", [0.0, 0.2, 1 / 3])
def test_kuhn_closed_form_equilibria(alpha, kuhn):
    policy = kuhn_equilibrium(kuhn, alpha)
    assert openspiel_nash_conv(kuhn, policy, "kuhn_poker") == pytest.approx(0.0, abs=1e-12)
    assert F.nash_conv(kuhn, policy) == pytest.approx(0.0, abs=1e-9)
    values = F.expected_returns(kuhn, policy)
    assert float(values[0]) == pytest.approx(-1 / 18, abs=1e-12)
    assert float(values[1]) == pytest.approx(1 / 18, abs=1e-12)
    # At an equilibrium each best response earns the game's value.
    best = F.best_response_values(kuhn, policy)
    np.testing.assert_allclose(best.numpy(), [-1 / 18, 1 / 18], atol=1e-12)


def test_kuhn_perturbed_equilibrium_is_exploitable(kuhn):
    # Player 1 calling with Q at 1/3 + 0.1 instead of 1/3 is no longer an equilibrium: the
    # NashConv is positive and equals OpenSpiel's.
    policy = kuhn_equilibrium(kuhn, 0.2)
    policy[kuhn.keys.index("1b")] = torch.tensor([2 / 3 - 0.1, 1 / 3 + 0.1], dtype=torch.float64)
    ours = F.nash_conv(kuhn, policy)
    assert ours > 1e-3
    assert ours == pytest.approx(openspiel_nash_conv(kuhn, policy, "kuhn_poker"), abs=1e-12)


# ----------------------------------------------------------------------------- best response
@pytest.mark.parametrize("player", [0, 1])
def test_best_response_is_the_best_pure_strategy(player, kuhn):
    base = random_policy(kuhn, 11)
    rows = [x for x in range(12) if int(kuhn.player[x]) == player]
    assert len(rows) == 6
    best = -math.inf
    for bits in range(2**6):
        policy = base.clone()
        for j, x in enumerate(rows):
            a = (bits >> j) & 1
            policy[x] = torch.tensor([1.0 - a, float(a)], dtype=torch.float64)
        best = max(best, float(F.expected_returns(kuhn, policy)[player]))
    assert float(F.best_response_values(kuhn, base)[player]) == pytest.approx(best, abs=1e-12)


# ---------------------------------------------------------------------------- sequence form
@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_log_sequence_plan_is_the_product_along_the_own_sequence(name, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    policy = random_policy(tree, 5, zeros=0.2)
    log_plan = F.log_sequence_plan(tree, torch.log(policy))
    np.testing.assert_allclose(log_plan.exp().numpy(), hand_plan(tree, policy), rtol=1e-12, atol=0)
    assert torch.isneginf(log_plan[~tree.legal]).all()
    # A plan is consistent: the children's plans sum to the parent sequence's.
    plan = log_plan.exp()
    for x in range(tree.num_infosets):
        parent = int(tree.parent_sequence[x])
        above = 1.0 if parent < 0 else float(plan.view(-1)[parent])
        assert float(plan[x].sum()) == pytest.approx(above, abs=1e-12)


def test_sequence_payoffs_by_hand(kuhn):
    policy = random_policy(kuhn, 4)
    plan = hand_plan(kuhn, policy)
    gen = torch.Generator().manual_seed(0)
    payoff = torch.randn(len(kuhn.terminal_chance), 2, generator=gen, dtype=torch.float64)
    table, empty = F.sequence_payoffs(kuhn, torch.from_numpy(plan), payoff)
    expected = np.zeros(24)
    expected_empty = np.zeros(2)
    for z in range(len(kuhn.terminal_chance)):
        s = [int(v) for v in kuhn.terminal_sequence[z]]
        for i in (0, 1):
            other = 1.0 if s[1 - i] < 0 else plan.flat[s[1 - i]]
            value = float(kuhn.terminal_chance[z]) * other * float(payoff[z, i])
            if s[i] >= 0:
                expected[s[i]] += value
            else:
                expected_empty[i] += value
    np.testing.assert_allclose(table.numpy().ravel(), expected, atol=1e-14)
    np.testing.assert_allclose(empty.numpy(), expected_empty, atol=1e-14)
    # In Kuhn both players always act.
    assert (kuhn.terminal_sequence >= 0).all()


# ---------------------------------------------------------------------------------- episodes
def test_episode_uniforms_are_a_pure_function_of_seed_id_and_step():
    ids = torch.arange(0, 64)
    first = F.episode_uniforms(3, ids, 7)
    assert first.shape == (64, 7) and first.dtype == torch.float64
    assert torch.equal(first, F.episode_uniforms(3, ids, 7))
    halves = torch.cat([F.episode_uniforms(3, ids[:40], 7), F.episode_uniforms(3, ids[40:], 7)])
    assert torch.equal(first, halves)
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(F.episode_uniforms(3, ids[perm], 7), first[perm])
    assert torch.equal(F.episode_uniforms(3, ids, 4), first[:, :4])
    # Another seed, another id or another step: other numbers.
    other = F.episode_uniforms(4, ids, 7)
    assert not torch.isclose(other, first).any()
    assert len(torch.unique(first)) == first.numel()


def test_episode_uniforms_are_uniform():
    n = 100_000
    u = F.episode_uniforms(0, torch.arange(n), 2)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    se = math.sqrt(1 / 12 / n)
    for column in (u[:, 0], u[:, 1]):
        assert abs(float(column.mean()) - 0.5) < 4 * se
        assert abs(float(column.var()) - 1 / 12) < 4 * math.sqrt(1 / 180 / n)
        # Ten equal bins, each within 4 standard errors of n / 10.
        counts = torch.histc(column, bins=10, min=0.0, max=1.0)
        assert (counts - n / 10).abs().max() < 4 * math.sqrt(n * 0.1 * 0.9)
    corr = float(torch.corrcoef(torch.stack([u[:-1, 0], u[1:, 0], u[:-1, 1]]))[0, 1:].abs().max())
    assert corr < 4 / math.sqrt(n)


def exact_terminal_probabilities(tree, policy) -> dict[tuple, float]:
    """Each (last sequences, returns) outcome's probability: chance times both plans."""
    plan = hand_plan(tree, policy).ravel()
    exact: dict[tuple, float] = defaultdict(float)
    for z in range(len(tree.terminal_chance)):
        s0, s1 = (int(v) for v in tree.terminal_sequence[z])
        reach = (1.0 if s0 < 0 else plan[s0]) * (1.0 if s1 < 0 else plan[s1])
        key = (s0, s1, *(float(r) for r in tree.terminal_returns[z]))
        exact[key] += float(tree.terminal_chance[z]) * reach
    return exact


def test_sample_episodes_frequencies_match_exact_probabilities(kuhn):
    policy = random_policy(kuhn, 9)
    policy[kuhn.keys.index("1pb")] = torch.tensor([0.0, 1.0], dtype=torch.float64)
    policy[kuhn.keys.index("2")] = torch.tensor([0.0, 1.0], dtype=torch.float64)
    exact = exact_terminal_probabilities(kuhn, policy)
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-12)
    n = 200_000
    episodes = F.sample_episodes(kuhn, policy, F.episode_uniforms(1, torch.arange(n), 5))
    counts: dict[tuple, int] = defaultdict(int)
    keys = torch.cat([episodes.last_sequence.double(), episodes.returns], 1).tolist()
    for row in keys:
        counts[(int(row[0]), int(row[1]), row[2], row[3])] += 1
    assert set(counts) <= set(exact)
    impossible = [key for key, p in exact.items() if p == 0]
    assert len(impossible) >= 4
    for key, p in exact.items():
        if p == 0:
            assert counts.get(key, 0) == 0, key
        else:
            assert abs(counts.get(key, 0) / n - p) < 4 * math.sqrt(p * (1 - p) / n), key


def test_sample_episodes_never_takes_an_action_of_probability_zero(leduc):
    policy = random_policy(leduc, 2, zeros=0.4)
    plan = F.log_sequence_plan(leduc, torch.log(policy)).exp().view(-1)
    n = 20_000
    episodes = F.sample_episodes(leduc, policy, F.episode_uniforms(5, torch.arange(n), 11))
    for i in (0, 1):
        seq = episodes.last_sequence[:, i]
        # Every action a player takes lies on its own last sequence.
        assert (plan[seq[seq >= 0]] > 0).all()
    # Zero-sum payoffs of reachable terminals.
    assert torch.allclose(episodes.returns.sum(1), torch.zeros(n, dtype=torch.float64))


def test_sample_episodes_needs_enough_uniforms(kuhn):
    with pytest.raises(ValueError, match="5 uniforms"):
        F.sample_episodes(kuhn, kuhn.uniform_policy(), torch.rand(3, 4, dtype=torch.float64))


def test_sample_episodes_inverts_the_cdf(kuhn):
    # u = 0 everywhere: chance deals its first outcomes (J to player 0, Q to player 1) and
    # each player takes its first action of positive probability.
    policy = kuhn.uniform_policy().clone()
    policy[kuhn.keys.index("0")] = torch.tensor([0.0, 1.0], dtype=torch.float64)
    episodes = F.sample_episodes(kuhn, policy, torch.zeros(1, 5, dtype=torch.float64))
    s0, s1 = (int(v) for v in episodes.last_sequence[0])
    assert (kuhn.keys[s0 // 2], s0 % 2) == ("0", 1)  # J bets
    assert (kuhn.keys[s1 // 2], s1 % 2) == ("1b", 0)  # Q folds
    assert episodes.returns[0].tolist() == [1.0, -1.0]


# ------------------------------------------------------------------------- loss estimates
def test_implicit_exploration_losses_by_hand(kuhn):
    policy = random_policy(kuhn, 6)
    log_plan = F.log_sequence_plan(kuhn, torch.log(policy))
    plan = hand_plan(kuhn, policy).ravel()
    gamma = torch.rand(12, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    episodes = F.sample_episodes(kuhn, policy, F.episode_uniforms(2, torch.arange(50), 5))
    expected = np.zeros(24)
    for seqs, ret in zip(episodes.last_sequence.tolist(), episodes.returns.tolist()):
        for i in (0, 1):
            s = seqs[i]
            loss = (2.0 - ret[i]) / 4.0
            expected[s] += loss / (plan[s] + float(gamma[s // 2]))
    got = F.implicit_exploration_losses(kuhn, episodes, log_plan, gamma)
    np.testing.assert_allclose(got.numpy().ravel(), expected, rtol=1e-12, atol=0)


def test_implicit_exploration_losses_without_exploration_are_unbiased(kuhn):
    policy = random_policy(kuhn, 8)
    log_plan = F.log_sequence_plan(kuhn, torch.log(policy))
    plan = log_plan.exp()
    loss = (2.0 - kuhn.terminal_returns) / 4.0
    exact, _ = F.sequence_payoffs(kuhn, plan, loss)
    gamma = torch.zeros(12, dtype=torch.float64)
    chunks, size = 100, 2_000
    uniforms = F.episode_uniforms(3, torch.arange(chunks * size), 5)
    means = []
    for c in range(chunks):
        episodes = F.sample_episodes(kuhn, policy, uniforms[c * size : (c + 1) * size])
        means.append(F.implicit_exploration_losses(kuhn, episodes, log_plan, gamma) / size)
    means = torch.stack(means)
    estimate = means.mean(0)
    se = means.std(0) / math.sqrt(chunks)
    # A sequence whose loss is always 0 (K calls after pass-bet and wins) has zero variance.
    certain = se == 0
    assert certain.sum() < 3 and (exact[certain] == 0).all() and (estimate[certain] == 0).all()
    assert ((estimate - exact).abs() < 5 * se)[~certain].all(), (estimate - exact) / se
    # The exact table is the expected loss: summed against the plan it is each player's
    # expected loss under the policy.
    values = F.expected_returns(kuhn, policy)
    for i in (0, 1):
        rows = kuhn.player == i
        total = float((plan[rows] * exact[rows]).sum())
        assert total == pytest.approx((2.0 - float(values[i])) / 4.0, abs=1e-12)


# ------------------------------------------------------------------------- regulariser weights
def virtual_transition_by_definition(tree) -> np.ndarray:
    """The docstring's c, d and p*, recursively over each player's tree."""
    children = children_of(tree)
    actions = tree.num_actions

    def c(x):
        d = [sum(c(y) for y in children[x * actions + a]) for a in range(actions)]
        return max(d) if max(d) > 0 else 1.0

    p = np.zeros(tree.num_infosets)

    def down(x):
        for a in range(actions):
            kids = children[x * actions + a]
            d = sum(c(y) for y in kids)
            for y in kids:
                p[y] = p[x] * c(y) / d
                down(y)

    for i in (0, 1):
        roots = [
            x
            for x in range(tree.num_infosets)
            if int(tree.parent_sequence[x]) < 0 and int(tree.player[x]) == i
        ]
        total = sum(c(x) for x in roots)
        for x in roots:
            p[x] = c(x) / total
            down(x)
    return p


def test_virtual_transition_on_kuhn_by_hand(kuhn):
    # Player 0: three roots (its cards), each with one later infoset ("cpb") under the pass,
    # so c = 1 everywhere, p* = 1/3 at the roots and 1/3 * 1/1 below. Player 1: six roots of
    # depth one (card x opponent's action), p* = 1/6.
    expected = [1 / 3 if int(kuhn.player[x]) == 0 else 1 / 6 for x in range(12)]
    np.testing.assert_allclose(F.virtual_transition(kuhn).numpy(), expected, atol=1e-15)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_virtual_transition_is_a_distribution_per_child_set(name, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    p = F.virtual_transition(tree)
    assert (p > 0).all() and (p <= 1).all()
    for i in (0, 1):
        roots = (tree.parent_sequence < 0) & (tree.player == i)
        assert float(p[roots].sum()) == pytest.approx(1.0, abs=1e-12)
    sums = defaultdict(float)
    for x in range(tree.num_infosets):
        if int(tree.parent_sequence[x]) >= 0:
            sums[int(tree.parent_sequence[x])] += float(p[x])
    assert sums
    for seq, total in sums.items():
        assert total == pytest.approx(float(p[seq // tree.num_actions]), abs=1e-12)
    np.testing.assert_allclose(p.numpy(), virtual_transition_by_definition(tree), atol=1e-14)
    if name == "leduc_poker":
        assert len(torch.unique(p)) > 2  # a non-trivial case


def layer_counts(tree):
    """``N_h(x, a)`` and ``N_h(x)``: the layer-``h`` sequences below a sequence, an infoset."""
    children = children_of(tree)
    actions = tree.num_actions
    legal = tree.legal.sum(1).tolist()
    depth = tree.depth.tolist()

    @functools.cache
    def n_seq(x, a, h):
        return sum(n_inf(y, h) for y in children[x * actions + a])

    @functools.cache
    def n_inf(x, h):
        if depth[x] == h:
            return legal[x]
        return sum(n_seq(x, a, h) for a in range(actions) if tree.legal[x, a])

    return n_seq, n_inf


def balanced_plan_by_definition(tree) -> np.ndarray:
    """Bai et al.'s mu*_{1:h}(x): N_h counted recursively, the ratios multiplied down."""
    n_seq, n_inf = layer_counts(tree)
    actions = tree.num_actions
    legal = tree.legal.sum(1).tolist()
    depth = tree.depth.tolist()
    out = np.zeros(tree.num_infosets)
    for x in range(tree.num_infosets):
        h, ratio, y = depth[x], 1.0, x
        while int(tree.parent_sequence[y]) >= 0:
            z, a = divmod(int(tree.parent_sequence[y]), actions)
            ratio *= n_seq(z, a, h) / n_inf(z, h)
            y = z
        out[x] = ratio / legal[x]
    return out


def test_balanced_plan_on_kuhn_by_hand(kuhn):
    # Roots: uniform over two actions, 1/2. "cpb": the layer-1 sequences below the root all lie
    # under the pass (2 of 2), so the ratio is 1 and the plan 1 * 1/2.
    np.testing.assert_allclose(F.balanced_plan(kuhn).numpy(), np.full(12, 0.5), atol=1e-15)


def test_balanced_plan_on_leduc(leduc):
    mu = F.balanced_plan(leduc)
    assert (mu > 0).all() and (mu <= 1).all()
    np.testing.assert_allclose(mu.numpy(), balanced_plan_by_definition(leduc), rtol=1e-12)
    assert len(torch.unique(mu)) > 3
    n_seq, n_inf = layer_counts(leduc)
    for h in range(int(leduc.depth.max()) + 1):
        layer = leduc.depth == h
        # The layer-h balanced policy, N_h(y, a) / N_h(y) above layer h, uniform at it, is a
        # distribution everywhere, and mu* is its plan at layer h.
        balanced = leduc.uniform_policy().clone()
        support = leduc.legal.clone()  # actions that lead to layer-h sequences
        for y in range(leduc.num_infosets):
            if int(leduc.depth[y]) < h and n_inf(y, h) > 0:
                for a in range(leduc.num_actions):
                    if leduc.legal[y, a]:
                        balanced[y, a] = n_seq(y, a, h) / n_inf(y, h)
                        support[y, a] = n_seq(y, a, h) > 0
        leduc.check_policy(balanced)
        plan = F.log_sequence_plan(leduc, torch.log(balanced)).exp()
        expected = torch.where(leduc.legal[layer], mu[layer, None], 0.0)
        torch.testing.assert_close(plan[layer], expected, rtol=1e-12, atol=0)
        # Bai et al.'s balancing identity: for a policy that reaches layer h at every choice
        # above it, sum over a player's layer-h sequences of mu_{1:h}(x, a) / mu*_{1:h}(x)
        # is the number N_h of those sequences.
        raw = random_policy(leduc, h) * support
        policy = raw / raw.sum(1, keepdim=True)
        plan = F.log_sequence_plan(leduc, torch.log(policy)).exp()
        for i in (0, 1):
            rows = (leduc.player == i) & layer
            if rows.any():
                total = float((plan[rows] / mu[rows, None]).sum())
                assert total == pytest.approx(float(leduc.legal[rows].sum()), rel=1e-12)


def test_negentropy_gradient_is_autograd(leduc):
    policy = random_policy(leduc, 3, zeros=0.2)
    log_plan = F.log_sequence_plan(leduc, torch.log(policy))
    gen = torch.Generator().manual_seed(0)
    weight = torch.rand(leduc.num_infosets, generator=gen, dtype=torch.float64) + 0.1
    plan = log_plan.exp().clone().requires_grad_(True)
    q = weight[:, None] * plan
    legal = leduc.legal & (plan.detach() > 0)
    (q[legal] * torch.log(q[legal])).sum().backward()
    got = F.negentropy_gradient(leduc, log_plan, weight)
    torch.testing.assert_close(got[legal], plan.grad[legal], rtol=1e-12, atol=1e-12)
    assert (got[~leduc.legal] == 0).all()


# ------------------------------------------------------------------------------------- OMD step
def proximal_solve(tree, log_policy, losses, eta) -> torch.Tensor:
    """argmin_pi <mu_pi, L> + sum_x mu_pi(parent(x)) KL(pi(.|x) || pi_k(.|x)) / eta_x over
    softmax parameters (first legal logit fixed at 0), by BFGS on torch-autograd gradients."""
    legal = tree.legal
    order = sorted(range(tree.num_infosets), key=lambda x: int(tree.depth[x]))
    free = legal.clone()
    free[torch.arange(tree.num_infosets), legal.to(torch.int8).argmax(1)] = False
    old = torch.where(legal, log_policy, torch.zeros_like(log_policy))

    def policy_of(theta):
        logits = torch.full(legal.shape, -math.inf, dtype=torch.float64)
        logits = torch.where(legal, torch.zeros_like(logits), logits)
        logits = logits.masked_scatter(free, theta)
        return torch.log_softmax(logits, 1)

    def objective(theta_np):
        theta = torch.tensor(theta_np, dtype=torch.float64, requires_grad=True)
        log_pi = policy_of(theta)
        pi = log_pi.exp()
        above = [None] * tree.num_infosets
        plan = [None] * tree.num_infosets
        for x in order:
            parent = int(tree.parent_sequence[x])
            above[x] = (
                torch.ones((), dtype=torch.float64)
                if parent < 0
                else (plan[parent // tree.num_actions][parent % tree.num_actions])
            )
            plan[x] = above[x] * pi[x]
        total = torch.zeros((), dtype=torch.float64)
        for x in range(tree.num_infosets):
            m = legal[x]
            kl = (pi[x][m] * (log_pi[x][m] - old[x][m])).sum()
            total = total + (plan[x][m] * losses[x][m]).sum() + above[x] * kl / eta[x]
        total.backward()
        return float(total.detach()), theta.grad.numpy().copy()

    # Start from pi_k's own logits.
    first = log_policy.gather(1, legal.to(torch.int8).argmax(1, keepdim=True).long())
    theta0 = (log_policy - first)[free].numpy()
    result = minimize(
        objective, theta0, jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 10_000}
    )
    return policy_of(torch.from_numpy(result.x)).exp()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dilated_omd_step_is_the_proximal_point(seed, kuhn):
    gen = torch.Generator().manual_seed(seed)
    log_policy = torch.log(random_policy(kuhn, 20 + seed))
    losses = torch.rand(12, 2, generator=gen, dtype=torch.float64) * 3.0
    eta = torch.rand(12, generator=gen, dtype=torch.float64) * 1.5 + 0.2
    new = F.dilated_omd_step(kuhn, log_policy, losses, eta).exp()
    np.testing.assert_allclose(new.sum(1).numpy(), np.ones(12), atol=1e-12)
    solved = proximal_solve(kuhn, log_policy, losses, eta)
    np.testing.assert_allclose(new.numpy(), solved.numpy(), atol=1e-6, rtol=0)
    assert (new - log_policy.exp()).abs().max() > 1e-2  # the step moves the policy


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_dilated_omd_step_with_zero_losses_keeps_the_policy(name, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    log_policy = torch.log(random_policy(tree, 4, zeros=0.2))
    gen = torch.Generator().manual_seed(0)
    eta = torch.rand(tree.num_infosets, generator=gen, dtype=torch.float64) + 0.1
    new = F.dilated_omd_step(tree, log_policy, torch.zeros_like(log_policy), eta)
    legal = log_policy > -math.inf
    torch.testing.assert_close(new[legal], log_policy[legal], rtol=0, atol=1e-12)
    assert torch.isneginf(new[~legal]).all()


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_dilated_omd_step_keeps_infosets_of_loss_free_subtrees(name, kuhn, leduc):
    tree = tree_of(name, kuhn, leduc)
    gen = torch.Generator().manual_seed(5)
    log_policy = torch.log(random_policy(tree, 6))
    losses = torch.rand(tree.legal.shape, generator=gen, dtype=torch.float64)
    losses = torch.where(tree.legal, losses, torch.zeros_like(losses))
    eta = torch.rand(tree.num_infosets, generator=gen, dtype=torch.float64) + 0.1
    children = children_of(tree)

    def subtree(x):
        below = [
            subtree(y) for a in range(tree.num_actions) for y in children[x * tree.num_actions + a]
        ]
        return [x, *(y for part in below for y in part)]

    # Clear the losses of each player's largest root subtree, and of an inner infoset's
    # subtree elsewhere (its ancestors still see losses and move).
    kept = []
    for i in (0, 1):
        roots = [
            x
            for x in range(tree.num_infosets)
            if int(tree.parent_sequence[x]) < 0 and int(tree.player[x]) == i
        ]
        kept += max((subtree(r) for r in roots), key=len)
    inner = [
        x for x in range(tree.num_infosets) if int(tree.parent_sequence[x]) >= 0 and x not in kept
    ]
    kept += subtree(inner[-1])
    losses[kept] = 0.0
    new = F.dilated_omd_step(tree, log_policy, losses, eta)
    legal = tree.legal
    torch.testing.assert_close(
        new[kept][legal[kept]], log_policy[kept][legal[kept]], rtol=0, atol=1e-12
    )
    others = [x for x in range(tree.num_infosets) if x not in set(kept)]
    assert (new[others][legal[others]] - log_policy[others][legal[others]]).abs().max() > 1e-3


# ------------------------------------------------------------------------------------- rates
def test_solver_rates_schedules(kuhn):
    p_star = np.array([1 / 3 if int(kuhn.player[x]) == 0 else 1 / 6 for x in range(12)])
    rates = F.SolverRates(kuhn, "virtual_transition", eta=0.7, gamma=0.05, tau=0.3)
    np.testing.assert_allclose(rates.weight.numpy(), p_star, atol=1e-15)
    for k in (1, 1000):
        at = rates.at(k)
        np.testing.assert_allclose(at.eta.numpy(), 0.7 * k**-0.625 / p_star, rtol=1e-13)
        np.testing.assert_allclose(at.gamma.numpy(), np.full(12, 0.05 * k**-0.375), rtol=1e-13)
        assert at.tau == pytest.approx(0.3 * k**-0.125, rel=1e-13)
    ix = F.SolverRates(kuhn, "ix_omd", eta=0.01, gamma=5e-4)
    balanced = F.SolverRates(kuhn, "balanced_omd", eta=0.01, gamma=5e-4)
    for k in (1, 1000):
        np.testing.assert_allclose(ix.at(k).eta.numpy(), np.full(12, 0.01), rtol=1e-15)
        np.testing.assert_allclose(ix.at(k).gamma.numpy(), np.full(12, 5e-4), rtol=1e-15)
        assert ix.at(k).tau == 0.0
        # Kuhn's mu* is 1/2 everywhere.
        np.testing.assert_allclose(balanced.at(k).eta.numpy(), np.full(12, 0.005), rtol=1e-15)
        np.testing.assert_allclose(balanced.at(k).gamma.numpy(), np.full(12, 2.5e-4), rtol=1e-15)
        assert balanced.at(k).tau == 0.0


def test_solver_rates_refuse_bad_arguments(kuhn):
    with pytest.raises(ValueError, match="method"):
        F.SolverRates(kuhn, "cfr", eta=1.0, gamma=0.1)
    with pytest.raises(ValueError, match="eta > 0"):
        F.SolverRates(kuhn, "ix_omd", eta=0.0, gamma=0.1)
    with pytest.raises(ValueError, match="eta > 0"):
        F.SolverRates(kuhn, "ix_omd", eta=-1.0, gamma=0.1)
    with pytest.raises(ValueError, match="gamma >= 0"):
        F.SolverRates(kuhn, "ix_omd", eta=1.0, gamma=-0.1)
    with pytest.raises(ValueError, match="tau >= 0"):
        F.SolverRates(kuhn, "virtual_transition", eta=1.0, gamma=0.1, tau=-0.1)


# ----------------------------------------------------------------------------------- update
def entropies(policy: torch.Tensor) -> torch.Tensor:
    terms = torch.where(policy > 0, policy * torch.log(policy), torch.zeros_like(policy))
    return -terms.sum(1)


def test_solver_update_regulariser_raises_the_entropy(kuhn):
    policy = torch.tensor([[0.95, 0.05]], dtype=torch.float64).repeat(12, 1)
    log_policy = torch.log(policy)
    weight = F.virtual_transition(kuhn)
    zero = torch.zeros(12, 2, dtype=torch.float64)
    eta = 0.5 / weight
    plain = F.solver_update(kuhn, log_policy, zero, F.Rates(eta, 0 * eta, 0.0), weight)
    torch.testing.assert_close(plain, log_policy, rtol=0, atol=1e-12)
    regular = F.solver_update(kuhn, log_policy, zero, F.Rates(eta, 0 * eta, 0.2), weight, 4)
    gained = entropies(regular.exp()) - entropies(policy)
    assert (gained > 1e-3).all(), gained


def test_solver_update_is_the_omd_step_on_the_regularised_losses(leduc):
    gen = torch.Generator().manual_seed(0)
    log_policy = torch.log(random_policy(leduc, 1))
    losses = torch.rand(leduc.legal.shape, generator=gen, dtype=torch.float64)
    losses = torch.where(leduc.legal, losses, torch.zeros_like(losses))
    weight = F.virtual_transition(leduc)
    eta = 0.3 / weight
    rates = F.Rates(eta, torch.zeros_like(eta), 0.0)
    torch.testing.assert_close(
        F.solver_update(leduc, log_policy, losses, rates, weight, 7),
        F.dilated_omd_step(leduc, log_policy, losses, eta),
        rtol=0,
        atol=0,
    )
    # tau > 0: the losses gain episodes * tau * (the negentropy gradient, by hand).
    plan = torch.from_numpy(hand_plan(leduc, log_policy.exp()))
    gradient = weight[:, None] * (torch.log(weight[:, None] * plan) + 1.0)
    regularised = losses + 7 * 0.05 * torch.where(leduc.legal, gradient, 0.0)
    got = F.solver_update(leduc, log_policy, losses, F.Rates(eta, 0 * eta, 0.05), weight, 7)
    expected = F.dilated_omd_step(leduc, log_policy, regularised, eta)
    legal = leduc.legal
    torch.testing.assert_close(got[legal], expected[legal], rtol=0, atol=1e-10)
