"""Observational data for ancestral-graph search: forward samples of a Bayesian network with
hidden nodes and its oracle PAG, or a user's own table.

``BayesianNetworkDataModule("alarm", num_samples=1000, hidden_fraction=0.1, data_seed=0)`` reads
one of pgmpy's bundled networks (``get_example_model``: alarm, insurance, child, asia, sachs,
barley, mildew, ...; a ``.bif`` path works too), draws ``num_samples`` rows by forward sampling,
hides ``round(hidden_fraction * p)`` nodes (at least one when the fraction is positive) chosen
uniformly at random, as the reference benchmark does, and keeps the observed columns as integer
codes (:func:`~lightning_info.methods.ancestral_search.information.encode`). The truth is the PAG
of the network's DAG with the hidden nodes marginalised
(:func:`~lightning_info.methods.ancestral_search.graphs.pag_from_dag`), and its MAG
(:func:`~lightning_info.methods.ancestral_search.graphs.mag_from_dag`). The reference scores its
no-latent runs against the CPDAG and its latent runs against ``pcalg::dag2pag`` with a Gaussian
test on a random covariance; here every truth is the PAG from an exact d-separation oracle.

``BayesianNetworkDataModule.from_csv(path)`` takes a user's table of discrete columns (no
truth); with ``bins=k`` its continuous (floating-point) columns are first cut into ``k``
equal-frequency bins (:func:`equal_frequency_bins`; MIIC's optimal discretisation is not
implemented). Sampled or read, a column observed constant is refused (it carries no information and
would make every score degenerate): raise ``num_samples`` or drop it.

The search is not minibatch training: the data live in the module (``codes``, ``names``,
``levels``), and the loaders yield one item per search move (``moves`` of them an epoch), so a
Trainer's ``max_epochs`` / ``max_steps`` budget the search.
"""

from __future__ import annotations

import functools
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_info.core.files import read_csv_table
from lightning_info.core.optional import require_extra
from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import require_fraction, require_int
from lightning_info.methods.ancestral_search.graphs import mag_from_dag, pag_from_dag
from lightning_info.methods.ancestral_search.information import encode

__all__ = [
    "TOY_GRAPHS",
    "BayesianNetworkDataModule",
    "equal_frequency_bins",
    "load_network",
    "monotone_binary_samples",
    "sample_network",
]


def equal_frequency_bins(values: np.ndarray, bins: int) -> np.ndarray:
    """Codes ``0 .. bins - 1`` of a continuous column cut at its ``j / bins`` quantiles, so each
    bin holds about ``n / bins`` values (ties stay in one bin; fewer bins when the column has
    fewer distinct values). NaN and infinities are refused."""
    values = np.asarray(values, dtype=np.float64)
    bins = require_int(bins, "bins", 2)
    if np.isnan(values).any():
        raise ValueError("a continuous column holds NaN: drop or impute those rows first.")
    if np.isinf(values).any():
        raise ValueError(
            "a continuous column holds an infinite value: replace or drop those rows first."
        )
    edges = np.unique(np.quantile(values, np.arange(1, bins) / bins))
    cells = np.searchsorted(edges, values, side="right")
    return np.unique(cells, return_inverse=True)[1]  # consecutive codes from 0


def _dag(edges: list[tuple[int, int]], nodes: int) -> np.ndarray:
    dag = np.zeros((nodes, nodes), dtype=bool)
    for a, b in edges:
        dag[a, b] = True
    return dag


TOY_GRAPHS = {
    # X1 -> X2 <- X3 -> X4 <- X5, X6 -> X4 with X3 hidden: X2 <-> X4
    "two_colliders": (_dag([(0, 1), (2, 1), (2, 3), (4, 3), (5, 3)], 6), [2]),
    # L -> X2, L -> X3, X1 -> X2, X4 -> X3 with L hidden: X2 <-> X3, X1 -> X2, X4 -> X3
    "confounded_pair": (_dag([(0, 2), (0, 3), (1, 2), (4, 3)], 5), [0]),
}
"""The method note's toy graphs: ``name -> (dag, hidden nodes)`` (``dag[a, b]`` for ``a -> b``)."""


