"""SFT pipeline recipe: four of the suite's methods in one LoRA fine-tuning run, each stage
measured against the run without it.

Decontaminate (train-test overlap), select (FisherSFT), train with LoRA under FisherConstraint,
audit (fragment extraction on planted canaries; loss on the clean and the contaminated test items).
The bundled corpus is FisherSFT's docstring pool with test items copied into it, and canary
records that every arm trains on (``data.always_train``); the recipe writes it into
``corpus.out_dir`` (once, and again when the ``corpus`` sizes change) whenever ``data.pool`` lies
there. The base model is the FisherSFT recipe's (pretrained once). Any LightningCLI flag overrides
``recipes/sft_pipeline.yaml``; a model and an instruction set of your own go through the same
YAML (the audit's canaries and reference model are named in its callbacks: in a copy of the
YAML, passed with ``--config``)::

    python recipes/sft_pipeline.py --compare.seeds='[0]'
    python recipes/sft_pipeline.py --model.model=path/or/name --data.tokenizer=path/or/name \\
        --data.pool=my_pool.jsonl --data.test_set=my_test_set/ --data.always_train=my_canaries.jsonl

A quick look at the whole pipeline, in under a minute on two CPU cores once the base model is
pretrained (its one-time pretraining adds about two minutes): the baseline and the full
pipeline, one seed, a smaller corpus with 120 audit negatives, budget 32, three epochs; the
table goes to ``results/sft_pipeline_quick/``::

    python recipes/sft_pipeline.py --config recipes/sft_pipeline_quick.yaml

The corpus sizes are the ``corpus`` section of the config (:class:`PlantedCorpus`), e.g.
``--corpus.non_members=300``.
"""

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lightning.pytorch.cli import LightningArgumentParser

from lab import ComparisonCLI
from lab.fisher_sft.study import pretrain_docstring_lm
from lab.sft_corpus import CORPUS_FILES, write_planted_sft_corpus
from lightning_info import CausalLMFineTuner
from lightning_info.pipelines import SFTPipelineDataModule

DEFAULT_BASE_MODEL = "results/fisher_sft/tiny-docstring-gpt2"
CORPUS_SETTINGS = "corpus.json"
"""The file beside the corpus that records the sizes it was written with."""


@dataclass(frozen=True)
class PlantedCorpus:
    """The bundled corpus the recipe writes (``lab.sft_corpus.write_planted_sft_corpus``).

    Args:
        out_dir: where it is written; the recipe writes it only when ``data.pool`` lies there.
        pool_size: the docstring candidates of the pool (``None``: all 405).
        test_size: the test items (``None``: all 102).
        contaminated: the test items copied into the pool.
        canaries: the canary records every arm trains on (the audit's members).
        non_members: the records never planted, which the audit scores as negatives with
            ``canaries`` fragments of no record: a TPR at 0.1% FPR rests on more than one
            negative from 1,000 negatives on.
    """

    out_dir: str = "results/sft_pipeline/corpus"
    pool_size: int | None = None
    test_size: int | None = None
    contaminated: int = 20
    canaries: int = 40
    non_members: int = 1000


class RecipeParser(LightningArgumentParser):
    """LightningCLI's parser; the one that reads the recipe's config (``corpus=True``) takes a
    ``corpus`` section too (the parsers made for nested classes, such as callbacks, do not)."""

    def __init__(self, *args, corpus: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if corpus:
            self.add_argument(
                "--corpus",
                type=PlantedCorpus,
                default=PlantedCorpus(),
                help="The bundled corpus: its folder and sizes (written there when data.pool "
                "lies in it).",
            )


def prepare_corpus(corpus: PlantedCorpus, pool: str) -> None:
    """Write ``corpus`` when ``pool`` lies in its folder and the files are missing or were
    written with other sizes."""
    out = Path(corpus.out_dir)
    if Path(pool).parent != out:
        return
    settings = {k: v for k, v in asdict(corpus).items() if k != "out_dir"}
    recorded = out / CORPUS_SETTINGS
    written = all((out / name).exists() for name in CORPUS_FILES.values()) and (
        recorded.exists() and json.loads(recorded.read_text()) == settings
    )
    if not written:
        print(f"Writing the planted corpus into {out} ...", flush=True)
        write_planted_sft_corpus(out, **settings)
        recorded.write_text(json.dumps(settings, indent=1) + "\n")


def main(args=None):
    cli = ComparisonCLI(
        CausalLMFineTuner,
        SFTPipelineDataModule,
        default_config=Path(__file__).with_suffix(".yaml"),
        args=args,
        parser_class=RecipeParser,
        parser_kwargs={"corpus": True},
    )
    base = cli.config.model.model
    if base == DEFAULT_BASE_MODEL and not Path(base, "config.json").exists():
        print(f"Pretraining the base model on docstrings into {base} ...", flush=True)
        pretrain_docstring_lm(base)
    corpus = cli.config.corpus
    if not isinstance(corpus, PlantedCorpus):
        corpus = PlantedCorpus(**vars(corpus))
    prepare_corpus(corpus, cli.config.data.pool)
    cli.run()
    return cli


if __name__ == "__main__":
    main()
