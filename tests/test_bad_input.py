"""Bad input to the functional cores fails early, with a message naming the argument and the fix.

``CORES`` maps each functional core to its rows ``pytest.param(call, exception, message_regex,
id=...)``; a new core adds its own key with its rows, and ``test_bad_input_is_rejected`` picks
them up, together with the ``BAD_INPUT`` table of every module under ``tests/methods`` (each
method's public entry points, beside the tests of its valid input). Every core that takes
tensors has a meta-device row. The tests after the table check that the corresponding valid input
still works.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tests.lm
import tests.methods
import tests.pipelines
from lightning_info.core.blocks import TokenBlocks
from lightning_info.methods.fic_tsc.functional import empirical_fisher_trace, fisher_penalty
from lightning_info.methods.fisher_sft.functional import (
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    prepare_blocks,
)
from lightning_info.methods.fisher_sft.sampler import select_subset
from lightning_info.methods.pointwise_confidence.scorers import PSIScorer
from lightning_info.methods.rome.attacks import fgsm, pgd
from lightning_info.methods.train_test_overlap.functional import (
    OverlapOptions,
    TestInstance,
    compute_overlap,
)
from lightning_info.methods.train_test_overlap.methodologies import substring_overlap

META = "meta device .*materialise it"


def _pool(widths=(3, 3, 3), rows=(2, 1, 3), seed=0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(m, d, generator=generator) for m, d in zip(rows, widths)]


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(shape, device="meta")


def _instances() -> list[TestInstance]:
    return [TestInstance(id="a", input="the quick brown fox", references=["jumps"])]


def _m_step_returns(*, shape=(4, 2), next_shape=None, flags=torch.bool, gamma=0.9, m=2):
    pytest.importorskip("gymnasium")
    from lightning_info.methods.asymmetric_ac.module import m_step_returns

    rewards = torch.ones(shape)
    next_values = torch.zeros(next_shape or shape)
    done = torch.zeros(shape, dtype=flags)
    return m_step_returns(rewards, next_values, done, done, gamma, m)


def _classifier() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(4, 3)


def _images(n: int = 2) -> torch.Tensor:
    return torch.rand(n, 4, generator=torch.Generator().manual_seed(0))


def _outputs(n: int = 12, d: int = 4, k: int = 3):
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(n, d, generator=generator)
    logits = torch.randn(n, k, generator=generator)
    return features, logits, torch.arange(n) % k


def _fitted_psi() -> PSIScorer:
    return PSIScorer(num_directions=4, bins=4).fit(*_outputs())


def _meta_grad_trace():
    parameter = nn.Parameter(_meta(3))
    parameter.grad = _meta(3)
    return empirical_fisher_trace([parameter])


def _parameter() -> nn.Parameter:
    return nn.Parameter(torch.ones(3))


CORES = {
    "overlap": [
        pytest.param(
            lambda: compute_overlap(_instances(), "one string", OverlapOptions(n=2)),
            TypeError,
            r"`documents` .* single str .*wrap it in a list",
            id="documents-bare-str",
        ),
        pytest.param(
            lambda: compute_overlap(_instances(), b"one string", OverlapOptions(n=2)),
            TypeError,
            r"`documents` .* single bytes .*wrap it in a list",
            id="documents-bare-bytes",
        ),
        pytest.param(
            lambda: substring_overlap(["some text"], "one string"),
            TypeError,
            r"`documents` .*wrap it in a list",
            id="substring-documents-bare-str",
        ),
        pytest.param(
            lambda: TestInstance(id="a", input="x", references=None),
            TypeError,
            r"`references` must be a sequence of strings, got None; pass \(\)",
            id="references-none",
        ),
        pytest.param(
            lambda: TestInstance(id="a", input="x", references="yes"),
            TypeError,
            r"`references` .*bare string 'yes'; wrap it in a list",
            id="references-bare-str",
        ),
    ],
    "deep_ac": [
        pytest.param(
            lambda: _m_step_returns(m=0), ValueError, r"`m` must be >= 1, got 0", id="m-zero"
        ),
        pytest.param(
            lambda: _m_step_returns(m=1.5), TypeError, r"`m` must be an int", id="m-float"
        ),
        pytest.param(
            lambda: _m_step_returns(gamma=-0.5),
            ValueError,
            r"`gamma` must be a discount factor in \[0, 1\], got -0.5",
            id="gamma-negative",
        ),
        pytest.param(
            lambda: _m_step_returns(gamma=1.5),
            ValueError,
            r"`gamma` .*\[0, 1\]",
            id="gamma-above-one",
        ),
        pytest.param(
            lambda: _m_step_returns(next_shape=(3, 2)),
            ValueError,
            r"share one \(T, E\) shape, got rewards \(4, 2\), next_values \(3, 2\), "
            r"terminated \(4, 2\), truncated \(4, 2\)",
            id="shapes-mismatch",
        ),
        pytest.param(
            lambda: _m_step_returns(shape=(4,)),
            ValueError,
            r"\(T, E\) shape, got rewards \(4,\)",
            id="rewards-1d",
        ),
        pytest.param(
            lambda: _m_step_returns(flags=torch.float32),
            TypeError,
            r"`terminated` must be a boolean tensor.*terminated.bool\(\)",
            id="flags-float",
        ),
    ],
    "fisher_sft": [
        pytest.param(
            lambda: fisher_greedy_select(_pool(widths=(3, 3, 5)), 1),
            ValueError,
            r"`features\[2\]` has d = 5 but `features\[0\]` has d = 3",
            id="blocks-different-widths",
        ),
        pytest.param(
            lambda: prepare_blocks([torch.ones(3)]),
            ValueError,
            r"`features\[0\]` must be an \(m_i, d\) matrix.*got shape \(3,\)",
            id="block-not-2d",
        ),
        pytest.param(
            lambda: fisher_greedy_select(torch.ones(3, 2), 1),
            TypeError,
            r"`features` must be a TokenBlocks or a list .*list\(x.unsqueeze\(1\)\)",
            id="features-plain-tensor",
        ),
        pytest.param(
            lambda: fisher_greedy_select(_pool(), 1, token_weights="heavy"),
            TypeError,
            r"`token_weights` must be a tensor, a list of numbers",
            id="token-weights-str",
        ),
        pytest.param(
            lambda: fisher_greedy_select(_pool(), 1, token_weights=[1.0, 2.0]),
            ValueError,
            r"`token_weights` must have one entry per token row \(6\), got shape \(2,\)",
            id="token-weights-list-too-short",
        ),
        pytest.param(
            lambda: fisher_greedy_select(_pool(), 1, token_weights=[torch.ones(2)] * 3),
            ValueError,
            r"Per-example `token_weights` must match .*\[2, 1, 3\].*\[2, 2, 2\]",
            id="token-weights-per-example-lengths",
        ),
        pytest.param(
            lambda: log_det_objective(_pool(), [0, 3]),
            IndexError,
            r"`indices\[1\]` = 3 is outside the pool of 3 examples; pass indices in \[0, 3\)",
            id="log-det-index-too-large",
        ),
        pytest.param(
            lambda: log_det_objective(_pool(), [-1]),
            IndexError,
            r"`indices\[0\]` = -1 is outside the pool of 3 examples",
            id="log-det-index-negative",
        ),
        pytest.param(
            lambda: log_det_objective(_pool(), [0.5]),
            TypeError,
            r"`indices` must hold integer example indices, got 0.5",
            id="log-det-index-float",
        ),
        pytest.param(
            lambda: fisher_greedy_select([_meta(2, 3), _meta(1, 3)], 1),
            ValueError,
            rf"`features\[0\]` is on the {META}",
            id="meta-features-list",
        ),
        pytest.param(
            lambda: fisher_greedy_select(TokenBlocks(_meta(3, 2), torch.tensor([0, 1, 3])), 1),
            ValueError,
            rf"`features.values` is on the {META}",
            id="meta-token-blocks",
        ),
        pytest.param(
            lambda: fisher_greedy_select(_pool(), 1, token_weights=_meta(6)),
            ValueError,
            rf"`token_weights` is on the {META}",
            id="meta-token-weights",
        ),
        pytest.param(
            lambda: k_center_select(_meta(4, 2), 2),
            ValueError,
            rf"`points` is on the {META}",
            id="meta-k-center-points",
        ),
    ],
    "subset": [
        pytest.param(
            lambda: select_subset(_pool(widths=(3, 4, 3)), 2, strategy="k_center"),
            ValueError,
            r"`features\[1\]` has d = 4 but `features\[0\]` has d = 3",
            id="k-center-list-different-widths",
        ),
        pytest.param(
            lambda: select_subset(torch.ones(4, 3), 2, strategy="k_center"),
            TypeError,
            r"`features` must be a TokenBlocks or a list of \(m_i, d\) tensors",
            id="k-center-plain-tensor",
        ),
        pytest.param(
            lambda: select_subset([_meta(2, 3), _meta(1, 3)], 1, strategy="k_center"),
            ValueError,
            rf"`features\[0\]` is on the {META}",
            id="meta-k-center-list",
        ),
    ],
    "attacks": [
        pytest.param(
            lambda: fgsm(_classifier(), _images(), torch.tensor([0, 3]), 0.1),
            ValueError,
            r"`y` must hold class indices in \[0, 3\) for a model with 3 outputs, "
            r"got values in \[0, 3\]",
            id="fgsm-label-too-large",
        ),
        pytest.param(
            lambda: fgsm(_classifier(), _images(), torch.tensor([-1, 0]), 0.1),
            ValueError,
            r"`y` must hold class indices in \[0, 3\)",
            id="fgsm-label-negative",
        ),
        pytest.param(
            lambda: fgsm(_classifier(), _images(), torch.tensor([0.0, 1.0]), 0.1),
            TypeError,
            r"`y` must hold integer class indices, got dtype torch.float32; pass `y.long\(\)`",
            id="fgsm-float-labels",
        ),
        pytest.param(
            lambda: pgd(_classifier(), _images(), torch.tensor([0, 7]), 0.1, steps=2),
            ValueError,
            r"`y` must hold class indices in \[0, 3\).*\[0, 7\]",
            id="pgd-label-too-large",
        ),
        pytest.param(
            lambda: pgd(_classifier(), _images(), torch.tensor([True, False]), 0.1, steps=2),
            TypeError,
            r"`y` must hold integer class indices, got dtype torch.bool",
            id="pgd-bool-labels",
        ),
        pytest.param(
            lambda: fgsm(_classifier(), _meta(2, 4), torch.tensor([0, 1]), 0.1),
            ValueError,
            rf"`x` is on the {META}",
            id="meta-fgsm-x",
        ),
        pytest.param(
            lambda: pgd(
                _classifier(), _images(), torch.empty(2, dtype=torch.long, device="meta"), 0.1
            ),
            ValueError,
            rf"`y` is on the {META}",
            id="meta-pgd-y",
        ),
    ],
    "scoring": [
        pytest.param(
            lambda: _fitted_psi().score(torch.randn(5, 6), torch.randn(5, 3)),
            ValueError,
            r"`features` have D = 6 but PSIScorer was fitted on D = 4",
            id="psi-features-width",
        ),
        pytest.param(
            lambda: _fitted_psi().score(torch.randn(5, 4), torch.randn(5, 5)),
            ValueError,
            r"`logits` have K = 5 but PSIScorer was fitted on K = 3",
            id="psi-logits-width",
        ),
        pytest.param(
            lambda: PSIScorer(num_directions=4).fit(_meta(12, 4), *_outputs()[1:]),
            ValueError,
            rf"`features` is on the {META}",
            id="meta-psi-fit",
        ),
        pytest.param(
            lambda: _fitted_psi().score(torch.randn(5, 4), _meta(5, 3)),
            ValueError,
            rf"`logits` is on the {META}",
            id="meta-psi-score",
        ),
    ],
    "fisher_functional": [
        pytest.param(
            lambda: fisher_penalty((_parameter() ** 2).sum().detach(), [_parameter()]),
            ValueError,
            r"`loss` has no autograd graph .*compute it from `parameters` with grad enabled",
            id="penalty-detached-loss",
        ),
        pytest.param(
            lambda: fisher_penalty(torch.tensor(1.0), [_parameter()]),
            ValueError,
            r"`loss` has no autograd graph \(requires_grad=False\)",
            id="penalty-constant-loss",
        ),
        pytest.param(
            lambda: fisher_penalty(_meta(), [_parameter()]),
            ValueError,
            rf"`loss` is on the {META}",
            id="meta-penalty-loss",
        ),
        pytest.param(
            _meta_grad_trace,
            ValueError,
            rf"`parameters\[0\].grad` is on the {META}",
            id="meta-fisher-trace-grad",
        ),
    ],
}


def method_tables() -> dict[str, list]:
    """``BAD_INPUT`` of every module under ``tests/methods`` (the public entry points of each
    method: constructors, data modules, file readers, functions), ``tests/lm`` and
    ``tests/pipelines``, keyed ``method/module`` (``lm/module``, ``pipelines/module``)."""
    tables = {}
    for package in (tests.methods, tests.lm, tests.pipelines):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            rows = getattr(importlib.import_module(info.name), "BAD_INPUT", None)
            if rows:
                parts = info.name.split(".")
                owner = parts[2] if package is tests.methods else parts[1]
                module = parts[3] if package is tests.methods else parts[2]
                tables[f"{owner}/{module.removeprefix('test_')}"] = rows
    return tables


ROWS = [
    pytest.param(*row.values, marks=row.marks, id=f"{core}/{row.id}")
    for core, rows in {**CORES, **method_tables()}.items()
    for row in rows
]


@pytest.mark.parametrize(("call", "exception", "message"), ROWS)
def test_bad_input_is_rejected(call, exception, message, tmp_path, one_torch_thread, monkeypatch):
    """A call of one parameter is given a temporary folder (for the files it writes); the
    Hugging Face hub is offline, so a name that is no local folder fails at once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    arguments = [tmp_path] if inspect.signature(call).parameters else []
    with pytest.raises(exception, match=message):
        call(*arguments)


