"""``TabularImputationDataModule``: a table, its (simulated) missingness, a split and a scaling.

The table is one of scikit-learn's bundled data sets (``diabetes``, ``wine``, ``breast_cancer``,
``iris``, ``linnerud``, ``digits``; no download), statsmodels' bundled ``fair`` (6,366 rows),
a generated nonlinear table (``synthetic[:rows]``), a CSV file, or any array / DataFrame
(:meth:`TabularImputationDataModule.from_table`). A complete table gets simulated missingness
(:func:`~lightning_info.methods.cacti.missingness.simulate_missing`, the evaluation protocol,
at the strength of a :class:`~lightning_info.methods.cacti.missingness.MissingnessOptions`);
a table with its own NaN is imputed as it is (``mechanism="none"``). The rows are split
train / validation / test (:class:`SplitOptions`) by ``data_seed``; every column is min-max
scaled to ``[0, 1]`` with the *training* split's observed minimum and maximum only
(standardising first, as the paper does, changes nothing after a min-max map). Batches are the dicts
:class:`~lightning_info.methods.cacti.module.CACTI` reads: ``values`` (0 at unobserved entries),
``observed``, ``truth`` (the scaled complete values, NaN where unknown) and ``target`` (entries
hidden by the simulation, whose truth is known). The source table is never modified.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from lightning_info.core.files import read_csv_table
from lightning_info.core.validation import require_choice, require_fraction, require_int
from lightning_info.data.scaling import MinMaxScaling
from lightning_info.data.splits import SplitDataModule, TensorRows
from lightning_info.methods.cacti.context import column_descriptions, context_texts, embed_columns
from lightning_info.methods.cacti.missingness import (
    MECHANISMS,
    MissingnessOptions,
    simulate_missing,
)

__all__ = [
    "BUNDLED_TABLES",
    "OFFLINE_TABLES",
    "SplitOptions",
    "TabularImputationDataModule",
    "load_table",
    "synthetic_table",
]

BUNDLED_TABLES = ("diabetes", "wine", "breast_cancer", "iris", "linnerud")
#: Larger tables that ship offline: scikit-learn's ``digits`` (1,797 8x8 images, the 61
#: non-constant pixel columns: pixels (0, 0), (4, 0) and (4, 7) are 0 in every image and are
#: dropped) and statsmodels' ``fair`` (Fair's 1974 survey of 6,366 married women, 9 columns;
#: needs statsmodels, which the ``causal`` extra installs).
OFFLINE_TABLES = ("digits", "fair")

_FAIR_DESCRIPTIONS = {
    "rate_marriage": "self-rated marriage, 1 = very poor to 5 = very good",
    "age": "age in years",
    "yrs_married": "number of years married",
    "children": "number of children",
    "religious": "how religious, 1 = not to 4 = strongly",
    "educ": "years of education, 9 = grade school to 20 = advanced degree",
    "occupation": "occupation, 1 = student to 6 = professional with advanced degree",
    "occupation_husb": "husband's occupation, 1 = student to 6 = professional",
    "affairs": "time spent in extramarital affairs",
}


@dataclass(frozen=True)
class SplitOptions:
    """The shares of the rows held out; the rest (at least 2 rows) is the training split.

    Args:
        test_fraction: the test rows (scored on their simulated entries).
        val_fraction: the validation rows (scored likewise, when there are any).
    """

    test_fraction: float = 0.2
    val_fraction: float = 0.0

    def __post_init__(self) -> None:
        require_fraction(self.test_fraction, "test_fraction")
        require_fraction(self.val_fraction, "val_fraction")


# data modules keep their options in the hyperparameters, which torch.load reads weights-only
torch.serialization.add_safe_globals([MissingnessOptions, SplitOptions])

_MISSINGNESS = MissingnessOptions()
_SPLIT = SplitOptions()


def synthetic_table(rows: int = 2000, columns: int = 12, latent: int = 3, noise: float = 0.1):
    """A fixed nonlinear latent-factor table: ``x = tanh(z W_1 + b_1) W_2 + noise * eps`` with
    ``z ~ N(0, I_latent)``, 16 hidden units and weights drawn from seed 0 (every column depends on
    the others only through ``z``, nonlinearly)."""
    rng = np.random.default_rng(0)
    inner = rng.normal(size=(latent, 16))
    bias = rng.normal(size=16)
    outer = rng.normal(size=(16, columns)) / 4
    z = rng.normal(size=(require_int(rows, "rows", 2), latent))
    table = np.tanh(z @ inner + bias) @ outer + noise * rng.normal(size=(rows, columns))
    return table, [f"feature_{j}" for j in range(columns)]


def load_table(
    source: str | Path, encode_categorical: bool = False
) -> tuple[np.ndarray, list[str]]:
    """A bundled sklearn table by name, ``synthetic`` or ``synthetic:<rows>``
    (:func:`synthetic_table`, 2,000 rows by default), or a CSV file with a header row, as
    ``(values, column names)``. Non-numeric CSV columns need ``encode_categorical`` (ordinal
    codes of the sorted categories; empty cells stay missing)."""
    if not isinstance(source, (str, Path)):
        raise TypeError(
            f"the table must be named by a str or a Path, got {type(source).__name__} {source!r}; "
            "pass an array or DataFrame to TabularImputationDataModule.from_table."
        )
    if str(source).split(":")[0] == "synthetic":
        _, _, rows = str(source).partition(":")
        if rows and not rows.isdigit():
            raise ValueError(
                f"{source!r}: the rows of `synthetic:<rows>` must be a whole number, got {rows!r}."
            )
        return synthetic_table(int(rows) if rows else 2000)
    if str(source) in OFFLINE_TABLES:
        return offline_table(str(source))
    if str(source) in BUNDLED_TABLES:
        import sklearn.datasets

        bunch = getattr(sklearn.datasets, f"load_{source}")()
        return np.asarray(bunch.data, dtype=np.float64), [str(c) for c in bunch.feature_names]
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(
            f"{source!r} is neither a bundled table {BUNDLED_TABLES} nor a CSV file."
        )
    return frame_values(read_csv_table(path), encode_categorical)


def offline_table(name: str) -> tuple[np.ndarray, list[str]]:
    """One of :data:`OFFLINE_TABLES` as ``(values, column names)``."""
    if name == "digits":
        import sklearn.datasets

        bunch = sklearn.datasets.load_digits()
        keep = np.flatnonzero(bunch.data.std(0) > 0)  # the 3 pixels that are 0 in every image
        return bunch.data[:, keep].astype(np.float64), [bunch.feature_names[j] for j in keep]
    if name == "fair":
        try:
            from statsmodels.datasets import fair
        except ImportError as error:
            raise ImportError(
                "the 'fair' table ships with statsmodels: pip install statsmodels (the causal "
                "extra installs it)."
            ) from error
        frame = fair.load_pandas().data
        return frame.to_numpy(dtype=np.float64), [str(c) for c in frame.columns]
    raise ValueError(f"unknown offline table {name!r}: choose from {OFFLINE_TABLES}.")


def table_descriptions(name: str, columns: list[str]) -> dict[str, str] | None:
    """The columns' descriptions of a named table (``None`` for a CSV, an in-memory table or
    ``synthetic``)."""
    if name in BUNDLED_TABLES:
        return {c: d for c, d in column_descriptions(name).items() if c in columns}
    if name == "fair":
        return {c: d for c, d in _FAIR_DESCRIPTIONS.items() if c in columns}
    if name == "digits":
        pixels = [c.split("_") for c in columns]
        return {
            column: f"ink count (0 to 16) of the 4x4 pixel block at row {p[1]}, column {p[2]} "
            "of an 8x8 image of a handwritten digit"
            for column, p in zip(columns, pixels)
            if len(p) == 3 and p[0] == "pixel"
        }
    return None


def frame_values(frame, encode_categorical: bool = False) -> tuple[np.ndarray, list[str]]:
    """A DataFrame's values as float64 and its column names; non-numeric columns are refused
    unless ``encode_categorical`` turns them into ordinal codes."""
    import pandas as pd

    repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if repeated:
        raise ValueError(f"the table repeats the column name(s) {repeated}; rename them apart.")
    columns = []
    for name in frame.columns:
        column = frame[name]
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            if not encode_categorical:
                raise ValueError(
                    f"column {name!r} is not numeric ({column.dtype}): encode it first (one-hot "
                    "or ordinal codes), or pass encode_categorical=True for ordinal codes."
                )
            codes = pd.Categorical(column.astype("string"), ordered=False).codes
            column = pd.Series(np.where(codes < 0, np.nan, codes), index=column.index)
        columns.append(column.to_numpy(dtype=np.float64, na_value=np.nan))
    return np.stack(columns, axis=1), [str(c) for c in frame.columns]


def check_missingness(observed: np.ndarray, columns: list[str], what: str) -> None:
    """Refuse a table CACTI cannot learn from: fewer than 2 columns, or a column or a row
    without any observed value."""
    if observed.shape[1] < 2:
        raise ValueError(f"{what} has {observed.shape[1]} column(s): an imputer needs at least 2.")
    empty_columns = [columns[j] for j in np.flatnonzero(~observed.any(0))]
    if empty_columns:
        raise ValueError(
            f"{what}: column(s) {empty_columns[:10]} have no observed value; drop "
            "them (nothing can be learned about them)."
        )
    check_rows(observed, what)


def check_rows(observed: np.ndarray, what: str) -> None:
    """Refuse rows without any observed value (there is nothing to impute them from)."""
    empty_rows = np.flatnonzero(~observed.any(1))
    if empty_rows.size:
        raise ValueError(
            f"{what}: {empty_rows.size} row(s) (e.g. {empty_rows[:5].tolist()}) have no observed "
            "value; CACTI imputes a row from its observed values: drop these rows, or lower the "
            "simulated missing rate."
        )


def imputation_rows(
    scaled_truth: np.ndarray, observed: np.ndarray, target: np.ndarray
) -> TensorRows:
    """Rows as the dicts CACTI reads: ``values`` (0 at unobserved entries), ``observed``,
    ``truth`` and ``target`` (see the module docstring)."""
    truth = torch.as_tensor(scaled_truth, dtype=torch.float32)
    observed = torch.as_tensor(observed)
    values = torch.where(observed, truth, 0.0)
    return TensorRows(values=values, observed=observed, truth=truth, target=torch.as_tensor(target))


class TabularImputationDataModule(SplitDataModule):
    """A table with missing values for CACTI (see the module docstring).

    Args:
        name: a bundled table (``diabetes``, ``wine``, ``breast_cancer``, ``iris``,
            ``linnerud``, ``digits``, ``fair``), ``synthetic[:<rows>]`` (a generated nonlinear
            latent-factor table) or the path of a CSV file with a header row.
        mechanism: ``mcar``, ``mar``, ``mnar`` (simulated on a complete table) or ``none``
            (the table's own NaN are the missing entries).
        missingness: the simulated missing ``rate`` and ``observed_share`` (the share of
            always-observed (MAR) or input (MNAR) columns).
        data_seed: seeds the missingness and the split (named apart from a model's ``seed``).
        split: the shares of the rows held out for testing and validation.
        batch_size, num_workers: the loaders'.
        descriptions: column -> description for the context texts; default: parsed from the
            bundled table's documentation, or the column names.
        context: the text encoder of the context embeddings: ``auto`` (the packaged
            all-MiniLM-L6-v2 when the ``context`` extra is installed, else TF-IDF + SVD),
            ``tfidf``, ``minilm``, any sentence-transformers model name, or ``none``.
        context_dim: the TF-IDF + SVD width.
        encode_categorical: ordinal codes for a CSV's non-numeric columns.
    """

    def __init__(
        self,
        name: str = "diabetes",
        mechanism: Literal["mcar", "mar", "mnar", "none"] = "mnar",
        missingness: MissingnessOptions = _MISSINGNESS,
        data_seed: int = 0,
        split: SplitOptions = _SPLIT,
        batch_size: int = 128,
        descriptions: dict[str, str] | None = None,
        context: str = "auto",
        context_dim: int = 32,
        encode_categorical: bool = False,
        num_workers: int = 0,
        _table: tuple[np.ndarray, list[str]] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["_table", "descriptions"])
        require_choice(mechanism, "mechanism", (*MECHANISMS, "none"))
        for value, kind, argument in (
            (missingness, MissingnessOptions, "missingness"),
            (split, SplitOptions, "split"),
        ):
            if not isinstance(value, kind):
                raise TypeError(
                    f"`{argument}` must be a {kind.__name__}, got {type(value).__name__}."
                )
        self.name = name
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.shuffle_seed = require_int(data_seed, "data_seed", 0)
        self.num_workers = require_int(num_workers, "num_workers", 0)
        table, self.columns = _table if _table is not None else load_table(name, encode_categorical)
        self.table = np.array(table, dtype=np.float64)  # a copy: the source is never touched
        if self.table.ndim != 2 or self.table.shape[0] < 2:
            raise ValueError(f"need a 2-D table of at least 2 rows, got {self.table.shape}.")
        if np.isinf(self.table).any():
            raise ValueError("the table holds infinite values: replace them (NaN = missing).")
        own_missing = np.isnan(self.table)
        if mechanism == "none":
            self.simulated = np.zeros_like(own_missing)
        elif own_missing.any():
            raise ValueError(
                f"the table already has {int(own_missing.sum())} missing value(s): use "
                "mechanism='none' to impute them, or drop incomplete rows to simulate missingness."
            )
        else:
            self.simulated = simulate_missing(
                self.table, missingness.rate, mechanism, missingness.observed_share, data_seed
            )
        self.observed = ~own_missing & ~self.simulated
        empty = ~self.observed.any(1)
        self.dropped_rows = int(empty.sum()) if missingness.drop_empty_rows else 0
        if self.dropped_rows:
            if self.dropped_rows > self.table.shape[0] - 2:
                raise ValueError(f"the missingness leaves fewer than 2 rows of table {name!r}.")
            self.table = self.table[~empty]
            self.simulated = self.simulated[~empty]
            self.observed = self.observed[~empty]
        check_missingness(self.observed, self.columns, f"table {name!r}")
        self.splits = self._split(split.test_fraction, split.val_fraction, data_seed)
        train = self.splits["train"]
        check_missingness(self.observed[train], self.columns, f"the training rows of {name!r}")
        self.scaling = MinMaxScaling(self.table[train], self.observed[train])
        if descriptions is None:
            descriptions = table_descriptions(str(name), self.columns)
        self.descriptions = descriptions
        self.context_texts = context_texts(self.columns, descriptions)
        context_dim = require_int(context_dim, "context_dim", 1)
        self.context_embeddings = (
            None
            if context == "none"
            else torch.as_tensor(embed_columns(self.context_texts, context, context_dim, data_seed))
        )

    @classmethod
    def from_table(cls, table, columns=None, **kwargs: Any) -> TabularImputationDataModule:
        """From an array ``(n, d)`` (NaN = missing) or a DataFrame; ``columns`` names an array's
        columns (default ``column_0`` ...)."""
        if hasattr(table, "columns") and hasattr(table, "dtypes"):
            values, names = frame_values(table, kwargs.pop("encode_categorical", False))
        else:
            values = np.asarray(table, dtype=np.float64)
            if values.ndim != 2:
                raise ValueError(f"need a 2-D table, got shape {values.shape}.")
            names = [f"column_{j}" for j in range(values.shape[1])]
        if isinstance(columns, str):
            raise TypeError(f"`columns` must be a list of names, got the string {columns!r}.")
        names = [str(c) for c in columns] if columns is not None else names
        if len(names) != values.shape[1]:
            raise ValueError(f"{len(names)} column names for {values.shape[1]} columns.")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"`columns` repeats the name(s) {repeated}; give each column its own.")
        kwargs.setdefault("name", "table")
        return cls(_table=(values, names), **kwargs)

    def _split(self, test_fraction: float, val_fraction: float, seed: int) -> dict[str, np.ndarray]:
        rows = self.table.shape[0]
        order = np.random.default_rng(seed).permutation(rows)
        test = round(test_fraction * rows)
        val = round(val_fraction * rows)
        if rows - test - val < 2:
            raise ValueError(
                f"{rows} rows leave fewer than 2 for training with test_fraction="
                f"{test_fraction} and val_fraction={val_fraction}."
            )
        return {
            "test": np.sort(order[:test]),
            "val": np.sort(order[test : test + val]),
            "train": np.sort(order[test + val :]),
        }

    @property
    def num_columns(self) -> int:
        return self.table.shape[1]

    def dataset(self, split: str) -> TensorRows:
        """The split's rows, scaled, as a Dataset (the loaders' source)."""
        index = self.splits[split]
        truth = self.scaling.forward(self.table[index])
        return imputation_rows(truth, self.observed[index], self.simulated[index])

    def arrays(self, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(scaled table with NaN at unobserved entries, scaled truth, target)`` of a split:
        what a baseline imputer gets and is scored against."""
        index = self.splits[split]
        truth = self.scaling.forward(self.table[index])
        return np.where(self.observed[index], truth, np.nan), truth, self.simulated[index]
