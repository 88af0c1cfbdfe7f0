"""Clustering ACC/NMI/ARI against brute force and sklearn, view alignment on planted permutations,
and the contingency Metrics over batches and over two real gloo processes."""

import itertools
import socket

import pytest
import torch
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from lightning_info.measures.clustering import (
    ClusteringAccuracy,
    ClusteringMetrics,
    align_assignments,
    align_probabilities,
    best_cluster_mapping,
    clustering_accuracy,
    clustering_scores,
    contingency_matrix,
)


def _labels(n, k, seed, c=None, agreement=0.6):
    """Random cluster labels in [0, k) and class labels in [0, c) that agree partly."""
    g = torch.Generator().manual_seed(seed)
    c = k if c is None else c
    target = torch.randint(0, c, (n,), generator=g)
    noise = torch.randint(0, k, (n,), generator=g)
    predicted = torch.where(torch.rand(n, generator=g) < agreement, target % k, noise)
    return predicted, target


def _brute_force_acc(predicted, target, k, c):
    """max over one-to-one cluster -> class maps, by enumerating them and counting sample by
    sample."""
    p, t = predicted.tolist(), target.tolist()
    best = 0
    if k <= c:  # every cluster gets a distinct class
        maps = (dict(enumerate(classes)) for classes in itertools.permutations(range(c), k))
    else:  # every class gets a distinct cluster; the other clusters match nothing
        maps = (
            {cluster: cls for cls, cluster in enumerate(clusters)}
            for clusters in itertools.permutations(range(k), c)
        )
    for mapping in maps:
        best = max(best, sum(mapping.get(pi, -1) == ti for pi, ti in zip(p, t)))
    return best / len(p)


def _sklearn(predicted, target):
    p, t = predicted.numpy(), target.numpy()
    return normalized_mutual_info_score(t, p), adjusted_rand_score(t, p)


def test_contingency_matches_a_python_loop():
    predicted, target = _labels(300, 4, seed=0, c=6)
    expected = torch.zeros(7, 9, dtype=torch.long)
    for p, t in zip(predicted.tolist(), target.tolist()):
        expected[p, t] += 1
    m = contingency_matrix(predicted, target, num_clusters=7, num_classes=9)
    assert m.dtype == torch.long and torch.equal(m, expected)
    inferred = contingency_matrix(predicted.tolist(), target.numpy())
    assert torch.equal(inferred, expected[: int(predicted.max()) + 1, : int(target.max()) + 1])


@pytest.mark.parametrize("k, c", [(2, 2), (3, 3), (4, 4), (5, 5), (2, 5), (5, 3), (4, 2), (3, 4)])
def test_accuracy_equals_brute_force_over_all_matchings(k, c):
    for seed in range(3):
        predicted, target = _labels(60, k, seed=10 * k + c + seed, c=c, agreement=0.4)
        # sizes are inferred from the labels: pin them to k and c
        predicted[:2], target[:2] = torch.tensor([k - 1, 0]), torch.tensor([c - 1, 0])
        ours = clustering_accuracy(predicted, target)
        assert ours.dtype == torch.float64 and ours.dim() == 0
        assert ours.item() == pytest.approx(_brute_force_acc(predicted, target, k, c), abs=1e-12)


def test_best_cluster_mapping_is_one_to_one_and_marks_unmatched_clusters():
    wide = torch.tensor([[0, 5, 1, 0], [4, 0, 0, 0], [0, 0, 0, 7]])  # K=3 < C=4
    assert best_cluster_mapping(wide).tolist() == [1, 0, 3]
    tall = wide.T.contiguous()  # K=4 > C=3: cluster 2 (row [1, 0, 0]) loses to cluster 1
    assert best_cluster_mapping(tall).tolist() == [1, 0, -1, 2]
    # the greedy row-wise argmax would map both clusters to class 0 (3 + 2), Hungarian gets 3 + 4
    assert best_cluster_mapping(torch.tensor([[3, 0], [2, 4]])).tolist() == [0, 1]
    assert best_cluster_mapping(torch.tensor([[3.0, 2.9], [3.0, 0.0]])).tolist() == [1, 0]


