"""The docstring SFT benchmark: module-disjoint splits, pretraining, and the FisherSFT recipe."""

from __future__ import annotations

import sys

import pytest
import torch

from lab.fisher_sft.docstrings import DocstringSFTDataModule, docstring_splits
from lab.fisher_sft.study import pretrain_docstring_lm
from lightning_info.lm.corpus import module_of
from lightning_info.lm.tiny_lm import load_causal_lm
from tests.benchmark_scripts import load_recipe


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("base")
    return pretrain_docstring_lm(
        out,
        vocab_size=400,
        n_layer=1,
        n_embd=16,
        n_head=2,
        max_epochs=1,
        max_length=64,
        batch_size=32,
    )


def test_splits_share_no_module():
    parts = docstring_splits(split_seed=0)
    modules = [{module_of(name) for name, _ in part} for part in parts]
    assert all(modules) and not (
        modules[0] & modules[1] or modules[0] & modules[2] or modules[1] & modules[2]
    )


def test_pretrained_model_is_saved_and_reloads_with_identical_outputs(base_model):
    model, tokenizer = load_causal_lm(str(base_model))
    again, _ = load_causal_lm(str(base_model))
    ids = tokenizer("Return the sum of a sequence.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, again(ids).logits)
    assert tokenizer.pad_token_id is not None


def test_data_module_serves_pool_and_held_out_from_other_modules(base_model):
    data = DocstringSFTDataModule(
        str(base_model), budget=4, strategy="random", pool_size=30, held_out_size=6
    )
    pool_modules = {module_of(n) for n in data.pool["name"]}
    held_modules = {module_of(n) for n in data.eval_dataset["name"]}
    assert len(data.pool) == 30 and len(data.eval_dataset) == 6
    assert not pool_modules & held_modules
    with pytest.raises(ValueError, match="larger than the pool"):
        DocstringSFTDataModule(str(base_model), budget=31, pool_size=30)


def test_recipe_compares_fisher_and_random_subsets(base_model, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["recipe"])
    recipe = load_recipe("fisher_sft")
    results = recipe.main(
        [
            f"--model.model={base_model}",
            f"--data.tokenizer={base_model}",
            "--compare.grid=[6]",
            "--compare.seeds=[0]",
            "--trainer.max_epochs=1",
            "--trainer.check_val_every_n_epoch=1",
            "--data.pool_size=24",
            "--data.held_out_size=6",
            "--data.max_length=64",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            "--data.progress=false",
            f"--compare.output_dir={tmp_path}",
            f"--trainer.default_root_dir={tmp_path}",
            "--model.lora={r: 2, lora_alpha: 4, target_modules: [c_attn]}",
        ]
    ).results
    assert [(r.grid_value, r.arm) for r in results] == [(6, "baseline"), (6, "method")]
    assert all(torch.isfinite(torch.tensor(r.value)) and r.value > 0 for r in results)
    assert "FisherSFT subset" in (tmp_path / "fisher_sft.md").read_text()
