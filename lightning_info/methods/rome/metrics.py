"""Robustness scores of BEARD (Zhou et al., 2025) over a suite of attacks, and their I-RR variant.

Accuracies are fractions in ``[0, 1]`` (0.6995, not 69.95); the scores come back in percent, as
the BEARD tables report them. For a clean accuracy ``ACC`` and accuracies ``acc_i`` under attacks
``i = 1..n`` the attack success rates are ``ASR_i = ACC - acc_i`` and

    RR   = 100 * (1 - mean(ASR) / max(ASR))                        (robustness ratio)
    I-RR = 100 * (1 - mean(ASR) * max(ASR) / ACC**2)                (improved robustness ratio)

RR compares the average attack with the strongest one and ignores how much accuracy is lost;
I-RR scales the loss by the clean accuracy, so a model that keeps its accuracy scores near 100.
An attack that raises accuracy has ``ASR_i < 0``, which can push either score above 100.

Degenerate cases: when no attack lowers accuracy (``max(ASR) <= 0``) RR is 100 by convention (no
attack succeeds, so nothing is lost); I-RR needs no convention there and gives 100 whenever
``max(ASR) = 0``. With ``ACC = 0`` I-RR is undefined and returns NaN.

With wall-clock times ``t_clean`` for clean inference and ``t_i`` per attack,

    AE     = 100 * (mean(t) - t_clean) / (max(t) - t_clean)          (attack efficiency ratio)
    CREI   = alpha * RR + (1 - alpha) * AE,   alpha = 1/2 in BEARD
    I-CREI = alpha * I-RR + (1 - alpha) * AE

and AE is 0 when ``max(t) <= t_clean`` (no attack costs anything beyond a clean pass).

:class:`RobustnessRatio` and :class:`ImprovedRobustnessRatio` accumulate correct-prediction counts
(summed across processes under DDP) and apply the same formulas to the pooled accuracies. Over
no predictions at all (no ``update``, or only empty batches) they return NaN with a warning, as
torchmetrics' means do, never a score. Bools are not accuracies or times: ``True`` is refused,
not read as 1; ``attack_accs`` and ``attack_times`` of CREI must have one entry per attack.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from lightning_info.core.validation import (
    require_equal_lengths,
    require_finite_tensor,
    require_int,
    require_string_sequence,
)
from lightning_info.methods.rome.functional import predicted_classes

Values = float | Sequence[float] | Tensor


def attack_success_rates(clean_acc: float | Tensor, attack_accs: Values) -> Tensor:
    """``ASR_i = ACC_clean - acc_i`` per attack, as fractions (float64, shape ``(n,)``)."""
    clean, accs = _accuracies(clean_acc, attack_accs)
    return clean - accs


def robustness_ratio(clean_acc: float | Tensor, attack_accs: Values) -> Tensor:
    """BEARD robustness ratio ``RR = 100 * (1 - mean(ASR) / max(ASR))``, 100 if ``max(ASR) <= 0``.

    Args:
        clean_acc: accuracy on clean inputs, a fraction in ``[0, 1]``.
        attack_accs: accuracy under each attack, fractions in ``[0, 1]``, at least one.

    Returns:
        A 0-dim float64 tensor, in percent.
    """
    return _robustness_ratio(*_accuracies(clean_acc, attack_accs))


def improved_robustness_ratio(clean_acc: float | Tensor, attack_accs: Values) -> Tensor:
    """Improved robustness ratio ``I-RR = 100 * (1 - mean(ASR) * max(ASR) / ACC_clean**2)``.

    Same arguments as :func:`robustness_ratio`; NaN when ``ACC_clean = 0``.
    """
    return _improved_robustness_ratio(*_accuracies(clean_acc, attack_accs))


def attack_efficiency(clean_time: float | Tensor, attack_times: Values) -> Tensor:
    """BEARD attack efficiency ratio ``AE = 100 * (mean(t) - t_clean) / (max(t) - t_clean)``.

    Times are non-negative and in any one unit; AE is 0 when ``max(t) <= t_clean``. Returns a
    0-dim float64 tensor, in percent.
    """
    clean, times = _values(clean_time, attack_times, "clean_time", "attack_times")
    if clean < 0 or (times < 0).any():
        raise ValueError("`clean_time` and `attack_times` must be >= 0.")
    span = times.max() - clean
    safe_span = torch.where(span > 0, span, torch.ones_like(span))
    return torch.where(span > 0, 100 * (times.mean() - clean) / safe_span, torch.zeros_like(span))


def _efficiency_index(
    ratio: Tensor, clean_time: float | Tensor, attack_times: Values, alpha: float
) -> Tensor:
    weight = _weight(alpha)
    return weight * ratio + (1 - weight) * attack_efficiency(clean_time, attack_times)


def crei(
    clean_acc: float | Tensor,
    attack_accs: Values,
    clean_time: float | Tensor,
    attack_times: Values,
    *,
    alpha: float = 0.5,
) -> Tensor:
    """Comprehensive robustness-efficiency index ``CREI = alpha * RR + (1 - alpha) * AE``;
    ``attack_accs`` and ``attack_times`` have one entry per attack, in the same order."""
    accuracies = _accuracies(clean_acc, attack_accs)
    _require_one_time_per_attack(accuracies[1], clean_time, attack_times)
    return _efficiency_index(_robustness_ratio(*accuracies), clean_time, attack_times, alpha)


def improved_crei(
    clean_acc: float | Tensor,
    attack_accs: Values,
    clean_time: float | Tensor,
    attack_times: Values,
    *,
    alpha: float = 0.5,
) -> Tensor:
    """``I-CREI = alpha * I-RR + (1 - alpha) * AE``, CREI with I-RR in place of RR."""
    accuracies = _accuracies(clean_acc, attack_accs)
    _require_one_time_per_attack(accuracies[1], clean_time, attack_times)
    ratio = _improved_robustness_ratio(*accuracies)
    return _efficiency_index(ratio, clean_time, attack_times, alpha)


def _require_one_time_per_attack(
    accuracies: Tensor, clean_time: float | Tensor, attack_times: Values
) -> None:
    _, times = _values(clean_time, attack_times, "clean_time", "attack_times")
    require_equal_lengths({"attack_accs": accuracies.numel(), "attack_times": times.numel()})


class _AttackAccuracies(Metric):
    """Counts of correct predictions on clean inputs and under each attack, summed over batches.

    Args:
        attacks: the attack names (a list, also for one name), in the order of a stacked
            ``preds_per_attack``, or their number (then ``preds_per_attack`` must be stacked,
            not a dict).
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    clean_correct: Tensor
    attack_correct: Tensor
    total: Tensor

    def __init__(self, attacks: int | Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(attacks, int):
            self.attack_names: tuple[str, ...] | None = None
            self.num_attacks = require_int(attacks, "attacks", 1)
        else:
            if not isinstance(attacks, (str, bytes, Sequence)):
                raise TypeError(
                    "`attacks` must be the number of attacks (an int) or their names, got "
                    f"{attacks!r}."
                )
            names = tuple(require_string_sequence(attacks, "attacks"))
            if not names:
                raise ValueError(
                    f"`attacks` must be a non-empty sequence of names, got {attacks!r}."
                )
            if len(set(names)) != len(names):
                raise ValueError(f"`attacks` must not repeat a name, got {names!r}.")
            self.attack_names = names
            self.num_attacks = len(names)
        self.add_state("clean_correct", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state(
            "attack_correct", torch.zeros(self.num_attacks, dtype=torch.long), dist_reduce_fx="sum"
        )
        self.add_state("total", torch.tensor(0), dist_reduce_fx="sum")

    def update(
        self,
        preds_clean: Tensor,
        preds_per_attack: Mapping[str, Tensor] | Tensor,
        target: Tensor,
    ) -> None:
        """Add one batch.

        Args:
            preds_clean: predictions on the clean batch, labels ``(N,)`` or scores ``(N, C)``.
            preds_per_attack: predictions on each attacked batch, a dict keyed by every attack
                name, or one tensor stacked in attack order, ``(A, N)`` or ``(A, N, C)``.
            target: true labels ``(N,)``.
        """
        if target.dim() != 1:
            raise ValueError(f"`target` must have shape (N,), got {tuple(target.shape)}.")
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
            raise TypeError(
                f"`target` must hold integer class labels, got dtype {target.dtype}; pass "
                "`target.long()`."
            )
        if isinstance(preds_per_attack, Mapping):
            stacked = self._stack(preds_per_attack)
        else:
            stacked = preds_per_attack
            if stacked.dim() < 2 or stacked.shape[0] != self.num_attacks:
                raise ValueError(
                    f"stacked `preds_per_attack` must have shape ({self.num_attacks}, N[, C]), "
                    f"got {tuple(stacked.shape)}."
                )
        self.clean_correct = self.clean_correct + _correct(preds_clean, target, "preds_clean")
        self.attack_correct = self.attack_correct + torch.stack(
            [_correct(preds, target, "preds_per_attack") for preds in stacked]
        )
        self.total = self.total + target.numel()

    def accuracies(self) -> tuple[Tensor, Tensor]:
        """Pooled clean accuracy (0-dim) and accuracy per attack ``(A,)``, as float64 fractions."""
        total = self.total.double()
        return self.clean_correct.double() / total, self.attack_correct.double() / total

    def _over_some_data(self, score: Tensor) -> Tensor:
        """``score``, or NaN with a warning when no prediction was counted."""
        if int(self.total) == 0:
            warnings.warn(
                f"{type(self).__name__} counted no predictions (no update, or empty batches); "
                "its score is undefined and compute returns NaN.",
                UserWarning,
                stacklevel=3,
            )
            return torch.full_like(score, float("nan"))
        return score

    def _stack(self, preds_per_attack: Mapping[str, Tensor]) -> Tensor:
        if self.attack_names is None:
            raise TypeError(
                "a dict `preds_per_attack` needs the attack names: construct the metric with "
                "`attacks=[...names]` or pass a stacked tensor."
            )
        if set(preds_per_attack) != set(self.attack_names):
            raise ValueError(
                f"`preds_per_attack` must have exactly the keys {self.attack_names}, "
                f"got {tuple(preds_per_attack)}."
            )
        return torch.stack([preds_per_attack[name] for name in self.attack_names])


class RobustnessRatio(_AttackAccuracies):
    """BEARD robustness ratio (percent) of the pooled accuracies; see :func:`robustness_ratio`."""

    def compute(self) -> Tensor:
        return self._over_some_data(_robustness_ratio(*self.accuracies()))


class ImprovedRobustnessRatio(_AttackAccuracies):
    """Improved robustness ratio I-RR (percent); see :func:`improved_robustness_ratio`."""

    def compute(self) -> Tensor:
        return self._over_some_data(_improved_robustness_ratio(*self.accuracies()))


def _robustness_ratio(clean: Tensor, accs: Tensor) -> Tensor:
    asr = clean - accs
    worst = asr.max()
    safe_worst = torch.where(worst > 0, worst, torch.ones_like(worst))
    return torch.where(worst > 0, 100 * (1 - asr.mean() / safe_worst), torch.full_like(worst, 100))


def _improved_robustness_ratio(clean: Tensor, accs: Tensor) -> Tensor:
    asr = clean - accs
    safe_clean = torch.where(clean > 0, clean, torch.ones_like(clean))
    value = 100 * (1 - asr.mean() * asr.max() / safe_clean**2)
    return torch.where(clean > 0, value, torch.full_like(value, float("nan")))


def _correct(preds: Tensor, target: Tensor, name: str) -> Tensor:
    if preds.dim() == 2:
        preds = predicted_classes(preds)
    if preds.shape != target.shape:
        raise ValueError(
            f"`{name}` must be labels (N,) or scores (N, C) with N={target.numel()}, "
            f"got shape {tuple(preds.shape)}."
        )
    return (preds == target).sum()


def _refuse_bools(value: Any, name: str) -> None:
    """Bools are not accuracies or times: refuse ``True`` rather than read it as 1; nor are
    strings (``"0.9"``)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(item, (str, bytes)) for item in items):
        raise TypeError(f"`{name}` must hold numbers, got a string in {value!r}.")
    if any(isinstance(item, bool) for item in items) or (
        isinstance(value, Tensor) and value.dtype == torch.bool
    ):
        raise TypeError(f"`{name}` must hold numbers, got a bool in {value!r}.")


def _values(first: float | Tensor, rest: Values, first_name: str, rest_name: str):
    _refuse_bools(first, first_name)
    _refuse_bools(rest, rest_name)
    rest_t = torch.as_tensor(rest, dtype=torch.float64)
    first_t = torch.as_tensor(first, dtype=torch.float64, device=rest_t.device)
    if first_t.dim() != 0:
        raise ValueError(f"`{first_name}` must be a single number, got shape {first_t.shape}.")
    if rest_t.dim() != 1 or rest_t.numel() == 0:
        raise ValueError(f"`{rest_name}` must be a non-empty 1-D sequence, got {rest!r}.")
    require_finite_tensor(first_t, first_name)
    require_finite_tensor(rest_t, rest_name)
    return first_t, rest_t


def _accuracies(clean_acc: float | Tensor, attack_accs: Values) -> tuple[Tensor, Tensor]:
    clean, accs = _values(clean_acc, attack_accs, "clean_acc", "attack_accs")
    if not (0 <= clean <= 1) or ((accs < 0) | (accs > 1)).any():
        raise ValueError(
            "accuracies must be fractions in [0, 1] (0.6995, not 69.95), got "
            f"clean_acc={float(clean)!r}, attack_accs={accs.tolist()!r}."
        )
    return clean, accs


def _weight(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"`alpha` must be a number in [0, 1], got {alpha!r}.")
    return float(alpha)