# ------------------------------------------------------------------ valid input still works


def test_overlap_accepts_a_list_of_documents_and_of_references():
    instance = TestInstance(id="a", input="x y", references=("y z",))
    assert instance.references == ("y z",)
    report = compute_overlap([instance], ["x y z"], OverlapOptions(n=2, n_values=()))
    assert report.num_documents == 1
    assert report.rows[0]["input_binary"] == 1.0


def test_m_step_returns_accepts_the_boundary_discounts():
    assert _m_step_returns(gamma=1.0, m=1).shape == (4, 2)
    torch.testing.assert_close(_m_step_returns(gamma=0, m=3), torch.ones(4, 2))


def test_token_weights_list_equals_tensor():
    pool = _pool()
    weights = torch.rand(6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = fisher_greedy_select(pool, 2, token_weights=weights)
    as_list = fisher_greedy_select(pool, 2, token_weights=weights.tolist())
    per_example = fisher_greedy_select(pool, 2, token_weights=list(weights.split([2, 1, 3])))
    for got in (as_list, per_example):
        assert got.indices == expected.indices
        assert got.objective == pytest.approx(expected.objective, rel=1e-12)
    assert log_det_objective(pool, [0, 2], token_weights=weights.tolist()) == pytest.approx(
        log_det_objective(pool, [0, 2], token_weights=weights), rel=1e-12
    )


def test_k_center_on_a_list_equals_k_center_on_the_blocks():
    pool = _pool(widths=(3,) * 8, rows=(2, 1, 3, 1, 2, 4, 1, 2), seed=3)
    on_list = select_subset(pool, 4, strategy="k_center", seed=2)
    on_blocks = select_subset(TokenBlocks.from_list(pool), 4, strategy="k_center", seed=2)
    assert on_list == on_blocks
    stacked = torch.stack([block.mean(0) for block in pool])
    assert on_list.indices == k_center_select(stacked, 4, seed=2)


def test_log_det_objective_accepts_integer_like_indices():
    pool = _pool()
    assert log_det_objective(pool, [np.int64(2), torch.tensor(0)]) == pytest.approx(
        log_det_objective(pool, [2, 0])
    )


def test_attacks_accept_valid_labels_and_class_probabilities():
    model, x = _classifier(), _images()
    labels = torch.tensor([0, 2])
    assert fgsm(model, x, labels, 0.1).shape == x.shape
    assert pgd(model, x, labels, 0.1, steps=2).shape == x.shape
    probabilities = F.one_hot(labels, 3).float()
    torch.testing.assert_close(fgsm(model, x, probabilities, 0.1), fgsm(model, x, labels, 0.1))


def test_scorer_widths_survive_a_save_and_load(tmp_path):
    scorer = _fitted_psi()
    features, logits, _ = _outputs(n=5)
    assert scorer.score(features, logits).shape == (5,)
    scorer.save(tmp_path / "psi.pt")
    loaded = PSIScorer(num_directions=4, bins=4).load(tmp_path / "psi.pt")
    torch.testing.assert_close(loaded.score(features, logits), scorer.score(features, logits))
    with pytest.raises(ValueError, match="fitted on D = 4"):
        loaded.score(torch.randn(5, 2), logits)


def test_fisher_penalty_accepts_a_loss_built_from_the_parameters():
    parameter = _parameter()
    penalty = fisher_penalty((parameter**2).sum(), [parameter])
    assert penalty.item() == pytest.approx(12.0)
