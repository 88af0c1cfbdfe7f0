"""``OODShapingReport``: after fitting, detect OOD inputs with shaped penultimate features.

For each shaper (``identity`` is the plain energy score) the shaper's parameters are tuned by
random search on the data module's ``ood_dataloaders("val")`` against the ID ``fit_on`` split,
then the energy score of the shaped features is evaluated: AUROC and FPR at 95% TPR of the ID
``evaluate_on`` split against each ``ood_dataloaders("test")`` set. The report mechanics are
:class:`~lightning_info.scoring.report.PosthocReport`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from torch import Tensor, nn

from lightning_info.core.logging import metric_key
from lightning_info.core.validation import require_int, require_string_sequence
from lightning_info.methods.ood_shaping.functional import SHAPERS
from lightning_info.methods.ood_shaping.metrics import fpr_at_95_tpr, ood_auroc
from lightning_info.methods.ood_shaping.scorers import FeatureShapingScorer, tune
from lightning_info.scoring.report import (
    Outputs,
    PosthocReport,
    Table,
    collect_outputs,
    first_batch,
)


class OODShapingReport(PosthocReport):
    """Tune feature shapers on held-out OOD sets and report OOD detection on the test OOD sets.

    The data module must offer ``ood_dataloaders(split)`` returning ``{name: DataLoader}`` for
    ``"val"`` and ``"test"`` (as :class:`~lightning_info.data.DigitsDataModule` does); this is
    checked in ``setup``.

    Args:
        shapers: presets of
            :class:`~lightning_info.methods.ood_shaping.scorers.FeatureShapingScorer`.
        head, fit_on, evaluate_on, output_dir: see
            :class:`~lightning_info.scoring.report.PosthocReport` (``ood_shaping.md``).
        tune_trials, seed: random search of the shapers' parameters.
    """

    kind = "ood_shaping"
    needs_labels = False

    def __init__(
        self,
        shapers: Sequence[str] = ("identity", "react", "vra", "plf"),
        head: str | None = None,
        fit_on: str = "val",
        evaluate_on: str = "test",
        tune_trials: int = 100,
        seed: int = 0,
        output_dir: str | None = None,
    ) -> None:
        super().__init__(head, fit_on, evaluate_on, output_dir)
        self.shapers = require_string_sequence(shapers, "shapers")
        unknown = [s for s in self.shapers if s not in SHAPERS]
        if not self.shapers or unknown:
            raise ValueError(
                f"`shapers` must be a non-empty list of {sorted(SHAPERS)}, got {shapers!r}."
            )
        self.tune_trials = require_int(tune_trials, "tune_trials", 1)
        self.seed = require_int(seed, "seed", 0)

    def check_run(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The data module offers a non-empty ``{name: DataLoader}`` of OOD sets for ``"val"``
        (tuning) and ``"test"`` (the table's columns), each yielding at least one batch."""
        data = trainer.datamodule
        if not callable(getattr(data, "ood_dataloaders", None)):
            raise ValueError(
                f"OODShapingReport needs `ood_dataloaders(split)` on the data module; "
                f"{type(data).__name__} has none (DigitsDataModule shows the shape)."
            )
        for split in ("val", "test"):
            loaders = data.ood_dataloaders(split)
            if not isinstance(loaders, dict) or not loaders:
                raise ValueError(
                    f"OODShapingReport needs at least one OOD set from "
                    f"`{type(data).__name__}.ood_dataloaders({split!r})`, a dict "
                    f"{{name: DataLoader}}, got {loaders!r}; return the OOD loaders of the "
                    f"{split!r} split."
                )
            for name, loader in loaders.items():
                first_batch(loader, f"OOD {split} {name}", "OODShapingReport")
            logged = [metric_key(name) for name in loaders]
            repeated = sorted({n for n, key in zip(loaders, logged) if logged.count(key) > 1})
            if repeated:
                raise ValueError(
                    f"the OOD sets {repeated} of `{type(data).__name__}.ood_dataloaders({split!r})`"
                    " differ only in case or punctuation, so their logged columns would be one; "
                    "name them apart."
                )

    def build_tables(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        head: nn.Linear,
        fit: Outputs,
        test: Outputs,
    ) -> dict[str, tuple[str, Table]]:
        data = trainer.datamodule

        def features(split: str) -> dict[str, Tensor]:
            loaders = data.ood_dataloaders(split)
            return {name: collect_outputs(pl_module, head, lo)[0] for name, lo in loaders.items()}

        id_fit, id_test = fit[0], test[0]
        ood_val, ood_test = features("val"), features("test")
        held_out = torch.cat(list(ood_val.values()))
        columns = ["shaper"] + [f"{n} {m}" for n in ood_test for m in ("AUROC", "FPR@95")]
        rows = []
        for shaper in self.shapers:
            if shaper == "identity":
                scorer = FeatureShapingScorer(head, "identity").fit_features(id_fit)
            else:
                scorer = tune(
                    shaper, id_fit, held_out, layer=head, n_trials=self.tune_trials, seed=self.seed
                ).scorer
            id_scores = scorer.score_features(id_test)
            row = ["energy" if shaper == "identity" else shaper]
            for ood in ood_test.values():
                out_scores = scorer.score_features(ood)
                row += [
                    f"{float(ood_auroc(id_scores, out_scores)):.4f}",
                    f"{float(fpr_at_95_tpr(id_scores, out_scores)):.4f}",
                ]
            rows.append(row)
        title = f"OOD detection: ID {self.evaluate_on} vs each OOD test set (energy score)"
        return {"ood": (title, (columns, rows))}
