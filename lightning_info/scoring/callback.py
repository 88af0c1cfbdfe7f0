"""``PosthocScoring``: after fitting, score the trained classifier without changing it.

At the end of ``trainer.fit`` (or when :meth:`PosthocScoring.run` is called) the callback reads the
classifier's penultimate features and logits through a forward hook on its final linear layer
(``head``), on the data module's ``fit_on`` split (to fit the scorers) and ``evaluate_on`` split
(to evaluate them), and builds two tables:

- failure prediction: each confidence scorer (MSP, temperature-scaled MSP, PMI, PVI, PSI by
  default) fitted on ``fit_on`` and evaluated on ``evaluate_on``: AUROC, AUPR of successes and of
  errors, AURC, E-AURC, FPR at 95% TPR, ECE, NLL and Brier of the scorer's class distribution;
- OOD detection, when the data module offers ``ood_dataloaders(split)`` (e.g.
  :class:`~lightning_info.data.digits.DigitsDataModule`): the energy score of shaped features for
  each
  shaper (``identity`` is the plain energy), the shaper's parameters tuned by random search on
  the ``"val"`` OOD sets against the ID ``fit_on`` split, then AUROC and FPR at 95% TPR of ID
  ``evaluate_on`` against each ``"test"`` OOD set.

Both tables are printed and logged (scalars to every logger, tables and a reliability diagram to
W&B), and written to ``output_dir`` when given. Every process computes the same numbers from the
full (unsharded) loaders; only global rank 0 prints, logs and writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_info.core.logging import log_wandb_tables, markdown_table
from lightning_info.core.plotting import pyplot
from lightning_info.core.validation import require_int
from lightning_info.scoring import metrics
from lightning_info.scoring.base import PosthocScorer
from lightning_info.scoring.pointwise import MSPScorer, PMIScorer, PSIScorer, PVIScorer
from lightning_info.scoring.shaping import FeatureShapingScorer, tune

_SPLITS = ("train", "val", "test")
FAILURE_COLUMNS = [
    "scorer",
    "AUROC",
    "AUPR-success",
    "AUPR-error",
    "AURC",
    "E-AURC",
    "FPR@95TPR",
    "ECE",
    "NLL",
    "Brier",
]


def default_scorers() -> list[PosthocScorer]:
    return [MSPScorer(), MSPScorer(temperature_scaled=True), PMIScorer(), PVIScorer(), PSIScorer()]


@torch.no_grad()
def collect_outputs(
    model: nn.Module, head: nn.Module, loader: DataLoader
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Penultimate features (the input of ``head``), logits (its output) and labels, on CPU.

    Batches are ``(x,)`` or ``(x, y, ...)``; the model runs in eval mode and is restored after.
    """
    captured: list[tuple[Tensor, Tensor]] = []
    hook = head.register_forward_hook(
        lambda module, args, output: captured.append((args[0].detach(), output.detach()))
    )
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    labels = []
    try:
        for batch in loader:
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            model(x.to(device))
            if isinstance(batch, (tuple, list)) and len(batch) > 1:
                labels.append(batch[1])
    finally:
        hook.remove()
        model.train(was_training)
    if not captured:
        raise ValueError("the loader yielded no batches: nothing to score.")
    features = torch.cat([f.flatten(1) for f, _ in captured]).cpu()
    logits = torch.cat([lg for _, lg in captured]).cpu()
    return features, logits, torch.cat(labels).cpu() if labels else None


def failure_row(scorer: PosthocScorer, features: Tensor, logits: Tensor, labels: Tensor) -> list:
    """The failure-prediction metrics of a fitted scorer on labelled outputs.

    A ranking metric that is undefined on these labels (every prediction right, or every one
    wrong) is reported as NaN with a warning.
    """
    confidence = scorer.score(features, logits)
    correct = logits.argmax(1) == labels
    probabilities = scorer.class_probabilities(features, logits)
    computations = [
        lambda: metrics.failure_auroc(confidence, correct),
        lambda: metrics.aupr_success(confidence, correct),
        lambda: metrics.aupr_error(confidence, correct),
        lambda: metrics.aurc(confidence, correct),
        lambda: metrics.e_aurc(confidence, correct),
        lambda: metrics.failure_fpr_at_95_tpr(confidence, correct),
        lambda: metrics.expected_calibration_error(confidence, correct),
        lambda: metrics.negative_log_likelihood(probabilities, labels, eps=1e-12),
        lambda: metrics.brier_score(probabilities, labels),
    ]
    return [
        scorer.name,
        *(f"{_value_or_nan(compute, scorer.name):.4f}" for compute in computations),
    ]


def _value_or_nan(compute, scorer_name: str) -> float:
    try:
        return float(compute())
    except metrics.UndefinedMetricError as err:
        rank_zero_warn(f"PosthocScoring ({scorer_name}): {err} Reported as NaN.")
        return float("nan")


