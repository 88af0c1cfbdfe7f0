"""CausalLMFineTuner trains a model loaded with ``from_pretrained`` (which returns it in eval mode)
in train mode, with and without LoRA: no eval-mode warning at the start of fit, dropout on in
``training_step`` and off in ``validation_step`` and ``test_step`` (the modules' ``training``
flags are the oracle)."""

from __future__ import annotations

import warnings

import pytest
import torch
from lightning.pytorch import Trainer
from torch.utils.data import DataLoader

from lightning_info.lm.fine_tuner import CausalLMFineTuner

LORA = {"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"], "lora_dropout": 0.1}


@pytest.fixture(scope="module")
def pretrained_folder(tokenizer, tmp_path_factory):
    """A one-layer GPT-2 with dropout, saved as ``save_pretrained`` writes it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("dropout-gpt2")
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class ModeRecorder(CausalLMFineTuner):
    """Records the ``training`` flag of every submodule and every dropout of the wrapped model
    in each step."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.modes: dict[str, list[tuple[bool, ...]]] = {"train": [], "val": [], "test": []}
        self.dropouts: dict[str, list[dict[str, bool]]] = {"train": [], "val": [], "test": []}

    def _record(self, stage: str) -> None:
        modules = list(self.model.modules())
        self.modes[stage].append(tuple(m.training for m in modules))
        self.dropouts[stage].append(
            {
                name: m.training
                for name, m in self.model.named_modules()
                if isinstance(m, torch.nn.Dropout)
            }
        )

    def training_step(self, batch, batch_idx):
        self._record("train")
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        self._record("val")
        return super().validation_step(batch, batch_idx)

    def test_step(self, batch, batch_idx):
        self._record("test")
        return super().test_step(batch, batch_idx)


def _loader() -> DataLoader:
    ids = torch.randint(3, 200, (8, 12), generator=torch.Generator().manual_seed(0))
    rows = [{"input_ids": r, "attention_mask": torch.ones_like(r), "labels": r} for r in ids]
    return DataLoader(rows, batch_size=4)


def _fit_and_test(module: CausalLMFineTuner, root) -> list[str]:
    """Fit two epochs with validation, then test; the warnings raised, as text."""
    trainer = Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=str(root),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, train_dataloaders=_loader(), val_dataloaders=_loader())
        trainer.test(module, dataloaders=_loader(), verbose=False)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("lora", [None, LORA], ids=["full", "lora"])
def test_a_pretrained_model_fits_in_train_mode_and_evaluates_in_eval_mode(
    pretrained_folder, lora, tmp_path
):
    from transformers import AutoModelForCausalLM

    assert not AutoModelForCausalLM.from_pretrained(pretrained_folder).training  # as loaded
    module = ModeRecorder(str(pretrained_folder), lora=lora)
    assert all(m.training for m in module.modules())
    messages = _fit_and_test(module, tmp_path)
    assert not [m for m in messages if "eval mode" in m], messages
    assert len(module.modes["train"]) == 4 and len(module.modes["val"]) == 4
    assert all(all(flags) for flags in module.modes["train"])
    assert all(not any(flags) for stage in ("val", "test") for flags in module.modes[stage])
    names = set(module.dropouts["train"][0])
    assert any(name.endswith("drop") for name in names)  # GPT-2's embedding dropout
    assert any(name.endswith("resid_dropout") for name in names)
    assert any("lora_dropout" in name for name in names) == (lora is not None)
    assert all(all(flags.values()) for flags in module.dropouts["train"])
    evaluated = module.dropouts["val"] + module.dropouts["test"]
    assert all(set(flags) == names and not any(flags.values()) for flags in evaluated)
    assert all(m.training for m in module.model.modules())  # back in train mode after test


def test_a_module_passed_in_eval_mode_is_trained_in_train_mode(pretrained_folder, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(pretrained_folder).eval()
    module = ModeRecorder(model, lora=LORA)
    messages = _fit_and_test(module, tmp_path)
    assert not [m for m in messages if "eval mode" in m], messages
    assert all(all(flags) for flags in module.modes["train"])
    assert all(not any(flags) for flags in module.modes["val"])