def test_scores_are_invariant_to_renaming_clusters_and_classes():
    predicted, target = _labels(500, 5, seed=3, c=4)
    before = clustering_scores(predicted, target)
    g = torch.Generator().manual_seed(4)
    renamed = torch.randperm(5, generator=g)[predicted]
    renamed_target = torch.randperm(4, generator=g)[target]
    for p, t in ((renamed, target), (predicted, renamed_target), (renamed, renamed_target)):
        after = clustering_scores(p, t)
        assert after.keys() == {"acc", "nmi", "ari"}
        for name in before:
            assert after[name] == pytest.approx(before[name], abs=1e-12), name


@pytest.mark.parametrize(
    "n, k, c, agreement",
    [(50, 2, 2, 0.9), (400, 5, 3, 0.5), (1000, 10, 10, 0.7), (300, 7, 12, 0.0)],
)
def test_nmi_and_ari_equal_sklearn(n, k, c, agreement):
    predicted, target = _labels(n, k, seed=n + k, c=c, agreement=agreement)
    scores = clustering_scores(predicted, target)
    nmi, ari = _sklearn(predicted, target)
    assert scores["nmi"] == pytest.approx(nmi, abs=1e-6)
    assert scores["ari"] == pytest.approx(ari, abs=1e-6)


@pytest.mark.parametrize(
    "predicted, target",
    [
        ([0, 0, 0, 0], [0, 0, 0, 0]),  # both one cluster: NMI 1 (torchmetrics says 0)
        ([0, 0, 0, 0], [0, 1, 2, 3]),  # one side one cluster: NMI 0
        ([0, 1, 2, 3], [3, 2, 1, 0]),  # all singletons: a perfect match
        ([3], [1]),  # a single sample, labels far from 0 (empty rows/columns)
        ([0, 0, 1, 1], [0, 1, 0, 1]),  # ARI below 0 (-0.5)
        ([2, 2, 5, 5, 5], [1, 1, 0, 0, 0]),  # unused cluster ids
    ],
)
def test_degenerate_labelings_follow_sklearn(predicted, target):
    scores = clustering_scores(predicted, target)
    nmi, ari = _sklearn(torch.tensor(predicted), torch.tensor(target))
    assert scores["nmi"] == pytest.approx(nmi, abs=1e-12)
    assert scores["ari"] == pytest.approx(ari, abs=1e-12)


def test_ari_does_not_overflow_at_large_n():
    # tp * tn ~ N^4 / 4 exceeds int64 from N ~ 55k; torchmetrics 1.9 reports 0.93 here
    predicted, target = _labels(200_000, 10, seed=5, agreement=0.7)
    scores = clustering_scores(predicted, target)
    nmi, ari = _sklearn(predicted, target)
    assert scores["ari"] == pytest.approx(ari, abs=1e-9) and 0.4 < ari < 0.6
    assert scores["nmi"] == pytest.approx(nmi, abs=1e-9)


FOUR_CYCLE = torch.tensor([1, 2, 3, 0])  # sigma: 0 -> 1 -> 2 -> 3 -> 0


def test_align_assignments_recovers_a_planted_four_cycle_in_the_right_direction():
    reference = torch.randint(0, 4, (200,), generator=torch.Generator().manual_seed(6))
    other = FOUR_CYCLE[reference]  # the same clustering, clusters renamed by sigma
    perm = align_assignments(reference, other, num_clusters=4)
    assert perm.dtype == torch.long and torch.equal(perm, FOUR_CYCLE.argsort())  # sigma^-1
    assert torch.equal(perm[other], reference)  # 100% agreement, applied as perm[other]
    # the inverse renames by sigma twice: a fixed-point-free permutation, 0% agreement
    assert int((perm.argsort()[other] == reference).sum()) == 0


