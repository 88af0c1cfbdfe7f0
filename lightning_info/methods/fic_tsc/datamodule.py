"""UCR/UEA classification data sets that ship inside the ``aeon`` package.

aeon bundles a handful of small problems from the UCR (univariate) and UEA (multivariate)
time-series classification archives (Dau et al., 2019; Bagnall et al., 2018) under
``aeon/datasets/data``. They are read straight from there with
:func:`aeon.datasets.load_from_ts_file`, so nothing is ever downloaded. A data set is offered
when both its ``<Name>_TRAIN.ts`` and ``<Name>_TEST.ts`` headers declare ``@classLabel true``;
equal-length variants shipped as ``<Name>_eq_TRAIN.ts`` appear as ``<Name>_eq``.

Series of unequal length (for example ``JapaneseVowels`` and ``PickupGestureWiimoteZ``) are
right-padded with zeros to the longest series over train and test, so every split is one
``(N, C, T)`` array; the padding is treated as data by the normalisations below. Their ``_eq``
variants are the archive's own equal-length versions.

aeon is an optional dependency (``pip install 'lightning-info[tsc]'``) and is imported only
when a data set is listed or loaded.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.optional import require_extra
from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.sampling import EpochShuffleSampler
from lightning_info.core.validation import require_int
from lightning_info.methods.fic_tsc.shift import ShiftOptions, apply_shift

__all__ = ["UCRUEADataModule", "available_bundled_datasets", "load_bundled_dataset"]

_NORMALIZATIONS = ("channel", "instance", "none")
_STD_FLOOR = 1e-8


def _import_aeon_datasets() -> Any:
    return require_extra("aeon.datasets", "tsc", "The bundled UCR/UEA data sets")


def _bundled_root() -> Path:
    """Folder holding aeon's bundled data sets."""
    _import_aeon_datasets()
    return Path(str(importlib.resources.files("aeon.datasets") / "data"))


def _declares_class_labels(path: Path) -> bool:
    """Whether the ``.ts`` header of ``path`` contains ``@classLabel true``."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            tokens = line.split()
            if not tokens:
                continue
            key = tokens[0].lower()
            if key == "@data":
                return False
            if key == "@classlabel":
                return len(tokens) > 1 and tokens[1].lower() == "true"
    return False


@functools.lru_cache(maxsize=8)
def _discover(root: str) -> MappingProxyType[str, tuple[Path, Path]]:
    """Map each classification data set under ``root`` to its (train, test) ``.ts`` files."""
    found: dict[str, tuple[Path, Path]] = {}
    for folder in sorted(Path(root).iterdir()):
        if not folder.is_dir():
            continue
        for train in sorted(folder.glob("*_TRAIN.ts")):
            name = train.name[: -len("_TRAIN.ts")]
            test = folder / f"{name}_TEST.ts"
            if name in found or not test.is_file():
                continue
            if _declares_class_labels(train) and _declares_class_labels(test):
                found[name] = (train, test)
    return MappingProxyType(found)


def _bundled_files() -> MappingProxyType[str, tuple[Path, Path]]:
    return _discover(str(_bundled_root()))


def available_bundled_datasets() -> list[str]:
    """Sorted names of the classification data sets bundled with aeon."""
    return sorted(_bundled_files())


def _resolve(name: str) -> tuple[Path, Path]:
    files = _bundled_files()
    if not isinstance(name, str) or name not in files:
        raise ValueError(
            f"Unknown bundled data set {name!r}. Available: {', '.join(sorted(files))}."
        )
    return files[name]


@dataclass(frozen=True)
class _BundledData:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]


def _as_series(x: Any, name: str, split: str) -> list[np.ndarray]:
    """Views of each ``(C, T_i)`` series in aeon's output, after checking for missing values."""
    series = list(x) if isinstance(x, np.ndarray) else [np.asarray(s) for s in x]
    for s in series:
        if s.ndim != 2:
            raise ValueError(
                f"Data set {name!r} ({split}) holds a series of shape {s.shape}; "
                "expected (channels, length)."
            )
        if not np.isfinite(s).all():
            variant = f"{name}_eq"
            if variant in _bundled_files():
                hint = f"the equal-length variant {variant!r}"
            else:
                hint = "an equal-length '<name>_eq' variant where one exists"
            raise ValueError(
                f"Data set {name!r} ({split} split) contains missing (NaN) or infinite values. "
                f"Use {hint}, or impute the gaps before training."
            )
    return series


def _pad(series: list[np.ndarray], channels: int, length: int) -> np.ndarray:
    """Stack series into a new float32 ``(N, channels, length)`` array, zero-padded on the right."""
    out = np.zeros((len(series), channels, length), dtype=np.float32)
    for i, s in enumerate(series):
        out[i, :, : s.shape[1]] = s
    return out


def _sorted_labels(labels: set[str]) -> list[str]:
    """Labels in numeric order when all of them are numbers ('2' before '10'), else lexical."""
    try:
        return sorted(labels, key=lambda label: (float(label), label))
    except ValueError:
        return sorted(labels)


