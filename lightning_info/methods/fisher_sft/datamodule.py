"""``FisherSubsetDataModule``: embed a prompt/response pool, select a subset, serve it for SFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader

from lightning_info.core.blocks import TokenBlocks
from lightning_info.core.distributed import gather_strided_blocks, strided_shard
from lightning_info.core.resume import ResumableDataLoader
from lightning_info.core.validation import require_int
from lightning_info.methods.fisher_sft.functional import Selection
from lightning_info.methods.fisher_sft.sampler import (
    STRATEGIES,
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
)

TOKEN_WEIGHTINGS = ("none", "p(1-p)")


class FisherSubsetDataModule(LightningDataModule):
    """Serves the FisherSFT subset of a ``datasets.Dataset`` of prompt/response pairs.

    In ``setup`` the pool is embedded with the frozen causal LM (last-layer hidden states at the
    response tokens; see :func:`lightning_info.lm.features.response_features`), ``budget`` examples
    are selected (``strategy="fisher"``, or the ``"random"`` / ``"k_center"`` baselines), and the
    train loader serves them through a :class:`FisherSubsetSampler`, as causal-LM batches
    (``input_ids``, ``attention_mask``, ``labels`` with ``-100`` outside the response).

    Under DDP the pool is embedded in strided shards, one per rank, gathered with Lightning's
    ``all_gather``; rank 0 selects and broadcasts the indices, so every rank serves the same subset
    and Lightning's ``DistributedSamplerWrapper`` shards it. With ``selection_path`` the selection
    is saved after it is made and reloaded (after checking pool size, budget and strategy) instead
    of being recomputed.

    Args:
        pool: candidate pool with ``prompt_column`` and ``response_column``.
        tokenizer: the model's tokenizer (needs a pad token).
        budget: number of examples to select.
        feature_model: the frozen model to embed the pool with; ``None`` takes the attached
            LightningModule's ``model`` attribute (the LM being fine-tuned, as in the paper).
        eval_dataset: optional held-out pairs for ``val_dataloader`` / ``test_dataloader``.
        token_weighting: ``"none"`` (every response token counts once) or ``"p(1-p)"``: each
            token's curvature weight from the feature model's own next-token prediction
            (:func:`~lightning_info.lm.features.response_features` with
            ``curvature_weights=True``), used in the objective of every strategy.
    """

    def __init__(
        self,
        pool: Any,
        tokenizer: Any,
        budget: int,
        *,
        strategy: str = "fisher",
        feature_model: torch.nn.Module | None = None,
        eval_dataset: Any = None,
        prompt_column: str = "prompt",
        response_column: str = "response",
        chat_template: bool = False,
        max_length: int = 256,
        batch_size: int = 8,
        embed_batch_size: int = 16,
        lam: float = 1.0,
        pooling: str = "none",
        token_weighting: str = "none",
        seed: int = 0,
        selection_path: str | None = None,
        progress: bool = True,
    ) -> None:
        super().__init__()
        if strategy not in STRATEGIES:
            raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}.")
        for name, dataset in (("pool", pool), ("eval_dataset", eval_dataset)):
            if dataset is None:
                continue
            missing = {prompt_column, response_column} - set(dataset.column_names)
            if missing:
                raise ValueError(
                    f"`{name}` lacks column(s) {sorted(missing)}; it has {dataset.column_names}."
                )
        if token_weighting not in TOKEN_WEIGHTINGS:
            raise ValueError(
                f"`token_weighting` must be one of {TOKEN_WEIGHTINGS}, got {token_weighting!r}."
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
        self.feature_model = feature_model
        self.eval_dataset = eval_dataset
        self.prompt_column = prompt_column
        self.response_column = response_column
        self.chat_template = chat_template
        self.max_length = require_int(max_length, "max_length", 2)
        self.batch_size = require_int(batch_size, "batch_size", 1)
        self.embed_batch_size = require_int(embed_batch_size, "embed_batch_size", 1)
        self.lam = lam
        self.pooling = pooling
        self.token_weighting = token_weighting
        self.seed = require_int(seed, "seed", 0)
        self.selection_path = Path(selection_path) if selection_path else None
        self.progress = progress
        self.selection: Selection | None = None
        self.sampler: FisherSubsetSampler | None = None
        self.embedded_rows = 0

    # -- selection -----------------------------------------------------------------------------

    def _expected_metadata(self) -> dict[str, Any]:
        return {
            "pool_size": len(self.pool),
            "budget": self.budget,
            "strategy": self.strategy,
            "token_weighting": self.token_weighting,
        }

    def _embed(self) -> tuple[TokenBlocks, Tensor | None]:
        """The pool's features (and token weights, with ``token_weighting="p(1-p)"``), each rank
        embedding a strided shard, gathered to every rank."""
        from lightning_info.lm.features import response_features

        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        model = self.feature_model
        if model is None:
            model = getattr(trainer.lightning_module, "model", None) if trainer else None
            if model is None:
                raise ValueError(
                    "No model to embed the pool with: pass `feature_model`, or attach a "
                    "LightningModule with a `model` attribute."
                )
        if trainer is not None:
            # Setup runs before the strategy moves the model; embed on the run's device already.
            model.to(trainer.strategy.root_device)
        rows = strided_shard(len(self.pool), rank, world)
        local = response_features(
            model,
            self.tokenizer,
            self.pool.select(rows),
            prompt_column=self.prompt_column,
            response_column=self.response_column,
            batch_size=self.embed_batch_size,
            max_length=self.max_length,
            chat_template=self.chat_template,
            progress=self.progress and rank == 0,
            curvature_weights=self.token_weighting != "none",
        )
        self.embedded_rows = len(rows)
        if self.token_weighting == "none":
            return self._gathered(local, rank, world), None
        # The weights travel as one more column of the token rows.
        features, weights = local
        packed = TokenBlocks(torch.cat([features.values, weights[:, None]], 1), features.offsets)
        packed = self._gathered(packed, rank, world)
        return TokenBlocks(packed.values[:, :-1], packed.offsets), packed.values[:, -1]

    def _gathered(self, local: TokenBlocks, rank: int, world: int) -> TokenBlocks:
        if world == 1:
            return local
        return gather_strided_blocks(self.trainer.strategy, local, len(self.pool), rank, world)

    def _select(self) -> Selection:
        if self.selection_path is not None and self.selection_path.exists():
            return load_selection(self.selection_path, **self._expected_metadata())
        needs_features = self.strategy != "random" or self.token_weighting != "none"
        features, weights = self._embed() if needs_features else (None, None)
        trainer = self.trainer
        selection = None
        if trainer is None or trainer.global_rank == 0:
            selection = select_subset(
                features,
                self.budget,
                strategy=self.strategy,
                pool_size=len(self.pool),
                seed=self.seed,
                lam=self.lam,
                pooling=self.pooling,
                token_weights=weights,
            )
            if self.selection_path is not None:
                save_selection(selection, self.selection_path, **self._expected_metadata())
        if trainer is not None and trainer.world_size > 1:
            selection = trainer.strategy.broadcast(selection, src=0)
        return selection

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.selection is None:
            self.selection = self._select()
            self.sampler = FisherSubsetSampler(self.selection.indices, seed=self.seed)
            self.sampler.selection = self.selection

    # -- loaders -------------------------------------------------------------------------------

    def collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Tokenise prompt + response; ``labels`` are the response tokens, ``-100`` elsewhere."""
        from lightning_info.lm.features import tokenize_prompt_response

        encoded = tokenize_prompt_response(
            self.tokenizer,
            [r[self.prompt_column] for r in rows],
            [r[self.response_column] for r in rows],
            max_length=self.max_length,
            chat_template=self.chat_template,
        )
        labels = encoded["input_ids"].masked_fill(encoded["response_mask"] == 0, -100)
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            "labels": labels,
        }

    def train_dataloader(self) -> DataLoader:
        if self.sampler is None:
            self.setup("fit")
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

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict()} if self.sampler is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if "sampler" in state_dict:
            self.sampler = FisherSubsetSampler(state_dict["sampler"]["indices"], seed=self.seed)
            self.sampler.load_state_dict(state_dict["sampler"])
            self.selection = Selection(
                list(self.sampler.indices), [], float("nan"), self.lam, len(self.pool)
            )
