"""A toy SFT pipeline: a tiny local base model (built from a config, saved to a folder), the
planted corpus at toy size, and the recipe's config pointed at them (everything built, nothing
fetched). Module-level builders so that the DDP script and the tests share them."""

from __future__ import annotations

from pathlib import Path

import yaml

from lab.sft_corpus import write_planted_sft_corpus
from lightning_info.lm.tiny_lm import tiny_causal_lm
from tests import tiny_lm

RECIPE_YAML = Path(__file__).resolve().parents[2] / "recipes" / "sft_pipeline.yaml"
BASE = "results/fisher_sft/tiny-docstring-gpt2"
CORPUS = "results/sft_pipeline/corpus"
TOY = {
    "trainer": {"max_epochs": 2, "enable_progress_bar": False, "logger": False},
    "model": {
        "optimizer": {"lr": 0.01},
        "lora": {"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]},
    },
    "data": {"budget": 16, "max_length": 256, "batch_size": 4},
    "compare": {"grid": [16], "seeds": [0]},
}


def base_model(folder: Path) -> Path:
    """A one-layer GPT-2 of width 16 and its BPE tokenizer, saved to ``folder``."""
    if not (folder / "config.json").exists():
        tokenizer = tiny_lm.tokenizer()
        model = tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=0)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def corpus(folder: Path) -> dict[str, Path]:
    """The planted corpus at toy size: 40 docstrings + 4 planted test items in the pool, and 8
    canaries that every arm trains on."""
    return write_planted_sft_corpus(folder, pool_size=40, test_size=12, contaminated=4, canaries=8)


def _replace(value, old: str, new: str):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    return value


def _merge(config: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _merge(config[key], value)
        else:
            config[key] = value
    return config


def toy_config(root: Path, **overrides) -> Path:
    """The recipe's YAML with its model and corpus paths under ``root`` and toy sizes."""
    model, files = base_model(root / "base"), corpus(root / "corpus")
    config = yaml.safe_load(RECIPE_YAML.read_text())  # anchors resolved
    config = _replace(config, BASE, str(model))
    config = _replace(config, CORPUS, str(files["pool"].parent))
    config = _merge(_merge(config, TOY), overrides)
    config["compare"]["output_dir"] = str(root / "results")
    config["trainer"]["default_root_dir"] = str(root / "logs")
    path = root / "sft_pipeline.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def prepare(root: Path) -> tuple[Path, dict[str, Path], Path]:
    """The base model, the corpus files and the pool saved with ``save_to_disk``, under ``root``,
    written only where missing. The DDP test calls it before launching the processes: were each
    rank to write them, one could read a file the other is still writing."""
    from lab.sft_corpus import CORPUS_FILES
    from lightning_info.pipelines.sft import load_examples

    model_dir = base_model(root / "base")
    files = {role: root / "corpus" / name for role, name in CORPUS_FILES.items()}
    if not all(path.exists() for path in files.values()):
        files = corpus(root / "corpus")
    saved = root / "pool_dataset"
    if not saved.exists():
        load_examples(files["pool"]).save_to_disk(str(saved))
    return model_dir, files, saved


def pipeline_parts(
    root: Path, *, decontaminate: bool = True, strategy: str = "fisher", max_fisher: float = 1e-10
):
    """The full pipeline's module, data module and callbacks, attached as a user attaches them
    (the pool from a ``save_to_disk`` folder, the test set from JSON lines)."""
    from lightning_info import (
        CausalLMFineTuner,
        FisherConstraint,
        FragmentExtractionAudit,
        TrainTestOverlap,
    )
    from lightning_info.core.options import AdamWOptions
    from lightning_info.methods.prism.auditor import FragmentAuditOptions
    from lightning_info.methods.train_test_overlap.functional import OverlapOptions
    from lightning_info.pipelines import SFTPipelineDataModule, SFTPipelineReport

    model_dir, files, saved = prepare(root)
    data = SFTPipelineDataModule(
        str(model_dir),
        str(saved),
        str(files["test_set"]),
        budget=16,
        strategy=strategy,
        decontaminate=decontaminate,
        max_length=256,
        batch_size=4,
        always_train=str(files["always_train"]),
    )
    module = CausalLMFineTuner(
        str(model_dir),
        optimizer=AdamWOptions(lr=0.01),
        lora={"r": 2, "lora_alpha": 4, "target_modules": ["c_attn"]},
    )
    callbacks = [
        TrainTestOverlap(splits=["test"], options=OverlapOptions(progress=False)),
        FragmentExtractionAudit(
            str(files["canaries"]),
            shadow=str(model_dir),
            world_models=str(model_dir),
            options=FragmentAuditOptions(data_aware="logistic"),
        ),
        FisherConstraint(max_fisher=max_fisher),
        SFTPipelineReport(),
    ]
    return module, data, callbacks


def fit_and_test(
    root: Path, *, seed: int = 0, ckpt_path=None, extra_callbacks=(), **trainer_kwargs
):
    """Fit then test the full pipeline on one CPU process (or under ``trainer_kwargs``'
    strategy); the trainer, the module, the data module, the callbacks and the test metrics."""
    from lightning.pytorch import Trainer, seed_everything
    from lightning.pytorch.loggers import CSVLogger

    seed_everything(seed)
    module, data, callbacks = pipeline_parts(root)
    settings = {
        "max_epochs": 2,
        "accelerator": "cpu",
        "devices": 1,
        "logger": CSVLogger(str(root / "csv"), name="pipeline"),
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "num_sanity_val_steps": 0,
        "limit_val_batches": 0,
        "log_every_n_steps": 1,
        "default_root_dir": str(root),
        **trainer_kwargs,
    }
    trainer = Trainer(callbacks=[*callbacks, *extra_callbacks], **settings)
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    (tested,) = trainer.test(module, datamodule=data, verbose=False)
    return trainer, module, data, callbacks, tested
