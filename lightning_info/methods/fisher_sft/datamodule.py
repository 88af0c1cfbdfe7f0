"""``FisherSubsetDataModule``: embed a prompt/response pool, select a subset, serve it for SFT."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch
from lightning.pytorch import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.distributed import gather_strided_blocks, strided_shard
from lightning_info.core.fingerprint import require_fingerprint
from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import (
    require_bool,
    require_choice,
    require_indices,
    require_int,
    require_positive,
)
from lightning_info.methods.fisher_sft.dask_select import store_two_round_select
from lightning_info.methods.fisher_sft.feature_store import FeatureStore
from lightning_info.methods.fisher_sft.functional import (
    POOLINGS,
    FeatureSketch,
    Selection,
    fisher_greedy_select,
    merge_shard_selections,
)
from lightning_info.methods.fisher_sft.sampler import (
    STRATEGIES,
    FisherSubsetSampler,
    describe_model,
    describe_tokenizer,
    load_selection,
    save_selection,
    select_subset,
    selection_fingerprint,
)

TOKEN_WEIGHTINGS = ("none", "p(1-p)")

__all__ = [
    "FisherSubsetDataModule",
    "PromptResponseColumns",
    "SubsetSelectionOptions",
]


@dataclass(frozen=True)
class SubsetSelectionOptions:
    """How :class:`FisherSubsetDataModule` selects its subset (:func:`select_subset`).

    Args:
        lam: the ridge ``lambda > 0`` of (FSFT-1).
        pooling: ``"none"`` (token blocks), ``"mean"`` or ``"sum"`` (one row per example).
        token_weighting: ``"none"`` (every response token counts once) or ``"p(1-p)"``: each
            token's curvature weight from the feature model's own next-token prediction
            (:func:`~lightning_info.lm.features.response_features` with
            ``curvature_weights=True``), used in the objective of every strategy.
        embed_batch_size: pool examples per forward pass when embedding.
        path: a JSON file the selection is saved to once made and reloaded from instead of
            being recomputed, after checking that it was made for this pool (its prompts and
            responses), budget, strategy, seed (random and k-center), these options and, where
            the pool is embedded, the tokenizer and the feature model's class, configuration and
            shape (not its weights: delete the file after changing them); ``None`` keeps it in
            memory only.
        two_round: under DDP with the ``"fisher"`` strategy, each rank selects from the shard it
            embedded and only the picks are gathered, for a second greedy on rank 0 (GreeDi:
            :func:`~lightning_info.methods.fisher_sft.functional.two_round_greedy_select`);
            ``False`` gathers the whole pool to every rank. One process: the same either way.
        sketch_dim: hold the pool's token rows at this many columns, sketched as they are
            embedded (:class:`~lightning_info.methods.fisher_sft.functional.FeatureSketch`,
            seeded by ``sketch_seed``); ``None`` keeps the model's full width.
        feature_dir: a folder the features are written to as each batch is embedded (a
            :class:`~lightning_info.methods.fisher_sft.feature_store.FeatureStore` in
            ``<feature_dir>/rank<r>``, one per rank, rewritten at each selection) instead of
            being held; the selection reads them from there. In one process, ``two_round``
            selects by GreeDi over ``store_shards`` contiguous shards of the store, one in memory
            at a time (:func:`~.dask_select.store_two_round_select`); without it the greedy runs
            on the memory-mapped pool (in float64, a copy of it). Under DDP it needs
            ``two_round``: each rank selects from its own store. ``None`` holds the features in
            memory.
        store_shards: the shards of that GreeDi.
    """

    lam: float = 1.0
    pooling: Literal["none", "mean", "sum"] = "none"
    token_weighting: Literal["none", "p(1-p)"] = "none"
    embed_batch_size: int = 16
    path: str | None = None
    two_round: bool = False
    sketch_dim: int | None = None
    sketch_seed: int = 0
    feature_dir: str | None = None
    store_shards: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "lam", require_positive(self.lam, "lam"))
        require_bool(self.two_round, "two_round")
        for name in ("path", "feature_dir"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"`{name}` must be a path (str) or None, got {value!r}.")
        require_choice(self.pooling, "pooling", POOLINGS)
        require_choice(self.token_weighting, "token_weighting", TOKEN_WEIGHTINGS)
        require_int(self.embed_batch_size, "embed_batch_size", 1)
        if self.sketch_dim is not None:
            require_int(self.sketch_dim, "sketch_dim", 1)
        require_int(self.sketch_seed, "sketch_seed", 0)
        require_int(self.store_shards, "store_shards", 1)


@dataclass(frozen=True)
class PromptResponseColumns:
    """Where a pool's examples keep their prompt and response, and whether the tokenizer's chat
    template wraps them (:func:`~lightning_info.lm.features.tokenize_prompt_response`)."""

    prompt_column: str = "prompt"
    response_column: str = "response"
    chat_template: bool = False

    def __post_init__(self) -> None:
        for name in ("prompt_column", "response_column"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(
                    f"`{name}` must be a column name (str), got {getattr(self, name)!r}."
                )
        require_bool(self.chat_template, "chat_template")


def _instance(value: Any, name: str, kind: type) -> Any:
    """``value``, checked to be a ``kind`` (LightningCLI builds the option groups of a YAML)."""
    if not isinstance(value, kind):
        raise TypeError(f"`{name}` must be a {kind.__name__}, got {type(value).__name__}.")
    return value


class FisherSubsetDataModule(LightningDataModule):
    """Serves the FisherSFT subset of a ``datasets.Dataset`` of prompt/response pairs.

    In ``setup`` the pool is embedded with the frozen causal LM (last-layer hidden states at the
    response tokens; see :func:`lightning_info.lm.features.response_features`), ``budget`` examples
    are selected (``strategy="fisher"``, or the ``"random"`` / ``"k_center"`` baselines), and the
    train loader serves them through a :class:`FisherSubsetSampler`, as causal-LM batches
    (``input_ids``, ``attention_mask``, ``labels`` with ``-100`` outside the response).

    Under DDP the pool is embedded in strided shards, one per rank, gathered with Lightning's
    ``all_gather``; rank 0 selects and broadcasts the indices, so every rank serves the same subset
    and Lightning's ``DistributedSamplerWrapper`` shards it. With ``selection_options.path`` the
    selection is saved after it is made and reloaded (after checking pool size, budget and
    strategy) instead of being recomputed.

    Args:
        pool: candidate pool with the ``columns``' prompt and response columns.
        tokenizer: the model's tokenizer (needs a pad token).
        budget: number of examples to select.
        strategy: ``"fisher"``, ``"random"`` or ``"k_center"`` (:func:`select_subset`).
        selection_options: the objective, the token weighting, the embedding batch size and the
            selection file (:class:`SubsetSelectionOptions`).
        feature_model: the frozen model to embed the pool with; ``None`` takes the attached
            LightningModule's ``model`` attribute (the LM being fine-tuned, as in the paper).
        eval_dataset: optional held-out pairs for ``val_dataloader`` / ``test_dataloader``.
        columns: the prompt and response columns and the chat template
            (:class:`PromptResponseColumns`).
        max_length: tokens per prompt + response, when embedding and when training.
        batch_size: examples per training and evaluation batch.
        seed: the random and k-center selections and the sampler's order.
        progress: show a progress bar while embedding (global rank 0).
    """

    def __init__(
        self,
        pool: Any,
        tokenizer: Any,
        budget: int,
        strategy: Literal["fisher", "random", "k_center"] = "fisher",
        *,
        selection_options: SubsetSelectionOptions = SubsetSelectionOptions(),
        feature_model: torch.nn.Module | None = None,
        eval_dataset: Any = None,
        columns: PromptResponseColumns = PromptResponseColumns(),
        max_length: int = 256,
        batch_size: int = 8,
        seed: int = 0,
        progress: bool = True,
    ) -> None:
        super().__init__()
        require_choice(strategy, "strategy", STRATEGIES)
        options = _instance(selection_options, "selection_options", SubsetSelectionOptions)
        columns = _instance(columns, "columns", PromptResponseColumns)
        if feature_model is not None and not isinstance(feature_model, torch.nn.Module):
            raise TypeError(
                "`feature_model` must be a torch.nn.Module (a causal LM) or None, got "
                f"{type(feature_model).__name__}; load it first, e.g. with "
                "`lightning_info.lm.load_causal_lm`."
            )
        for name, dataset in (("pool", pool), ("eval_dataset", eval_dataset)):
            if dataset is None:
                continue
            if not hasattr(dataset, "column_names") or not hasattr(dataset, "select"):
                raise TypeError(
                    f"`{name}` must be a datasets.Dataset, got {type(dataset).__name__}; build "
                    "one with `datasets.Dataset.from_list(rows)` or `Dataset.from_dict(columns)`."
                )
            needed = {columns.prompt_column, columns.response_column}
            missing = needed - set(dataset.column_names)
            if missing:
                raise ValueError(
                    f"`{name}` lacks column(s) {sorted(missing)}; it has {dataset.column_names}."
                )
        if len(pool) == 0:
            raise ValueError("`pool` is empty: give at least `budget` candidate examples.")
        require_int(budget, "budget", 1)
        if budget > len(pool):
            raise ValueError(
                f"budget={budget} is larger than the pool ({len(pool)} examples); lower it."
            )
        if tokenizer.pad_token_id is None:
            raise ValueError("The tokenizer has no pad token; set `tokenizer.pad_token` first.")
        self.pool = pool
        self.tokenizer = tokenizer
        self.budget = budget
        self.strategy = strategy
        self.selection_options = options
        self.feature_model = feature_model
        self.eval_dataset = eval_dataset
        self.columns = columns
        self.max_length = require_int(max_length, "max_length", 2)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.seed = require_int(seed, "seed", 0)
        self.selection_path = Path(options.path) if options.path else None
        self.progress = require_bool(progress, "progress")
        self.selection: Selection | None = None
        self.sampler: FisherSubsetSampler | None = None
        self.embedded_rows = 0
        self.feature_store: FeatureStore | None = None
        """This rank's store of the pool's features, with ``selection_options.feature_dir``."""
        self.gathered_examples = 0
        """Examples whose features met on one rank to be selected from (the pool, or with
        ``two_round`` under DDP only the ranks' picks)."""
        self.fingerprint: str | None = None
        """The digest of what the selection was made from (pool, settings, models), set
        when ``setup("fit")`` selects or loads it."""
        self.selection_history: list[dict[str, Any]] = []
        """Every subset served so far, ``{"epoch": e, "indices": [...]}`` from the first epoch
        it served (the first selection at epoch 0, each :meth:`reselect` after it)."""
        self._excluded: frozenset[int] = frozenset()
        self.reselection: Any = None
        """What decides, at each train loader request, whether to select again (a
        :class:`~.reselection_callback.FisherReselection` sets itself here at setup): its
        ``wants(epoch)`` and ``exclude_served``; ``None``: the first subset all along."""

    # -- selection -----------------------------------------------------------------------------

    def _expected_metadata(self) -> dict[str, Any]:
        return {
            "pool_size": len(self.pool),
            "budget": self.budget,
            "strategy": self.strategy,
            "token_weighting": self.selection_options.token_weighting,
            **self._sketch_metadata(),
        }

    def _sketch_metadata(self) -> dict[str, Any]:
        # files saved before sketching existed have no `sketch_dim`: read as None, unsketched
        options = self.selection_options
        if options.sketch_dim is None:
            return {"sketch_dim": None}
        return {"sketch_dim": options.sketch_dim, "sketch_seed": options.sketch_seed}

    def _needs_features(self) -> bool:
        return self.strategy != "random" or self.selection_options.token_weighting != "none"

    def _two_round(self) -> bool:
        return self.selection_options.two_round and self.strategy == "fisher"

    def _current_fingerprint(self) -> str:
        """The digest of what the selection depends on
        (:func:`~lightning_info.methods.fisher_sft.sampler.selection_fingerprint`): the pool's
        prompts and responses, the budget, strategy, seed (random and k-center only: FisherSFT
        does not draw), the selection options and, where the pool is embedded, the tokenizer's
        vocabulary, ``max_length``, the chat template and the feature model's class,
        configuration and embedding shape."""
        options, columns = self.selection_options, self.columns
        settings: dict[str, Any] = {
            "budget": self.budget,
            "strategy": self.strategy,
            "seed": None if self.strategy == "fisher" else self.seed,
            "lam": options.lam,
            "pooling": options.pooling,
            "token_weighting": options.token_weighting,
            **self._sketch_metadata(),
        }
        if self._needs_features():
            trainer = self.trainer
            settings |= {
                "max_length": self.max_length,
                "chat_template": columns.chat_template,
                "tokenizer": describe_tokenizer(self.tokenizer),
                "feature_model": describe_model(self._feature_model()),
                "two_round": self._two_round(),
                "world_size": trainer.world_size if trainer is not None else 1,
                "store_shards": options.store_shards if options.feature_dir else None,
            }
        prompts = list(self.pool[columns.prompt_column])
        responses = list(self.pool[columns.response_column])
        return selection_fingerprint((prompts, responses), **settings)

    def _feature_model(self) -> torch.nn.Module:
        """The model the pool is embedded with: ``feature_model``, else the attached
        LightningModule's ``model``."""
        model = self.feature_model
        trainer = self.trainer
        if model is None:
            model = getattr(trainer.lightning_module, "model", None) if trainer else None
            if model is None:
                raise ValueError(
                    "No model to embed the pool with: pass `feature_model`, or attach a "
                    "LightningModule with a `model` attribute."
                )
        return model

    def _embed(self) -> tuple[TokenBlocks, Tensor | None]:
        """The pool's features (and token weights, with ``token_weighting="p(1-p)"``), each rank
        embedding a strided shard, gathered to every rank."""
        local, weights, rank, world = self._embed_shard()
        if weights is None or world == 1:
            return self._gathered(local, rank, world), weights
        # The weights travel as one more column of the token rows.
        packed = TokenBlocks(torch.cat([local.values, weights[:, None]], 1), local.offsets)
        packed = self._gathered(packed, rank, world)
        return TokenBlocks(packed.values[:, :-1], packed.offsets), packed.values[:, -1]

    def _embed_shard(self) -> tuple[TokenBlocks, Tensor | None, int, int]:
        """This rank's strided shard of the pool embedded: features, token weights (or
        ``None``), rank and world size."""
        from lightning_info.lm.features import response_features

        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        model = self._feature_model()
        if trainer is not None:
            # Setup runs before the strategy moves the model; embed on the run's device already.
            model.to(trainer.strategy.root_device)
        rows = strided_shard(len(self.pool), rank, world)
        weighted = self.selection_options.token_weighting != "none"
        embed = functools.partial(
            response_features,
            model,
            self.tokenizer,
            prompt_column=self.columns.prompt_column,
            response_column=self.columns.response_column,
            batch_size=self.selection_options.embed_batch_size,
            max_length=self.max_length,
            chat_template=self.columns.chat_template,
            curvature_weights=weighted,
            project=self._sketch(),
        )
        if self.selection_options.feature_dir is not None:
            features, weights = self._embed_to_store(embed, rows, rank)
        else:
            local = embed(self.pool.select(rows), progress=self.progress and rank == 0)
            features, weights = local if weighted else (local, None)
        self.embedded_rows = len(rows)
        return features, weights, rank, world

    def _embed_to_store(
        self, embed: functools.partial, rows: list[int], rank: int
    ) -> tuple[TokenBlocks, Tensor | None]:
        """Embed ``rows`` one batch at a time, each batch appended to this rank's store; the
        store's memory-mapped features and token weights."""
        options = self.selection_options
        weighted = options.token_weighting != "none"
        store = FeatureStore.create(
            Path(options.feature_dir) / f"rank{rank}",
            sketch=self._sketch(),
            weighted=weighted,
            overwrite=True,
        )
        batch = options.embed_batch_size
        bar = tqdm(
            total=len(rows),
            desc="response features to disk",
            unit="example",
            disable=not (self.progress and rank == 0),
        )
        try:
            for start in range(0, len(rows), batch):
                embedded = embed(self.pool.select(rows[start : start + batch]), progress=False)
                features, weights = embedded if weighted else (embedded, None)
                store.append(features, weights)
                bar.update(len(features))
        finally:
            bar.close()
        self.feature_store = store
        return store.blocks(), store.token_weights()

    def _two_round_select(self) -> Selection | None:
        """GreeDi under DDP: greedy on this rank's shard, the picks (with their token weights and
        pool indices as extra columns) gathered, the second round on rank 0; ``None`` elsewhere."""
        local, weights, rank, world = self._embed_shard()
        options = self.selection_options
        rows = strided_shard(len(self.pool), rank, world)
        kept = [i for i, row in enumerate(rows) if row not in self._excluded]
        candidates, candidate_weights = _rows_of(local, weights, kept)
        picks = [
            kept[i]
            for i in fisher_greedy_select(
                candidates,
                min(self.budget, len(kept)),
                lam=options.lam,
                pooling=options.pooling,
                token_weights=candidate_weights,
            ).indices
        ]
        packed = []  # only the picks travel: rows, token weight, pool index (float64 columns)
        for i in picks:
            start, end = int(local.offsets[i]), int(local.offsets[i + 1])
            columns = [local.values[start:end].double()]
            if weights is not None:
                columns.append(weights[start:end].double()[:, None])
            columns.append(torch.full((end - start, 1), float(rows[i]), dtype=torch.float64))
            packed.append(torch.cat(columns, 1))
        chosen = TokenBlocks.from_list(packed)
        sizes = [
            min(
                self.budget,
                sum(i not in self._excluded for i in strided_shard(len(self.pool), r, world)),
            )
            for r in range(world)
        ]
        gathered = gather_strided_blocks(self.trainer.strategy, chosen, sum(sizes), rank, world)
        self.gathered_examples = len(gathered)
        if rank != 0:
            return None
        values = gathered.values.cpu()
        offsets = gathered.offsets.cpu()
        pool_indices = values[offsets[:-1], -1].long().tolist()
        candidates = TokenBlocks(values[:, : local.dim], offsets)
        merged = merge_shard_selections(
            candidates,
            [list(range(r, sum(sizes), world)) for r in range(world)],
            self.budget,
            lam=options.lam,
            pooling=options.pooling,
            token_weights=None if weights is None else values[:, local.dim],
        )
        indices = [pool_indices[i] for i in merged.indices]
        return replace(merged, indices=indices, pool_size=len(self.pool))

    def _sketch(self) -> FeatureSketch | None:
        options = self.selection_options
        if options.sketch_dim is None:
            return None
        return FeatureSketch(options.sketch_dim, options.sketch_seed)

    def _gathered(self, local: TokenBlocks, rank: int, world: int) -> TokenBlocks:
        if world == 1:
            return local
        return gather_strided_blocks(self.trainer.strategy, local, len(self.pool), rank, world)

    def _save(self, selection: Selection) -> None:
        save_selection(
            selection,
            self.selection_path,
            fingerprint=self.fingerprint,
            **self._expected_metadata(),
        )

    def _select(self, use_saved: bool = True) -> Selection:
        options = self.selection_options
        trainer = self.trainer
        world = trainer.world_size if trainer is not None else 1
        two_round = self._two_round()
        needs_features = self._needs_features()
        if options.feature_dir is not None and world > 1 and needs_features and not two_round:
            raise ValueError(
                "`feature_dir` under DDP needs `two_round=True` and strategy='fisher': each rank "
                "then selects from the store it wrote and only the picks are gathered (gathering "
                "every rank's store to one process would hold the pool again). Set them, or "
                "select in one process with `path` set: the DDP run then reuses that selection."
            )
        self.fingerprint = self._current_fingerprint()
        saved = use_saved and self.selection_path is not None
        if saved and self.selection_path.exists():
            return load_selection(
                self.selection_path, fingerprint=self.fingerprint, **self._expected_metadata()
            )
        if two_round and world > 1:
            selection = self._two_round_select()
            if selection is not None and saved:
                self._save(selection)
            return trainer.strategy.broadcast(selection, src=0)
        features, weights = self._embed() if needs_features else (None, None)
        self.gathered_examples = 0 if features is None else len(features)
        selection = None
        if options.feature_dir is not None and two_round:  # one process: GreeDi from disk
            selection = store_two_round_select(
                self.feature_store,
                self.budget,
                options.store_shards,
                lam=options.lam,
                pooling=options.pooling,
            )
        elif trainer is None or trainer.global_rank == 0:
            kept = [i for i in range(len(self.pool)) if i not in self._excluded]
            if features is not None:
                features, weights = _rows_of(features, weights, kept)
            selection = select_subset(
                features,
                self.budget,
                strategy=self.strategy,
                pool_size=len(kept),
                seed=self.seed + len(self.selection_history),  # a new draw per round
                lam=options.lam,
                pooling=options.pooling,
                token_weights=weights,
            )
            selection = replace(
                selection, indices=[kept[i] for i in selection.indices], pool_size=len(self.pool)
            )
        if selection is not None and saved:
            self._save(selection)
        if trainer is not None and trainer.world_size > 1:
            selection = trainer.strategy.broadcast(selection, src=0)
        return selection

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.selection is None:
            self._check_tokenizer()
            self._serve(self._select(), epoch=0)

    def _serve(self, selection: Selection, epoch: int) -> None:
        self.selection = selection
        self.sampler = FisherSubsetSampler(selection.indices, seed=self.seed)
        self.sampler.selection = selection
        self.selection_history.append({"epoch": epoch, "indices": list(selection.indices)})

    def reselect(self, epoch: int, exclude_served: bool = False) -> Selection:
        """Select again, from the features of the model as it is now (the attached module's
        ``model`` unless ``feature_model`` was given), and serve the new subset from the next
        train loader (Lightning's ``reload_dataloaders_every_n_epochs``). Under DDP every rank
        must call it (the pool is embedded in shards and the selection broadcast from rank 0,
        as in ``setup``), so that every rank serves the same subset. ``exclude_served``: choose
        among the examples no earlier subset served. ``epoch``: the first epoch the subset
        serves (kept in :attr:`selection_history`). The ``selection_options.path`` file keeps
        the first selection only."""
        require_int(epoch, "epoch", 0)
        require_bool(exclude_served, "exclude_served")
        if exclude_served and self.selection_options.feature_dir and self._two_round():
            raise ValueError(
                "exclude_served=True is not supported with `feature_dir` and `two_round` (the "
                "GreeDi over the stored shards selects from every row); drop one of them."
            )
        excluded = {i for entry in self.selection_history for i in entry["indices"]}
        if exclude_served and len(self.pool) - len(excluded) < self.budget:
            raise ValueError(
                f"{len(self.pool) - len(excluded)} examples of the pool were never served, "
                f"fewer than budget={self.budget}: re-select less often, keep served examples "
                "(exclude_served=False) or grow the pool."
            )
        self._excluded = frozenset(excluded) if exclude_served else frozenset()
        try:
            selection = self._select(use_saved=False)
        finally:
            self._excluded = frozenset()
        self._serve(selection, epoch)
        return selection

    # -- loaders -------------------------------------------------------------------------------

    def collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Tokenise prompt + response; ``labels`` are the response tokens, ``-100`` elsewhere."""
        from lightning_info.lm.features import tokenize_prompt_response

        columns = self.columns
        encoded = tokenize_prompt_response(
            self.tokenizer,
            [r[columns.prompt_column] for r in rows],
            [r[columns.response_column] for r in rows],
            max_length=self.max_length,
            chat_template=columns.chat_template,
        )
        labels = encoded["input_ids"].masked_fill(encoded["response_mask"] == 0, -100)
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            "labels": labels,
        }

    def train_dataloader(self) -> DataLoader:
        """The loader of the current subset. Lightning requests it at the start of every epoch
        with ``Trainer(reload_dataloaders_every_n_epochs=1)``: that is where a due
        re-selection (:attr:`reselection`) runs, before the epoch it serves, on every rank."""
        if self.sampler is None:
            self.setup("fit")
        policy, trainer = self.reselection, self.trainer
        epoch = trainer.current_epoch if trainer is not None else 0
        later = epoch > self.selection_history[-1]["epoch"]
        if policy is not None and later and policy.wants(epoch):
            self.reselect(epoch, exclude_served=policy.exclude_served)
        return ResumableDataLoader(
            self.pool,
            trainer=self.trainer,
            batch_size=self.batch_size,
            sampler=self.sampler,
            collate_fn=self.collate,
        )

    def _eval_loader(self) -> DataLoader | list:
        if self.eval_dataset is None:
            return []
        return DataLoader(self.eval_dataset, batch_size=self.batch_size, collate_fn=self.collate)

    def val_dataloader(self) -> DataLoader | list:
        return self._eval_loader()

    def test_dataloader(self) -> DataLoader | list:
        return self._eval_loader()

    def _check_tokenizer(self) -> None:
        """Refuse a tokenizer with ids the trained (or feature) model has no embedding for."""
        from lightning_info.lm.features import require_matching_tokenizer

        trainer = self.trainer
        trained = getattr(trainer.lightning_module, "model", None) if trainer else None
        for model in (trained, self.feature_model):
            if isinstance(model, torch.nn.Module):
                require_matching_tokenizer(model, self.tokenizer)

    def served_count(self) -> int:
        """How many pool rows the train loader serves: the ``budget`` selected."""
        return self.budget

    def state_dict(self) -> dict[str, Any]:
        if self.sampler is None:
            return {}
        return {
            "sampler": self.sampler.state_dict(),
            "fingerprint": self.fingerprint,
            "history": [
                dict(entry, indices=list(entry["indices"])) for entry in self.selection_history
            ],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the served subset and its order. Refused when the checkpoint's subset is not
        ``served_count()`` distinct rows of this pool, or (where both are known) was selected
        from another pool or with other settings than this data module's."""
        if "sampler" in state_dict:
            saved = state_dict.get("fingerprint")
            if saved is not None and self.fingerprint is not None:
                require_fingerprint(
                    saved, self.fingerprint, what="data module state", where="The checkpoint"
                )
            indices = require_indices(
                state_dict["sampler"]["indices"],
                "the checkpoint's selected indices",
                len(self.pool),
                unique=True,
            )
            if len(indices) != self.served_count():
                raise ValueError(
                    f"The checkpoint serves {len(indices)} pool rows but this data module "
                    f"serves {self.served_count()} (budget={self.budget}); resume with the "
                    "settings the checkpoint was saved with."
                )
            self.sampler = FisherSubsetSampler(state_dict["sampler"]["indices"], seed=self.seed)
            self.sampler.load_state_dict(state_dict["sampler"])
            self.selection = Selection(
                list(self.sampler.indices),
                [],
                float("nan"),
                self.selection_options.lam,
                len(self.pool),
            )
            history = state_dict.get("history")
            if history is None:  # saved before re-selection: the one subset, from epoch 0
                history = [{"epoch": 0, "indices": list(self.sampler.indices)}]
            self.selection_history = [
                {
                    "epoch": require_int(entry["epoch"], "the checkpoint's history epoch", 0),
                    "indices": require_indices(
                        entry["indices"],
                        "the checkpoint's history indices",
                        len(self.pool),
                        unique=True,
                    ).tolist(),
                }
                for entry in history
            ]


def _rows_of(
    features: TokenBlocks, weights: Tensor | None, rows: list[int]
) -> tuple[TokenBlocks, Tensor | None]:
    """The examples ``rows`` of ``features`` (and their token weights), in that order; the
    blocks themselves when ``rows`` is all of them."""
    if rows == list(range(len(features))):
        return features, weights
    offsets = features.offsets.tolist()
    spans = [torch.arange(offsets[i], offsets[i + 1]) for i in rows]
    tokens = torch.cat(spans) if spans else torch.zeros(0, dtype=torch.long)
    lengths = torch.tensor([len(span) for span in spans], dtype=torch.long)
    new_offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    picked = TokenBlocks(features.values[tokens.to(features.values.device)], new_offsets)
    return picked, None if weights is None else weights[tokens.to(weights.device)]
