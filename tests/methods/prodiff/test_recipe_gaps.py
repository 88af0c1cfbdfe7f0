"""The ProDiff ablation config (``recipes/prodiff_gaps.yaml``) at a toy size: its studies run
on top of the default config, the default study is skipped, every arm (the sharp-attention one
included) is scored on the same windows and the prototype diagnostics are tabled."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from tests.benchmark_scripts import RECIPES, load_recipe

TOY_MODEL = (
    '{"encoder": {"embed_dim": 8, "num_layers": 1, "num_heads": 2, "feedforward_dim": 8}, '
    '"denoiser": {"base_channels": 4, "multipliers": [1], "res_blocks": 1, '
    '"attention_lengths": []}, "diffusion": {"num_steps": 20}, "sampling": {"steps": 4}, '
    '"prototype_options": {"num_prototypes": 4}}'
)


@pytest.fixture(autouse=True)
def _recipe_argv(monkeypatch):
    """Recipes parse ``args``; keep pytest's own command line out of LightningCLI's view."""
    monkeypatch.setattr(sys, "argv", ["recipe"])


def test_the_gaps_config_runs_every_arm_and_tables_the_diagnostics(tmp_path):
    threads = torch.get_num_threads()  # the recipe sets one thread
    toy = [
        "--studies.one_sided.window_lengths=[5, 7]",
        "--studies.one_sided.seeds=[0]",
        "--studies.one_sided.num_trajectories=48",
        "--studies.one_sided.max_epochs=1",
        "--studies.one_sided.batch_size=16",
        "--studies.one_sided.workers=1",
        f"--studies.one_sided.model={TOY_MODEL}",
    ]
    cli = load_recipe("prodiff").main(
        [
            "--config",
            str(RECIPES / "prodiff_gaps.yaml"),
            f"--compare.output_dir={tmp_path}",
            "--trainer.logger=false",
            "--studies.two_sided=null",
            "--studies.scale_one_sided=null",
            "--studies.scale_two_sided=null",
            *toy,
        ]
    )
    torch.set_num_threads(threads)
    assert set(cli.study_results) == {"one_sided"}  # the default study is skipped
    study = cli.config.studies["one_sided"].init_args
    assert study.synthetic == {"left_side_probability": 1.0} and study.sharp_temperature == 0.1
    assert cli.config.studies["two_sided"] is None
    result = cli.study_results["one_sided"]
    columns, rows = next(iter(result.tables.values()))
    assert columns == [
        "k",
        "linear interpolation",
        "ProDiff",
        "ProDiff (no prototypes)",
        "ProDiff (sharp attention)",
    ]
    assert [row[0] for row in rows] == [5, 7]
    title = "prototype diagnostics (test windows' endpoint queries; gradients)"
    columns, rows = result.tables[title]
    assert columns == ["k", "diagnostic", "ProDiff", "ProDiff (sharp attention)"]
    assert len(rows) == 2 * 8 and all("|" not in str(cell) for row in rows for cell in row)
    for record in result.records:
        assert set(record["scores"]) == {
            "linear",
            "prodiff",
            "prodiff_no_prototypes",
            "prodiff_sharp",
        }
        assert all(np.isfinite(s["mtd"]) for s in record["scores"].values())
        assert set(record["diagnostics"]) == {"prodiff", "prodiff_sharp"}
        for found in record["diagnostics"].values():
            assert 1.0 <= found["effective"] <= 4.0 + 1e-9
            assert found["grad_start_ce"] == 0.0
    assert (tmp_path / "prodiff_gaps_one_sided.md").exists()
