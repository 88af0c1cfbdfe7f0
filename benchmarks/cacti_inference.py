"""CACTI inference and training cost: batched key-padded imputation against the reference's
one-row-at-a-time procedure, and an epoch of training against IterativeImputer's fit.

- ``inference``: a CACTI model (``--embed-dim`` 64, ``--encoder-depth`` 10, ``--decoder-depth``
  4: the paper's size; weights as initialised, which costs the same as trained ones) imputes
  ``--rows`` rows of ``--table`` (rows tiled from the bundled table, 30% MCAR missing), either in
  batches of ``--batch-size`` with key-padding masks (:meth:`CACTI.impute`) or one row per call,
  which is how the reference code must run (its batched path truncates every row of a batch to the
  batch's shortest). Before timing, the script asserts that the two give the same imputation
  (max abs difference <= 1e-5) on the first 256 rows. Rows per second are the median over
  ``--repeats`` runs; the ratio is batched over one-row.
- ``training``: seconds per epoch of CACTI (batch 128, through a Lightning ``Trainer``, MT-CM
  on) on the table's training split, the median epoch of ``--epochs``, against sklearn's
  ``IterativeImputer(max_iter=10)`` fit on the same rows (median of ``--repeats``).

Torch runs with ``--threads`` threads (default 1). ``--quick``: small sizes, one repeat. The
last line is the results as one JSON object; ``--json PATH`` also writes them to a file, with the
header (``benchmarks/harness.py``).

Usage::

    python benchmarks/cacti_inference.py [--quick] [--table breast_cancer] [--rows 4096]
        [--batch-size 256] [--epochs 5] [--repeats 3] [--threads 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import lightning.pytorch as pl
import numpy as np
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

from lightning_info.core.logging import markdown_table
from lightning_info.core.trainers import quiet_trainer
from lightning_info.methods.cacti import CACTI, CACTINetwork, TabularImputationDataModule


def parse(args=None) -> argparse.Namespace:
    parser = benchmark_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--table", default="breast_cancer")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--encoder-depth", type=int, default=10)
    parser.add_argument("--decoder-depth", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parsed = parser.parse_args(args)
    if parsed.quick:
        parsed.rows, parsed.repeats, parsed.epochs = 256, 1, 2
        parsed.embed_dim, parsed.encoder_depth, parsed.decoder_depth = 16, 2, 2
    return parsed


def tiled_rows(data: TabularImputationDataModule, rows: int, seed: int):
    """``rows`` scaled rows drawn from the table, 30% MCAR missing (at least one observed)."""
    rng = np.random.default_rng(seed)
    table = data.scaling.forward(data.table)[rng.integers(0, len(data.table), rows)]
    observed = rng.random(table.shape) > 0.3
    observed[np.arange(rows), rng.integers(0, table.shape[1], rows)] = True
    values = torch.as_tensor(np.where(observed, table, 0.0), dtype=torch.float32)
    return values, torch.as_tensor(observed)


def batched(model: CACTI, values, observed, batch_size: int):
    return torch.cat(
        [
            model.impute(values[i : i + batch_size], observed[i : i + batch_size])
            for i in range(0, len(values), batch_size)
        ]
    )


def one_row_at_a_time(model: CACTI, values, observed):
    return torch.cat(
        [model.impute(values[i : i + 1], observed[i : i + 1]) for i in range(len(values))]
    )


class EpochTimer(pl.Callback):
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.seconds.append(time.perf_counter() - self.start)


def main(args=None) -> dict:
    options = parse(args)
    if options.threads > 0:
        torch.set_num_threads(options.threads)
    head = header(options)
    warnings.filterwarnings("ignore")
    data = TabularImputationDataModule(
        options.table, mechanism="mcar", context="tfidf", data_seed=options.seed
    )
    torch.manual_seed(options.seed)
    network = CACTINetwork(
        data.num_columns,
        data.context_embeddings.shape[1],
        embed_dim=options.embed_dim,
        encoder_depth=options.encoder_depth,
        decoder_depth=options.decoder_depth,
    )
    model = CACTI(data.num_columns, data.context_embeddings, network=network).eval()
    values, observed = tiled_rows(data, options.rows, options.seed)
    check = slice(0, min(256, options.rows))
    difference = (
        (
            batched(model, values[check], observed[check], options.batch_size)
            - one_row_at_a_time(model, values[check], observed[check])
        )
        .abs()
        .max()
        .item()
    )
    assert difference <= 1e-5, f"batched and one-row imputations differ by {difference}"
    batch_seconds, _ = median_time(
        lambda: batched(model, values, observed, options.batch_size), options.repeats
    )
    row_seconds, _ = median_time(
        lambda: one_row_at_a_time(model, values, observed), options.repeats
    )

    timer = EpochTimer()
    pl.seed_everything(options.seed, verbose=False)
    trainer = quiet_trainer(
        max_epochs=options.epochs,
        callbacks=[timer],
        gradient_clip_val=5.0,
        limit_val_batches=0,
    )
    trainer.fit(model.train(), train_dataloaders=data.train_dataloader())
    epoch = statistics.median(timer.seconds[1:] or timer.seconds)
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer

    train, _, _ = data.arrays("train")
    iterative, _ = median_time(
        lambda: IterativeImputer(max_iter=10, random_state=0).fit(train), options.repeats
    )
    rows = [
        [
            "inference, batched (key-padding masks)",
            f"{options.rows / batch_seconds:,.0f} rows/s",
            format_ratio(row_seconds, batch_seconds),
        ],
        [
            "inference, one row per call (reference)",
            f"{options.rows / row_seconds:,.0f} rows/s",
            "1x",
        ],
        [
            f"training, one epoch ({len(data.splits['train'])} rows)",
            f"{epoch:.3f} s",
            format_ratio(epoch, iterative) + " of IterativeImputer's fit",
        ],
        ["IterativeImputer(max_iter=10).fit", f"{iterative:.3f} s", "1x"],
    ]
    print_header(head)
    print(
        f"CACTI D={options.embed_dim} encoder {options.encoder_depth} decoder "
        f"{options.decoder_depth}, {options.table} ({data.num_columns} columns), "
        f"{options.rows} rows, batch {options.batch_size}, {options.threads} thread(s); "
        f"batched vs one-row max |diff| {difference:.1e}"
    )
    print(markdown_table(["what", "speed", "ratio"], rows))
    result = {
        "rows_per_second": {
            "batched": options.rows / batch_seconds,
            "one_row": options.rows / row_seconds,
        },
        "epoch_seconds": epoch,
        "iterative_fit_seconds": iterative,
        "max_difference": difference,
        "options": vars(options),
    }
    result = document(head, result)
    if options.json:
        write_json(options.json, head, result)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
