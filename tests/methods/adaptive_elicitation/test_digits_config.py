"""``recipes/adaptive_elicitation_digits.yaml``: its settings (the latent world's budget on
shifted digits), and the config end to end at a toy size, its reference lines recomputed."""

from __future__ import annotations

import math
import sys

import pytest
import yaml

from tests.benchmark_scripts import RECIPES, load_recipe

CONFIG = RECIPES / "adaptive_elicitation_digits.yaml"


@pytest.fixture(autouse=True)
def _recipe_argv(monkeypatch):
    """Recipes parse ``args``; keep pytest's own command line out of LightningCLI's view."""
    monkeypatch.setattr(sys, "argv", ["recipe"])


def _init_args() -> dict:
    return yaml.safe_load(CONFIG.read_text())["studies"]["elicitation"]["init_args"]


def test_the_config_trains_about_8000_entities_for_about_4000_steps():
    from lightning_info.methods.adaptive_elicitation import DigitQuestionOptions

    args = _init_args()
    digits = DigitQuestionOptions(**args["digits"]["digits"])
    questions = digits.questions()
    assert [questions[q] for q in args["candidates"]["digits"]] == [
        f"Region {r} dark?" for r in (1, 2, 5, 6, 9, 10, 13, 14)
    ]
    assert [questions[q] for q in args["targets"]["digits"]] == [f"Is it a {k}?" for k in range(10)]
    train = 1797 - args["digits"]["num_val"] - args["digits"]["num_test"]
    entities = train * len(digits.shifts)
    steps = args["epochs"]["digits"] * math.ceil(entities / args["digits"]["batch_size"])
    assert entities == 6985 and steps == 3942
    assert "lookahead" not in args["policies"] and args["worlds"] == ["digits"]


def test_the_config_runs_at_toy_size_with_both_reference_lines(tmp_path):
    from lightning_info.lm.tiny_lm import train_bpe_tokenizer
    from lightning_info.methods.adaptive_elicitation import (
        DigitQuestionOptions,
        ElicitationDataModule,
        EmpiricalPredictiveModel,
    )
    from lightning_info.methods.adaptive_elicitation.evaluation import elicitation_curves

    cli = load_recipe("adaptive_elicitation").main(
        [
            "--config",
            str(CONFIG),
            "--trainer.logger=false",
            f"--compare.output_dir={tmp_path}",
            "--studies.elicitation.seeds=[0, 1]",
            "--studies.elicitation.steps=2",
            "--studies.elicitation.report_at=[0, 2]",
            "--studies.elicitation.entities=4",
            "--studies.elicitation.epochs={digits: 1}",
            "--studies.elicitation.size={layers: 1, width: 16, heads: 2}",
            "--studies.elicitation.trainer={limit_train_batches: 2, limit_val_batches: 1, "
            "limit_test_batches: 1}",
            "--studies.elicitation.workers=1",
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
        "reference EIG (empirical, unshifted images)",
    ]
    args = _init_args()
    digits = DigitQuestionOptions(**args["digits"]["digits"])
    tokenizer = train_bpe_tokenizer(digits.questions() * 5, vocab_size=300)
    candidates, targets = args["candidates"]["digits"], args["targets"]["digits"]
    for record in result.records:
        data = ElicitationDataModule(
            tokenizer,
            source="digits",
            digits=digits,
            num_val=200,
            num_test=200,
            seed=record["seed"],
        )
        assert len(data.train_entities) == 6985
        answers = data.table.answers[data.test_entities[:4]]
        for line, rows_ in (
            ("reference", data.train_entities),
            ("reference_unshifted", data.train_originals),
        ):
            model = EmpiricalPredictiveModel(data.table.answers[rows_], 2)
            curves = elicitation_curves("eig", model, answers, candidates, targets, 2)
            expected = curves["nll"].mean(0).tolist()
            assert record["curves"][line]["nll"] == pytest.approx(expected, abs=1e-12)
        random_curve = record["curves"]["random"]["accuracy"]
        assert all(0.0 <= a <= 1.0 for a in random_curve) and len(random_curve) == 3
        assert all(kl >= -1e-6 for kl in record["kl"])