class PosthocScoring(pl.Callback):
    """Fit post-hoc scorers on a trained classifier and report failure prediction and OOD tables.

    Args:
        scorers: confidence scorers (default :func:`default_scorers`); each needs a
            ``class_probabilities(features, logits)`` method for NLL and Brier.
        shapers: presets of :class:`FeatureShapingScorer` for the OOD table; empty: no OOD table.
        head: name of the classifier's final ``nn.Linear`` submodule; ``None``: the last
            ``nn.Linear`` registered in the model.
        fit_on, evaluate_on: data-module splits (``"train"``, ``"val"``, ``"test"``).
        tune_trials, seed: random search of the shapers' parameters.
        bins: bins of ECE and of the reliability diagram.
        output_dir: folder for ``posthoc_failure.md``, ``posthoc_ood.md`` and
            ``posthoc_reliability.png``; ``None`` writes nothing.
    """

    def __init__(
        self,
        scorers: Sequence[PosthocScorer] | None = None,
        shapers: Sequence[str] = ("identity", "react", "vra", "plf"),
        head: str | None = None,
        fit_on: str = "val",
        evaluate_on: str = "test",
        tune_trials: int = 100,
        seed: int = 0,
        bins: int = 10,
        output_dir: str | None = None,
    ) -> None:
        for name, split in (("fit_on", fit_on), ("evaluate_on", evaluate_on)):
            if split not in _SPLITS:
                raise ValueError(f"`{name}` must be one of {_SPLITS}, got {split!r}.")
        self.scorers = list(default_scorers() if scorers is None else scorers)
        missing = [type(s).__name__ for s in self.scorers if not hasattr(s, "class_probabilities")]
        if missing:
            raise TypeError(f"scorers {missing} have no `class_probabilities(features, logits)`.")
        self.shapers = list(shapers)
        self.head = head
        self.fit_on, self.evaluate_on = fit_on, evaluate_on
        self.tune_trials = require_int(tune_trials, "tune_trials", 1)
        self.seed = require_int(seed, "seed", 0)
        self.bins = require_int(bins, "bins", 1)
        self.output_dir = output_dir
        self.tables: dict[str, tuple[list[str], list[list]]] = {}

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        # everything the end-of-fit report needs is checked here, before any training
        self._head(pl_module)
        data = trainer.datamodule
        if data is None:
            raise ValueError("PosthocScoring reads its splits from a LightningDataModule.")
        for split in dict.fromkeys((self.fit_on, self.evaluate_on)):
            _require_labelled(self._loader(data, split), split)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run(trainer, pl_module)

    @staticmethod
    def _loader(data: pl.LightningDataModule, split: str) -> DataLoader:
        """The data module's loader of ``split``; the test split is set up first, as
        ``trainer.test`` would (``fit`` sets up only the train and validation splits)."""
        if split == "test":
            data.setup("test")
        try:
            return getattr(data, f"{split}_dataloader")()
        except (MisconfigurationException, NotImplementedError) as err:
            raise ValueError(
                f"PosthocScoring reads the {split!r} split, but {type(data).__name__} has no "
                f"`{split}_dataloader`; implement it or choose other `fit_on` / `evaluate_on`."
            ) from err

    def _head(self, pl_module: pl.LightningModule) -> nn.Linear:
        if self.head is None:
            linears = [m for m in pl_module.modules() if isinstance(m, nn.Linear)]
            if not linears:
                raise ValueError("the model has no nn.Linear layer; pass `head=` its final layer.")
            return linears[-1]
        try:
            head = pl_module.get_submodule(self.head)
        except AttributeError as err:
            raise ValueError(
                f"the model has no submodule {self.head!r}; pass `head=` the name of its final "
                "nn.Linear layer."
            ) from err
        if not isinstance(head, nn.Linear):
            raise TypeError(f"`{self.head}` must be an nn.Linear, got {type(head).__name__}.")
        return head

    def run(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        """Fit and evaluate every scorer now; returns the tables ``{name: (columns, rows)}``."""
        data = trainer.datamodule
        head = self._head(pl_module)
        loaders = {split: self._loader(data, split) for split in (self.fit_on, self.evaluate_on)}
        fit = collect_outputs(pl_module, head, loaders[self.fit_on])
        test = collect_outputs(pl_module, head, loaders[self.evaluate_on])
        if fit[2] is None or test[2] is None:
            raise ValueError("the fit_on and evaluate_on loaders must yield labels (x, y).")
        with torch.inference_mode(False), torch.enable_grad():
            failure = [failure_row(s.fit(*fit), *test) for s in self.scorers]
        self.tables = {"failure": (FAILURE_COLUMNS, failure)}
        if self.shapers and hasattr(data, "ood_dataloaders"):
            self.tables["ood"] = self._ood_table(data, pl_module, head, fit[0], test[0])
        if trainer.is_global_zero:
            self._report(trainer, test)
        return self.tables

    def _ood_table(self, data, pl_module, head, id_fit: Tensor, id_test: Tensor):
        def features(split: str) -> dict[str, Tensor]:
            loaders = data.ood_dataloaders(split)
            return {name: collect_outputs(pl_module, head, lo)[0] for name, lo in loaders.items()}

        ood_val, ood_test = features("val"), features("test")
        held_out = torch.cat(list(ood_val.values()))
        columns = ["shaper"] + [f"{n} {m}" for n in ood_test for m in ("AUROC", "FPR@95")]
        rows = []
        for shaper in self.shapers:
            if shaper == "identity":
                scorer = FeatureShapingScorer(head, "identity").fit_features(id_fit)
            else:
                scorer = tune(
                    shaper,
                    id_fit,
                    held_out,
                    layer=head,
                    n_trials=self.tune_trials,
                    seed=self.seed,
                ).scorer
            id_scores = scorer.score_features(id_test)
            row = ["energy" if shaper == "identity" else shaper]
            for ood in ood_test.values():
                out_scores = scorer.score_features(ood)
                row += [
                    f"{float(metrics.ood_auroc(id_scores, out_scores)):.4f}",
                    f"{float(metrics.fpr_at_95_tpr(id_scores, out_scores)):.4f}",
                ]
            rows.append(row)
        return columns, rows

    def _report(self, trainer: pl.Trainer, test: tuple[Tensor, Tensor, Tensor]) -> None:
        text = "\n\n".join(
            f"{title}\n\n{markdown_table(*table)}" for title, table in self._titled().items()
        )
        print(f"\n{text}\n", flush=True)
        scalars = {}
        for kind, (columns, rows) in self.tables.items():
            for row in rows:
                for column, value in zip(columns[1:], row[1:]):
                    scalars[f"posthoc/{kind}/{row[0]}/{column}"] = float(value)
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=trainer.global_step)
        figure_path = None
        if self.output_dir is not None:
            out = Path(self.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "posthoc_scoring.md").write_text(text + "\n")
            figure_path = str(out / "posthoc_reliability.png")
        wandb_loggers = [lg for lg in trainer.loggers if isinstance(lg, WandbLogger)]
        if figure_path is not None or wandb_loggers:
            figure = reliability_diagram(self.scorers, *test, self.bins)
            if figure_path is not None:
                figure.savefig(figure_path, dpi=120)
            for logger in wandb_loggers:
                logger.log_image(key="posthoc/reliability", images=[figure])
        log_wandb_tables(trainer.loggers, {f"posthoc/{k}": t for k, t in self.tables.items()})

    def _titled(self) -> dict[str, tuple[list[str], list[list]]]:
        titles = {
            "failure": f"failure prediction on {self.evaluate_on} (scorers fit on {self.fit_on})",
            "ood": f"OOD detection: ID {self.evaluate_on} vs each OOD test set (energy score)",
        }
        return {titles[kind]: table for kind, table in self.tables.items()}


