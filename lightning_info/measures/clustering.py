"""Clustering evaluation shared by the clustering methods (SDCIB multi-view, CMV-ND graph).

A clustering assigns each of ``N`` samples a cluster ``p_i in {0..K-1}``; the ground truth gives
a class ``t_i in {0..C-1}``. Cluster indices are arbitrary names, so every score here is invariant
to renaming them. All three scores are functions of the contingency matrix

    M[k, c] = #{i : p_i = k, t_i = c}        (rows = clusters, columns = classes; long (K, C))

with ``a_k = sum_c M[k, c]``, ``b_c = sum_k M[k, c]`` and ``N = sum M``:

    ACC = max_m (1/N) sum_i 1[t_i = m(p_i)]   over one-to-one maps m from clusters to classes
                                              (partial when K != C: min(K, C) pairs are matched,
                                              the other samples count as errors); solved by the
                                              Hungarian (Kuhn-Munkres) algorithm on M, the
                                              standard unsupervised clustering accuracy (Yang et
                                              al. 2010; Xie et al., DEC, 2016)
    NMI = I(p; t) / ((H(p) + H(t)) / 2)       natural log, arithmetic normaliser (Strehl & Ghosh
                                              2002; Vinh et al. 2010), with
                                              I = sum_kc M/N log(N M / (a_k b_c)); 1 when both
                                              labelings have a single cluster, 0 when I = 0;
                                              equals sklearn ``normalized_mutual_info_score``
    ARI = (RI - E[RI]) / (max RI - E[RI])     Hubert & Arabie (1985), from the pair confusion
                                              counts in exact integer arithmetic; 1 when the two
                                              labelings agree on every pair; equals sklearn
                                              ``adjusted_rand_score``

Why not torchmetrics' own ``NormalizedMutualInfoScore`` / ``AdjustedRandScore`` (1.9): they keep
every prediction and target in ``cat`` list states (O(N) memory per process, gathered whole under
DDP), compute in float32, give NMI 0 instead of 1 when both labelings are a single cluster, and
form ARI's ``tp * tn`` (~N^4/4) in int64, which silently overflows from N ~ 55k (at N = 200k they
report 0.93 where sklearn gives 0.49). The Metrics here keep only ``M`` with
``dist_reduce_fx="sum"`` — O(KC) state, an exact reduction over processes and batches — and derive
the three scores from it: ACC by scipy's ``linear_sum_assignment`` (torchmetrics'
``ClusterAccuracy`` needs the extra package ``torch_linear_assignment``), NMI by sklearn's
``mutual_info_score`` of ``M`` and scipy's ``entropy`` of its margins, ARI from the pair counts in
Python integers (sklearn's ``adjusted_rand_score`` takes the two label vectors, which the Metrics
do not keep).

Aligning clusterings (views of a multi-view model): :func:`align_assignments` returns a
permutation ``perm`` to apply as ``perm[other]``; :func:`align_probabilities` moves the columns of
soft assignments the same way. Their docstrings pin the direction, which is easy to get backwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection

from lightning_info.core.validation import require_finite_tensor, require_int, require_real_tensor

__all__ = [
    "ClusteringARI",
    "ClusteringAccuracy",
    "ClusteringMetrics",
    "ClusteringNMI",
    "ContingencyMetric",
    "accuracy_from_contingency",
    "adjusted_rand_index",
    "align_assignments",
    "align_probabilities",
    "ari_from_contingency",
    "best_cluster_mapping",
    "clustering_accuracy",
    "clustering_scores",
    "contingency_matrix",
    "nmi_from_contingency",
    "normalized_mutual_info",
]

Labels = Tensor | Sequence[int] | np.ndarray


# ----------------------------------------------------------------------------- contingency


def contingency_matrix(
    predicted: Labels,
    target: Labels,
    num_clusters: int | None = None,
    num_classes: int | None = None,
) -> Tensor:
    """``M[k, c] = #{i : predicted_i = k, target_i = c}``: a long ``(K, C)`` tensor, one bincount.

    ``K`` defaults to ``predicted.max() + 1`` and ``C`` to ``target.max() + 1``; pass them to
    keep a fixed shape (clusters or classes absent from this data then give zero rows/columns).
    Labels are 1-D integer tensors (or sequences) of equal, non-zero length with values in
    ``[0, K)`` and ``[0, C)``. The result lives on ``predicted``'s device.
    """
    predicted, target = _label_pair(predicted, target, "predicted", "target")
    return _contingency(predicted, target, num_clusters, num_classes, "predicted", "target")


def best_cluster_mapping(contingency: Tensor) -> Tensor:
    """The cluster -> class map of ACC: ``mapping[k]`` is the class matched to cluster ``k``.

    A one-to-one matching of rows to columns of ``contingency`` (``(K, C)``, non-negative counts
    or weights) maximising the matched total ``sum_k M[k, mapping[k]]``, found by
    ``scipy.optimize.linear_sum_assignment``; rectangular matrices are allowed. When ``K > C``
    only ``C`` clusters are matched and the others map to ``-1``. Ties between optimal matchings
    are broken by scipy. Returns a long ``(K,)`` tensor on the device of ``contingency``.
    """
    require_real_tensor(contingency, "contingency")
    if contingency.dim() != 2 or 0 in contingency.shape:
        raise ValueError(
            "`contingency` must be a non-empty (K, C) matrix (rows = clusters, columns = "
            f"classes), got shape {tuple(contingency.shape)}."
        )
    if contingency.dtype == torch.bool or contingency.is_complex():
        raise TypeError(f"`contingency` must hold real counts, got dtype {contingency.dtype}.")
    require_finite_tensor(contingency, "contingency")
    if bool((contingency < 0).any()):
        raise ValueError("`contingency` holds negative entries; it must hold counts or weights.")
    return _hungarian(contingency)


def _hungarian(contingency: Tensor) -> Tensor:
    from scipy.optimize import linear_sum_assignment

    weights = contingency.detach().cpu().double().numpy()
    rows, cols = linear_sum_assignment(weights, maximize=True)
    mapping = torch.full((contingency.shape[0],), -1, dtype=torch.long)
    mapping[torch.from_numpy(rows)] = torch.from_numpy(cols).long()
    return mapping.to(contingency.device)


# ----------------------------------------------------------------------------- scores


def accuracy_from_contingency(contingency: Tensor) -> Tensor:
    """ACC of a ``(K, C)`` contingency matrix: Hungarian-matched count / total (0-dim float64)."""
    mapping = best_cluster_mapping(contingency)
    matched = mapping >= 0
    rows = torch.nonzero(matched).flatten()
    hits = contingency[rows, mapping[rows]].sum()
    total = _require_samples(contingency)
    return (hits.double() / total).to(contingency.device)


def nmi_from_contingency(contingency: Tensor) -> Tensor:
    """NMI (arithmetic normaliser, natural log) of a ``(K, C)`` count matrix; 0-dim float64.

    ``I(p; t)`` is sklearn's ``mutual_info_score`` of the matrix (its per-cell terms below
    float64 eps zeroed, the sum clipped at 0), so the result equals sklearn's
    ``normalized_mutual_info_score`` case for case: empty rows and columns are dropped; 1 when
    both sides then have one cluster; 0 when the MI is 0. Floating counts must be whole numbers.
    """
    from scipy.stats import entropy
    from sklearn.metrics import mutual_info_score

    _require_samples(contingency)
    counts = contingency.detach().cpu()
    if counts.is_floating_point():
        if not bool((counts == counts.round()).all()):
            raise ValueError(
                "NMI needs whole-number counts in `contingency`, got fractions; pass the counts "
                "of `contingency_matrix(predicted, target)`."
            )
        counts = counts.long()
    counts = counts[counts.sum(1) > 0][:, counts.sum(0) > 0]
    if counts.shape == (1, 1):
        return _scalar(1.0, contingency)
    mutual_information = mutual_info_score(None, None, contingency=counts.numpy())
    if mutual_information == 0.0:
        return _scalar(0.0, contingency)
    entropies = entropy(counts.sum(1).numpy()) + entropy(counts.sum(0).numpy())
    return _scalar(mutual_information / (entropies / 2), contingency)


def ari_from_contingency(contingency: Tensor) -> Tensor:
    """ARI of a ``(K, C)`` count matrix (0-dim float64); 1 when the labelings agree on all pairs.

    The pair confusion counts (ordered pairs, as sklearn's ``pair_confusion_matrix``) are exact
    int64 (they are below ``N^2``); the ``~N^4`` products are formed in Python integers, so there
    is no overflow at any ``N``.
    """
    _require_samples(contingency)
    if contingency.is_floating_point():
        raise TypeError("ARI needs integer counts; pass a long contingency matrix.")
    counts = contingency.detach().cpu().long()
    n = int(counts.sum())
    sum_squares = int((counts * counts).sum())
    a, b = counts.sum(1), counts.sum(0)
    same_both = sum_squares - n
    same_cluster_only = int((a * a).sum()) - sum_squares
    same_class_only = int((b * b).sum()) - sum_squares
    different_both = n * n - same_cluster_only - same_class_only - sum_squares
    tp, tn, fp, fn = same_both, different_both, same_cluster_only, same_class_only
    if fp == 0 and fn == 0:
        return _scalar(1.0, contingency)
    value = 2 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))
    return _scalar(value, contingency)


def clustering_accuracy(predicted: Labels, target: Labels) -> Tensor:
    """ACC with the Hungarian matching of clusters to classes (see the module docstring).

    Sizes are inferred (``K = max(predicted) + 1``, ``C = max(target) + 1``); ``K != C`` is
    allowed. Returns a 0-dim float64 tensor on ``predicted``'s device.
    """
    return accuracy_from_contingency(contingency_matrix(predicted, target))


def normalized_mutual_info(predicted: Labels, target: Labels) -> Tensor:
    """NMI (arithmetic normaliser), equal to sklearn's ``normalized_mutual_info_score``."""
    return nmi_from_contingency(contingency_matrix(predicted, target))


def adjusted_rand_index(predicted: Labels, target: Labels) -> Tensor:
    """ARI, equal to sklearn's ``adjusted_rand_score`` at every ``N`` (no int64 overflow)."""
    return ari_from_contingency(contingency_matrix(predicted, target))


def clustering_scores(predicted: Labels, target: Labels) -> dict[str, float]:
    """``{"acc", "nmi", "ari"}`` as Python floats, from one contingency matrix."""
    contingency = contingency_matrix(predicted, target)
    return {
        "acc": float(accuracy_from_contingency(contingency)),
        "nmi": float(nmi_from_contingency(contingency)),
        "ari": float(ari_from_contingency(contingency)),
    }


# ----------------------------------------------------------------------------- alignment


def align_assignments(reference: Labels, other: Labels, num_clusters: int) -> Tensor:
    """The relabelling of ``other``'s clusters that agrees most with ``reference``.

    Returns a long permutation ``perm`` of ``range(num_clusters)`` where ``perm[a]`` is the
    reference cluster that ``other``'s cluster ``a`` is renamed to. Apply it by INDEXING THE
    PERMUTATION WITH THE LABELS::

        aligned = perm[other]          # sample i: other_i = a  ->  aligned_i = perm[a]

    ``(aligned == reference).mean()`` is then the largest agreement over all ``K!`` renamings
    (Hungarian matching on ``M[a, b] = #{i : other_i = a, reference_i = b}``). Renaming by the
    inverse, ``perm.argsort()[other]``, is wrong: for ``other = sigma[reference]`` with ``sigma``
    a 4-cycle, ``perm`` is ``sigma^-1`` and the inverse gives ``sigma^2[reference]``, a
    fixed-point-free renaming with 0% agreement. The reference SDCIB code made this mistake. To
    move the columns of soft assignments instead of renaming labels, see
    :func:`align_probabilities`. ``perm`` lives on ``other``'s device.
    """
    num_clusters = require_int(num_clusters, "num_clusters", 1)
    reference, other = _label_pair(reference, other, "reference", "other")
    contingency = _contingency(other, reference, num_clusters, num_clusters, "other", "reference")
    return _hungarian(contingency)


def align_probabilities(reference_probs: Tensor, other_probs: Tensor) -> Tensor:
    """``other_probs`` (``(N, K)`` soft assignments) with its columns moved to agree with
    ``reference_probs``, using :func:`align_assignments` on the two argmax assignments.

    Column ``a`` (the probability of ``other``'s cluster ``a``) becomes column ``perm[a]``::

        aligned[:, perm] = other_probs      i.e.  aligned = other_probs[:, perm.argsort()]

    so ``aligned.argmax(1) == perm[other_probs.argmax(1)]``: columns move by ``perm`` exactly
    when labels are renamed by ``perm`` (gathering columns by ``perm`` itself would apply the
    inverse). A new tensor is returned (``other_probs`` is not modified) and the gradient flows
    through the column gather; the permutation itself is not differentiated.
    """
    for name, probs in (("reference_probs", reference_probs), ("other_probs", other_probs)):
        require_real_tensor(probs, name)
        if probs.dim() != 2 or 0 in probs.shape:
            raise ValueError(
                f"`{name}` must be a non-empty (N, K) matrix of soft assignments, got shape "
                f"{tuple(probs.shape)}."
            )
        if not probs.is_floating_point():
            raise TypeError(f"`{name}` must be floating point, got dtype {probs.dtype}.")
        require_finite_tensor(probs, name)
    if reference_probs.shape != other_probs.shape:
        raise ValueError(
            "`reference_probs` and `other_probs` must have the same shape (N, K), got "
            f"{tuple(reference_probs.shape)} and {tuple(other_probs.shape)}."
        )
    with torch.no_grad():
        perm = align_assignments(
            reference_probs.argmax(1), other_probs.argmax(1), other_probs.shape[1]
        )
    return other_probs[:, perm.argsort().to(other_probs.device)]


# ----------------------------------------------------------------------------- metrics


class ContingencyMetric(Metric):
    """Accumulates the ``(num_clusters, num_classes)`` contingency matrix over batches and, with
    ``dist_reduce_fx="sum"``, over processes; subclasses score it in ``compute``.

    ``update(predicted, target)`` takes 1-D integer cluster and class labels of one batch (an
    empty batch is allowed, e.g. a process with no data). Values outside ``[0, num_clusters)`` or
    ``[0, num_classes)`` raise.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    contingency: Tensor

    def __init__(self, num_clusters: int, num_classes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_clusters = require_int(num_clusters, "num_clusters", 1)
        self.num_classes = require_int(num_classes, "num_classes", 1)
        default = torch.zeros(self.num_clusters, self.num_classes, dtype=torch.long)
        self.add_state("contingency", default=default, dist_reduce_fx="sum")

    def update(self, predicted: Labels, target: Labels) -> None:
        predicted, target = _label_pair(
            predicted, target, "predicted", "target", allow_empty=True, device=self.device
        )
        if predicted.numel() == 0:
            return
        self.contingency = self.contingency + _contingency(
            predicted, target, self.num_clusters, self.num_classes, "predicted", "target"
        )

    def _checked(self) -> Tensor:
        if int(self.contingency.sum()) == 0:
            raise ValueError(
                f"{type(self).__name__} has no samples: call `update(...)` before `compute()`."
            )
        return self.contingency


class ClusteringAccuracy(ContingencyMetric):
    """Hungarian-matched clustering accuracy (ACC) of everything seen since the last reset."""

    def compute(self) -> Tensor:
        return accuracy_from_contingency(self._checked())


class ClusteringNMI(ContingencyMetric):
    """NMI (arithmetic normaliser) from the accumulated contingency matrix."""

    def compute(self) -> Tensor:
        return nmi_from_contingency(self._checked())


class ClusteringARI(ContingencyMetric):
    """Adjusted Rand index from the accumulated contingency matrix."""

    def compute(self) -> Tensor:
        return ari_from_contingency(self._checked())


class ClusteringMetrics(MetricCollection):
    """``{"acc", "nmi", "ari"}`` (plus ``prefix``/``postfix``) over one shared contingency state.

    The three metrics have identical states, so the collection's compute groups update a single
    ``(num_clusters, num_classes)`` matrix per batch; under DDP it is summed over processes.
    Use as any MetricCollection: ``metrics.update(predicted, target)``, ``metrics.compute()``,
    or ``self.log_dict(metrics)`` after ``metrics(predicted, target)`` in a LightningModule.
    """

    def __init__(
        self,
        num_clusters: int,
        num_classes: int,
        *,
        prefix: str | None = None,
        postfix: str | None = None,
        **metric_kwargs: Any,
    ) -> None:
        super().__init__(
            {
                "acc": ClusteringAccuracy(num_clusters, num_classes, **metric_kwargs),
                "nmi": ClusteringNMI(num_clusters, num_classes, **metric_kwargs),
                "ari": ClusteringARI(num_clusters, num_classes, **metric_kwargs),
            },
            prefix=prefix,
            postfix=postfix,
        )


# ----------------------------------------------------------------------------- validation


def _as_labels(values: Labels, name: str) -> Tensor:
    if isinstance(values, Tensor):
        require_real_tensor(values, name)
        tensor = values.detach()
    else:
        tensor = torch.as_tensor(np.asarray(values))
    if tensor.dim() != 1:
        raise ValueError(f"`{name}` must be 1-D labels of shape (N,), got {tuple(tensor.shape)}.")
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise TypeError(
            f"`{name}` must hold integer cluster/class indices, got dtype {tensor.dtype}; "
            "for soft assignments pass `probs.argmax(1)`, for float labels `.long()`."
        )
    return tensor


def _label_pair(
    first: Labels,
    second: Labels,
    first_name: str,
    second_name: str,
    *,
    allow_empty: bool = False,
    device: torch.device | None = None,
) -> tuple[Tensor, Tensor]:
    a = _as_labels(first, first_name)
    b = _as_labels(second, second_name)
    if a.numel() != b.numel():
        raise ValueError(
            f"`{first_name}` and `{second_name}` must have the same length, got {a.numel()} "
            f"and {b.numel()}."
        )
    if a.numel() == 0 and not allow_empty:
        raise ValueError(f"`{first_name}` and `{second_name}` are empty: pass at least one sample.")
    device = a.device if device is None else device
    return a.to(device), b.to(device)


def _contingency(
    predicted: Tensor,
    target: Tensor,
    num_clusters: int | None,
    num_classes: int | None,
    predicted_name: str,
    target_name: str,
) -> Tensor:
    # one device sync for all four bounds
    low_p, high_p, low_t, high_t = torch.stack(
        [predicted.min(), predicted.max(), target.min(), target.max()]
    ).tolist()
    for name, low in ((predicted_name, low_p), (target_name, low_t)):
        if low < 0:
            raise ValueError(f"`{name}` holds a negative label ({low}); labels must be >= 0.")
    sizes = []
    for name, high, size, size_name in (
        (predicted_name, high_p, num_clusters, "num_clusters"),
        (target_name, high_t, num_classes, "num_classes"),
    ):
        if size is None:
            size = high + 1
        else:
            size = require_int(size, size_name, 1)
            if high >= size:
                raise ValueError(
                    f"`{name}` holds label {high} but `{size_name}` is {size}; labels must lie "
                    f"in [0, {size})."
                )
        sizes.append(size)
    k, c = sizes
    index = predicted.long() * c + target.long()
    return torch.bincount(index, minlength=k * c).reshape(k, c)


def _require_samples(contingency: Tensor) -> int:
    total = int(contingency.sum())
    if total <= 0:
        raise ValueError("the contingency matrix holds no samples; pass at least one.")
    return total


def _scalar(value: float, like: Tensor) -> Tensor:
    return torch.tensor(value, dtype=torch.float64, device=like.device)
