"""ProDiff's training step reads nothing back from the device but the Hungarian matching's cost
matrix: the windows' finiteness sits behind ``validate_args``, and the k-means seeding runs on
the device, drawing exactly what ``torch.multinomial`` on the CPU drew from the same generator."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_info.methods.prodiff import PrototypeOptions
from lightning_info.methods.prodiff import functional as F
from tests.methods.prodiff.tiny import tiny_prodiff
from tests.test_hot_path import count_host_reads
from tests.tiny import QUIET

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _windows(nan: bool = False) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    windows = torch.rand(16, 6, 3, generator=generator).sort(1).values  # times increase
    if nan:
        windows[2, 3, 1] = float("nan")
    return DataLoader([{"window": w} for w in windows], batch_size=8)


def _fit(model, loader, steps=2):
    pl.seed_everything(0)
    with count_host_reads() as reads:
        pl.Trainer(max_steps=steps, limit_val_batches=0, **QUIET).fit(model, loader)
    return reads


def test_only_the_matching_reads_back_and_only_when_it_runs():
    matched = tiny_prodiff()
    assert matched.validate_args is False
    reads = _fit(matched, _windows())
    assert reads.batches == 2
    assert {site.function for site in reads.calls} == {"match_clusters"}, reads.describe()
    unmatched = tiny_prodiff(prototype_options=PrototypeOptions(4, match_pseudo_labels=False))
    reads = _fit(unmatched, _windows())
    assert reads.total == 0, reads.describe()


def test_with_the_switch_a_nan_window_is_refused():
    with pytest.raises(ValueError, match="the windows hold NaN or infinity"):
        _fit(tiny_prodiff(validate_args=True), _windows(nan=True), steps=1)
    options = PrototypeOptions(4, match_pseudo_labels=False)
    reads = _fit(tiny_prodiff(prototype_options=options), _windows(nan=True), steps=1)
    assert reads.total == 0


def _multinomial_seeds(points, k, generator):
    """k-means++ seeding as it was written with host reads: ``torch.multinomial`` on the CPU."""
    n = points.shape[0]
    first = int(torch.randint(n, (1,), generator=generator))
    centres = [points[first]]
    nearest = ((points - points[first]) ** 2).sum(1)
    for _ in range(1, k):
        total = nearest.sum()
        weights = nearest / total if total > 0 else torch.full_like(nearest, 1.0 / n)
        chosen = int(torch.multinomial(weights.double().cpu(), 1, generator=generator))
        centres.append(points[chosen])
        nearest = torch.minimum(nearest, ((points - points[chosen]) ** 2).sum(1))
    return torch.stack(centres)


@pytest.mark.parametrize("kind", ["distinct", "repeated", "identical"])
def test_the_device_seeding_draws_what_multinomial_drew(kind):
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        points = torch.randn(25, 3, generator=g)
        if kind == "repeated":  # ties, and points at distance 0 from a chosen centre
            points = points.round()
        elif kind == "identical":  # every distance 0: the uniform fallback
            points = torch.zeros(25, 3)
        k = 1 + seed % 8
        ours, theirs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        assert torch.equal(
            F._plus_plus_seeds(points, k, ours), _multinomial_seeds(points, k, theirs)
        )
        assert torch.equal(ours.get_state(), theirs.get_state())  # the same draws consumed


def test_lloyd_iterations_past_the_fixed_point_change_nothing(monkeypatch):
    points = torch.randn(60, 4, generator=torch.Generator().manual_seed(1))
    equal, compared = torch.equal, []

    def counted(a, b):
        compared.append(equal(a, b))
        return compared[-1]

    monkeypatch.setattr(F.torch, "equal", counted)
    early = F.kmeans(points, 5, iterations=30, generator=torch.Generator().manual_seed(2))
    assert compared[-1] and len(compared) < 30  # the CPU run stopped at the fixed point
    monkeypatch.setattr(F.torch, "equal", lambda a, b: False)  # as on an accelerator: no stop
    full = F.kmeans(points, 5, iterations=30, generator=torch.Generator().manual_seed(2))
    assert equal(early[0], full[0]) and equal(early[1], full[1])
