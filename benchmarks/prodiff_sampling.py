"""ProDiff sampling cost and accuracy: DDIM over ``--ddim-steps`` (50) steps against DDPM over all
``T`` (500) steps of the schedule, on the same model.

- ``model``: one ProDiff (``lightning_info.methods.prodiff.module``) trained for ``--epochs``
  (60) on the synthetic city (``TrajectoryDataModule("synthetic", window_length=16,
  synthetic=SyntheticCity(num_trajectories=--num-trajectories, left_side_probability=1.0),
  batch_size=--train-batch-size)``: 2048 trajectories of one window each,
  every bend to the left, batches of 128, 80/10/10 split, as in the recipe) through a
  Lightning ``Trainer`` on the CPU (gradient clipping 1.0, no validation), seeded. The
  recipe's small CPU config (``SMALL``, the recipe's ``model`` settings, built by the study's
  ``build_prodiff``): encoder width 64, 2 layers of 4 heads, feed-forward 128, UNet 32
  channels x (1, 2), one residual block per level, no attention, ``lr=2e-3``,
  ``prediction="x0"``, ``clip_x0=(-0.2, 1.2)``; classifier-free guidance ``w = 2`` (two UNet
  calls per step). ``--paper-size``: the paper's default ``ProDiff(16)`` (embed 512, UNet 128 x
  (1, 2, 2, 2), attention at length 16; 21.1 M parameters against 0.42 M) as initialised,
  untrained -- its weights cost the same to sample, so only the speed is measured, not the
  accuracy.
- ``sanity`` (asserted before timing): both samplers return the given endpoints bit for bit
  (``torch.equal`` on ``[:, [0, -1]]``), and DDIM with ``eta = 0`` from the same generator seed
  twice gives identical samples.
- ``speed``: trajectories per second of ``ProDiff.impute`` on one batch of ``--batch-size``
  (256) scaled windows tiled from the test split, the model in ``.eval()``: DDIM
  (``--ddim-steps``, ``eta = 0``) and DDPM (all ``T`` steps); the median of ``--repeats`` (3)
  runs after one untimed warm-up (the sanity check), torch on ``--threads`` (1) threads. The ratio
  is DDIM's throughput over DDPM's.
- ``accuracy`` (trained model only): every window of the test split imputed once by DDIM
  (``eta = 0``), DDIM with ``eta = 1`` (DDPM's variance on DDIM's steps) and DDPM, each from a
  CPU generator seeded ``--seed``, unscaled to degrees (``model.unscale``) and scored against
  ``batch["raw"]`` by ``trajectory_metrics()``: ``mtd`` and ``maxtd`` (metres, interior points),
  ``tc@1km`` and ``tc_mean``; linear interpolation between the endpoints
  (``linear_interpolation(batch["raw"])``) is the reference row.

The header (``benchmarks/harness.py``) gives the date, the 1-minute load average at the start,
the CPU count, the thread count and python's, torch's and numpy's versions; the last lines the
whole run's seconds, then the results as one JSON line (``--json PATH`` also writes them to a
file). ``--quick``: 256 trajectories, 2 epochs, batch 16, a schedule of ``T = 50`` steps
(``num_steps=50``), DDIM over 10 of them, one repeat.

Usage::

    python benchmarks/prodiff_sampling.py [--quick] [--paper-size] [--epochs 60]
        [--num-trajectories 2048] [--train-batch-size 128] [--batch-size 256] [--ddim-steps 50]
        [--diffusion-steps 500] [--repeats 3] [--threads 1] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import lightning.pytorch as pl
import torch
from harness import (
    benchmark_parser,
    document,
    format_ratio,
    header,
    median_time,
    print_header,
    write_json,
)

from lab.prodiff.study import build_prodiff
from lightning_info.core.logging import markdown_table
from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.prodiff import (
    SyntheticCity,
    TrajectoryDataModule,
    linear_interpolation,
    trajectory_metrics,
)
from lightning_info.methods.prodiff.module import ProDiff

SMALL = {
    "denoiser": {
        "base_channels": 32,
        "multipliers": (1, 2),
        "res_blocks": 1,
        "attention_lengths": (),
    },
    "encoder": {"embed_dim": 64, "num_layers": 2, "num_heads": 4, "feedforward_dim": 128},
    "diffusion": {"prediction": "x0"},
    "sampling": {"clip_x0": (-0.2, 1.2)},
    "optimizer": {"lr": 2e-3},
}
"""The small CPU configuration the recipe trains (``--paper-size`` uses ``ProDiff(16)``)."""

WINDOW = 16
SCORES = ("mtd", "maxtd", "tc@1km", "tc_mean")


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--paper-size", action="store_true")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--num-trajectories", type=int, default=2048)
    parser.add_argument("--train-batch-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--ddim-steps", type=int, default=50)
    parser.add_argument("--diffusion-steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.num_trajectories, parsed.epochs, parsed.batch_size = 256, 2, 16
        parsed.diffusion_steps, parsed.ddim_steps, parsed.repeats = 50, 10, 1
    return parsed


def build(num_steps: int, sampling_steps: int, seed: int, paper_size: bool = False) -> ProDiff:
    """The benchmarked ProDiff: ``SMALL`` (or the paper's size) with a schedule of
    ``num_steps`` and DDIM over ``sampling_steps`` by default."""
    settings = {} if paper_size else SMALL
    steps = {
        "diffusion": {**settings.get("diffusion", {}), "num_steps": num_steps},
        "sampling": {**settings.get("sampling", {}), "steps": sampling_steps},
    }
    return build_prodiff(WINDOW, True, seed, {**settings, **steps})


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_split(data: TrajectoryDataModule) -> dict[str, torch.Tensor]:
    """The whole test split as one batch, through the data module's own loader."""
    batches = list(data.test_dataloader())
    return {key: torch.cat([batch[key] for batch in batches]) for key in batches[0]}


def sanity(model: ProDiff, window: torch.Tensor, options: argparse.Namespace) -> None:
    """Endpoints back bit for bit from both samplers; deterministic DDIM repeats itself."""
    ddim = [
        model.impute(
            window,
            sampler="ddim",
            sampling_steps=options.ddim_steps,
            eta=0.0,
            generator=generator(options.seed),
        )
        for _ in range(2)
    ]
    ddpm = model.impute(window, sampler="ddpm", generator=generator(options.seed))
    for name, sample in (("ddim", ddim[0]), ("ddpm", ddpm)):
        assert sample.shape == window.shape, f"{name} returned {tuple(sample.shape)}"
        assert torch.equal(sample[:, [0, -1]], window[:, [0, -1]]), (
            f"{name} did not return the given endpoints bit for bit"
        )
        assert torch.isfinite(sample).all(), f"{name} returned NaN or infinity"
    assert torch.equal(ddim[0], ddim[1]), "DDIM eta=0 from the same seed gave different samples"


def scores(pred: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    metrics = trajectory_metrics()
    metrics.update(pred, target)
    computed = metrics.compute()
    return {key: float(computed[key]) for key in SCORES}


def accuracy(model: ProDiff, test: dict[str, torch.Tensor], options) -> dict[str, dict]:
    """Scores of every sampler on the whole test split, and linear interpolation's."""
    raw, window = test["raw"], test["window"]
    runs = {
        "linear interpolation": (None, None, None),
        f"DDIM {options.ddim_steps} steps, eta 0": ("ddim", options.ddim_steps, 0.0),
        f"DDIM {options.ddim_steps} steps, eta 1": ("ddim", options.ddim_steps, 1.0),
        f"DDPM {model.schedule.num_steps} steps": ("ddpm", model.schedule.num_steps, None),
    }
    results = {}
    for name, (sampler, steps, eta) in runs.items():
        start = time.perf_counter()
        if sampler is None:
            pred = linear_interpolation(raw)
        else:
            sample = model.impute(
                window,
                sampler=sampler,
                sampling_steps=steps if sampler == "ddim" else None,
                eta=eta,
                generator=generator(options.seed),
            )
            pred = model.unscale(sample)
        seconds = time.perf_counter() - start
        results[name] = {"sampler": sampler, "steps": steps, "eta": eta, "seconds": seconds}
        results[name].update(scores(pred, raw))
    return results


def main(args=None) -> dict:
    options = parse(args)
    start = time.perf_counter()
    if options.threads > 0:
        torch.set_num_threads(options.threads)
    head = header(options)
    load = head["load_average"]
    pl.seed_everything(options.seed, verbose=False)
    data = TrajectoryDataModule(
        "synthetic",
        window_length=WINDOW,
        synthetic=SyntheticCity(
            num_trajectories=options.num_trajectories, left_side_probability=1.0
        ),
        batch_size=options.train_batch_size,
        data_seed=options.seed,
    )
    model = build(options.diffusion_steps, options.ddim_steps, options.seed, options.paper_size)
    train_loss = None
    train_seconds = 0.0
    if not options.paper_size:
        trainer = quiet_trainer(
            max_epochs=options.epochs,
            accelerator="cpu",
            gradient_clip_val=1.0,
            limit_val_batches=0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train_start = time.perf_counter()
            trainer.fit(model, datamodule=data)
            train_seconds = time.perf_counter() - train_start
        train_loss = float(trainer.callback_metrics["train/loss"])
    model.eval()
    total = model.schedule.num_steps
    calls = 2 if model.guidance.weight > 0 else 1

    test = test_split(data)
    tiled = test["window"][torch.arange(options.batch_size) % len(test["window"])]
    sanity(model, tiled, options)  # also the untimed warm-up of both samplers
    gen = generator(options.seed)

    def ddim():
        return model.impute(
            tiled, sampler="ddim", sampling_steps=options.ddim_steps, eta=0.0, generator=gen
        )

    def ddpm():
        return model.impute(tiled, sampler="ddpm", generator=gen)

    ddim_seconds, _ = median_time(ddim, options.repeats)
    ddpm_seconds, _ = median_time(ddpm, options.repeats)
    speed = {
        "ddim": {
            "steps": options.ddim_steps,
            "eta": 0.0,
            "seconds": ddim_seconds,
            "trajectories_per_second": options.batch_size / ddim_seconds,
        },
        "ddpm": {
            "steps": total,
            "eta": None,
            "seconds": ddpm_seconds,
            "trajectories_per_second": options.batch_size / ddpm_seconds,
        },
    }
    ratio = ddpm_seconds / ddim_seconds
    accuracies = None if options.paper_size else accuracy(model, test, options)

    size = "ProDiff(16), the paper's size" if options.paper_size else "small ProDiff"
    parameters = sum(p.numel() for p in model.parameters())
    trained = (
        "untrained"
        if options.paper_size
        else f"{options.epochs} epochs in {train_seconds:.0f} s, final train loss {train_loss:.4f}"
    )
    print_header(
        head,
        f"{size} ({parameters:,} parameters), {trained}",
        f"synthetic city, {len(data.splits['train'])} / {len(test['window'])} train / test "
        f"windows of {WINDOW}",
        f"T = {total}, guidance w = {model.guidance.weight:g} ({calls} UNet calls a step)",
        f"batch {options.batch_size}",
        f"{options.repeats} repeat(s), median",
        f"seed {options.seed}",
    )
    print("sanity: endpoints bit for bit (DDIM, DDPM), DDIM eta 0 repeats from its seed: ok\n")
    rows = [
        [
            f"DDIM, eta 0 ({options.ddim_steps} steps)",
            options.ddim_steps,
            options.ddim_steps * calls,
            f"{1000 * ddim_seconds:,.0f}",
            f"{options.batch_size / ddim_seconds:,.1f}",
            format_ratio(ratio),
        ],
        [
            f"DDPM ({total} steps)",
            total,
            total * calls,
            f"{1000 * ddpm_seconds:,.0f}",
            f"{options.batch_size / ddpm_seconds:,.1f}",
            "1x",
        ],
    ]
    columns = ["sampler", "steps", "UNet calls", "ms / batch", "trajectories/s", "vs DDPM"]
    print(markdown_table(columns, rows))
    if accuracies is not None:
        rows = [
            [
                name,
                "-" if run["steps"] is None else run["steps"],
                f"{run['mtd']:,.1f}",
                f"{run['maxtd']:,.1f}",
                f"{run['tc@1km']:.3f}",
                f"{run['tc_mean']:.3f}",
            ]
            for name, run in accuracies.items()
        ]
        print(f"\naccuracy on the {len(test['window'])} test windows (interior points):\n")
        print(markdown_table(["method", "steps", "mtd m", "maxtd m", "tc@1km", "tc_mean"], rows))
    elapsed = time.perf_counter() - start
    print(f"\nmeasured in {elapsed:.1f} s")
    result = {
        "header": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "load_average": load,
            "parameters": parameters,
            "train_windows": len(data.splits["train"]),
            "test_windows": len(test["window"]),
            "train_loss": train_loss,
            "train_seconds": train_seconds,
            "num_steps": total,
            "unet_calls_per_step": calls,
        },
        "speed": speed,
        "ddim_over_ddpm_throughput": ratio,
        "accuracy": accuracies,
        "seconds": elapsed,
        "options": vars(options),
    }
    result = document(head, result)
    if options.json:
        write_json(options.json, head, result)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
