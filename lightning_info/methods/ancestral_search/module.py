"""``AncestralGraphSearch``: the search-and-score of Lagrange & Isambert (ICML 2025) as a
LightningModule whose training step is one search move.

The data (integer codes, names and, when known, the true PAG) come from the data module
(:class:`~lightning_info.methods.ancestral_search.datamodule.BayesianNetworkDataModule`), whose
loaders yield one item per move. The first step builds the FCI skeleton and runs the node step
to its fixed point (:func:`~lightning_info.methods.ancestral_search.functional.node_step`); every
later step applies one edge move (:func:`~lightning_info.methods.ancestral_search.functional.
edge_deltas`, :func:`~lightning_info.methods.ancestral_search.functional.choose_move`) and the
search stops the Trainer once no admissible move lowers the score. Under DDP the edges' deltas
are split across the ranks and gathered with Lightning's ``all_gather``, so every rank applies
the same move. The graph, the phase, the last move (the tabu) and the visited graphs are saved
in checkpoints, so a resumed search continues exactly; the checkpoint also holds a fingerprint of
the data's column names and codes, and a search is never resumed on other data (another table,
other columns or another order of them: the saved graph would be read over the wrong variables).
Each step logs the moves made, the last
delta and, against a known truth, the orientation and skeleton F1
(:func:`~lightning_info.methods.ancestral_search.graphs.graph_scores`).
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn

from lightning_info.core.fingerprint import fingerprint, require_fingerprint
from lightning_info.core.validation import require_fraction
from lightning_info.methods.ancestral_search.functional import (
    choose_move,
    edge_deltas,
    initial_graph,
    marks_from_types,
    node_step,
    with_type,
)
from lightning_info.methods.ancestral_search.graphs import graph_scores, to_causallearn
from lightning_info.methods.ancestral_search.information import METHODS, InformationCache

__all__ = ["AncestralGraphSearch"]

_START, _EDGES, _DONE = 0, 1, 2
_DATA_KEY = "ancestral_search_data"
_NOT_LOADED = "not loaded"  # survives pickling (ddp_spawn), unlike a sentinel object


class AncestralGraphSearch(pl.LightningModule):
    """Greedy search-and-score over ancestral graphs (see the module docstring).

    Args:
        method: the complexity of the information scores, ``"nml"`` (MIIC's default) or
            ``"bic"``.
        alpha, test: the FCI skeleton's significance level and test (``"gsq"``, ``"chisq"``).
    """

    def __init__(self, method: str = "nml", alpha: float = 0.05, test: str = "gsq") -> None:
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
        if test not in ("gsq", "chisq"):
            raise ValueError(f"`test` must be 'gsq' or 'chisq', got {test!r}.")
        self.alpha = require_fraction(alpha, "alpha", inclusive_zero=False)
        self.save_hyperparameters()
        self.automatic_optimization = False
        # Lightning counts steps by optimizer steps; the search has nothing to differentiate,
        # so an empty parameter's optimizer marks each move as one step (global_step = moves).
        self.step_marker = nn.Parameter(torch.zeros(0))
        self.register_buffer("types", torch.zeros(0, 0, dtype=torch.int8))
        self.register_buffer("phase", torch.tensor(_START))
        self.register_buffer("last_move", torch.full((3,), -1, dtype=torch.long))
        self.seen: set[bytes] = set()
        self.score: InformationCache | None = None
        self.names: list[str] = []
        self.truth: np.ndarray | None = None
        self._loaded_data: object = _NOT_LOADED

    # ----------------------------------------------------------------------------- setup
    def setup(self, stage: str) -> None:
        data = getattr(self.trainer, "datamodule", None)
        codes = getattr(data, "codes", None)
        if codes is None:
            raise ValueError(
                "AncestralGraphSearch reads its data from the data module's `codes`: fit it "
                "with a BayesianNetworkDataModule (or BayesianNetworkDataModule.from_table)."
            )
        if codes.shape[0] < 10:
            raise ValueError(f"{codes.shape[0]} rows are too few to score a graph: need >= 10.")
        self.score = InformationCache(codes, method=self.hparams.method)
        self.codes = codes
        self.names = list(data.names)
        self.truth = getattr(data, "truth", None)
        if self.types.numel() == 0:
            self.types = torch.zeros(len(self.names), len(self.names), dtype=torch.int8)
        self._check_loaded_data()

    def _data_fingerprint(self) -> str:
        return fingerprint(self.names, np.asarray(self.codes))

    def _check_loaded_data(self) -> None:
        """Refuse a search state saved for other data than the data module's."""
        if self._loaded_data == _NOT_LOADED or not self.names:
            return
        require_fingerprint(
            self._loaded_data,
            self._data_fingerprint(),
            what="search state (its graph over the data's columns)",
            where="the checkpoint",
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD([self.step_marker], lr=0.0)

    # ----------------------------------------------------------------------------- search
    @property
    def graph(self) -> np.ndarray:
        """The current graph as an edge-mark matrix (``graphs``' convention)."""
        return marks_from_types(self.types.cpu().numpy())

    def to_causallearn(self):
        """The current graph as a causal-learn ``GeneralGraph`` named by the data's columns."""
        return to_causallearn(self.graph, self.names or None)

    def _types(self) -> np.ndarray:
        return self.types.cpu().numpy().copy()

    def _gathered_moves(self, types: np.ndarray) -> list[tuple[float, int, int, int]]:
        """Every edge's best move; each rank scores its share, ``all_gather`` joins them."""
        edges = list(zip(*np.nonzero(np.triu(types != 0))))
        rank, world = self.global_rank, self.trainer.world_size
        table = torch.full((len(edges), 4), float("inf"), dtype=torch.float64)
        mine = edges[rank::world]
        for delta, x, y, kind in edge_deltas(types, self.score, mine):
            table[edges.index((x, y))] = torch.tensor([delta, x, y, kind], dtype=torch.float64)
        if world > 1:
            gathered = self.all_gather(table.to(self.device)).cpu()  # (world, E, 4)
            owner = torch.arange(len(edges)) % world
            table = gathered[owner, torch.arange(len(edges))]
        finite = torch.isfinite(table[:, 0])
        return [(float(d), int(x), int(y), int(k)) for d, x, y, k in table[finite].tolist()]

    def on_train_batch_start(self, batch: Any, batch_index: int) -> int | None:
        if int(self.phase) == _DONE:  # converged (e.g. in the run this one resumes)
            self.trainer.should_stop = True
            return -1
        return None

    def training_step(self, batch: Any, batch_index: int) -> None:
        phase = int(self.phase)
        delta = 0.0
        if phase == _START:
            types = node_step(initial_graph(self.codes, self.alpha, self.hparams.test), self.score)
            self.seen = {types.tobytes()}
            self.phase.fill_(_EDGES)
        else:
            types = self._types()
            last = None if self.last_move[0] < 0 else tuple(int(v) for v in self.last_move)
            move = choose_move(types, self._gathered_moves(types), self.seen, last)
            if move is None:
                self.phase.fill_(_DONE)
            else:
                delta, x, y, kind = move
                self.last_move.copy_(torch.tensor([x, y, int(types[x, y])]))
                types = with_type(types, x, y, kind)
                self.seen.add(types.tobytes())
        self.types.copy_(torch.from_numpy(types))
        self.optimizers().step()
        if int(self.phase) == _DONE:
            self.trainer.should_stop = True
        self._log_progress(delta)

    def _log_progress(self, delta: float) -> None:
        logs = {
            "search/edges": float((self.types != 0).sum()) / 2,
            "search/delta": delta,
            "search/converged": float(int(self.phase) == _DONE),
        }
        if self.truth is not None:
            scores = graph_scores(self.graph, self.truth)
            logs["search/orientation_f1"] = scores["orientation_f1"]
            logs["search/skeleton_f1"] = scores["skeleton_f1"]
        self.log_dict(logs, prog_bar=True, on_step=True, on_epoch=False, batch_size=1)

    # ------------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["ancestral_search_seen"] = sorted(self.seen)
        if self.names:
            checkpoint[_DATA_KEY] = self._data_fingerprint()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.seen = set(checkpoint.get("ancestral_search_seen", []))
        self._loaded_data = checkpoint.get(_DATA_KEY)
        self._check_loaded_data()  # after setup when a Trainer resumes, else at setup

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # the graph's size is the data's: take it from the state being loaded
        if prefix + "types" in state_dict:
            self.types = torch.zeros_like(state_dict[prefix + "types"])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
