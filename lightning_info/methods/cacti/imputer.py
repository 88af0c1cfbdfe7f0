"""``CACTIImputer``: CACTI as a scikit-learn transformer, trained through a Lightning ``Trainer``.

``fit(X)`` learns the training rows' min-max scaling and the model from ``X``'s observed values
(NaN = missing); ``transform(X)`` imputes any rows, seen or not (inductive), in batches with
key-padding masks, and returns ``X`` with only its missing entries filled: every observed entry
is returned bit for bit. It follows scikit-learn's conventions: ``n_features_in_`` and
``feature_names_in_`` are set by ``fit`` and checked by ``transform`` (renamed or reordered
DataFrame columns are refused, never imputed by position), ``get_feature_names_out`` and
``set_output`` work, and it passes scikit-learn's estimator checks.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from lightning_info.core.trainers import quiet_trainer
from lightning_info.core.validation import require_int
from lightning_info.data.scaling import MinMaxScaling
from lightning_info.methods.cacti.datamodule import (
    SplitOptions,
    TabularImputationDataModule,
    check_rows,
    frame_values,
)
from lightning_info.methods.cacti.module import build_cacti

__all__ = ["CACTIImputer"]

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.3-1.5: the estimator's own method

    def _validate_data(estimator, X, *, ensure_all_finite, **check):
        return estimator._validate_data(X, force_all_finite=ensure_all_finite, **check)


class CACTIImputer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Fill missing values with CACTI (see the module docstring).

    Args:
        descriptions: column -> description for the context texts (default: the names).
        context: text encoder (``auto``, ``tfidf``, ``minilm``, a sentence-transformers model
            name, or ``none`` for the no-context ablation).
        context_dim: TF-IDF + SVD width.
        model: CACTI's settings (:func:`~lightning_info.methods.cacti.module.build_cacti`): the
            network's ``embed_dim``, ``encoder_depth``, ``decoder_depth``, ``num_heads``,
            ``mlp_ratio``, AdamW's ``lr``, ``weight_decay``, ... and ``copy_probability``.
        max_epochs, batch_size: training.
        gradient_clip_val: the trainer's gradient clipping (the paper's 5).
        trainer: ``Trainer`` arguments over the defaults ``accelerator="cpu"``, ``devices=1``,
            ``strategy="auto"``, ``precision="32-true"`` and the ones above (e.g.
            ``{"accelerator": "gpu", "precision": "bf16-mixed"}``, a logger or callbacks).
        seed: seeds Lightning, the model's masks and the TF-IDF projection.
    """

    def __init__(
        self,
        descriptions: dict[str, str] | None = None,
        context: str = "auto",
        context_dim: int = 32,
        model: dict[str, Any] | None = None,
        max_epochs: int = 100,
        batch_size: int = 128,
        gradient_clip_val: float = 5.0,
        trainer: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.descriptions = descriptions
        self.context = context
        self.context_dim = context_dim
        self.model = model
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.gradient_clip_val = gradient_clip_val
        self.trainer = trainer
        self.seed = seed

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN marks a missing value
        return tags

    def _more_tags(self) -> dict[str, bool]:  # scikit-learn < 1.6
        return {"allow_nan": True}

    def _table(self, X, fitting: bool) -> np.ndarray:
        """``X`` as float64 through scikit-learn's ``validate_data``: sets (``fitting``) or
        checks ``n_features_in_`` and ``feature_names_in_``."""
        if hasattr(X, "columns") and hasattr(X, "dtypes"):
            frame_values(X)  # refuses non-numeric columns, saying how to encode them
        values = _validate_data(
            self,
            X,
            reset=fitting,
            dtype=np.float64,
            ensure_all_finite=False,
            ensure_min_samples=2 if fitting else 1,
            ensure_min_features=2 if fitting else 1,
        )
        if np.isinf(values).any():
            raise ValueError("X holds infinite values: replace them (NaN marks a missing value).")
        return values

    def fit(self, X, y=None) -> CACTIImputer:
        """Train on ``X``'s observed values."""
        table = self._table(X, fitting=True)
        if hasattr(X, "columns") and hasattr(X, "dtypes"):
            names = [str(c) for c in X.columns]
        else:
            names = [f"column_{j}" for j in range(table.shape[1])]
        seed = require_int(self.seed, "seed", 0)
        data = TabularImputationDataModule.from_table(  # refuses empty rows / columns
            table,
            names,
            name="X",
            mechanism="none",
            split=SplitOptions(test_fraction=0.0),
            batch_size=self.batch_size,
            descriptions=self.descriptions,
            context=self.context,
            context_dim=self.context_dim,
            data_seed=seed,
        )
        self.scaling_ = data.scaling
        pl.seed_everything(seed, verbose=False)
        self.module_ = build_cacti(
            table.shape[1],
            data.context_embeddings,
            self.model,
            use_context=self.context != "none",
            seed=seed,
        )
        settings = {
            "accelerator": "cpu",
            "devices": 1,
            "strategy": "auto",
            "precision": "32-true",
            "max_epochs": require_int(self.max_epochs, "max_epochs", 1),
            "gradient_clip_val": self.gradient_clip_val,
            "limit_val_batches": 0,
            **(self.trainer or {}),
        }
        trainer = quiet_trainer(**settings)
        trainer.fit(self.module_, train_dataloaders=data.train_dataloader())
        self.module_.trainer = None  # a fitted imputer holds no Trainer (pickles small)
        self.module_.cpu().eval()
        return self

    def predict_scaled(self, scaled: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """The model's imputation of min-max-scaled rows, in batches of ``batch_size``."""
        check_is_fitted(self, "module_")
        device = next(self.module_.parameters()).device
        out = []
        for start in range(0, scaled.shape[0], self.batch_size):
            rows = slice(start, start + self.batch_size)
            values = torch.as_tensor(
                np.where(observed[rows], scaled[rows], 0.0), dtype=torch.float32
            )
            mask = torch.as_tensor(observed[rows])
            out.append(self.module_.impute(values.to(device), mask.to(device)).cpu().numpy())
        return np.concatenate(out).astype(np.float64) if out else np.empty((0, scaled.shape[1]))

    def transform(self, X) -> np.ndarray:
        """``X`` with its missing entries imputed; observed entries unchanged (bit for bit)."""
        check_is_fitted(self, "module_")
        table = self._table(X, fitting=False)
        observed = ~np.isnan(table)
        check_rows(observed, "X")
        scaling: MinMaxScaling = self.scaling_
        prediction = scaling.inverse(self.predict_scaled(scaling.forward(table), observed))
        imputed = table.copy()
        imputed[~observed] = prediction[~observed]
        return imputed
