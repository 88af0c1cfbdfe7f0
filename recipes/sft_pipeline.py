"""SFT pipeline recipe: four of the suite's methods in one LoRA fine-tuning run, each stage
measured against the run without it.

Decontaminate (train-test overlap), select (FisherSFT), train with LoRA under FisherConstraint,
audit (fragment extraction on planted canaries; loss on the clean and the contaminated test items).
The bundled corpus (written once into ``results/sft_pipeline/corpus``) is FisherSFT's docstring
pool with test items copied into it, and canary records that every arm trains on
(``data.always_train``); the base model is the FisherSFT recipe's (pretrained once). Any
LightningCLI flag overrides ``recipes/sft_pipeline.yaml``; a model and an instruction set of your
own go through the same YAML (the audit's canaries and reference model are named in its callbacks:
in a copy of the YAML, passed with ``--config``)::

    python recipes/sft_pipeline.py --compare.seeds='[0]'
    python recipes/sft_pipeline.py --model.model=path/or/name --data.tokenizer=path/or/name \\
        --data.pool=my_pool.jsonl --data.test_set=my_test_set/ --data.always_train=my_canaries.jsonl
"""

from pathlib import Path

from lab import ComparisonCLI
from lab.fisher_sft.study import pretrain_docstring_lm
from lab.sft_corpus import CORPUS_FILES, write_planted_sft_corpus
from lightning_info import CausalLMFineTuner
from lightning_info.pipelines import SFTPipelineDataModule

DEFAULT_BASE_MODEL = "results/fisher_sft/tiny-docstring-gpt2"
DEFAULT_CORPUS = Path("results/sft_pipeline/corpus")
NON_MEMBERS = 1000
"""Never-planted canary records the audit scores as negatives: a TPR at 0.1% FPR needs 1,000."""


def main(args=None):
    cli = ComparisonCLI(
        CausalLMFineTuner,
        SFTPipelineDataModule,
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
    )
    base = cli.config.model.model
    if base == DEFAULT_BASE_MODEL and not Path(base, "config.json").exists():
        print(f"Pretraining the base model on docstrings into {base} ...", flush=True)
        pretrain_docstring_lm(base)
    corpus = [DEFAULT_CORPUS / name for name in CORPUS_FILES.values()]
    if Path(cli.config.data.pool).parent == DEFAULT_CORPUS and not all(f.exists() for f in corpus):
        write_planted_sft_corpus(DEFAULT_CORPUS, non_members=NON_MEMBERS)
    cli.run()
    return cli


if __name__ == "__main__":
    main()
