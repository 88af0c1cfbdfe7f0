"""GreeDi's two-round greedy for FisherSFT: one shard is the centralised greedy, more shards keep
nearly all of its objective and GreeDi's bound against the exhaustive optimum."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft.functional import (
    fisher_greedy_select,
    log_det_objective,
    random_select,
    two_round_greedy_select,
)


def _pool(n: int, d: int, m: int = 4, seed: int = 0) -> TokenBlocks:
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(n * m, d, generator=generator, dtype=torch.float64)
    values = values * (0.3 + torch.rand(n * m, 1, generator=generator, dtype=torch.float64))
    return TokenBlocks(values, torch.arange(0, n * m + 1, m))


def test_one_shard_is_the_centralised_greedy():
    pool = _pool(120, 16)
    central = fisher_greedy_select(pool, 15)
    two = two_round_greedy_select(pool, 15, 1)
    assert sorted(two.indices) == sorted(central.indices)
    assert two.objective == pytest.approx(central.objective, abs=1e-9)


@pytest.mark.parametrize(("shards", "seed"), [(2, 0), (4, 1), (8, 2)])
def test_sharded_selection_keeps_nearly_all_of_the_centralised_objective(shards, seed):
    """Measured on such pools: 0.9995-1.0000 of the centralised greedy's F; random 0.85-0.87."""
    pool = _pool(400, 32, seed=seed)
    central = fisher_greedy_select(pool, 20)
    two = two_round_greedy_select(pool, 20, shards)
    assert two.objective == pytest.approx(log_det_objective(pool, two.indices), abs=1e-9)
    assert len(set(two.indices)) == 20
    assert two.objective >= 0.99 * central.objective
    chance = log_det_objective(pool, random_select(400, 20, seed=0))
    assert two.objective > chance + 0.9 * (central.objective - chance)


def test_greedi_bound_against_the_exhaustive_optimum():
    pool = _pool(12, 3, m=2, seed=5)
    optimum = max(log_det_objective(pool, s) for s in itertools.combinations(range(12), 3))
    for shards in (2, 3):
        two = two_round_greedy_select(pool, 3, shards)
        assert two.objective >= (1 - 1 / math.e) ** 2 / min(shards, 3) * optimum
        assert two.objective <= optimum + 1e-9


def test_token_weights_are_the_rows_scaled_by_their_square_root():
    pool = _pool(60, 8, m=3, seed=7)
    weights = torch.rand(pool.values.shape[0], generator=torch.Generator().manual_seed(1))
    weighted = TokenBlocks(pool.values * weights.double().sqrt()[:, None], pool.offsets)
    by_weights = two_round_greedy_select(pool, 10, 3, token_weights=weights)
    by_rows = two_round_greedy_select(weighted, 10, 3)
    assert by_weights.indices == by_rows.indices
    assert by_weights.objective == pytest.approx(by_rows.objective, abs=1e-9)


def test_bad_shard_counts_and_budgets_are_refused():
    pool = _pool(10, 4)
    with pytest.raises(ValueError, match="num_shards"):
        two_round_greedy_select(pool, 3, 0)
    with pytest.raises(ValueError, match="budget"):
        two_round_greedy_select(pool, 11, 2)
