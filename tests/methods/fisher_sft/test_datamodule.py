"""FisherSubsetDataModule: selection against the functional core, files, DDP, errors."""

from __future__ import annotations

import json

import pytest
import torch
from lightning.pytorch import Callback, Trainer

from lightning_info.lm.features import response_features
from lightning_info.methods.fisher_sft.datamodule import (
    PromptResponseColumns,
    SubsetSelectionOptions,
)
from lightning_info.methods.fisher_sft.sampler import select_subset
from tests import tiny_lm
from tests.tiny import QUIET, ReleaseProcessGroup


def _fit(data, model=None, **kwargs):
    model = model or tiny_lm.finetuner()
    trainer = Trainer(**{**QUIET, "max_steps": 1, **kwargs})
    trainer.fit(model, datamodule=data)
    return trainer, model


@pytest.mark.parametrize("strategy", ["fisher", "k_center", "random"])
def test_setup_selects_what_the_functional_core_selects(strategy):
    data = tiny_lm.subset_data(strategy=strategy)
    _, model = _fit(data)
    # Features of the untouched model: the module's LoRA adapters start as the identity.
    features = response_features(
        tiny_lm.finetuner().model,
        tiny_lm.tokenizer(),
        tiny_lm.pool(),
        max_length=96,
        progress=False,
    )
    expected = select_subset(features, 8, strategy=strategy, seed=0)
    assert data.selection.indices == expected.indices
    assert sorted(data.sampler) == sorted(expected.indices)
    assert data.embedded_rows == (0 if strategy == "random" else tiny_lm.POOL_SIZE)


def test_batches_hold_the_selected_rows_with_labels_on_the_response_only():
    data = tiny_lm.subset_data(budget=5, batch_size=5, max_length=256)
    data.feature_model = tiny_lm.finetuner().model
    data.setup("fit")
    (batch,) = list(data.train_dataloader())
    tokenizer = tiny_lm.tokenizer()
    served = {
        tokenizer.decode(ids[labels != -100])
        for ids, labels in zip(batch["input_ids"], batch["labels"])
    }
    expected = {tiny_lm.pool()[i]["response"] + tokenizer.eos_token for i in data.selection.indices}
    assert served == expected
    assert torch.equal(batch["attention_mask"].bool(), batch["input_ids"] != tokenizer.pad_token_id)


def test_selection_file_is_written_once_and_reused(tmp_path):
    path = tmp_path / "selection.json"
    saved = SubsetSelectionOptions(path=str(path))
    first = tiny_lm.subset_data(selection_options=saved)
    _fit(first)
    assert json.loads(path.read_text())["indices"] == first.selection.indices
    second = tiny_lm.subset_data(selection_options=saved)
    _fit(second)
    assert second.selection.indices == first.selection.indices
    assert second.embedded_rows == 0, "a saved selection must not embed the pool again"
    with pytest.raises(ValueError, match="budget: saved 8, now 6"):
        _fit(tiny_lm.subset_data(budget=6, selection_options=saved))


def test_evaluation_logs_token_weighted_loss_and_perplexity():
    data = tiny_lm.subset_data(eval_dataset=tiny_lm.held_out())
    trainer, model = _fit(data)
    (metrics,) = trainer.test(model, datamodule=data, verbose=False)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in data.test_dataloader():
            logits = model.model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
            labels = batch["labels"][:, 1:]
            nll = torch.nn.functional.cross_entropy(
                logits[:, :-1].transpose(1, 2), labels, ignore_index=-100, reduction="sum"
            )
            total += nll.item()
            count += int((labels != -100).sum())
    assert metrics["test/loss"] == pytest.approx(total / count, rel=1e-4)
    assert metrics["test/ppl"] == pytest.approx(
        torch.exp(torch.tensor(total / count)).item(), rel=1e-4
    )


