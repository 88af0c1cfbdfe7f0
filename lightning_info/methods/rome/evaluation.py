"""Trainer-less evaluation of a distilled set: train a fresh net on it, attack it, RR and I-RR."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_info.core.validation import (
    require_int,
    require_positive,
)
from lightning_info.methods.rome.attacks import check_target_shift, fgsm, pgd, shifted_targets
from lightning_info.methods.rome.augment import DSA
from lightning_info.methods.rome.functional import (
    ATTACKS,
    check_attacks,
    check_real,
    predicted_classes,
)
from lightning_info.methods.rome.metrics import (
    improved_robustness_ratio,
    robustness_ratio,
)
from lightning_info.methods.rome.network import NetFactory, SmallConvNet


def train_fresh_net(
    images: Tensor,
    labels: Tensor,
    *,
    epochs: int = 300,
    lr: float = 0.01,
    seed: int = 0,
    batch_size: int = 256,
    net: NetFactory | None = None,
    num_classes: int | None = None,
    augmentation: DSA | None = None,
) -> nn.Module:
    """A network ``net(in_channels, num_classes, image_size)`` (``None``: :class:`SmallConvNet`)
    trained from a seeded initialisation on ``(images, labels)``.

    Seeded SGD (momentum 0.9, weight decay 5e-4) on cross-entropy, ``epochs`` passes in seeded
    random order; with ``augmentation`` each batch is augmented, every image by its own draw
    (as the reference trains its evaluation networks under DSA). Returned in eval mode on the
    images' device.
    """
    epochs = require_int(epochs, "epochs", 1)
    lr = require_positive(lr, "lr")
    seed = require_int(seed, "seed", 0)
    batch_size = require_int(batch_size, "batch_size", 1)
    images, labels = check_real(images, labels)
    k = int(labels.max()) + 1 if num_classes is None else require_int(num_classes, "num_classes", 2)
    if int(labels.max()) >= k:
        raise ValueError(
            f"`labels` must lie in [0, {k}) for num_classes={k}, got a label "
            f"{int(labels.max())}; pass the data's number of classes."
        )
    generator = torch.Generator().manual_seed(seed)
    augment_rng = torch.Generator().manual_seed(seed + 1)
    factory = SmallConvNet if net is None else net
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = factory(images.shape[1], k, images.shape[-1]).to(images.device)
    require_network_dtype(model, images, "images")
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(images.shape[0], generator=generator).to(images.device)
        for start in range(0, images.shape[0], batch_size):
            pick = order[start : start + batch_size]
            x = images[pick]
            if augmentation is not None:
                x = augmentation(x, augment_rng, per_batch=False)
            optimizer.zero_grad()
            F.cross_entropy(model(x), labels[pick]).backward()
            optimizer.step()
    return model.eval()


def attacked_predictions(
    net: nn.Module,
    x: Tensor,
    y: Tensor,
    attacks: Sequence[str] = ATTACKS,
    *,
    eps: float = 8 / 255,
    eps_l2: float = 0.5,
    steps: int = 10,
    generator: torch.Generator | None = None,
    target_shift: int | None = None,
    num_classes: int | None = None,
) -> dict[str, Tensor]:
    """Predicted labels of ``net`` on ``x`` under each attack on the true labels ``y``.

    ``"fgsm"`` and ``"pgd"`` use the L-inf radius ``eps``, ``"pgd_l2"`` the L2 radius ``eps_l2``;
    PGD takes ``steps`` steps from a random start drawn with ``generator``. Pixel space ``[0, 1]``.
    The attacks are untargeted, or with ``target_shift`` targeted at ``(y + target_shift) mod
    num_classes`` (:func:`~.attacks.shifted_targets`; BEARD's protocol is ``1``).
    """
    goal, targeted = y, target_shift is not None
    if targeted:
        if num_classes is None:
            raise ValueError("a targeted attack needs num_classes to map the labels")
        goal = shifted_targets(y, num_classes, target_shift)
    predictions = {}
    for name in check_attacks(attacks):
        if name == "fgsm":
            x_adv = fgsm(net, x, goal, eps, targeted=targeted)
        else:
            radius, norm = (eps, "linf") if name == "pgd" else (eps_l2, "l2")
            x_adv = pgd(
                net, x, goal, radius, steps=steps, norm=norm, targeted=targeted, generator=generator
            )
        with torch.no_grad():
            predictions[name] = predicted_classes(net(x_adv))
    return predictions


def evaluate_distilled(
    images: Tensor,
    labels: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    epochs: int = 300,
    lr: float = 0.01,
    seed: int = 0,
    attacks: Sequence[str] = ATTACKS,
    eps: float = 8 / 255,
    eps_l2: float = 0.5,
    attack_steps: int = 10,
    batch_size: int = 256,
    net: NetFactory | None = None,
    num_classes: int | None = None,
    target_shifts: Sequence[int] = (),
    augmentation: DSA | None = None,
) -> dict[str, float]:
    """Train a fresh network on a (distilled) set and test it clean and attacked.

    Training is :func:`train_fresh_net` of ``net(in_channels, num_classes, image_size)``
    (``None``: :class:`SmallConvNet`; with ``augmentation``, if given); the attacks are
    :func:`attacked_predictions`. With ``ACC`` the clean accuracy and ``ASR_i = ACC - acc_i``,

        RR   = 100 * (1 - mean(ASR) / max(ASR)),
        I-RR = 100 * (1 - mean(ASR) * max(ASR) / ACC^2)    (BEARD; Zhou et al., ICML 2025).

    Each shift in ``target_shifts`` repeats the attacks targeted at ``(y + shift) mod K``
    (BEARD's headline protocol is the shift 1; others test whether a robustness is specific to
    that map), adding ``targeted+<shift>/<attack>`` accuracies (the fraction still predicted as
    the true label) and their ``targeted+<shift>/rr`` and ``targeted+<shift>/i_rr``.

    Returns:
        ``{"clean": ACC, <attack>: acc_i for each attack, "rr": RR, "i_rr": I-RR}``, accuracies
        as fractions in ``[0, 1]`` and the two ratios in percent, plus the targeted keys.
    """
    attacks = check_attacks(attacks)
    test_x, test_y = check_real(test_x, test_y)
    if num_classes is None:
        num_classes = int(max(int(labels.max()), int(test_y.max()))) + 1
    k = require_int(num_classes, "num_classes", 2)
    target_shifts = [check_target_shift(shift, k) for shift in target_shifts]
    model = train_fresh_net(
        images,
        labels,
        epochs=epochs,
        lr=lr,
        seed=seed,
        batch_size=batch_size,
        net=net,
        num_classes=k,
        augmentation=augmentation,
    )

    def accuracy(preds: Tensor) -> float:
        return float((preds == test_y).float().mean())

    with torch.no_grad():
        result = {"clean": accuracy(predicted_classes(model(test_x)))}
    for shift in (None, *target_shifts):  # untargeted, then each target shift
        predictions = attacked_predictions(
            model,
            test_x,
            test_y,
            attacks,
            eps=eps,
            eps_l2=eps_l2,
            steps=attack_steps,
            generator=torch.Generator().manual_seed(seed),
            target_shift=shift,
            num_classes=k,
        )
        prefix = "" if shift is None else f"targeted{int(shift):+d}/"
        result.update({prefix + name: accuracy(predictions[name]) for name in attacks})
        _add_ratios(result, prefix, [result[prefix + name] for name in attacks])
    return result


def require_network_dtype(net: nn.Module, images: Tensor, name: str) -> None:
    """Refuse images of another dtype than the network's parameters (no silent cast)."""
    weights = next((p.dtype for p in net.parameters() if p.is_floating_point()), images.dtype)
    if images.dtype != weights:
        raise TypeError(
            f"`{name}` have dtype {images.dtype} but the network's parameters are {weights}; "
            f"pass `{name}.to({weights})` (or a network factory that builds {images.dtype} "
            "networks)."
        )


def _add_ratios(result: dict[str, float], prefix: str, attacked: list[float]) -> None:
    result[prefix + "rr"] = float(robustness_ratio(result["clean"], attacked))
    result[prefix + "i_rr"] = float(improved_robustness_ratio(result["clean"], attacked))
