"""FisherSFT selection against brute force: slogdet gains, naive greedy, exhaustive optimum."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.functional import (
    _gains,
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    prepare_blocks,
    random_select,
)


def _pool(n=40, d=6, max_tokens=9, seed=0, scale=0.6) -> TokenBlocks:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_tokens + 1, (n,), generator=generator)
    # Examples differ in scale and direction, so the gains are far from tied.
    blocks = [
        torch.randn(int(m), d, generator=generator, dtype=torch.float64)
        * scale
        * (1 + torch.rand(1, generator=generator, dtype=torch.float64))
        for m in lengths
    ]
    return TokenBlocks.from_list(blocks)


def _brute_gain(blocks: list[torch.Tensor], selected: list[int], i: int, lam: float) -> float:
    d = blocks[0].shape[1]
    base = lam * torch.eye(d, dtype=torch.float64) + sum(
        (blocks[j].T @ blocks[j] for j in selected), torch.zeros(d, d, dtype=torch.float64)
    )
    return (
        torch.linalg.slogdet(base + blocks[i].T @ blocks[i]).logabsdet
        - torch.linalg.slogdet(base).logabsdet
    ).item()


@pytest.mark.parametrize("method", ["naive", "lazy"])
@pytest.mark.parametrize("lam", [0.1, 1.0, 10.0])
def test_incremental_gains_equal_the_brute_force_slogdet_change(lam, method):
    pool = _pool(n=25, d=5, max_tokens=12)  # some blocks have more tokens than dimensions
    blocks = pool.to_list()
    selection = fisher_greedy_select(pool, 8, lam=lam, method=method)
    for step, (index, gain) in enumerate(zip(selection.indices, selection.gains)):
        assert gain == pytest.approx(
            _brute_gain(blocks, selection.indices[:step], index, lam), abs=1e-8
        )
    assert selection.objective == pytest.approx(
        log_det_objective(pool, selection.indices, lam), abs=1e-8
    )
    assert selection.objective == pytest.approx(5 * math.log(lam) + sum(selection.gains), abs=1e-8)


def test_every_candidate_gain_matches_slogdet_mid_selection():
    pool = _pool(n=15, d=4, max_tokens=7, seed=3)
    factors = prepare_blocks(pool)
    selected = [2, 7, 11]
    matrix = 0.5 * torch.eye(4, dtype=torch.float64)
    for i in selected:
        matrix += factors[i].T @ factors[i]
    chol = torch.linalg.cholesky(matrix)
    padded = torch.zeros(len(factors), max(f.shape[0] for f in factors), 4, dtype=torch.float64)
    for i, f in enumerate(factors):
        padded[i, : f.shape[0]] = f
    ours = _gains(chol, padded)
    for i in range(len(factors)):
        assert ours[i].item() == pytest.approx(
            _brute_gain(pool.to_list(), selected, i, 0.5), abs=1e-10
        )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("pooling", ["none", "mean"])
def test_lazy_greedy_returns_the_naive_greedy_selection(seed, pooling):
    pool = _pool(n=60, d=8, seed=seed)
    naive = fisher_greedy_select(pool, 20, method="naive", pooling=pooling)
    lazy = fisher_greedy_select(pool, 20, method="lazy", pooling=pooling)
    assert lazy.indices == naive.indices
    torch.testing.assert_close(torch.tensor(lazy.gains), torch.tensor(naive.gains))
    if pooling == "none":
        assert lazy.evaluations < naive.evaluations
    else:  # one row per example: the rank-one greedy updates every gain (test_rank_one.py)
        assert lazy.evaluations == naive.evaluations


@pytest.mark.parametrize("lazy_batch", [1, 5, 64])
@pytest.mark.parametrize(
    "dim, picks",
    [(96, 20), (48, 30)],  # at most 80 columns of V < d: downdates only; 180 > d: both paths
)
def test_lazy_woodbury_greedy_is_exact_on_a_wide_pool_for_any_refresh_batch(lazy_batch, dim, picks):
    # wider than the tokens of any block, many picks: every refresh downdates by the columns
    # of V it has not seen, which a wrong mask or offset would get wrong
    pool = _pool(n=120, d=dim, max_tokens=4, seed=11, scale=0.3)
    blocks = pool.to_list()
    naive = fisher_greedy_select(pool, picks, lam=0.5, method="naive")
    lazy = fisher_greedy_select(pool, picks, lam=0.5, method="lazy", lazy_batch=lazy_batch)
    assert lazy.indices == naive.indices
    for step in (0, 9, picks - 1):
        index = lazy.indices[step]
        brute = _brute_gain(blocks, lazy.indices[:step], index, 0.5)
        assert lazy.gains[step] == pytest.approx(brute, abs=1e-8)
    assert lazy.objective == pytest.approx(log_det_objective(pool, lazy.indices, 0.5), abs=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_reaches_one_minus_one_over_e_of_the_exhaustive_optimum(seed):
    pool = _pool(n=10, d=3, max_tokens=4, seed=seed)
    lam, budget = 1.0, 3
    base = 3 * math.log(lam)
    best = max(
        log_det_objective(pool, subset, lam) for subset in itertools.combinations(range(10), budget)
    )
    greedy = fisher_greedy_select(pool, budget, lam=lam).objective
    assert greedy <= best + 1e-9
    # The guarantee is on the gain over the empty set, F(S) - F(empty).
    assert greedy - base >= (1 - 1 / math.e) * (best - base) - 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_greedy_objective_beats_random_and_k_center(seed):
    pool = _pool(n=200, d=16, seed=seed)
    budget = 20
    greedy = fisher_greedy_select(pool, budget).objective
    pooled = torch.stack([b.mean(0) for b in pool.to_list()])
    for indices in (random_select(200, budget, seed), k_center_select(pooled, budget, seed)):
        assert greedy > log_det_objective(pool, indices)


def test_qr_reduction_and_pre_aggregation_leave_the_objective_unchanged():
    generator = torch.Generator().manual_seed(0)
    long_block = torch.randn(50, 4, generator=generator, dtype=torch.float64)
    (factor,) = prepare_blocks([long_block])
    assert factor.shape == (4, 4)
    torch.testing.assert_close(factor.T @ factor, long_block.T @ long_block)


def test_pooling_and_token_weights():
    pool = _pool(n=12, d=4, seed=1)
    means = [b.mean(0, keepdim=True) for b in pool.to_list()]
    assert log_det_objective(pool, [0, 3], pooling="mean") == pytest.approx(
        log_det_objective(means, [0, 3])
    )
    weights = torch.rand(pool.values.shape[0], dtype=torch.float64)
    scaled = TokenBlocks(pool.values * weights.sqrt().unsqueeze(1), pool.offsets)
    assert log_det_objective(pool, [1, 5], token_weights=weights) == pytest.approx(
        log_det_objective(scaled, [1, 5])
    )
    original = pool.values.clone()
    fisher_greedy_select(pool, 3, token_weights=weights)
    assert torch.equal(pool.values, original)


def test_k_center_is_farthest_point_and_random_is_seeded():
    points = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 1.0], [5.0, 5.0], [-10.0, 0.0]])
    chosen = k_center_select(points, 3, seed=0)
    first = chosen[0]
    far = torch.linalg.vector_norm(points - points[first], dim=1)
    assert chosen[1] == int(torch.argmax(far))
    assert len(set(chosen)) == 3
    assert random_select(50, 10, seed=4) == random_select(50, 10, seed=4)
    assert random_select(50, 10, seed=4) != random_select(50, 10, seed=5)
    assert len(set(random_select(50, 50, seed=1))) == 50


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(budget=41), "larger than the candidate pool"),
        (dict(budget=0), "budget"),
        (dict(budget=3, lam=0.0), "lam"),
        (dict(budget=3, pooling="max"), "pooling"),
        (dict(budget=3, method="fast"), "method"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fisher_greedy_select(_pool(n=40), **kwargs)


def test_nan_features_and_empty_examples_are_rejected():
    pool = _pool(n=5)
    values = pool.values.clone()
    values[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        fisher_greedy_select(TokenBlocks(values, pool.offsets), 2)
    empty = TokenBlocks(pool.values, torch.cat([pool.offsets[:1], pool.offsets]))
    with pytest.raises(ValueError, match="no token rows"):
        fisher_greedy_select(empty, 2)


@pytest.mark.parametrize("method", ["naive", "lazy"])
@pytest.mark.parametrize("dim", [6, 40])  # 40: more picked columns than dimensions (dense path)
def test_the_selection_allocates_on_its_inputs_device(method, dim):
    """Features on a GPU stay there: with factories defaulting to the ``meta`` device, a tensor
    the selection built without its input's device would break it; the picks are unchanged."""
    pool = _pool(n=30, d=dim, max_tokens=5, seed=3)
    expected = fisher_greedy_select(pool, 25, method=method, pooling="none")
    with torch.device("meta"):
        picked = fisher_greedy_select(pool, 25, method=method, pooling="none")
    assert picked.indices == expected.indices
    assert picked.gains == pytest.approx(expected.gains)