def test_align_assignments_with_noise_and_fixed_clusters():
    g = torch.Generator().manual_seed(7)
    sigma = torch.tensor([1, 2, 3, 0, 4, 5])  # a 4-cycle; clusters 4 and 5 stay
    reference = torch.randint(0, 6, (600,), generator=g)
    flipped = torch.rand(600, generator=g) < 0.25
    other = torch.where(flipped, torch.randint(0, 6, (600,), generator=g), sigma[reference])
    perm = align_assignments(reference.tolist(), other, 6)
    assert torch.equal(perm, sigma.argsort())
    agreement = (perm[other] == reference).double().mean()
    assert agreement == (~flipped | (other == sigma[reference])).double().mean()
    assert agreement > 0.75
    # perm is the best of all 720 renamings
    best = max(
        (torch.tensor(p)[other] == reference).sum() for p in itertools.permutations(range(6))
    )
    assert (perm[other] == reference).sum() == best


def test_align_probabilities_moves_columns_with_the_labels():
    g = torch.Generator().manual_seed(8)
    reference_probs = torch.randn(120, 4, generator=g, dtype=torch.float64).softmax(1)
    # other's cluster sigma[b] is reference's cluster b: column b moves to column sigma[b]
    other_probs = torch.empty_like(reference_probs)
    other_probs[:, FOUR_CYCLE] = reference_probs
    other_probs.requires_grad_(True)
    snapshot = other_probs.detach().clone()
    aligned = align_probabilities(reference_probs, other_probs)
    assert torch.equal(aligned, reference_probs)
    assert torch.equal(other_probs.detach(), snapshot)
    perm = align_assignments(reference_probs.argmax(1), other_probs.argmax(1), 4)
    assert torch.equal(aligned.argmax(1), perm[other_probs.argmax(1)])
    # gathering the columns by perm itself would be the inverse: nothing lines up
    assert int((other_probs[:, perm].argmax(1) == reference_probs.argmax(1)).sum()) == 0
    aligned.sum(0)[0].backward()  # reference column 0 is other's column sigma[0] = 1
    assert other_probs.grad[:, 1].eq(1).all() and other_probs.grad[:, [0, 2, 3]].eq(0).all()


def test_align_probabilities_is_consistent_with_align_assignments_on_noisy_views():
    g = torch.Generator().manual_seed(9)
    reference_probs = torch.randn(300, 5, generator=g).softmax(1)
    other_probs = torch.randn(300, 5, generator=g) + 3 * reference_probs[:, [2, 0, 4, 1, 3]]
    other_probs = other_probs.softmax(1)
    perm = align_assignments(reference_probs.argmax(1), other_probs.argmax(1), 5)
    aligned = align_probabilities(reference_probs, other_probs)
    assert torch.equal(aligned[:, perm], other_probs)
    assert torch.equal(aligned.argmax(1), perm[other_probs.argmax(1)])


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_metric_over_batches_equals_the_functional_on_the_concatenation():
    predicted, target = _labels(700, 6, seed=11, c=4)
    metrics = ClusteringMetrics(num_clusters=8, num_classes=5, prefix="val/")
    accuracy = ClusteringAccuracy(num_clusters=8, num_classes=5)
    for start, stop in ((0, 100), (100, 100), (100, 333), (333, 700)):  # one empty batch
        metrics.update(predicted[start:stop], target[start:stop])
        accuracy.update(predicted[start:stop], target[start:stop])
    out = metrics.compute()
    expected = clustering_scores(predicted, target)
    assert set(out) == {"val/acc", "val/nmi", "val/ari"}
    for name, value in expected.items():
        assert out[f"val/{name}"].item() == pytest.approx(value, abs=1e-12)
    assert accuracy.compute().item() == pytest.approx(expected["acc"], abs=1e-12)
    assert len(metrics.compute_groups) == 1  # one shared contingency matrix
    assert torch.equal(accuracy.contingency, contingency_matrix(predicted, target, 8, 5))
    metrics.reset()
    with pytest.raises(ValueError, match="no samples"):
        metrics.compute()