def _load(name: str) -> _BundledData:
    train_path, test_path = _resolve(name)
    aeon_datasets = _import_aeon_datasets()
    x_train_raw, y_train_raw = aeon_datasets.load_from_ts_file(str(train_path))
    x_test_raw, y_test_raw = aeon_datasets.load_from_ts_file(str(test_path))

    train_series = _as_series(x_train_raw, name, "train")
    test_series = _as_series(x_test_raw, name, "test")
    all_series = train_series + test_series
    channel_counts = {s.shape[0] for s in all_series}
    if len(channel_counts) != 1:
        raise ValueError(f"Data set {name!r} mixes channel counts {sorted(channel_counts)}.")
    channels = channel_counts.pop()
    length = max(s.shape[1] for s in all_series)

    y_train_str = np.asarray(y_train_raw).astype(str)
    y_test_str = np.asarray(y_test_raw).astype(str)
    classes = _sorted_labels(set(y_train_str.tolist()) | set(y_test_str.tolist()))
    index = {label: i for i, label in enumerate(classes)}
    return _BundledData(
        x_train=_pad(train_series, channels, length),
        y_train=np.array([index[v] for v in y_train_str.tolist()], dtype=np.int64),
        x_test=_pad(test_series, channels, length),
        y_test=np.array([index[v] for v in y_test_str.tolist()], dtype=np.int64),
        classes=tuple(classes),
    )


