"""``AdamWOptions`` refuses what AdamW or its schedule would misread, with a message naming the
field: a floor above the rate, bools as numbers, NaN, and betas that are not a pair of numbers.
Valid boundaries (``min_lr == lr``, a list of betas, zero weight decay) still build, and every
``optimizer`` of the recipes still does."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from lightning_info.core.options import AdamWOptions

NAN = math.nan

BAD_INPUT = [
    pytest.param(
        lambda: AdamWOptions(lr=1e-4, min_lr=1.0),
        ValueError,
        r"`optimizer.min_lr` \(1.0\) must not exceed `optimizer.lr` \(0.0001\).*min_lr <= lr",
        id="min-lr-above-lr",
    ),
    pytest.param(
        lambda: AdamWOptions(lr=True), TypeError, r"`optimizer.lr` must be a real", id="lr-bool"
    ),
    pytest.param(
        lambda: AdamWOptions(lr=NAN), ValueError, r"`optimizer.lr` must be finite", id="lr-nan"
    ),
    pytest.param(
        lambda: AdamWOptions(min_lr=NAN),
        ValueError,
        r"`optimizer.min_lr` must be finite",
        id="min-lr-nan",
    ),
    pytest.param(
        lambda: AdamWOptions(min_lr=False),
        TypeError,
        r"`optimizer.min_lr` must be a real",
        id="min-lr-bool",
    ),
    pytest.param(
        lambda: AdamWOptions(betas=(False, 0.9)),
        TypeError,
        r"`optimizer.betas\[0\]` must be a real number, got False",
        id="betas-bool",
    ),
    pytest.param(
        lambda: AdamWOptions(betas=(0.9, NAN)),
        ValueError,
        r"`optimizer.betas\[1\]` must be finite",
        id="betas-nan",
    ),
    pytest.param(
        lambda: AdamWOptions(betas="ab"),
        TypeError,
        r"`optimizer.betas` must be a pair of numbers in \[0, 1\), got 'ab'",
        id="betas-str",
    ),
    pytest.param(
        lambda: AdamWOptions(betas=None),
        TypeError,
        r"`optimizer.betas` must be a pair of numbers",
        id="betas-none",
    ),
    pytest.param(
        lambda: AdamWOptions(betas=(0.9, 1.0)),
        ValueError,
        r"`optimizer.betas` must be two numbers in \[0, 1\), got \(0.9, 1.0\)",
        id="betas-one",
    ),
    pytest.param(
        lambda: AdamWOptions(betas=(0.9,)),
        ValueError,
        r"`optimizer.betas` must be a pair",
        id="betas-single",
    ),
    pytest.param(
        lambda: AdamWOptions(weight_decay=True),
        TypeError,
        r"`optimizer.weight_decay` must be a real",
        id="weight-decay-bool",
    ),
    pytest.param(
        lambda: AdamWOptions(warmup_fraction=True),
        TypeError,
        r"`optimizer.warmup_fraction` must be a real",
        id="warmup-bool",
    ),
    pytest.param(
        lambda: AdamWOptions(schedule_steps=True),
        TypeError,
        r"`optimizer.schedule_steps` must be an int",
        id="schedule-steps-bool",
    ),
]


@pytest.mark.parametrize(("call", "exception", "message"), BAD_INPUT)
def test_bad_options_are_rejected(call, exception, message):
    with pytest.raises(exception, match=message):
        call()


def test_boundary_options_still_build():
    options = AdamWOptions(lr=1e-3, min_lr=1e-3, betas=[0, 0.95], weight_decay=0)
    assert options.betas == (0.0, 0.95) and options.min_lr == options.lr
    optimizer = options.configure([torch.nn.Parameter(torch.ones(2))], trainer=None)
    assert optimizer.param_groups[0]["betas"] == (0.0, 0.95)


def _optimizer_blocks(node):
    """Every mapping under an ``optimizer`` key of a parsed YAML."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "optimizer" and isinstance(value, dict) and "class_path" not in value:
                yield value
            yield from _optimizer_blocks(value)
    elif isinstance(node, list):
        for item in node:
            yield from _optimizer_blocks(item)


def test_every_recipe_optimizer_still_builds():
    recipes = sorted(Path(__file__).parents[2].joinpath("recipes").glob("*.yaml"))
    blocks = [
        block for path in recipes for block in _optimizer_blocks(yaml.safe_load(path.read_text()))
    ]
    assert blocks, "no recipe sets an optimizer"
    for block in blocks:
        AdamWOptions(**{k: tuple(v) if k == "betas" else v for k, v in block.items()})
