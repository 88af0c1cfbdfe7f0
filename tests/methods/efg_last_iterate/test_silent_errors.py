"""Values pass through the last-iterate core unchanged where nothing is to be checked."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspiel")

import torch  # noqa: E402

from lightning_info.methods.efg_last_iterate import functional as F  # noqa: E402
from lightning_info.methods.efg_last_iterate import game_tree  # noqa: E402


def test_rates_hold_their_values_unchanged():
    eta, gamma = torch.tensor([0.5, 2.0]), torch.tensor([0.1, 0.0])
    rates = F.Rates(eta, gamma, 0.25)
    assert rates.eta is eta and rates.gamma is gamma and rates.tau == 0.25


def test_a_zero_loss_update_keeps_the_policy_and_the_callers_tables():
    tree = game_tree("kuhn_poker")
    log_policy = torch.log(tree.uniform_policy())
    before = log_policy.clone()
    rates = F.SolverRates(tree, "ix_omd", eta=0.5, gamma=0.1).at(1)
    new = F.solver_update(tree, log_policy, torch.zeros_like(log_policy), rates, rates.eta)
    torch.testing.assert_close(new.exp(), tree.uniform_policy())
    assert torch.equal(log_policy, before)


def test_expected_returns_and_best_responses_of_uniform_kuhn_match_the_closed_form():
    tree = game_tree("kuhn_poker")
    policy = tree.uniform_policy()
    torch.testing.assert_close(
        F.expected_returns(tree, policy), torch.tensor([1 / 8, -1 / 8], dtype=policy.dtype)
    )
    values = F.best_response_values(tree, policy)
    assert float(values.sum() - F.expected_returns(tree, policy).sum()) == pytest.approx(11 / 12)