def _require_labelled(loader: DataLoader, split: str) -> None:
    """Raise unless the first batch of ``loader`` is ``(x, y, ...)`` with integer labels ``y``."""
    batch = next(iter(loader), None)
    if batch is None:
        raise ValueError(f"PosthocScoring: the {split!r} loader yields no batches.")
    if not (isinstance(batch, (tuple, list)) and len(batch) > 1):
        raise ValueError(
            f"PosthocScoring needs labelled batches (x, y) from the {split!r} split, but its "
            f"loader yields {type(batch).__name__} batches without labels; return (x, y) from the "
            "data set, or drop the callback for unlabelled data."
        )
    labels = batch[1]
    if not (isinstance(labels, Tensor) and not labels.is_floating_point() and labels.ndim == 1):
        shown = (
            f"{labels.dtype} {tuple(labels.shape)}" if isinstance(labels, Tensor) else type(labels)
        )
        raise ValueError(
            f"PosthocScoring needs integer class labels (N,) as the second item of each "
            f"{split!r} batch, got {shown}."
        )


def reliability_diagram(scorers, features: Tensor, logits: Tensor, labels: Tensor, bins: int):
    """Accuracy against mean confidence in ``bins`` equal-width bins, one line per scorer."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5, 5))
    axis.plot([0, 1], [0, 1], "k--", linewidth=0.8, label="calibrated")
    correct = (logits.argmax(1) == labels).float()
    edges = torch.linspace(0, 1, bins + 1)
    for scorer in scorers:
        confidence = scorer.score(features, logits)
        index = torch.bucketize(confidence, edges[1:-1], right=False)
        points = [
            (confidence[index == b].mean(), correct[index == b].mean())
            for b in range(bins)
            if (index == b).any()
        ]
        axis.plot(*zip(*points), marker="o", label=scorer.name)
    axis.set(xlabel="confidence", ylabel="accuracy", title="reliability", xlim=(0, 1), ylim=(0, 1))
    axis.legend(fontsize=7)
    figure.tight_layout()
    return figure
