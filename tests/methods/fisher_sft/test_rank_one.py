"""FisherSFT's rank-one greedy (one row per example) against naive greedy and brute force."""

from __future__ import annotations

import math
import tracemalloc

import pytest
import torch

from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fisher_sft import functional
from lightning_info.methods.fisher_sft.functional import fisher_greedy_select, log_det_objective


def _points(n: int, d: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    scales = torch.exp(0.5 * torch.randn(n, 1, generator=generator, dtype=torch.float64))
    spectrum = (1e-2 ** (torch.arange(d, dtype=torch.float64) / max(d - 1, 1))).sqrt()
    return scales * torch.randn(n, d, generator=generator, dtype=torch.float64) * spectrum


def _rows(points: torch.Tensor) -> list[torch.Tensor]:
    return list(points.unsqueeze(1))


def _brute_force_greedy(points: torch.Tensor, budget: int, lam: float) -> list[int]:
    """Greedy by a full ``slogdet`` per candidate per pick, lowest index on ties."""
    d = points.shape[1]
    matrix = lam * torch.eye(d, dtype=torch.float64)
    selected: list[int] = []
    for _ in range(budget):
        best, best_value = -1, -math.inf
        for i, x in enumerate(points):
            if i in selected:
                continue
            value = torch.linalg.slogdet(matrix + torch.outer(x, x)).logabsdet.item()
            if value > best_value:
                best, best_value = i, value
        selected.append(best)
        matrix = matrix + torch.outer(points[best], points[best])
    return selected


def _spy(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("_rank_one_greedy", "_lazy_woodbury_greedy"):
        original = getattr(functional, name)

        def wrapped(*args, _original=original, _name=name, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(functional, name, wrapped)
    return calls


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("d", [3, 8, 40])  # 40: more picks than... no, picks < d; 3: picks > d
def test_rank_one_greedy_equals_naive_greedy_with_exact_gains(seed, lam, d):
    points = _points(60, d, seed)
    naive = fisher_greedy_select(_rows(points), 25, lam=lam, method="naive")
    fast = functional._rank_one_greedy(points, 25, lam)
    assert fast.indices == naive.indices
    torch.testing.assert_close(torch.tensor(fast.gains), torch.tensor(naive.gains))
    assert fast.objective == pytest.approx(log_det_objective(_rows(points), fast.indices, lam))
    assert fast.evaluations == naive.evaluations


@pytest.mark.parametrize("seed", range(3))
def test_rank_one_greedy_equals_brute_force_greedy(seed):
    points = _points(25, 5, seed)
    assert functional._rank_one_greedy(points, 10, 0.5).indices == _brute_force_greedy(
        points, 10, 0.5
    )


def test_near_and_exact_ties_are_broken_like_naive_greedy():
    base = _points(30, 6, seed=7)
    # exact duplicates (ties: the lowest index wins), and copies scaled by 1 +- 1e-9 (gains
    # apart by about 1e-9, far above float64 round-off): every method must order them alike
    points = torch.cat([base, base, base * (1 + 1e-9), base * (1 - 1e-9)])
    points = points[torch.randperm(len(points), generator=torch.Generator().manual_seed(0))]
    naive = fisher_greedy_select(_rows(points), 40, method="naive")
    fast = functional._rank_one_greedy(points, 40, 1.0)
    lazy = functional._lazy_woodbury_greedy(
        points.unsqueeze(1), torch.ones(len(points), dtype=torch.long), 40, 1.0, 4096, 16
    )
    assert fast.indices == naive.indices == lazy.indices
    assert fast.indices[:12] == _brute_force_greedy(points, 12, 1.0)
    first = fast.indices[0]  # the largest copy of the largest row, at the lowest index
    copies = [i for i in range(len(points)) if torch.equal(points[i], points[first])]
    assert first == min(copies)


@pytest.mark.parametrize("pooling", ["mean", "sum"])
def test_lazy_dispatches_pooled_pools_to_the_rank_one_greedy(monkeypatch, pooling):
    generator = torch.Generator().manual_seed(2)
    lengths = torch.randint(1, 6, (50,), generator=generator)
    pool = TokenBlocks.from_list(
        [torch.randn(int(m), 7, generator=generator, dtype=torch.float64) for m in lengths]
    )
    naive = fisher_greedy_select(pool, 15, pooling=pooling, method="naive")
    calls = _spy(monkeypatch)
    assert fisher_greedy_select(pool, 15, pooling=pooling).indices == naive.indices
    assert calls == ["_rank_one_greedy"]
    fisher_greedy_select(pool, 15, pooling="none")  # blocks of several rows: lazy greedy
    assert calls == ["_rank_one_greedy", "_lazy_woodbury_greedy"]
    monkeypatch.setattr(functional, "_RANK_ONE_MAX_BYTES", 8 * 7 * 50 - 1)  # one byte too big
    assert fisher_greedy_select(pool, 15, pooling=pooling).indices == naive.indices
    assert calls[-1] == "_lazy_woodbury_greedy"


def test_one_row_blocks_take_the_rank_one_path_in_numpy_and_in_torch(monkeypatch):
    pool = TokenBlocks.from_list(_rows(_points(40, 6, seed=1)))
    expected = fisher_greedy_select(pool, 30, method="naive")
    calls = _spy(monkeypatch)
    with torch.device("meta"):  # a tensor built without the input's device would break it
        picked = fisher_greedy_select(pool, 30)
    assert calls == ["_rank_one_greedy"]
    assert picked.indices == expected.indices
    assert picked.gains == pytest.approx(expected.gains)
    points = pool.values  # the torch loop, which other devices (a GPU) run, on the same points
    with torch.device("meta"):
        in_torch = functional._rank_one_greedy(points, 30, 1.0, use_numpy=False)
    assert in_torch.indices == expected.indices
    assert in_torch.gains == pytest.approx(expected.gains)


def test_rank_one_greedy_never_builds_an_n_by_n_matrix(monkeypatch):
    points = _points(2000, 4, seed=3)  # an N x N float64 kernel would take 32 MB
    functional._rank_one_greedy(points[:10], 2, 1.0)  # first-call set-up, untraced
    tracemalloc.start()  # numpy's allocations are traced
    functional._rank_one_greedy(points, 20, 1.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200_000  # a few N-long vectors (16 kB each) and V
    shapes: list[tuple[int, ...]] = []
    matmul = torch.Tensor.__matmul__

    def spy(a, b):
        out = matmul(a, b)
        shapes.append(tuple(out.shape))
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy)
    functional._rank_one_greedy(points, 20, 1.0, use_numpy=False)
    assert shapes and all(math.prod(s) <= 2000 for s in shapes)
