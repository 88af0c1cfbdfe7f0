"""The scale study's pieces: the larger offline tables, rows the simulation leaves empty, the
study over several missing rates with ReMasker and tuned baselines (cells against a direct
computation), a step budget, and recipes/cacti_scale.yaml at a toy size."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import yaml

from lab.cacti import study as study_module
from lab.cacti.study import ImputationStudy, baseline_imputer, train_cacti
from lightning_info.methods.cacti.datamodule import TabularImputationDataModule, load_table
from lightning_info.methods.cacti.functional import imputation_scores
from lightning_info.methods.cacti.missingness import MissingnessOptions, simulate_missing
from tests.benchmark_scripts import RECIPES, load_recipe

TINY = {"embed_dim": 8, "encoder_depth": 1, "decoder_depth": 1, "num_heads": 2}


def test_digits_drops_its_constant_pixels_and_describes_the_rest():
    import sklearn.datasets

    values, columns = load_table("digits")
    full = sklearn.datasets.load_digits()
    assert values.shape == (1797, 61) and values.std(0).min() > 0
    dropped = sorted(set(full.feature_names) - set(columns))
    assert dropped == ["pixel_0_0", "pixel_4_0", "pixel_4_7"]
    assert (full.data[:, [0, 32, 39]] == 0).all()  # the dropped ones are 0 in every image
    kept = [full.feature_names.index(c) for c in columns]
    np.testing.assert_array_equal(values, full.data[:, kept])
    data = TabularImputationDataModule("digits", mechanism="mcar", context="none")
    assert "row 3, column 5" in data.descriptions["pixel_3_5"]


def test_fair_loads_from_statsmodels_with_descriptions():
    fair = pytest.importorskip("statsmodels.datasets.fair")
    values, columns = load_table("fair")
    frame = fair.load_pandas().data
    assert values.shape == (6366, 9) and columns == list(frame.columns)
    np.testing.assert_array_equal(values, frame.to_numpy())
    data = TabularImputationDataModule("fair", mechanism="mar", context="none")
    assert data.descriptions["rate_marriage"].startswith("self-rated marriage")


def test_rows_left_empty_are_dropped_only_when_asked():
    table = np.random.default_rng(0).normal(size=(300, 3))
    options = MissingnessOptions(rate=0.6)
    empty = simulate_missing(table, 0.6, "mcar", seed=4).all(1)
    assert empty.sum() > 20  # the oracle: rows whose every entry the simulation hides
    with pytest.raises(ValueError, match="no observed"):
        TabularImputationDataModule.from_table(
            table, mechanism="mcar", missingness=options, data_seed=4, context="none"
        )
    data = TabularImputationDataModule.from_table(
        table,
        mechanism="mcar",
        missingness=MissingnessOptions(rate=0.6, drop_empty_rows=True),
        data_seed=4,
        context="none",
    )
    assert data.dropped_rows == empty.sum()
    np.testing.assert_array_equal(data.table, table[~empty])
    assert data.observed.any(1).all()


def test_a_step_budget_replaces_epochs():
    data = TabularImputationDataModule("synthetic:120", mechanism="mcar", context="none")
    data.batch_size = 32  # 96 training rows: 3 steps an epoch
    module = train_cacti(data, False, 0, TINY, max_epochs=50, max_steps=4)
    assert module.trainer.global_step == 4
    assert train_cacti(data, False, 0, TINY, max_epochs=2).trainer.global_step == 6


def test_study_over_rates_with_remasker_and_tuned_baselines(monkeypatch):
    trained = []
    original = study_module.train_cacti

    def recording(data, use_context, seed, model, max_epochs, max_steps=None):
        module = original(data, use_context, seed, model, max_epochs, max_steps)
        trained.append((use_context, module.masking, module.mask_ratio, module.use_context))
        return module

    monkeypatch.setattr(study_module, "train_cacti", recording)
    study = ImputationStudy(
        tables=["synthetic:80"],
        mechanisms=["mnar"],
        rate=[0.1, 0.5],
        seeds=[0],
        methods=["knn", "iterative", "remasker", "cacti"],
        model=TINY,
        remasker={"mask_ratio": 0.25},
        baselines={"knn": {"n_neighbors": 3}, "iterative": {"max_iter": 4}},
        max_steps=2,
        context="tfidf",
    )
    result = study.run()
    columns, rows = list(result.tables.values())[0]
    assert columns == [
        "table",
        "mechanism",
        "missing",
        "KNN (3)",
        "IterativeImputer",
        "ReMasker",
        "CACTI",
        "CACTI - best baseline",
        "CACTI - ReMasker",
    ]
    assert [row[:3] for row in rows] == [
        ["synthetic:80", "mnar", "10%"],
        ["synthetic:80", "mnar", "50%"],
    ]
    # ReMasker: random re-masking at its ratio, no context; CACTI: copy masking with context
    assert sorted(trained) == [
        (False, "random", 0.25, False),
        (False, "random", 0.25, False),
        (True, "copy", 0.5, True),
        (True, "copy", 0.5, True),
    ]
    for row, rate in zip(rows, (0.1, 0.5)):
        data = TabularImputationDataModule(
            "synthetic:80",
            mechanism="mnar",
            missingness=MissingnessOptions(rate=rate, drop_empty_rows=True),
            context="none",
        )
        train, _, _ = data.arrays("train")
        test, truth, target = data.arrays("test")
        for column, method in ((3, "knn"), (4, "iterative")):
            imputer = baseline_imputer(method, 0, study.baselines[method])
            expected = imputation_scores(truth, imputer.fit(train).transform(test), target)["r2"]
            assert row[column] == f"{expected:.4f} ± 0.0000"
        cacti, remasker = float(row[6].split(" ± ")[0]), float(row[5].split(" ± ")[0])
        assert abs(float(row[8]) - (cacti - remasker)) <= 1e-3 + 1e-9
    with pytest.raises(ValueError, match="rate"):
        ImputationStudy(rate=[0.3, 1.0])
    with pytest.raises(ValueError, match="baselines"):
        ImputationStudy(baselines={"cacti": {}})


def test_baselines_tuned_per_cell_are_the_ones_each_cell_runs():
    """`cell_baselines` sets KNN's k on one table and rate; the other cells keep `baselines`:
    each cell's score equals KNNImputer at that cell's k computed directly."""
    study = ImputationStudy(
        tables=["synthetic:80"],
        mechanisms=["mnar"],
        rate=[0.1, 0.5],
        seeds=[0, 1],
        methods=["knn"],
        baselines={"knn": {"n_neighbors": 3}, "iterative": {"max_iter": 4}},
        cell_baselines={"synthetic:80@0.5": {"knn": {"n_neighbors": 9}}},
        context="none",
    )
    assert study._baselines("synthetic:80", 0.5) == {
        "knn": {"n_neighbors": 9},
        "iterative": {"max_iter": 4},
    }
    assert list(study._baselines("synthetic:80", 0.5)) == ["knn", "iterative"]  # a stable repr
    columns, rows = list(study.run().tables.values())[0]
    assert columns == ["table", "mechanism", "missing", "KNN (tuned k)"]
    for row, rate, k in zip(rows, (0.1, 0.5), (3, 9)):
        scores = []
        for seed in (0, 1):
            data = TabularImputationDataModule(
                "synthetic:80",
                mechanism="mnar",
                missingness=MissingnessOptions(rate=rate, drop_empty_rows=True),
                data_seed=seed,
                context="none",
            )
            train, _, _ = data.arrays("train")
            test, truth, target = data.arrays("test")
            imputed = baseline_imputer("knn", seed, {"n_neighbors": k}).fit(train).transform(test)
            scores.append(imputation_scores(truth, imputed, target)["r2"])
        assert row[3] == f"{np.mean(scores):.4f} ± {np.std(scores, ddof=1):.4f}"
    with pytest.raises(ValueError, match="no cell of this study"):
        ImputationStudy(tables=["synthetic:80"], rate=0.3, cell_baselines={"synthetic:80@0.5": {}})
    with pytest.raises(ValueError, match="choose from"):
        ImputationStudy(
            tables=["synthetic:80"], rate=0.5, cell_baselines={"synthetic:80@0.5": {"cacti": {}}}
        )


TOY = [
    "tables=[synthetic:60, synthetic:90]",
    "seeds=[0]",
    "max_steps=1",
    "context=tfidf",
    "workers=1",
    'model={"embed_dim": 8, "encoder_depth": 1, "decoder_depth": 1}',
]


RATES = ["10%", "30%", "50%"]


def run_toy(config, studies, tmp_path, monkeypatch, extra=()):
    monkeypatch.setattr(sys, "argv", ["recipe"])  # LightningCLI reads only `args`
    recipe = load_recipe("cacti")
    args = ["--config", str(RECIPES / f"{config}.yaml"), f"--compare.output_dir={tmp_path}"]
    args += ["--trainer.logger=false"] + list(extra)
    args += [f"--studies.{study}.{setting}" for study in studies for setting in TOY]
    threads = torch.get_num_threads()  # the recipe sets one thread
    try:
        return recipe.main(args)
    finally:
        torch.set_num_threads(threads)


def check_rows(table, mechanisms, rates):
    columns, rows = table
    assert columns[3 if len(rates) > 1 else 2 :][:4] == [
        "KNN (20)",
        "IterativeImputer",
        "ReMasker",
        "CACTI",
    ]
    assert [row[: 3 if len(rates) > 1 else 2] for row in rows] == [
        [table, mechanism, *([rate] if len(rates) > 1 else [])]
        for table in ("synthetic:60", "synthetic:90")
        for mechanism in mechanisms
        for rate in rates
    ]
    assert all("-" not in row[2:] for row in rows)  # every method scored every cell


def test_scale_config_parses_and_runs_at_a_toy_size(tmp_path, monkeypatch):
    cli = run_toy("cacti_scale", ["rows", "missingness"], tmp_path, monkeypatch)
    results = cli.study_results
    check_rows(list(results["rows"].tables.values())[0], ["mnar"], ["30%"])
    check_rows(list(results["missingness"].tables.values())[0], ["mnar"], ["10%", "50%"])
    studies = cli._studies()
    for name in ("model", "remasker", "baselines", "max_steps"):  # one tuned setting for both
        assert getattr(studies["missingness"], name) == getattr(studies["rows"], name)
    assert (tmp_path / "cacti_scale_rows.md").exists()
    assert (tmp_path / "cacti_scale_missingness.md").exists()


def test_scale_epochs_config_parses_and_runs_at_a_toy_size(tmp_path, monkeypatch):
    cells = ['--studies.mnar.cell_baselines={"synthetic:90@0.5": {"knn": {"n_neighbors": 7}}}']
    cli = run_toy("cacti_scale_epochs", ["mnar"], tmp_path, monkeypatch, cells)
    columns, rows = list(cli.study_results["mnar"].tables.values())[0]
    assert columns[3:7] == ["KNN (tuned k)", "IterativeImputer", "ReMasker", "CACTI"]
    assert [row[:3] for row in rows] == [
        [table, "mnar", rate] for table in ("synthetic:60", "synthetic:90") for rate in RATES
    ]
    assert all("-" not in row[3:] for row in rows)
    shipped = yaml.safe_load((RECIPES / "cacti_scale_epochs.yaml").read_text())
    budget = shipped["studies"]["mnar"]["init_args"]
    assert budget["max_epochs"] == 300 and budget["max_steps"] is None  # the paper's epochs
    assert (tmp_path / "cacti_scale_epochs_mnar.md").exists()


def test_scale_full_config_parses_and_runs_at_a_toy_size(tmp_path, monkeypatch):
    rates = ["--studies.imputation.rate=[0.1, 0.5]"]
    cli = run_toy("cacti_scale_full", ["imputation"], tmp_path, monkeypatch, rates)
    table = list(cli.study_results["imputation"].tables.values())[0]
    check_rows(table, ["mcar", "mar", "mnar"], ["10%", "50%"])
    assert (tmp_path / "cacti_scale_full_imputation.md").exists()
