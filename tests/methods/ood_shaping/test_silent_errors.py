"""What :func:`tune` returns matches an independent computation and leaves the caller's
objects unchanged."""

from __future__ import annotations

import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from lightning_info.methods.ood_shaping.scorers import TuneResult, tune


def test_tune_result_reports_the_held_out_auroc_of_its_scorer_and_mutates_nothing():
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    id_features = torch.rand(30, 4, generator=generator)
    ood_features = torch.rand(20, 4, generator=generator) * 2
    id_copy, ood_copy = id_features.clone(), ood_features.clone()
    search_space = {"percentile": (60.0, 95.0)}

    result = tune(
        "react", id_features, ood_features, layer=layer, search_space=search_space, n_trials=4
    )

    assert isinstance(result, TuneResult)
    scores_in = result.scorer.score_features(id_features)
    scores_out = result.scorer.score_features(ood_features)
    expected = roc_auc_score(
        [1] * len(scores_in) + [0] * len(scores_out), torch.cat([scores_in, scores_out]).numpy()
    )
    assert abs(result.auroc - expected) < 1e-12
    assert len(result.history) == 4
    assert result.auroc == max(auroc for _, auroc in result.history)
    assert result.params == result.scorer.shaper.params()
    assert 60.0 <= result.params["percentile"] <= 95.0
    assert search_space == {"percentile": (60.0, 95.0)}
    assert torch.equal(id_features, id_copy) and torch.equal(ood_features, ood_copy)
