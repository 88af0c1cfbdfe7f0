"""``ROMEDistillation``: the LightningModule that learns the synthetic set (see ``functional``)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.logging import metric_key
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_fraction,
    require_in_range,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.methods.rome.attacks import (
    TARGET_MAPS,
    check_target_shift,
    pgd,
    training_attack_labels,
)
from lightning_info.methods.rome.augment import DSA, DSA_STRATEGY, strategy_families
from lightning_info.methods.rome.evaluation import (
    attacked_predictions,
    require_network_dtype,
    train_fresh_net,
)
from lightning_info.methods.rome.functional import (
    ATTACKS,
    check_attacks,
    check_real,
    image_grid,
    predicted_classes,
    rome_alignment,
)
from lightning_info.methods.rome.metrics import (
    ImprovedRobustnessRatio,
    robustness_ratio,
)
from lightning_info.methods.rome.network import NetFactory, SmallConvNet
from lightning_info.methods.rome.pool import NetworkPool


@dataclass(frozen=True)
class DistillationOptions:
    """One distillation step of :class:`ROMEDistillation`: the loss weights, the real batch,
    the augmentation and the SGD on the synthetic images.

    Args:
        alpha: weight of the alignment term; ``1 - alpha`` scales the performance term.
        w_ce: weight of the performance term (``acc_net`` is a fraction; the reference's
            ``ce_weight`` multiplies a percentage, see the method card for the conversion).
        real_batch: real images per class and step, and per step of the pool's training.
        lr, momentum: SGD on the normalised synthetic images (the reference's ``lr_img``
            units: a pixel moves by ``lr * std**2`` times its gradient).
        dsa_strategy: differentiable siamese augmentation families (:class:`~.augment.DSA`;
            ``None`` or ``""``: none), also applied to each batch of the evaluation network.
    """

    alpha: float = 0.2
    w_ce: float = 0.5
    real_batch: int = 256
    lr: float = 0.2
    momentum: float = 0.5
    dsa_strategy: str | None = DSA_STRATEGY

    def __post_init__(self) -> None:
        alpha = require_in_range(self.alpha, "distillation.alpha", 0.0, None)
        if alpha > 1:
            raise ValueError(f"`distillation.alpha` must lie in [0, 1], got {self.alpha!r}.")
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "w_ce", require_non_negative(self.w_ce, "distillation.w_ce"))
        require_int(self.real_batch, "distillation.real_batch", 1)
        object.__setattr__(self, "lr", require_positive(self.lr, "distillation.lr"))
        momentum = require_fraction(self.momentum, "distillation.momentum")
        object.__setattr__(self, "momentum", momentum)
        if self.dsa_strategy:
            strategy_families(self.dsa_strategy)


@dataclass(frozen=True)
class AttackOptions:
    """The L-inf PGD on the real batches of the alignment and of the pool's training; its
    radius and steps are also those of the test-time attacks.

    Args:
        robust: attack the real batches (ROME) or align clean features (distribution matching
            with ``alpha = 1``); a bool.
        target: ``"next"`` (the reference's targeted PGD towards ``(c + 1) mod K``),
            ``"rotating"`` (towards ``c + s`` with ``s = 1 + step mod (K - 1)``) or
            ``"untargeted"`` (:func:`~.attacks.training_attack_labels`).
        eps: the L-inf radius in pixel units (pixels in ``[0, 1]``, so at most 1), also the
            L-inf radius of the test attacks.
        steps: PGD steps, in training and in the test attacks.
        step_size: the PGD step in pixel units; ``None`` means ``2.5 * eps / steps``.
    """

    robust: bool = True
    target: Literal["next", "rotating", "untargeted"] = "next"
    eps: float = 8 / 255
    steps: int = 10
    step_size: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.robust, bool):
            raise TypeError(f"`attack.robust` must be a bool, got {self.robust!r}.")
        require_choice(self.target, "attack.target", TARGET_MAPS)
        eps = require_non_negative(self.eps, "attack.eps")
        if eps > 1:
            raise ValueError(
                f"`attack.eps` must be at most 1 (the pixel range [0, 1]), got {self.eps!r}; it "
                "is in pixel units, e.g. 8/255."
            )
        object.__setattr__(self, "eps", eps)
        require_int(self.steps, "attack.steps", 1)
        if self.step_size is not None:
            step_size = require_positive(self.step_size, "attack.step_size")
            object.__setattr__(self, "step_size", step_size)


@dataclass(frozen=True)
class NetworkPoolOptions:
    """The pool of adversarially trained networks (:class:`~.pool.NetworkPool`).

    Args:
        num_nets, max_nets: initial and largest pool size.
        add_every: a new network joins every this many steps (``0``: the pool never grows);
            past ``max_nets`` the oldest leaves.
        refresh_every: every this many steps ``nets_per_refresh`` networks take ``train_steps``
            steps of adversarial training (``0``: the networks are never trained).
        lr, momentum, weight_decay: each network's persistent SGD (the reference's
            ``--net_decay`` settings).
        acc_window: ``acc_net`` counts the training batches since the last multiple of this
            many steps (the reference's evaluation interval); ``0`` never resets the count.
    """

    num_nets: int = 3
    max_nets: int = 100
    add_every: int = 30
    refresh_every: int = 1
    nets_per_refresh: int = 2
    train_steps: int = 10
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 5e-4
    acc_window: int = 100

    def __post_init__(self) -> None:
        require_int(self.max_nets, "pool.max_nets", 1)
        require_int(self.num_nets, "pool.num_nets", 1)
        if self.num_nets > self.max_nets:
            raise ValueError(
                f"`pool.num_nets` ({self.num_nets}) must not exceed `pool.max_nets` "
                f"({self.max_nets})."
            )
        require_int(self.add_every, "pool.add_every", 0)
        require_int(self.refresh_every, "pool.refresh_every", 0)
        require_int(self.nets_per_refresh, "pool.nets_per_refresh", 1)
        require_int(self.train_steps, "pool.train_steps", 1)
        object.__setattr__(self, "lr", require_positive(self.lr, "pool.lr"))
        object.__setattr__(self, "momentum", require_fraction(self.momentum, "pool.momentum"))
        weight_decay = require_non_negative(self.weight_decay, "pool.weight_decay")
        object.__setattr__(self, "weight_decay", weight_decay)
        require_int(self.acc_window, "pool.acc_window", 0)


@dataclass(frozen=True)
class RobustEvaluationOptions:
    """The test-time evaluation of the distilled set (:func:`~.evaluation.evaluate_distilled`):
    a fresh network trained on it, tested clean and attacked.

    Args:
        epochs, lr: the fresh network's seeded SGD training.
        attacks: distinct names of ``"fgsm"``, ``"pgd"`` (L-inf, radius ``attack.eps``) and
            ``"pgd_l2"`` (radius ``eps_l2``).
        eps_l2: the L2 radius.
        target_shifts: each shift repeats the attacks targeted at ``(y + shift) mod K`` (BEARD's
            protocol is ``1``), logged as ``metric_key("test", "targeted+1/pgd")``, that is
            ``test/targetedplus1/pgd``, ..., ``test/targetedplus1/i_rr`` (``-1``:
            ``test/targeted-1/pgd``).
    """

    epochs: int = 300
    lr: float = 0.01
    attacks: tuple[Literal["fgsm", "pgd", "pgd_l2"], ...] = ATTACKS
    eps_l2: float = 0.5
    target_shifts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        require_int(self.epochs, "evaluation.epochs", 1)
        object.__setattr__(self, "lr", require_positive(self.lr, "evaluation.lr"))
        object.__setattr__(self, "attacks", check_attacks(self.attacks, "evaluation.attacks"))
        object.__setattr__(self, "eps_l2", require_non_negative(self.eps_l2, "evaluation.eps_l2"))
        if isinstance(self.target_shifts, (str, bytes, numbers.Number)):
            raise TypeError(
                "`evaluation.target_shifts` must be a sequence of ints, got "
                f"{self.target_shifts!r}; wrap it: ({self.target_shifts!r},)."
            )
        shifts = tuple(self.target_shifts)
        if any(isinstance(s, bool) or not isinstance(s, int) for s in shifts):
            raise TypeError(f"`evaluation.target_shifts` must be ints, got {shifts!r}.")
        object.__setattr__(self, "target_shifts", shifts)


# the options live in checkpoints' hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals(
    [DistillationOptions, AttackOptions, NetworkPoolOptions, RobustEvaluationOptions]
)


class ROMEDistillation(pl.LightningModule):
    """Distil a labelled image set into ``images_per_class`` robust synthetic images per class.

    The module samples its own per-class real batches from ``real_images`` and ``real_labels``
    (plain tensors, out of checkpoints and out of DDP's per-step buffer broadcast, moved to the
    module's device when first sampled there).
    Batches fed by a data module (e.g. :class:`~lightning_info.data.digits.DigitsDataModule`) only
    count steps; without one, :meth:`train_dataloader` yields ``steps_per_epoch`` step indices,
    so ``trainer.fit(module)`` needs no data of its own.

    Optimisation is manual. The synthetic images are the only trainable parameters (the pool's
    weights have ``requires_grad=False`` outside their own training, so DDP synchronises the
    images alone). They are held normalised, ``synthetic = (images - mean) / std`` with the
    real data's channel statistics, so ``distillation.lr`` is in the reference's units (its
    images are mean/std normalised: a step of ``lr`` there moves the pixels by ``lr * std**2``
    times the pixel gradient); :attr:`images` gives the pixels, kept in ``[0, 1]``. Each
    training step picks one network from the pool, adds up the loss of the module docstring
    over all classes and takes one SGD step; as each class owns its own slice of images, this
    equals one step per class. With ``distillation.dsa_strategy`` the real and synthetic
    batches of a class are augmented by the same random transform (:class:`~.augment.DSA`)
    before the real batch is attacked.

    The networks live in ``self.pool`` (a :class:`~.pool.NetworkPool`; ``self.nets`` lists
    them), each with its own persistent SGD optimizer; weights, optimizer states and counts are
    checkpointed. Every ``pool.refresh_every`` steps ``pool.nets_per_refresh`` of them take
    ``pool.train_steps`` steps on real batches of all classes, attacked as the alignment attacks
    them (``attack.target``) when ``attack.robust`` and clean otherwise, with the true labels
    as targets of the cross-entropy. ``acc_net`` of the performance term is the network's
    running accuracy on its own (adversarial) training batches since the last multiple of
    ``pool.acc_window`` steps, and 0 for a network with no such batch, as in the reference.
    Every ``pool.add_every`` steps a new network joins the pool; past ``pool.max_nets`` the
    oldest leaves.

    Randomness is a pure function of ``(seed, step)``: the pool (which network, its training
    batches) draws from a stream shared by all processes, the real batches of the distillation
    term from a stream that also depends on the global rank. Under DDP every rank thus aligns
    its own real batches, the image gradients are averaged, and the pool stays identical (rank
    0's trained weights are broadcast as well); a resumed run continues exactly. The choices
    made among Python objects (which network, which augmentation family, the seeds of the
    attacks' random starts) are drawn on the host from NumPy generators keyed the same way, and
    the step counters have host copies, so a training step reads no value back from the device
    (no synchronisation; a DDP run's broadcast of the pool is the exception).

    With ``validate_args`` each step also checks the values it computes with: the attacked
    batches finite and in ``[0, 1]``, their labels in ``[0, K)``, the features of the alignment
    finite (reads of values on the host, a device synchronisation each on an accelerator).
    The real data are checked once, here; the default ``False`` checks nothing per step.

    Testing (``trainer.test``) trains a fresh ``eval_net`` on the distilled set
    (``evaluation.epochs``, ``evaluation.lr``, seeded by ``seed``) and logs its accuracy on the
    test batches, clean and under each of ``evaluation.attacks``, with RR and I-RR (see
    :func:`evaluate_distilled`) as ``test/clean``, ``test/<attack>``, ``test/rr`` and
    ``test/i_rr``.

    The networks are injected as factories, ``net(in_channels, num_classes, image_size)``
    returning a module with ``features(x)`` and ``forward(x)``, because the pool builds a fresh,
    separately seeded network at every growth step: in Python ``SmallConvNet`` itself,
    ``functools.partial(SmallConvNet, width=16)`` or any callable; in a LightningCLI YAML a
    class whose first three arguments are those, with its other arguments as ``init_args``
    (``net: {class_path: lightning_info.methods.rome.SmallConvNet, init_args: {width: 16}}``).
    Neither factory is saved in the hyperparameters: pass them again when loading a checkpoint.

    Args:
        real_images: ``(N, C, H, W)`` real images with pixels in ``[0, 1]``.
        real_labels: ``(N,)`` integer labels in ``[0, num_classes)``, every class present.
        num_classes: ``K``; ``None`` takes ``max(real_labels) + 1``.
        images_per_class: synthetic images per class, drawn from the reals of that class.
        net: builds each pool network; ``None``: :class:`SmallConvNet` (width 32).
        eval_net: builds the network trained and attacked by ``trainer.test``; ``None``: the
            factory of ``net``.
        distillation: the loss weights, real batch, augmentation and image SGD
            (:class:`DistillationOptions`).
        attack: the attack of the alignment and of the pool's training
            (:class:`AttackOptions`); its ``eps`` and ``steps`` also set the test attacks.
        pool: the pool's size, growth and adversarial training (:class:`NetworkPoolOptions`).
        evaluation: the test-time evaluation (:class:`RobustEvaluationOptions`).
        steps_per_epoch: length of the module's own step-counting dataloader.
        seed: seeds the initial images, the network initialisations and all sampling.
        validate_args: check the values of every step's batches and features (above).
    """

    def __init__(
        self,
        real_images: Tensor,
        real_labels: Tensor,
        *,
        num_classes: int | None = None,
        images_per_class: int = 10,
        net: NetFactory | None = None,
        eval_net: NetFactory | None = None,
        distillation: DistillationOptions = DistillationOptions(),
        attack: AttackOptions = AttackOptions(),
        pool: NetworkPoolOptions = NetworkPoolOptions(),
        evaluation: RobustEvaluationOptions = RobustEvaluationOptions(),
        steps_per_epoch: int = 100,
        seed: int = 0,
        validate_args: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["real_images", "real_labels", "net", "eval_net"])
        self.automatic_optimization = False
        images, labels = check_real(real_images, real_labels)
        k = int(labels.max()) + 1
        if num_classes is not None:
            k = require_int(num_classes, "num_classes", 2)
        if k < 2 or int(labels.max()) >= k:
            raise ValueError(f"`real_labels` must lie in [0, {k}) with K >= 2 classes.")
        counts = torch.bincount(labels, minlength=k)
        if (counts == 0).any():
            missing = torch.nonzero(counts == 0).flatten().tolist()
            raise ValueError(f"every class needs real images; classes {missing} have none.")
        self.num_classes = k
        self.ipc = require_int(images_per_class, "images_per_class", 1)
        self.distillation_options = _require_options(
            distillation, DistillationOptions, "distillation"
        )
        self.attack_options = _require_options(attack, AttackOptions, "attack")
        self.pool_options = _require_options(pool, NetworkPoolOptions, "pool")
        self.evaluation_options = _require_options(
            evaluation, RobustEvaluationOptions, "evaluation"
        )
        self._net_factory = _require_factory(net, "net", SmallConvNet)
        self._eval_net_factory = _require_factory(eval_net, "eval_net", self._net_factory)
        self.steps_per_epoch = require_int(steps_per_epoch, "steps_per_epoch", 1)
        self.seed = require_int(seed, "seed", 0)
        self.validate_args = require_bool(validate_args, "validate_args")
        self._shape = tuple(images.shape[1:])

        order = torch.argsort(labels, stable=True)
        starts = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        # plain tensors, not buffers: DDP would broadcast every buffer at every step
        self._real = _RealData(images, labels, order, starts.tolist(), counts.tolist())
        self.register_buffer("iteration", torch.zeros((), dtype=torch.long))
        self.register_buffer(
            "nets_built", torch.tensor(self.pool_options.num_nets, dtype=torch.long)
        )
        # host copies of the two counters, refreshed whenever a state dict is loaded
        self._iteration, self._nets_built = 0, self.pool_options.num_nets
        self.register_load_state_dict_post_hook(_read_counters)

        mean, std = _channel_statistics(images)
        self.register_buffer("pixel_mean", mean.view(1, -1, 1, 1))
        self.register_buffer("pixel_std", std.view(1, -1, 1, 1))
        strategy = self.distillation_options.dsa_strategy
        self.augmentation = (
            DSA(strategy, tuple(mean.tolist()), tuple(std.tolist())) if strategy else None
        )
        self._families = strategy_families(strategy) if strategy else ()
        init_rng = self._generator(_INIT_STREAM)
        init = torch.cat([self._sample_class(c, self.ipc, init_rng, self._real) for c in range(k)])
        self.synthetic = nn.Parameter((init - self.pixel_mean) / self.pixel_std)
        self.register_buffer("labels", torch.arange(k).repeat_interleave(self.ipc))
        options = self.pool_options
        self.pool = NetworkPool(
            options.max_nets, options.lr, options.momentum, options.weight_decay
        )
        for index in range(options.num_nets):
            self.pool.add(self._build_net(index))
        require_network_dtype(self.pool[0], images, "real_images")
        eval_attacks = self.evaluation_options.attacks
        self.test_scores = ImprovedRobustnessRatio(eval_attacks)
        self.eval_target_shifts = [
            check_target_shift(shift, k) for shift in self.evaluation_options.target_shifts
        ]
        self.targeted_scores = nn.ModuleDict(
            {
                f"{shift:+d}": ImprovedRobustnessRatio(eval_attacks)
                for shift in self.eval_target_shifts
            }
        )
        self._evaluation: dict[str, nn.Module] = {}

    # ---------------------------------------------------------------- data and networks

    def _generator(self, stream: int, rank: int = 0, device: torch.device | None = None):
        """A generator seeded by ``(seed, stream, step, rank)``: no RNG state to checkpoint."""
        entropy = [self.seed, stream, self._iteration, rank]
        seed = int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> 1)
        return torch.Generator(device=device or "cpu").manual_seed(seed)

    def _choices(self, stream: int, rank: int = 0) -> np.random.Generator:
        """The host's draws of ``(seed, stream, step, rank)`` (which network, which
        augmentation family, the attacks' seeds): Python numbers, never read from a tensor."""
        entropy = [self.seed, stream, self._iteration, rank, _HOST_TAG]
        return np.random.default_rng(np.random.SeedSequence(entropy))

    @property
    def nets(self) -> nn.ModuleList:
        """The pool's networks, oldest first."""
        return self.pool.nets

    @property
    def images(self) -> Tensor:
        """The synthetic images in pixels, ``synthetic * std + mean`` (differentiable)."""
        return self.synthetic * self.pixel_std + self.pixel_mean

    @property
    def real(self) -> _RealData:
        """The real data, moved to the module's device on first use there."""
        if self._real.images.device != self.synthetic.device:
            self._real = self._real.to(self.synthetic.device)
        return self._real

    def _sample_class(
        self, c: int, n: int, generator: torch.Generator, real: _RealData | None = None
    ) -> Tensor:
        """Up to ``n`` distinct real images of class ``c`` (with repeats beyond the class size)."""
        real = self.real if real is None else real
        count, start = real.count[c], real.start[c]
        pick = torch.randperm(count, generator=generator)[:n]
        if n > count:
            extra = torch.randint(count, (n - count,), generator=generator)
            pick = torch.cat([pick, extra])
        return real.images[real.order[start + pick.to(real.order.device)]]

    def _build_net(self, index: int) -> nn.Module:
        channels, size = self._shape[0], self._shape[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 1_000_003 + index)
            net = self._net_factory(channels, self.num_classes, size)
        return net.requires_grad_(False)

    def distilled_dataset(self) -> tuple[Tensor, Tensor]:
        """The synthetic images ``(K * ipc, C, H, W)`` and their labels, detached copies."""
        return self.images.detach().clone(), self.labels.detach().clone()

    def train_dataloader(self) -> DataLoader:
        """Yields ``steps_per_epoch`` step indices; the real data is sampled inside the module."""
        return DataLoader(range(self.steps_per_epoch), batch_size=None)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        options = self.distillation_options
        return torch.optim.SGD([self.synthetic], lr=options.lr, momentum=options.momentum)

    # ---------------------------------------------------------------- training

    def class_loss(
        self,
        net: nn.Module,
        c: int,
        acc_net: float | Tensor,
        generator: torch.Generator | None = None,
        choices: np.random.Generator | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``(alpha * L_rob + L_perf, L_rob, L_perf)`` of class ``c`` under ``net``.

        ``acc_net`` weighs the performance term, a fraction in ``[0, 1]`` (a number or a 0-dim
        tensor). The real and synthetic batches share one augmentation draw; the real features
        are detached, so only the synthetic images receive gradients. ``generator`` draws the
        real batch, ``choices`` the host's choices (both keyed by the step by default).
        """
        options = self.distillation_options
        if generator is None:
            generator = self._generator(_REAL_STREAM, self.global_rank)
        if choices is None:
            choices = self._choices(_REAL_STREAM, self.global_rank)
        x_real = self._sample_class(c, options.real_batch, generator)
        y_real = torch.full((x_real.shape[0],), c, dtype=torch.long, device=x_real.device)
        # only this class's slice in pixels, not the whole set once per class
        x_syn = self.synthetic[c * self.ipc : (c + 1) * self.ipc] * self.pixel_std + self.pixel_mean
        y_syn = self.labels[c * self.ipc : (c + 1) * self.ipc]
        if self.augmentation is not None:
            family = self._families[choices.integers(len(self._families))]
            seed = int(choices.integers(_SEED_RANGE))
            x_real = self.augmentation(x_real, torch.Generator().manual_seed(seed), family=family)
            x_syn = self.augmentation(x_syn, torch.Generator().manual_seed(seed), family=family)
        if self.attack_options.robust:
            x_real = self._attack(net, x_real, y_real, choices)
        with torch.no_grad():
            target = net.features(x_real)
        l_rob = rome_alignment(net.features(x_syn), target, validate_args=self.validate_args)
        alpha = options.alpha
        weight = options.w_ce * (1 - alpha) * acc_net
        ce = F.cross_entropy(net(x_syn), y_syn)
        # a tensor weight in the loss's dtype: the product a Python number would give
        l_perf = (weight.to(ce.dtype) if isinstance(weight, Tensor) else weight) * ce
        return alpha * l_rob + l_perf, l_rob, l_perf

    def _attack(self, net: nn.Module, x: Tensor, y: Tensor, choices: np.random.Generator) -> Tensor:
        """``x`` under L-inf PGD on ``net`` with the labels of ``attack.target`` at this step,
        its random start drawn on ``x``'s device from a seed of ``choices``."""
        options = self.attack_options
        goal, targeted = training_attack_labels(
            y, self.num_classes, options.target, self._iteration, validate_args=self.validate_args
        )
        generator = torch.Generator(device=x.device).manual_seed(int(choices.integers(_SEED_RANGE)))
        return pgd(
            net,
            x,
            goal,
            options.eps,
            steps=options.steps,
            step_size=options.step_size,
            targeted=targeted,
            generator=generator,
            validate_args=self.validate_args,
        )

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        pool_options = self.pool_options
        if pool_options.acc_window and self._iteration % pool_options.acc_window == 0:
            self.pool.reset_accuracies()
        pool_rng = self._generator(_POOL_STREAM)
        real_rng = self._generator(_REAL_STREAM, self.global_rank)
        pool_choices = self._choices(_POOL_STREAM)
        real_choices = self._choices(_REAL_STREAM, self.global_rank)
        index = int(pool_choices.integers(len(self.nets)))
        net, acc_net = self.pool[index], self.pool.running_accuracy(index)
        total = self.synthetic.new_zeros(())
        l_rob, l_perf = [], []
        for c in range(self.num_classes):
            loss, rob, perf = self.class_loss(net, c, acc_net, real_rng, real_choices)
            total = total + loss
            l_rob.append(rob.detach())
            l_perf.append(perf.detach())
        optimizer.zero_grad()
        self.manual_backward(total)
        optimizer.step()
        with torch.no_grad():  # the pixels stay in [0, 1]
            low, high = -self.pixel_mean / self.pixel_std, (1 - self.pixel_mean) / self.pixel_std
            self.synthetic.copy_(torch.maximum(torch.minimum(self.synthetic, high), low))

        step = self._iteration + 1
        if pool_options.refresh_every and step % pool_options.refresh_every == 0:
            self._train_nets(pool_rng, pool_choices)
        self.iteration += 1
        self._iteration += 1
        if pool_options.add_every and step % pool_options.add_every == 0:
            self._add_net()
        self.log("rome/l_rob", torch.stack(l_rob).mean(), sync_dist=True)
        self.log("rome/l_perf", torch.stack(l_perf).mean(), sync_dist=True)
        self.log("rome/acc_net", torch.as_tensor(acc_net, dtype=torch.float32))
        self.log("rome/num_nets", float(len(self.nets)))

    def _train_nets(self, generator: torch.Generator, choices: np.random.Generator) -> None:
        count = min(self.pool_options.nets_per_refresh, len(self.nets))
        real_batch = self.distillation_options.real_batch
        chosen = choices.permutation(len(self.nets))[:count]
        real = self.real
        n_real = real.images.shape[0]
        for index in map(int, chosen):
            for _ in range(self.pool_options.train_steps):
                pick = torch.randperm(n_real, generator=generator)[:real_batch]
                pick = pick.to(real.images.device)
                x, y = real.images[pick], real.labels[pick]
                if self.attack_options.robust:
                    x = self._attack(self.pool[index], x, y, choices)
                self.pool.train_step(index, x, y)
            if self.trainer.world_size > 1:
                # CPU training is bitwise identical on every rank; a GPU's atomics may not be.
                self.pool.broadcast(index, self.trainer.strategy)

    def _add_net(self) -> None:
        self.pool.add(self._build_net(self._nets_built).to(self.synthetic.device))
        self.nets_built += 1
        self._nets_built += 1

    def on_train_end(self) -> None:
        """Log the distilled set as one image grid (a row per class) to W&B loggers."""
        loggers = [lg for lg in self.loggers if isinstance(lg, WandbLogger)]
        if loggers:
            grid = image_grid(self.images.detach().cpu(), self.ipc).permute(1, 2, 0)
            # 8-bit pixels: W&B reads float arrays as 0..255, which would show [0, 1] as black
            grid = (grid * 255).round().to(torch.uint8)
            picture = grid.squeeze(-1) if grid.shape[-1] == 1 else grid
            for logger in loggers:
                logger.log_image(key="rome/distilled", images=[picture.numpy()])

    # ---------------------------------------------------------------- evaluation

    def on_test_epoch_start(self) -> None:
        images, labels = self.distilled_dataset()
        with torch.inference_mode(False), torch.enable_grad():
            net = train_fresh_net(
                images.clone(),
                labels.clone(),
                epochs=self.evaluation_options.epochs,
                lr=self.evaluation_options.lr,
                seed=self.seed,
                net=self._eval_net_factory,
                num_classes=self.num_classes,
                augmentation=self.augmentation,
            )
        self._evaluation["net"] = net
        for _, scores in self._score_sets():
            scores.reset()

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        net = self._evaluation["net"]
        with torch.inference_mode(False), torch.enable_grad():
            # batches made under inference mode cannot enter autograd; copies made here can
            x, y = batch[0].clone(), batch[1].clone()
            generator = self._generator(_TEST_STREAM + batch_idx, self.global_rank, x.device)
            attacked = {
                shift: attacked_predictions(
                    net,
                    x,
                    y,
                    self.evaluation_options.attacks,
                    eps=self.attack_options.eps,
                    eps_l2=self.evaluation_options.eps_l2,
                    steps=self.attack_options.steps,
                    generator=generator,
                    target_shift=shift,
                    num_classes=self.num_classes,
                )
                for shift in (None, *self.eval_target_shifts)  # untargeted, then each shift
            }
            with torch.no_grad():
                clean = predicted_classes(net(x))
        for (_, scores), predictions in zip(self._score_sets(), attacked.values()):
            scores.update(clean, predictions, y)

    def _score_sets(self) -> list[tuple[str, ImprovedRobustnessRatio]]:
        """``(metric-name prefix, scores)``: the untargeted attacks, then each target shift."""
        return [("", self.test_scores)] + [
            (f"targeted{key}/", scores) for key, scores in self.targeted_scores.items()
        ]

    def on_test_epoch_end(self) -> None:
        clean, _ = self.test_scores.accuracies()
        self.log("test/clean", clean.float())
        for prefix, scores in self._score_sets():
            _, accs = scores.accuracies()
            for name, acc in zip(self.evaluation_options.attacks, accs):
                self.log(metric_key("test", f"{prefix}{name}"), acc.float())
            self.log(metric_key("test", f"{prefix}rr"), robustness_ratio(clean, accs).float())
            self.log(metric_key("test", f"{prefix}i_rr"), scores.compute().float())

    # ---------------------------------------------------------------- checkpoints

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The pool's optimizer states and running-accuracy counts (the weights are in the
        state dict)."""
        checkpoint[_POOL_KEY] = self.pool.checkpoint_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint["state_dict"]
        indices = {int(key.split(".")[2]) for key in state if key.startswith("pool.nets.")}
        size = max(indices) + 1 if indices else 0
        built = int(state.get("nets_built", torch.tensor(len(self.pool))))
        # the saved pool may have grown; rebuild it to the saved size before the weights load
        self.pool.replace(
            self._build_net(built - size + i).to(self.synthetic.device) for i in range(size)
        )
        if _POOL_KEY in checkpoint:
            self.pool.load_checkpoint_state(checkpoint[_POOL_KEY])


_INIT_STREAM, _POOL_STREAM, _REAL_STREAM, _TEST_STREAM = 0, 1, 2, 3
_HOST_TAG = 1  # a fifth entropy word: the host's draws never share a torch generator's seed
_SEED_RANGE = 2**62
_POOL_KEY = "rome_pool"


def _read_counters(module: ROMEDistillation, incompatible_keys: Any) -> None:
    """After a state dict is loaded: the host copies of ``iteration`` and ``nets_built``."""
    module._iteration, module._nets_built = int(module.iteration), int(module.nets_built)


def _channel_statistics(images: Tensor) -> tuple[Tensor, Tensor]:
    """Channel mean and standard deviation of ``(N, C, H, W)`` images; refuses a constant
    channel, whose normalisation would divide by zero."""
    mean = images.mean(dim=(0, 2, 3))
    std = images.std(dim=(0, 2, 3)) if images[:, 0].numel() > 1 else torch.zeros_like(mean)
    if (std <= 0).any():
        constant = torch.nonzero(std <= 0).flatten().tolist()
        raise ValueError(
            f"channels {constant} of `real_images` are constant; the synthetic images are "
            "normalised by the channel std, which must be positive."
        )
    return mean, std


@dataclass(frozen=True)
class _RealData:
    """Real images and labels, their indices sorted by class, and each class's slice of them."""

    images: Tensor
    labels: Tensor
    order: Tensor
    start: list[int]
    count: list[int]

    def to(self, device: torch.device) -> _RealData:
        return _RealData(
            self.images.to(device),
            self.labels.to(device),
            self.order.to(device),
            self.start,
            self.count,
        )


def _require_options(value: Any, kind: type, name: str) -> Any:
    """``value`` if it is a ``kind``, else a TypeError that names the class to build."""
    if not isinstance(value, kind):
        raise TypeError(
            f"`{name}` must be a {kind.__name__}, e.g. {name}={kind.__name__}(...), "
            f"got {type(value).__name__}."
        )
    return value


def _require_factory(value: Any, name: str, default: NetFactory) -> NetFactory:
    """``value`` if it is a network factory, ``default`` if it is ``None``; refuses a built
    network, which would be called with the shape as its input."""
    if value is None:
        return default
    if isinstance(value, nn.Module) or not callable(value):
        raise TypeError(
            f"`{name}` must build a network, `{name}(in_channels, num_classes, image_size)`: "
            f"pass the class (SmallConvNet), functools.partial(SmallConvNet, width=16) or any "
            f"callable, not {type(value).__name__} (the pool builds a fresh network per member)."
        )
    return value
