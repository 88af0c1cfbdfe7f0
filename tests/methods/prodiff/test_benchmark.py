"""benchmarks/prodiff_sampling.py: the quick run trains, checks, times and scores both samplers
as configured, and its sanity check refuses a sampler that moves the endpoints."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lightning_info.methods.prodiff import (
    SyntheticCity,
    TrajectoryDataModule,
    linear_interpolation,
    trajectory_scores,
)
from tests.benchmark_scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("prodiff_sampling")


def test_quick_run_times_and_scores_both_samplers(bench, one_torch_thread, capsys):
    result = bench.main(["--quick"])
    printed = capsys.readouterr().out

    options = result["options"]
    assert options["num_trajectories"] == 256 and options["epochs"] == 2
    assert options["batch_size"] == 16 and options["repeats"] == 1
    assert result["header"]["num_steps"] == 50 and result["header"]["unet_calls_per_step"] == 2
    assert result["header"]["threads"] == 1
    assert math.isfinite(result["header"]["train_loss"])

    speed = result["speed"]
    assert set(speed) == {"ddim", "ddpm"}
    assert speed["ddim"]["steps"] == 10 and speed["ddpm"]["steps"] == 50
    for run in speed.values():
        assert run["seconds"] > 0
        assert run["trajectories_per_second"] == pytest.approx(16 / run["seconds"])
    ratio = result["ddim_over_ddpm_throughput"]
    assert ratio == pytest.approx(speed["ddpm"]["seconds"] / speed["ddim"]["seconds"])
    assert ratio > 1.0  # 20 UNet calls against 100

    accuracy = result["accuracy"]
    assert list(accuracy) == [
        "linear interpolation",
        "DDIM 10 steps, eta 0",
        "DDIM 10 steps, eta 1",
        "DDPM 50 steps",
    ]
    assert [(r["sampler"], r["steps"], r["eta"]) for r in accuracy.values()] == [
        (None, None, None),
        ("ddim", 10, 0.0),
        ("ddim", 10, 1.0),
        ("ddpm", 50, None),
    ]
    for name, run in accuracy.items():
        values = [run[key] for key in ("mtd", "maxtd", "tc@1km", "tc_mean")]
        assert all(math.isfinite(v) for v in values), name
        assert 0 < run["mtd"] <= run["maxtd"], name
        assert 0 <= run["tc@1km"] <= run["tc_mean"] <= 1, name

    # The reference row is linear interpolation on the same test split, scored by the oracle.
    data = TrajectoryDataModule(
        "synthetic",
        window_length=16,
        synthetic=SyntheticCity(num_trajectories=256, left_side_probability=1.0),
        batch_size=128,
        data_seed=0,
    )
    raw = torch.cat([batch["raw"] for batch in data.test_dataloader()])
    assert result["header"]["test_windows"] == len(raw) == 26
    oracle = trajectory_scores(linear_interpolation(raw), raw)
    for key in ("mtd", "maxtd", "tc@1km", "tc_mean"):
        assert accuracy["linear interpolation"][key] == pytest.approx(oracle[key], rel=1e-9)

    assert "| DDIM, eta 0 (10 steps) | 10" in printed and "| DDPM (50 steps)" in printed
    assert "| linear interpolation" in printed
    assert json.loads(printed.strip().splitlines()[-1])["options"] == options


def test_sanity_check_refuses_moved_endpoints_and_random_ddim(bench, one_torch_thread):
    options = bench.parse(["--quick"])
    torch.manual_seed(0)
    model = bench.build(num_steps=5, sampling_steps=3, seed=0).eval()
    options.ddim_steps = 3
    window = torch.rand(4, 16, 3)
    bench.sanity(model, window, options)  # the real samplers pass

    impute = model.impute

    def moved(window, **kwargs):
        sample = impute(window, **kwargs)
        if kwargs["sampler"] == "ddpm":
            sample[:, 0] += 1e-6
        return sample

    model.impute = moved
    with pytest.raises(AssertionError, match="ddpm did not return the given endpoints"):
        bench.sanity(model, window, options)

    def unseeded(window, **kwargs):
        return impute(window, **{**kwargs, "generator": None, "eta": 1.0})

    model.impute = unseeded
    with pytest.raises(AssertionError, match="DDIM eta=0 from the same seed"):
        bench.sanity(model, window, options)