class SelectionProbe(Callback):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def on_train_start(self, trainer, pl_module):
        data = trainer.datamodule
        record = {
            "indices": data.selection.indices,
            "embedded_rows": data.embedded_rows,
            "gathered": data.gathered_examples,
        }
        (self.out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def test_ddp_ranks_embed_half_the_pool_each_and_select_the_same_subset(tmp_path):
    # with token weights, which travel with the gathered features (unweighted DDP: plugin table)
    weighted = SubsetSelectionOptions(token_weighting="p(1-p)")
    single = tiny_lm.subset_data(selection_options=weighted)
    _fit(single)
    _fit(
        tiny_lm.subset_data(batch_size=2, selection_options=weighted),
        strategy="ddp_spawn",
        devices=2,
        callbacks=[SelectionProbe(tmp_path), ReleaseProcessGroup()],
    )
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert records[0]["indices"] == records[1]["indices"] == single.selection.indices
    assert [r["embedded_rows"] for r in records] == [12, 12]
    assert [r["gathered"] for r in records] == [24, 24]  # the whole pool on every rank


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(budget=25), "larger than the pool"),
        (dict(strategy="best"), "strategy"),
        (dict(columns=PromptResponseColumns(prompt_column="question")), "lacks column"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        tiny_lm.subset_data(**kwargs)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: SubsetSelectionOptions(lam=0.0), ValueError, "`lam` must be > 0"),
        (lambda: SubsetSelectionOptions(pooling="max"), ValueError, "`pooling` must be one of"),
        (lambda: SubsetSelectionOptions(embed_batch_size=0), ValueError, "embed_batch_size"),
        (lambda: tiny_lm.subset_data(selection_options={"lam": 1.0}), TypeError, "Options"),
    ],
)
def test_bad_selection_options(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_empty_pool_and_missing_pad_token():
    from lightning_info import FisherSubsetDataModule

    with pytest.raises(ValueError, match="empty"):
        FisherSubsetDataModule(tiny_lm.pool().select([]), tiny_lm.tokenizer(), budget=1)
    no_pad = type("NoPad", (), {"pad_token_id": None})()
    with pytest.raises(ValueError, match="pad token"):
        FisherSubsetDataModule(tiny_lm.pool(), no_pad, budget=1)


def test_token_weighting_selects_with_the_models_curvature_weights():
    data = tiny_lm.subset_data(selection_options=SubsetSelectionOptions(token_weighting="p(1-p)"))
    data.feature_model = tiny_lm.finetuner().model
    data.setup("fit")
    features, weights = response_features(
        data.feature_model,
        tiny_lm.tokenizer(),
        tiny_lm.pool(),
        max_length=96,
        progress=False,
        curvature_weights=True,
    )
    expected = select_subset(features, 8, token_weights=weights)
    assert data.selection.indices == expected.indices
    assert data.selection.objective == pytest.approx(expected.objective, abs=1e-8)
    unweighted = select_subset(features, 8)
    assert data.selection.objective != pytest.approx(unweighted.objective, abs=1e-3)


def test_token_weighting_must_be_known():
    with pytest.raises(ValueError, match="token_weighting"):
        SubsetSelectionOptions(token_weighting="entropy")


def test_ddp_two_round_selection_gathers_only_each_ranks_picks(tmp_path):
    """GreeDi under DDP: each rank greedy-selects from the shard it embedded, rank 0 merges the
    picks; the same subset as the functional two-round greedy over the same strided shards."""
    from lightning_info.methods.fisher_sft.functional import two_round_greedy_select

    options = SubsetSelectionOptions(token_weighting="p(1-p)", two_round=True)
    _fit(
        tiny_lm.subset_data(batch_size=2, selection_options=options),
        strategy="ddp_spawn",
        devices=2,
        callbacks=[SelectionProbe(tmp_path), ReleaseProcessGroup()],
    )
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    features, weights = response_features(
        tiny_lm.finetuner().model,
        tiny_lm.tokenizer(),
        tiny_lm.pool(),
        max_length=96,
        progress=False,
        curvature_weights=True,
    )
    expected = two_round_greedy_select(features, 8, 2, token_weights=weights)
    assert records[0]["indices"] == records[1]["indices"] == expected.indices
    assert [r["embedded_rows"] for r in records] == [12, 12]
    assert records[0]["gathered"] == 16  # 8 picks of each rank met on rank 0, not 24 examples
