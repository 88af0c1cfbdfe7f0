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
from lightning_info.methods.rome.attacks import check_target_shift, next_class_targets, pgd
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
from lightning_info.methods.rome.network import NetFactory, SmallConvNet, trainable
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
    images alone). Each training step picks one network from the pool, adds up the loss of the
    module docstring over all classes and takes one SGD step (``lr``, ``momentum``); as each
    class owns its own slice of images, this equals one step per class. The networks live in
    ``self.nets`` (an ``nn.ModuleList``, so checkpoints hold them); every ``net_refresh_every``
    steps ``train_nets_per_refresh`` of them take ``net_train_steps`` plain SGD steps
    (``net_lr``, no momentum, hence no optimizer state to save) on real batches of all classes,
    attacked with untargeted PGD when ``robust`` (clean otherwise). Every ``add_net_every``
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
        w_ce: weight of the performance term.
        robust: attack the real batch (ROME) or match clean features (distribution matching).
        eps, attack_steps, attack_step_size: targeted L-inf PGD in pixel units; a step size of
            ``None`` means ``2.5 * eps / attack_steps``. ``eps`` is also the L-inf test radius.
        real_batch: real images per class and step (and per network-training step).
        lr, momentum: SGD on the synthetic images.
        num_nets, max_nets, add_net_every: initial and largest pool size, growth period
            (``0``: the pool never grows).
        net_refresh_every, train_nets_per_refresh, net_train_steps, net_lr: adversarial training
            of the pool (``net_refresh_every=0``: the networks are never trained).
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
        eps: float = 8 / 255,
        attack_steps: int = 10,
        attack_step_size: float | None = None,
        real_batch: int = 256,
        lr: float = 0.2,
        momentum: float = 0.5,
        num_nets: int = 3,
        max_nets: int = 100,
        add_net_every: int = 30,
        net_refresh_every: int = 1,
        train_nets_per_refresh: int = 2,
        net_train_steps: int = 10,
        net_lr: float = 0.01,
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

        init_rng = self._generator(_INIT_STREAM)
        init = torch.cat([self._sample_class(c, self.ipc, init_rng, self._real) for c in range(k)])
        self.images = nn.Parameter(init.clone())
        self.register_buffer("labels", torch.arange(k).repeat_interleave(self.ipc))
        self.nets = nn.ModuleList(self._build_net(i) for i in range(num_nets))
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
    def real(self) -> _RealData:
        """The real data, moved to the module's device on first use there."""
        if self._real.images.device != self.images.device:
            self._real = self._real.to(self.images.device)
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
        return torch.optim.SGD([self.images], lr=self.lr, momentum=self.momentum)

    # ---------------------------------------------------------------- training

    def class_loss(
        self, net: nn.Module, c: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(alpha * L_rob + L_perf, L_rob, L_perf, acc_net)`` of class ``c`` under ``net``.

        ``acc_net`` is the clean accuracy of ``net`` on the real batch, a fraction in ``[0, 1]``;
        the real features are detached, so only the synthetic images receive gradients.
        """
        generator = generator or self._generator(_REAL_STREAM, self.global_rank)
        x_real = self._sample_class(c, self.real_batch, generator)
        y_real = torch.full((x_real.shape[0],), c, dtype=torch.long, device=x_real.device)
        with torch.no_grad():
            acc_net = (net(x_real).argmax(1) == y_real).float().mean()
        if self.robust:
            x_real = pgd(
                net,
                x_real,
                next_class_targets(y_real, self.num_classes),
                self.eps,
                steps=self.attack_steps,
                step_size=self.attack_step_size,
                targeted=True,
                generator=self._device_generator(generator, x_real),
            )
        with torch.no_grad():
            target = net.features(x_real)
        x_syn = self.images[c * self.ipc : (c + 1) * self.ipc]
        y_syn = self.labels[c * self.ipc : (c + 1) * self.ipc]
        l_rob = rome_alignment(net.features(x_syn), target.detach())
        l_perf = self.w_ce * (1 - self.alpha) * acc_net * F.cross_entropy(net(x_syn), y_syn)
        return self.alpha * l_rob + l_perf, l_rob, l_perf, acc_net

    @staticmethod
    def _device_generator(generator: torch.Generator, x: Tensor) -> torch.Generator:
        """``generator`` if it lives on ``x``'s device, else one on that device seeded from it."""
        if x.device.type == generator.device.type:
            return generator
        seed = int(torch.randint(2**62, (1,), generator=generator))
        return torch.Generator(device=x.device).manual_seed(seed)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        pool_rng = self._generator(_POOL_STREAM)
        real_rng = self._generator(_REAL_STREAM, self.global_rank)
        net = self.nets[int(torch.randint(len(self.nets), (1,), generator=pool_rng))]
        total = self.images.new_zeros(())
        l_rob, l_perf, acc = [], [], []
        for c in range(self.num_classes):
            loss, rob, perf, accuracy = self.class_loss(net, c, real_rng)
            total = total + loss
            l_rob.append(rob.detach())
            l_perf.append(perf.detach())
            acc.append(accuracy)
        optimizer.zero_grad()
        self.manual_backward(total)
        optimizer.step()
        with torch.no_grad():
            self.images.clamp_(0.0, 1.0)

        step = int(self.iteration) + 1
        if self.net_refresh_every and step % self.net_refresh_every == 0:
            self._train_nets(pool_rng)
        self.iteration += 1
        if self.add_net_every and step % self.add_net_every == 0:
            self._add_net()
        self.log("rome/l_rob", torch.stack(l_rob).mean())
        self.log("rome/l_perf", torch.stack(l_perf).mean())
        self.log("rome/acc_net", torch.stack(acc).mean())
        self.log("rome/num_nets", float(len(self.nets)))

    def _train_nets(self, generator: torch.Generator) -> None:
        count = min(self.train_nets_per_refresh, len(self.nets))
        chosen = torch.randperm(len(self.nets), generator=generator)[:count].tolist()
        real = self.real
        n_real = real.images.shape[0]
        for index in chosen:
            net = self.nets[index]
            with trainable(net):
                optimizer = torch.optim.SGD(net.parameters(), lr=self.net_lr)
                for _ in range(self.net_train_steps):
                    pick = torch.randperm(n_real, generator=generator)[: self.real_batch]
                    pick = pick.to(real.images.device)
                    x, y = real.images[pick], real.labels[pick]
                    if self.robust:
                        x = pgd(
                            net,
                            x,
                            y,
                            self.eps,
                            steps=self.attack_steps,
                            step_size=self.attack_step_size,
                            generator=self._device_generator(generator, x),
                        )
                    optimizer.zero_grad()
                    F.cross_entropy(net(x), y).backward()
                    optimizer.step()
            if self.trainer.world_size > 1:
                # CPU training is bitwise identical on every rank; a GPU's atomics may not be.
                state = self.trainer.strategy.broadcast(net.state_dict(), src=0)
                net.load_state_dict(state)

    def _add_net(self) -> None:
        net = self._build_net(int(self.nets_built)).to(self.images.device)
        self.nets_built += 1
        self.nets.append(net)
        while len(self.nets) > self.max_nets:
            del self.nets[0]

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

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint["state_dict"]
        indices = {int(key.split(".")[1]) for key in state if key.startswith("nets.")}
        pool = max(indices) + 1 if indices else 0
        built = int(state.get("nets_built", torch.tensor(len(self.nets))))
        # the saved pool may have grown; rebuild it to the saved size before the weights load
        self.nets = nn.ModuleList(
            self._build_net(built - pool + i).to(self.images.device) for i in range(pool)
        )


_INIT_STREAM, _POOL_STREAM, _REAL_STREAM, _TEST_STREAM = 0, 1, 2, 3


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
