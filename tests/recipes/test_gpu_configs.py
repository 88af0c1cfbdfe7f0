"""The GPU configs (``recipes/*_gpu.yaml``) end to end on the CPU at a toy size: each loads its
named model the way a user's would, here a tiny Llama saved in a temporary folder (nothing is
downloaded), with the config's precision, LoRA and optimiser settings; only the accelerator is
forced to the CPU and the sizes cut."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.benchmark_scripts import RECIPES, load_recipe


@pytest.fixture(autouse=True)
def _recipe_argv(monkeypatch):
    """Recipes parse ``args``; keep pytest's own command line out of LightningCLI's view."""
    monkeypatch.setattr(sys, "argv", ["recipe"])


def _init_args(config: str) -> dict:
    studies = yaml.safe_load((RECIPES / config).read_text())["studies"]
    (study,) = studies.values()
    return study["init_args"]


def _tiny_llama(folder: Path, texts: list[str], vocab_size: int) -> str:
    """A randomly initialised one-layer Llama and its BPE tokenizer, saved as a user's model
    folder is (``save_pretrained``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lightning_info.lm.tiny_lm import train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(texts, vocab_size=vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_the_gpu_configs_name_a_model_a_gpu_and_bf16():
    for config in ("docks_rag_gpu.yaml", "adaptive_elicitation_gpu.yaml"):
        args = _init_args(config)
        assert args["model"] and args["workers"] == 1, config
        assert args["trainer"]["accelerator"] == "gpu", config
        assert args["trainer"]["precision"] == "bf16-mixed", config
    docks = _init_args("docks_rag_gpu.yaml")  # the paper's LoRA rank, learning rate, epochs
    assert (docks["lora"]["r"], docks["lr"], docks["epochs"]) == (16, 5e-5, 3)
    assert docks["data"]["prompt"]["query_triples"] is True
    assert _init_args("adaptive_elicitation_gpu.yaml")["worlds"] == ["digits"]


def test_docks_rag_gpu_config_tunes_a_saved_llama_with_lora_in_bf16(tmp_path):
    from lab.docks_rag.study import PROMPT_WORDS
    from lightning_info.methods.docks_rag.functional import document_text
    from lightning_info.methods.docks_rag.synthetic import RELATIONS, synthetic_docred

    texts = [document_text(d) for d in synthetic_docred(20, seed=0, world_seed=0)]
    texts += [" | ".join([*PROMPT_WORDS, *RELATIONS.values()])] * 5
    model = _tiny_llama(tmp_path / "llama", texts, vocab_size=500)
    cli = load_recipe("docks_rag").main(
        [
            "--config",
            str(RECIPES / "docks_rag_gpu.yaml"),
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            f"--studies.docred.model={model}",
            "--studies.docred.seeds=[0, 1]",
            "--studies.docred.data={source: {num_train: 6, num_dev: 2}, "
            "prompt: {top_k: 2, query_triples: true}, "
            "knowledge: {kg_steps: 20, encoder: tfidf, encoder_dim: 8}}",
            "--studies.docred.epochs=1",
            "--studies.docred.lr=0.01",
            "--studies.docred.max_length=384",
            "--studies.docred.threads=1",
            "--studies.docred.trainer={accelerator: cpu, precision: bf16-mixed}",
        ]
    )
    result = cli.study_results["docred"]
    columns, rows = result.tables["held-out relation extraction (official DocRED scores)"]
    assert [r[0] for r in rows] == [
        "+ DocKG",
        "+ DocKG + SetRAG (DocKS-RAG)",
        "DocKG scorer alone (its kept triples)",
    ]
    records = result.records
    assert sorted((r["variant"], r["seed"]) for r in records) == [
        ("docks_kg", 0),
        ("docks_kg", 1),
        ("hybrid", 0),
        ("hybrid", 1),
    ]
    assert all(r["model"] == model and r["model_kwargs"] == {"dtype": "bfloat16"} for r in records)
    assert all(r["lora"]["r"] == 16 for r in records)
    assert all(0.0 <= r["ign_f1"] <= r["f1"] + 1e-9 <= 1.0 + 1e-9 for r in records)
    assert (tmp_path / "docks_rag_gpu_docred_f1.png").exists()


def test_adaptive_elicitation_gpu_config_meta_trains_a_saved_llama_in_bf16(tmp_path):
    from lightning_info.methods.adaptive_elicitation.entities import digits_questions

    model = _tiny_llama(tmp_path / "llama", digits_questions(2, True) * 5, vocab_size=300)
    cli = load_recipe("adaptive_elicitation").main(
        [
            "--config",
            str(RECIPES / "adaptive_elicitation_gpu.yaml"),
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            f"--studies.elicitation.model={model}",
            "--studies.elicitation.seeds=[0, 1]",
            "--studies.elicitation.steps=2",
            "--studies.elicitation.report_at=[0, 2]",
            "--studies.elicitation.entities=4",
            "--studies.elicitation.targets={digits: [16, 17, 18]}",
            "--studies.elicitation.candidates={digits: [1, 2, 5, 6]}",
            "--studies.elicitation.digits={digits: {threshold: 0.5}, num_val: 4, num_test: 4, "
            "batch_size: 64}",
            "--studies.elicitation.epochs={digits: 1}",
            "--studies.elicitation.threads=1",
            "--studies.elicitation.trainer={accelerator: cpu, precision: bf16-mixed, "
            "gradient_clip_val: 1.0}",
        ]
    )
    result = cli.study_results["elicitation"]
    columns, rows = result.tables["digits: target accuracy and NLL after n questions"]
    assert columns == ["policy", "acc@0", "acc@2", "NLL@0", "NLL@2"]
    assert [r[0] for r in rows] == [
        "EIG (LM)",
        "max answer entropy (LM)",
        "random (LM)",
        "reference EIG (exact / empirical)",
    ]
    records = result.records
    assert sorted((r["world"], r["seed"]) for r in records) == [("digits", 0), ("digits", 1)]
    for record in records:
        for policy in ("eig", "max_entropy", "random"):
            assert all(0.0 <= a <= 1.0 for a in record["curves"][policy]["accuracy"])
        assert all(kl >= -1e-6 for kl in record["kl"])
    assert (tmp_path / "adaptive_elicitation_gpu_elicitation_curves.png").exists()