def load_bundled_dataset(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load a bundled classification data set as ``(X_train, y_train, X_test, y_test)``.

    ``X_*`` are new float32 arrays of shape ``(N, C, T)``; series of unequal length are
    right-padded with zeros to the longest series over both splits. ``y_*`` are int64 labels in
    ``0..K-1``; the encoding is fitted on the union of train and test labels in sorted order
    (numeric order when every label is a number), so both splits share it.

    Raises:
        ValueError: ``name`` is not bundled (the message lists what is), or the data hold NaN.
        ImportError: aeon is not installed.
    """
    data = _load(name)
    return data.x_train, data.y_train, data.x_test, data.y_test


class UCRUEADataModule(pl.LightningDataModule):
    """LightningDataModule over a UCR/UEA classification data set bundled with aeon.

    The bundled TRAIN split is divided into train and validation parts (stratified by class
    when every class has at least two members and each part can hold every class); the bundled
    TEST split is the test set. Normalisation, fitted on the train part only:

    * ``"channel"``: ``x[:, c] <- (x[:, c] - mu_c) / max(sigma_c, 1e-8)`` with ``mu_c`` and
      ``sigma_c`` the mean and standard deviation of channel ``c`` over all train series and
      time steps;
    * ``"instance"``: each series is z-normalised per channel over time (same floor);
    * ``"none"``: values are left as loaded.

    Datasets are ``TensorDataset(x float32 (N, C, T), y int64 (N,))``.

    A controlled train/test shift (:mod:`lightning_info.methods.fic_tsc.shift`): with
    ``test_shift`` the test inputs are that shift of a copy of the normalised TEST split (after
    the normalisation, so in training standard deviations under ``"channel"``); the train and
    validation parts and the normaliser's statistics are those of the unshifted run.

    Args:
        name: A name from :func:`available_bundled_datasets`.
        batch_size: Batch size of every loader.
        val_fraction: Share of the bundled TRAIN split held out for validation, in ``[0, 1)``;
            ``0`` means no validation set.
        normalize: ``"channel"``, ``"instance"`` or ``"none"``.
        seed: Seed of the train/validation split and of the training loader's shuffling.
        num_workers: DataLoader worker processes.
        test_shift: a :class:`~lightning_info.methods.fic_tsc.shift.ShiftOptions` of the test
            split (``kind``: ``none``, ``scale``, ``offset``, ``noise``), or ``None``.
    """

    def __init__(
        self,
        name: str = "GunPoint",
        batch_size: int = 64,
        val_fraction: float = 0.2,
        normalize: str = "channel",
        seed: int = 0,
        num_workers: int = 0,
        test_shift: ShiftOptions | None = None,
    ) -> None:
        super().__init__()
        require_int(batch_size, "batch_size", 1)
        require_int(seed, "seed", 0)
        require_int(num_workers, "num_workers", 0)
        if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)):
            raise TypeError(f"`val_fraction` must be a real number, got {val_fraction!r}.")
        if not (0.0 <= val_fraction < 1.0):
            raise ValueError(f"`val_fraction` must lie in [0, 1), got {val_fraction!r}.")
        if normalize not in _NORMALIZATIONS:
            raise ValueError(
                f"`normalize` must be one of {', '.join(map(repr, _NORMALIZATIONS))}, "
                f"got {normalize!r}."
            )
        if test_shift is not None and not isinstance(test_shift, ShiftOptions):
            raise TypeError(
                f"`test_shift` must be a ShiftOptions or None, got {type(test_shift).__name__}."
            )
        _resolve(name)
        self.save_hyperparameters()

        self.name = name
        self.batch_size = batch_size
        self.val_fraction = float(val_fraction)
        self.normalize = normalize
        self.seed = seed
        self.num_workers = num_workers
        self.test_shift = test_shift

        self._data: _BundledData | None = None
        self._split: tuple[np.ndarray, np.ndarray] | None = None
        self.channel_mean: np.ndarray | None = None
        self.channel_std: np.ndarray | None = None
        self.train_dataset: TensorDataset | None = None
        self.val_dataset: TensorDataset | None = None
        self.test_dataset: TensorDataset | None = None

    @property
    def _bundled(self) -> _BundledData:
        if self._data is None:
            self._data = _load(self.name)
        return self._data

    @property
    def class_names(self) -> tuple[str, ...]:
        """Original labels; ``class_names[k]`` is the label encoded as ``k``."""
        return self._bundled.classes

    @property
    def num_channels(self) -> int:
        return int(self._bundled.x_train.shape[1])

    @property
    def series_length(self) -> int:
        return int(self._bundled.x_train.shape[2])

    @property
    def num_classes(self) -> int:
        return len(self._bundled.classes)

    @property
    def num_train(self) -> int:
        return len(self.split_indices[0])

    @property
    def num_val(self) -> int:
        return len(self.split_indices[1])

    @property
    def num_test(self) -> int:
        return len(self._bundled.y_test)

    @property
    def split_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted indices into the bundled TRAIN split of the train and validation parts."""
        if self._split is None:
            self._split = self._make_split()
        return self._split

    def _make_split(self) -> tuple[np.ndarray, np.ndarray]:
        y = self._bundled.y_train
        n = len(y)
        indices = np.arange(n)
        if self.val_fraction == 0.0:
            return indices, indices[:0]
        n_val = math.ceil(self.val_fraction * n)
        if n_val >= n:
            raise ValueError(
                f"`val_fraction`={self.val_fraction} leaves no training series out of the "
                f"{n} in {self.name!r}; lower it."
            )
        from sklearn.model_selection import train_test_split

        counts = np.bincount(y)
        counts = counts[counts > 0]
        can_stratify = counts.min() >= 2 and min(n_val, n - n_val) >= len(counts)
        train_idx, val_idx = train_test_split(
            indices,
            test_size=self.val_fraction,
            random_state=self.seed,
            shuffle=True,
            stratify=y if can_stratify else None,
        )
        return np.sort(train_idx), np.sort(val_idx)

    def _fit_normalizer(self, x_train: np.ndarray) -> None:
        if self.normalize == "channel":
            x64 = x_train.astype(np.float64)
            self.channel_mean = x64.mean(axis=(0, 2))
            self.channel_std = np.maximum(x64.std(axis=(0, 2)), _STD_FLOOR)

    def _apply_normalizer(self, x: np.ndarray) -> np.ndarray:
        """Normalised copy of ``x``; ``x`` itself is never written to."""
        if self.normalize == "channel":
            assert self.channel_mean is not None and self.channel_std is not None
            mean = self.channel_mean[None, :, None]
            std = self.channel_std[None, :, None]
            return ((x - mean) / std).astype(np.float32)
        if self.normalize == "instance":
            mean = x.mean(axis=2, keepdims=True, dtype=np.float64)
            std = np.maximum(x.std(axis=2, keepdims=True, dtype=np.float64), _STD_FLOOR)
            return ((x - mean) / std).astype(np.float32)
        return x.copy()

    @staticmethod
    def _dataset(x: np.ndarray, y: np.ndarray) -> TensorDataset:
        return TensorDataset(
            torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)),
            torch.from_numpy(np.asarray(y, dtype=np.int64).copy()),
        )

    def setup(self, stage: str | None = None) -> None:
        """Split the bundled TRAIN set, fit the normaliser on the train part, build datasets
        (the test inputs under ``test_shift``, on a copy)."""
        if self.train_dataset is not None:
            return
        data = self._bundled
        train_idx, val_idx = self.split_indices
        x_train = data.x_train[train_idx]
        self._fit_normalizer(x_train)
        self.train_dataset = self._dataset(self._apply_normalizer(x_train), data.y_train[train_idx])
        if len(val_idx) > 0:
            self.val_dataset = self._dataset(
                self._apply_normalizer(data.x_train[val_idx]), data.y_train[val_idx]
            )
        x_test = apply_shift(self._apply_normalizer(data.x_test), self.test_shift)
        self.test_dataset = self._dataset(x_test, data.y_test)

    def _loader(self, dataset: TensorDataset, shuffle: bool) -> DataLoader:
        sampler = EpochShuffleSampler(len(dataset), seed=self.seed) if shuffle else None
        return ResumableDataLoader(
            dataset,
            trainer=self.trainer,
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader:
        self.setup("fit")
        assert self.train_dataset is not None
        return self._loader(self.train_dataset, shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        """Validation loader, or ``[]`` when ``val_fraction`` is 0 (no validation runs)."""
        self.setup("validate")
        if self.val_dataset is None:
            return []
        return self._loader(self.val_dataset, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        self.setup("test")
        assert self.test_dataset is not None
        return self._loader(self.test_dataset, shuffle=False)
