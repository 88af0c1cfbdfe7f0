"""FisherSFT recipe: LoRA fine-tuning on information-gain vs random subsets, several budgets.

A small GPT-2 is pretrained on one part of the standard library's docstrings (once, cached in
``model.model``'s folder), then fine-tuned with LoRA on ``budget`` "Explain <name>." -> docstring
examples from other modules, chosen by FisherSFT or at random, and evaluated on held-out modules.
Any LightningCLI flag overrides ``recipes/fisher_sft.yaml``; a real model works too::

    python recipes/fisher_sft.py --compare.grid='[32, 64]' --compare.seeds='[0]'
    python recipes/fisher_sft.py --model.model=gpt2 --data.tokenizer=gpt2 \\
        --model.lora='{r: 8, lora_alpha: 16, target_modules: [c_attn]}'
"""

from pathlib import Path

from lab import ComparisonCLI
from lab.fisher_sft.docstrings import DocstringSFTDataModule
from lab.fisher_sft.study import pretrain_docstring_lm
from lightning_info import CausalLMFineTuner

DEFAULT_BASE_MODEL = "results/fisher_sft/tiny-docstring-gpt2"


def main(args=None):
    cli = ComparisonCLI(
        CausalLMFineTuner,
        DocstringSFTDataModule,
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    base = cli.config.model.model
    if base == DEFAULT_BASE_MODEL and not Path(base, "config.json").exists():
        print(f"Pretraining the base model on docstrings into {base} ...", flush=True)
        pretrain_docstring_lm(base, split_seed=cli.config.data.split_seed)
    cli.run()
    return cli


if __name__ == "__main__":
    main()