def monotone_binary_samples(dag: np.ndarray, num_samples: int, seed: int) -> np.ndarray:
    """Binary forward samples of ``dag`` with ``P(v = 1 | pa) = 0.15 + 0.7 mean(pa)`` (0.5
    without parents): a monotone, hence faithful, model in which every edge carries
    dependence. ``(num_samples, p)`` int64, seeded."""
    rng = np.random.default_rng(seed)
    x = np.zeros((num_samples, len(dag)), dtype=np.int64)
    remaining = set(range(len(dag)))
    while remaining:
        for v in sorted(remaining):
            parents = np.flatnonzero(dag[:, v])
            if remaining.isdisjoint(parents.tolist()):
                if len(parents):
                    prob = 0.15 + 0.7 * x[:, parents].mean(1)
                else:
                    prob = np.full(num_samples, 0.5)
                x[:, v] = rng.random(num_samples) < prob
                remaining.discard(v)
    return x


@functools.lru_cache(maxsize=8)
def load_network(network: str | Path):
    """A pgmpy ``DiscreteBayesianNetwork``: a bundled example by name, or a ``.bif`` file
    (parsed once per process: reading Alarm's takes seconds, sampling it milliseconds)."""
    require_extra("pgmpy", "causal", "BayesianNetworkDataModule")
    import logging

    logging.getLogger("pgmpy").setLevel(logging.ERROR)
    path = Path(str(network))
    if path.suffix in (".bif", ".gz") or path.exists():
        return _read_bif(path)
    from pgmpy.utils import get_example_model

    return get_example_model(str(network))


def _read_bif(path: Path):
    """The network of a ``.bif`` (or gzipped ``.bif.gz``) file, checked to be complete."""
    import gzip

    from pgmpy.readwrite import BIFReader

    if not path.is_file():
        raise FileNotFoundError(
            f"BIF file {path} does not exist; give an existing .bif path or a pgmpy example name."
        )
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt") as handle:
                model = BIFReader(string=handle.read()).get_model()
        else:
            model = BIFReader(str(path)).get_model()
        if not model.nodes():
            raise ValueError("it defines no variable")
        model.check_model()
    except Exception as error:
        raise ValueError(
            f"{path} could not be parsed as a BIF Bayesian network ({error}); check its syntax "
            "and that every variable has a probability block."
        ) from error
    return model


def sample_network(model, num_samples: int, seed: int):
    """``num_samples`` forward samples (a pandas DataFrame, one column per node, in the
    model's node order), seeded."""
    from pgmpy.sampling import BayesianModelSampling

    frame = BayesianModelSampling(model).forward_sample(
        size=num_samples, seed=seed, show_progress=False
    )
    return frame[list(model.nodes())]


