"""``ROMEDistillation``: the LightningModule that learns the synthetic set (see ``functional``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import WandbLogger
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.validation import (
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
from lightning_info.methods.rome.augment import DSA, DSA_STRATEGY
from lightning_info.methods.rome.evaluation import (
    attacked_predictions,
    train_fresh_net,
)
from lightning_info.methods.rome.functional import (
    ATTACKS,
    check_attacks,
    check_real,
    image_grid,
    rome_alignment,
)
from lightning_info.methods.rome.network import NetFactory, SmallConvNet
from lightning_info.methods.rome.pool import NetworkPool
from lightning_info.methods.rome.robustness import (
    ImprovedRobustnessRatio,
    robustness_ratio,
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
    real data's channel statistics, so ``lr`` is in the reference's units (its images are
    mean/std normalised: a step of ``lr`` there moves the pixels by ``lr * std**2`` times the
    pixel gradient); :attr:`images` gives the pixels, kept in ``[0, 1]``. Each training step
    picks one network from the pool, adds up the loss of the module docstring over all classes
    and takes one SGD step (``lr``, ``momentum``); as each class owns its own slice of images,
    this equals one step per class. With ``dsa_strategy`` the real and synthetic batches of a
    class are augmented by the same random transform (:class:`~.augment.DSA`) before the real
    batch is attacked.

    The networks live in ``self.pool`` (a :class:`~.pool.NetworkPool`; ``self.nets`` lists
    them), each with its own persistent SGD optimizer (``net_lr``, ``net_momentum``,
    ``net_weight_decay``, as the reference's ``--net_decay``); weights, optimizer states and
    counts are checkpointed. Every
    ``net_refresh_every`` steps ``train_nets_per_refresh`` of them take ``net_train_steps``
    steps on real batches of all classes, attacked as the alignment attacks them
    (``attack_target``) when ``robust`` and clean otherwise, with the true labels as targets
    of the cross-entropy. ``acc_net`` of the performance term is the network's running accuracy
    on its own (adversarial) training batches since the last multiple of ``acc_window`` steps,
    and 0 for a network with no such batch, as in the reference. Every ``add_net_every``
    steps a new network joins the pool; past ``max_nets`` the oldest leaves.

    Randomness is a pure function of ``(seed, step)``: the pool (which network, its training
    batches) draws from a stream shared by all processes, the real batches of the distillation
    term from a stream that also depends on the global rank. Under DDP every rank thus aligns
    its own real batches, the image gradients are averaged, and the pool stays identical (rank
    0's trained weights are broadcast as well); a resumed run continues exactly.

    Testing (``trainer.test``) trains a fresh :class:`SmallConvNet` on the distilled set
    (``eval_epochs``, ``eval_lr``, seeded by ``seed``) and logs its accuracy on the test batches,
    clean and under each of ``eval_attacks``, with RR and I-RR (see :func:`evaluate_distilled`)
    as ``test/clean``, ``test/<attack>``, ``test/rr`` and ``test/i_rr``.

    Args:
        real_images: ``(N, C, H, W)`` real images with pixels in ``[0, 1]``.
        real_labels: ``(N,)`` integer labels in ``[0, num_classes)``, every class present.
        num_classes: ``K``; ``None`` takes ``max(real_labels) + 1``.
        images_per_class: synthetic images per class, drawn from the reals of that class.
        alpha: weight of the alignment term; ``1 - alpha`` scales the performance term.
        w_ce: weight of the performance term (``acc_net`` is a fraction; the reference's
            ``ce_weight`` multiplies a percentage, see the method card for the conversion).
        robust: attack the real batch (ROME) or match clean features (distribution matching).
        attack_target: the attack of the alignment and of the pool's training: ``"next"``
            (the reference's targeted PGD towards ``(c + 1) mod K``), ``"rotating"`` (towards
            ``c + s`` with ``s = 1 + step mod (K - 1)``) or ``"untargeted"``.
        eps, attack_steps, attack_step_size: L-inf PGD in pixel units; a step size of
            ``None`` means ``2.5 * eps / attack_steps``. ``eps`` is also the L-inf test radius.
        real_batch: real images per class and step (and per network-training step).
        lr, momentum: SGD on the normalised synthetic images (the reference's units).
        dsa_strategy: differentiable siamese augmentation families (``None`` or ``""``: none),
            also applied to each batch when the evaluation network trains.
        num_nets, max_nets, add_net_every: initial and largest pool size, growth period
            (``0``: the pool never grows).
        net_refresh_every, train_nets_per_refresh, net_train_steps, net_lr, net_momentum,
            net_weight_decay: adversarial training of the pool (``net_refresh_every=0``: the
            networks are never trained).
        acc_window: ``acc_net`` counts the training batches since the last multiple of this
            many steps (the reference's evaluation interval); ``0`` never resets the count.
        width: width of each :class:`SmallConvNet`.
        net_factory: ``net_factory(in_channels, num_classes, image_size)`` builds a pool network
            exposing ``features`` and ``forward``; ``None`` builds a :class:`SmallConvNet`. It is
            not saved in the hyperparameters: pass it again when loading a checkpoint.
        steps_per_epoch: length of the module's own step-counting dataloader.
        eval_epochs, eval_lr, eval_attacks, eval_eps_l2: the test-time evaluation.
        eval_target_shifts: each shift repeats the test attacks targeted at ``(y + shift) mod
            K`` (BEARD's protocol is ``1``), logged as ``test/targeted+1/pgd``, ...,
            ``test/targeted+1/i_rr`` (see :func:`evaluate_distilled`).
        seed: seeds the initial images, the network initialisations and all sampling.
    """

    def __init__(
        self,
        real_images: Tensor,
        real_labels: Tensor,
        *,
        num_classes: int | None = None,
        images_per_class: int = 10,
        alpha: float = 0.2,
        w_ce: float = 0.5,
        robust: bool = True,
        attack_target: str = "next",
        eps: float = 8 / 255,
        attack_steps: int = 10,
        attack_step_size: float | None = None,
        real_batch: int = 256,
        lr: float = 0.2,
        momentum: float = 0.5,
        dsa_strategy: str | None = DSA_STRATEGY,
        num_nets: int = 3,
        max_nets: int = 100,
        add_net_every: int = 30,
        net_refresh_every: int = 1,
        train_nets_per_refresh: int = 2,
        net_train_steps: int = 10,
        net_lr: float = 0.01,
        net_momentum: float = 0.9,
        net_weight_decay: float = 5e-4,
        acc_window: int = 100,
        width: int = 32,
        net_factory: NetFactory | None = None,
        steps_per_epoch: int = 100,
        eval_epochs: int = 300,
        eval_lr: float = 0.01,
        eval_attacks: Sequence[str] = ATTACKS,
        eval_eps_l2: float = 0.5,
        eval_target_shifts: Sequence[int] = (),
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["real_images", "real_labels", "net_factory"])
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
        self.alpha = require_in_range(alpha, "alpha", 0.0, None)
        if self.alpha > 1:
            raise ValueError(f"`alpha` must lie in [0, 1], got {alpha!r}.")
        self.w_ce = require_non_negative(w_ce, "w_ce")
        self.robust = bool(robust)
        if attack_target not in TARGET_MAPS:
            raise ValueError(f"`attack_target` must be one of {TARGET_MAPS}, got {attack_target!r}")
        self.attack_target = attack_target
        self.eps = require_non_negative(eps, "eps")
        self.attack_steps = require_int(attack_steps, "attack_steps", 1)
        self.attack_step_size = (
            None if attack_step_size is None else require_positive(attack_step_size, "step")
        )
        self.real_batch = require_int(real_batch, "real_batch", 1)
        self.lr = require_positive(lr, "lr")
        self.momentum = require_fraction(momentum, "momentum")
        self.max_nets = require_int(max_nets, "max_nets", 1)
        num_nets = require_int(num_nets, "num_nets", 1)
        if num_nets > self.max_nets:
            raise ValueError(f"`num_nets` ({num_nets}) must not exceed `max_nets`.")
        self.add_net_every = require_int(add_net_every, "add_net_every", 0)
        self.net_refresh_every = require_int(net_refresh_every, "net_refresh_every", 0)
        self.train_nets_per_refresh = require_int(train_nets_per_refresh, "nets per refresh", 1)
        self.net_train_steps = require_int(net_train_steps, "net_train_steps", 1)
        self.net_lr = require_positive(net_lr, "net_lr")
        self.net_momentum = require_fraction(net_momentum, "net_momentum")
        self.net_weight_decay = require_non_negative(net_weight_decay, "net_weight_decay")
        self.acc_window = require_int(acc_window, "acc_window", 0)
        self.width = require_int(width, "width", 1)
        self.steps_per_epoch = require_int(steps_per_epoch, "steps_per_epoch", 1)
        self.eval_epochs = require_int(eval_epochs, "eval_epochs", 1)
        self.eval_lr = require_positive(eval_lr, "eval_lr")
        self.eval_attacks = check_attacks(eval_attacks)
        self.eval_eps_l2 = require_non_negative(eval_eps_l2, "eval_eps_l2")
        self.seed = require_int(seed, "seed", 0)
        self._net_factory = net_factory
        self._shape = tuple(images.shape[1:])

        order = torch.argsort(labels, stable=True)
        starts = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        # plain tensors, not buffers: DDP would broadcast every buffer at every step
        self._real = _RealData(images, labels, order, starts.tolist(), counts.tolist())
        self.register_buffer("iteration", torch.zeros((), dtype=torch.long))
        self.register_buffer("nets_built", torch.tensor(num_nets, dtype=torch.long))

        mean, std = _channel_statistics(images)
        self.register_buffer("pixel_mean", mean.view(1, -1, 1, 1))
        self.register_buffer("pixel_std", std.view(1, -1, 1, 1))
        self.augmentation = (
            DSA(dsa_strategy, tuple(mean.tolist()), tuple(std.tolist())) if dsa_strategy else None
        )
        init_rng = self._generator(_INIT_STREAM)
        init = torch.cat([self._sample_class(c, self.ipc, init_rng, self._real) for c in range(k)])
        self.synthetic = nn.Parameter((init - self.pixel_mean) / self.pixel_std)
        self.register_buffer("labels", torch.arange(k).repeat_interleave(self.ipc))
        self.pool = NetworkPool(
            self.max_nets, self.net_lr, self.net_momentum, self.net_weight_decay
        )
        for index in range(num_nets):
            self.pool.add(self._build_net(index))
        self.test_scores = ImprovedRobustnessRatio(self.eval_attacks)
        self.eval_target_shifts = [check_target_shift(shift, k) for shift in eval_target_shifts]
        self.targeted_scores = nn.ModuleDict(
            {f"{shift:+d}": ImprovedRobustnessRatio(self.eval_attacks)
             for shift in self.eval_target_shifts}
        )  # fmt: skip
        self._evaluation: dict[str, nn.Module] = {}

    # ---------------------------------------------------------------- data and networks

    def _generator(self, stream: int, rank: int = 0, device: torch.device | None = None):
        """A generator seeded by ``(seed, stream, step, rank)``: no RNG state to checkpoint."""
        entropy = [self.seed, stream, int(self.iteration), rank]
        seed = int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> 1)
        return torch.Generator(device=device or "cpu").manual_seed(seed)

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
            if self._net_factory is None:
                net = SmallConvNet(channels, self.num_classes, size, self.width)
            else:
                net = self._net_factory(channels, self.num_classes, size)
        return net.requires_grad_(False)

    def distilled_dataset(self) -> tuple[Tensor, Tensor]:
        """The synthetic images ``(K * ipc, C, H, W)`` and their labels, detached copies."""
        return self.images.detach().clone(), self.labels.detach().clone()

    def train_dataloader(self) -> DataLoader:
        """Yields ``steps_per_epoch`` step indices; the real data is sampled inside the module."""
        return DataLoader(range(self.steps_per_epoch), batch_size=None)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD([self.synthetic], lr=self.lr, momentum=self.momentum)

    # ---------------------------------------------------------------- training

    def class_loss(
        self, net: nn.Module, c: int, acc_net: float, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``(alpha * L_rob + L_perf, L_rob, L_perf)`` of class ``c`` under ``net``.

        ``acc_net`` weighs the performance term, a fraction in ``[0, 1]``. The real and
        synthetic batches share one augmentation draw; the real features are detached, so only
        the synthetic images receive gradients.
        """
        generator = generator or self._generator(_REAL_STREAM, self.global_rank)
        x_real = self._sample_class(c, self.real_batch, generator)
        y_real = torch.full((x_real.shape[0],), c, dtype=torch.long, device=x_real.device)
        # only this class's slice in pixels, not the whole set once per class
        x_syn = self.synthetic[c * self.ipc : (c + 1) * self.ipc] * self.pixel_std + self.pixel_mean
        y_syn = self.labels[c * self.ipc : (c + 1) * self.ipc]
        if self.augmentation is not None:
            seed = int(torch.randint(2**62, (1,), generator=generator))
            x_real = self.augmentation(x_real, torch.Generator().manual_seed(seed))
            x_syn = self.augmentation(x_syn, torch.Generator().manual_seed(seed))
        if self.robust:
            x_real = self._attack(net, x_real, y_real, generator)
        with torch.no_grad():
            target = net.features(x_real)
        l_rob = rome_alignment(net.features(x_syn), target)
        l_perf = self.w_ce * (1 - self.alpha) * acc_net * F.cross_entropy(net(x_syn), y_syn)
        return self.alpha * l_rob + l_perf, l_rob, l_perf

    def _attack(self, net: nn.Module, x: Tensor, y: Tensor, generator: torch.Generator) -> Tensor:
        """``x`` under L-inf PGD on ``net`` with the labels of ``attack_target`` at this step."""
        goal, targeted = training_attack_labels(
            y, self.num_classes, self.attack_target, int(self.iteration)
        )
        return pgd(
            net,
            x,
            goal,
            self.eps,
            steps=self.attack_steps,
            step_size=self.attack_step_size,
            targeted=targeted,
            generator=self._device_generator(generator, x),
        )

    @staticmethod
    def _device_generator(generator: torch.Generator, x: Tensor) -> torch.Generator:
        """``generator`` if it lives on ``x``'s device, else one on that device seeded from it."""
        if x.device.type == generator.device.type:
            return generator
        seed = int(torch.randint(2**62, (1,), generator=generator))
        return torch.Generator(device=x.device).manual_seed(seed)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        if self.acc_window and int(self.iteration) % self.acc_window == 0:
            self.pool.reset_accuracies()
        pool_rng = self._generator(_POOL_STREAM)
        real_rng = self._generator(_REAL_STREAM, self.global_rank)
        index = int(torch.randint(len(self.nets), (1,), generator=pool_rng))
        net, acc_net = self.pool[index], self.pool.running_accuracy(index)
        total = self.synthetic.new_zeros(())
        l_rob, l_perf = [], []
        for c in range(self.num_classes):
            loss, rob, perf = self.class_loss(net, c, acc_net, real_rng)
            total = total + loss
            l_rob.append(rob.detach())
            l_perf.append(perf.detach())
        optimizer.zero_grad()
        self.manual_backward(total)
        optimizer.step()
        with torch.no_grad():  # the pixels stay in [0, 1]
            low, high = -self.pixel_mean / self.pixel_std, (1 - self.pixel_mean) / self.pixel_std
            self.synthetic.copy_(torch.maximum(torch.minimum(self.synthetic, high), low))

        step = int(self.iteration) + 1
        if self.net_refresh_every and step % self.net_refresh_every == 0:
            self._train_nets(pool_rng)
        self.iteration += 1
        if self.add_net_every and step % self.add_net_every == 0:
            self._add_net()
        self.log("rome/l_rob", torch.stack(l_rob).mean(), sync_dist=True)
        self.log("rome/l_perf", torch.stack(l_perf).mean(), sync_dist=True)
        self.log("rome/acc_net", float(acc_net))
        self.log("rome/num_nets", float(len(self.nets)))

    def _train_nets(self, generator: torch.Generator) -> None:
        count = min(self.train_nets_per_refresh, len(self.nets))
        chosen = torch.randperm(len(self.nets), generator=generator)[:count].tolist()
        real = self.real
        n_real = real.images.shape[0]
        for index in chosen:
            for _ in range(self.net_train_steps):
                pick = torch.randperm(n_real, generator=generator)[: self.real_batch]
                pick = pick.to(real.images.device)
                x, y = real.images[pick], real.labels[pick]
                if self.robust:
                    x = self._attack(self.pool[index], x, y, generator)
                self.pool.train_step(index, x, y)
            if self.trainer.world_size > 1:
                # CPU training is bitwise identical on every rank; a GPU's atomics may not be.
                self.pool.broadcast(index, self.trainer.strategy)

    def _add_net(self) -> None:
        self.pool.add(self._build_net(int(self.nets_built)).to(self.synthetic.device))
        self.nets_built += 1

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
                epochs=self.eval_epochs,
                lr=self.eval_lr,
                seed=self.seed,
                width=self.width,
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
                    self.eval_attacks,
                    eps=self.eps,
                    eps_l2=self.eval_eps_l2,
                    steps=self.attack_steps,
                    generator=generator,
                    target_shift=shift,
                    num_classes=self.num_classes,
                )
                for shift in (None, *self.eval_target_shifts)  # untargeted, then each shift
            }
            with torch.no_grad():
                clean = net(x).argmax(1)
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
            for name, acc in zip(self.eval_attacks, accs):
                self.log(f"test/{prefix}{name}", acc.float())
            self.log(f"test/{prefix}rr", robustness_ratio(clean, accs).float())
            self.log(f"test/{prefix}i_rr", scores.compute().float())

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
_POOL_KEY = "rome_pool"


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