def _ddp_worker(rank, port, folder, predicted, target):
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
    )
    try:
        metrics = ClusteringMetrics(num_clusters=6, num_classes=5)
        half = slice(0, 137) if rank == 0 else slice(137, None)  # uneven halves
        for chunk_p, chunk_t in zip(predicted[half].split(50), target[half].split(50)):
            metrics.update(chunk_p, chunk_t)
        out = {name: value.item() for name, value in metrics.compute().items()}
        torch.save(out, f"{folder}/rank{rank}.pt")
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def test_metric_reduces_over_two_gloo_processes(tmp_path):
    predicted, target = _labels(300, 6, seed=12, c=5)
    predicted[:137] = predicted[:137].clamp_max(4)  # cluster 5 only occurs on rank 1
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torch.multiprocessing.spawn(
        _ddp_worker, args=(port, str(tmp_path), predicted, target), nprocs=2, join=True
    )
    expected = clustering_scores(predicted, target)
    single = clustering_scores(predicted[137:], target[137:])
    assert abs(single["acc"] - expected["acc"]) > 1e-3  # a rank alone would be caught
    for rank in (0, 1):
        out = torch.load(tmp_path / f"rank{rank}.pt")
        assert out == pytest.approx(expected, abs=1e-12)


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")
def test_bad_inputs_raise_clear_errors():
    labels = torch.tensor([0, 1, 1, 0])
    with pytest.raises(ValueError, match="same length, got 4 and 3"):
        clustering_accuracy(labels, labels[:3])
    with pytest.raises(ValueError, match="negative label"):
        clustering_scores(torch.tensor([0, -1, 1, 0]), labels)
    with pytest.raises(ValueError, match="empty"):
        clustering_accuracy(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long))
    with pytest.raises(TypeError, match=r"integer cluster/class indices.*argmax"):
        clustering_scores(labels.float(), labels)
    with pytest.raises(TypeError, match="integer"):
        contingency_matrix(labels, [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match=r"1-D labels of shape \(N,\)"):
        contingency_matrix(labels.reshape(2, 2), labels.reshape(2, 2))
    with pytest.raises(ValueError, match=r"label 2 but `num_clusters` is 2"):
        contingency_matrix(torch.tensor([0, 2, 1, 0]), labels, num_clusters=2)
    with pytest.raises(TypeError, match="`num_classes` must be an int"):
        ClusteringMetrics(3, True)
    with pytest.raises(ValueError, match="`num_clusters` must be >= 1"):
        align_assignments(labels, labels, 0)
    metric = ClusteringAccuracy(2, 2)
    with pytest.raises(ValueError, match="labels must lie in"):
        metric.update(torch.tensor([0, 3]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="no samples"):
        metric.compute()
    with pytest.raises(ValueError, match="same shape"):
        align_probabilities(torch.rand(5, 3), torch.rand(5, 4))
    with pytest.raises(TypeError, match="floating point"):
        align_probabilities(torch.ones(5, 3, dtype=torch.long), torch.ones(5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="negative entries"):
        best_cluster_mapping(torch.tensor([[1, -1], [0, 2]]))
    with pytest.raises(ValueError, match=r"non-empty \(K, C\)"):
        best_cluster_mapping(torch.zeros(3))


def test_nmi_of_a_contingency_refuses_fractional_counts_and_matches_sklearn_on_whole_ones():
    from lightning_info.measures.clustering import nmi_from_contingency

    with pytest.raises(ValueError, match="whole-number counts"):
        nmi_from_contingency(torch.tensor([[1.5, 0.0], [0.0, 2.0]]))
    predicted, target = _labels(60, 3, seed=4)
    counts = contingency_matrix(predicted, target).double()
    expected = normalized_mutual_info_score(target.numpy(), predicted.numpy())
    assert float(nmi_from_contingency(counts)) == pytest.approx(expected, abs=1e-12)