class BayesianNetworkDataModule(pl.LightningDataModule):
    """Samples of a Bayesian network with hidden nodes, and the oracle PAG (module docstring).

    Args:
        network: a pgmpy example name or a ``.bif`` path.
        num_samples: rows to draw.
        hidden_fraction: share of the nodes to hide (0: none), or ``hidden`` names them.
        hidden: node names to hide (overrides ``hidden_fraction``).
        data_seed: seeds the sampling and the hidden nodes.
        moves: items per epoch of the search loaders.
        max_levels: the most categories a column may have.
        constant_columns: ``"error"`` (default): a node sampled constant is refused;
            ``"hide"``: it joins the hidden nodes (it carries no information, and the truth
            marginalises it like any hidden node); ``constant_hidden`` lists them.
    """

    def __init__(
        self,
        network: str = "alarm",
        num_samples: int = 1000,
        hidden_fraction: float = 0.0,
        hidden: list[str] | None = None,
        data_seed: int = 0,
        moves: int = 1,
        max_levels: int = 50,
        constant_columns: str = "error",
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        if constant_columns not in ("error", "hide"):
            raise ValueError(
                f"`constant_columns` must be 'error' or 'hide', got {constant_columns!r}."
            )
        num_samples = require_int(num_samples, "num_samples", 2)
        data_seed = require_int(data_seed, "data_seed", 0)
        hidden_fraction = require_fraction(hidden_fraction, "hidden_fraction")
        self.moves = require_int(moves, "moves", 1)
        model = load_network(network)
        nodes = [str(n) for n in model.nodes()]
        index = {name: k for k, name in enumerate(nodes)}
        if hidden is None:
            count = round(hidden_fraction * len(nodes))
            count = max(count, 1) if hidden_fraction > 0 else 0
            rng = np.random.default_rng([data_seed, 1])
            hidden = sorted(rng.choice(nodes, count, replace=False).tolist())
        if isinstance(hidden, str):  # its characters would be taken for node names
            raise TypeError(f"`hidden` must be a list of node names; write hidden=[{hidden!r}].")
        unknown = [h for h in hidden if h not in index]
        if unknown:
            raise ValueError(f"hidden nodes {unknown} are not in the network's nodes.")
        frame = sample_network(model, num_samples, data_seed)
        self.constant_hidden = []
        if constant_columns == "hide":
            constant = [n for n in nodes if n not in hidden and frame[n].nunique() < 2]
            self.constant_hidden, hidden = constant, sorted([*hidden, *constant])
        self.hidden = list(hidden)
        self.dag_names = nodes
        self.names = [n for n in nodes if n not in set(self.hidden)]
        self.codes, self.levels = encode(frame[self.names], max_levels=max_levels)
        self.dag = np.zeros((len(nodes), len(nodes)), dtype=bool)
        for a, b in model.edges():
            self.dag[index[str(a)], index[str(b)]] = True
        latent = [index[h] for h in self.hidden]
        self.truth_mag = mag_from_dag(self.dag, latent)
        self.truth = pag_from_dag(self.dag, latent)

    @classmethod
    def from_table(
        cls,
        table,
        names: list[str] | None = None,
        moves: int = 1,
        max_levels: int = 50,
        bins: int | None = None,
    ):
        """A data module over a user's table (array or DataFrame; no truth): discrete columns
        as they are, floating-point ones cut into ``bins`` equal-frequency bins when ``bins``
        is given."""
        values = table.to_numpy() if hasattr(table, "to_numpy") else np.asarray(table)
        if values.ndim != 2:
            raise ValueError(f"from_table needs a 2-D table (rows x columns), got {values.shape}.")
        if isinstance(names, str):
            raise TypeError(f"`names` must be a list of column names, got the string {names!r}.")
        if names is None:
            names = getattr(table, "columns", None)
        if names is None:
            names = [f"X{k + 1}" for k in range(values.shape[1])]
        names = [str(n) for n in names]
        if len(names) != values.shape[1]:
            raise ValueError(
                f"from_table got {len(names)} names for a table of {values.shape[1]} columns; "
                "give one name per column (or none: a DataFrame's columns, else X1, X2, ...)."
            )
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"from_table: the column names {repeated} repeat; make them unique.")
        module = cls.__new__(cls)
        pl.LightningDataModule.__init__(module)
        if bins is not None:
            values = np.array(values, dtype=object)
            for j in range(values.shape[1]):
                column = values[:, j]
                if all(isinstance(v, (float, np.floating)) for v in column):
                    values[:, j] = equal_frequency_bins(column.astype(np.float64), bins)
        module.names = names
        module.codes, module.levels = encode(values, max_levels=max_levels, names=names)
        module.moves = require_int(moves, "moves", 1)
        module.hidden, module.dag, module.truth, module.truth_mag = [], None, None, None
        module.constant_hidden = []
        module.dag_names = list(module.names)
        return module

    @classmethod
    def from_csv(
        cls, path: str | Path, moves: int = 1, max_levels: int = 50, bins: int | None = None
    ):
        """A data module over the columns of a CSV file (header row of names; a UTF-8
        byte-order mark is accepted), see :meth:`from_table`. A header that repeats a name
        (pandas would rename the second ``A`` to ``A.1``) and a row with more or fewer fields
        than the header (a truncated line) are refused, naming them."""
        return cls.from_table(read_csv_table(path), moves=moves, max_levels=max_levels, bins=bins)

    def _moves(self) -> DataLoader:
        moves = TensorDataset(torch.arange(self.moves))
        return ResumableDataLoader(moves, trainer=self.trainer, batch_size=1)

    def train_dataloader(self) -> DataLoader:
        return self._moves()
