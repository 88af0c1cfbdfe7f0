"""Feature shaping for OOD detection: oracles for the functional core and the presets, state round
trip, reproducible tuning, a synthetic problem where shaping beats the plain energy, and errors."""

import math
import sys

import numpy as np
import pytest
import torch
from torch import nn

from lightning_info.methods.ood_shaping.functional import (
    PLF,
    SHAPERS,
    VRA,
    FeatureQuantiles,
    ReAct,
    energy_score,
    piecewise_linear,
)
from lightning_info.methods.ood_shaping.metrics import ood_auroc
from lightning_info.methods.ood_shaping.scorers import FeatureShapingScorer, tune


def _layer(d=8, k=5, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(d, k)


def _features(n=64, d=8, seed=0, sparse=False):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g).abs() * 1.5
    if sparse:
        z = torch.relu(z - 1.0)  # most entries exactly zero, as after a ReLU
    return z


# ----------------------------------------------------------------------------- functional core


def test_piecewise_linear_matches_numpy_interp_inside_and_slopes_outside():
    g = torch.Generator().manual_seed(1)
    knots_x = torch.sort(torch.randn(6, generator=g, dtype=torch.float64) * 3).values
    knots_y = torch.randn(6, generator=g, dtype=torch.float64)
    z = torch.cat([torch.linspace(-15, 15, 401, dtype=torch.float64), knots_x])
    x, y, zz = knots_x.numpy(), knots_y.numpy(), z.numpy()

    flat = piecewise_linear(z, knots_x, knots_y)  # zero slopes: numpy.interp everywhere
    np.testing.assert_allclose(flat.numpy(), np.interp(zz, x, y), rtol=0, atol=1e-12)

    out = piecewise_linear(z, knots_x, knots_y, left_slope=-0.7, right_slope=2.5).numpy()
    expected = np.interp(zz, x, y)
    expected = np.where(zz < x[0], y[0] - 0.7 * (zz - x[0]), expected)
    expected = np.where(zz > x[-1], y[-1] + 2.5 * (zz - x[-1]), expected)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert (zz < x[0]).any() and (zz > x[-1]).any()


def test_piecewise_linear_jumps_at_knots_and_repeated_knots():
    # knot 0 at x=0: value 5, left limit -1, right limit 2; repeated knot at x=1 (jump 4 -> 7,
    # value 6 from the last copy); knot at x=2 continuous with value 9.
    z = torch.tensor([-1.0, -1e-6, 0.0, 0.5, 1 - 1e-6, 1.0, 1.5, 2.0, 3.0], dtype=torch.float64)
    out = piecewise_linear(
        z,
        [0.0, 1.0, 1.0, 2.0],
        [5.0, 0.0, 6.0, 9.0],
        left_slope=1.0,
        right_slope=-1.0,
        left_limits=[-1.0, 4.0, 100.0, 9.0],
        right_limits=[2.0, 100.0, 7.0, 9.0],
    )
    expected = [-2.0, -1 - 1e-6, 5.0, 3.0, 4 - 2e-6, 6.0, 8.0, 9.0, 8.0]
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64))


def test_piecewise_linear_keeps_shape_dtype_and_input():
    z = torch.randn(3, 4, 5)
    before = z.clone()
    out = piecewise_linear(z, [0.0], [0.0], 1.0, 1.0)
    assert out.shape == z.shape and out.dtype == z.dtype
    assert torch.equal(out, z) and torch.equal(z, before)


def test_energy_score_is_logsumexp_higher_for_confident_logits():
    logits = torch.tensor([[10.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    expected = torch.tensor([math.log(math.exp(10) + 2), math.log(3)])
    torch.testing.assert_close(energy_score(logits), expected)


def test_feature_quantiles_match_numpy():
    z = torch.randn(40, 7) * 2
    quantiles = FeatureQuantiles(z)
    fractions = [0.0, 0.1, 0.5, 0.9, 0.99, 1.0]
    np.testing.assert_allclose(quantiles(fractions), np.quantile(z.numpy(), fractions), rtol=1e-6)
    np.testing.assert_allclose(
        quantiles(fractions, absolute=True), np.quantile(np.abs(z.numpy()), fractions), rtol=1e-6
    )


# ----------------------------------------------------------------------------- preset oracles


@pytest.mark.parametrize("as_tensors", [False, True])
def test_identity_preset_leaves_the_energy_unchanged(as_tensors):
    layer = _layer()
    features = torch.randn(50, 8) * 3  # signed, so the identity is checked on both sides of 0
    logits = layer(features).detach()
    source = (layer.weight.detach(), layer.bias.detach()) if as_tensors else layer
    scorer = FeatureShapingScorer(source, "identity").fit(features, logits, logits.argmax(1))
    torch.testing.assert_close(scorer.shape(features), features, rtol=0, atol=0)
    torch.testing.assert_close(
        scorer.score(features, logits), energy_score(logits), rtol=0, atol=1e-6
    )


def test_react_preset_equals_clamp_at_the_id_percentile():
    layer = _layer()
    id_features = _features(seed=0)
    scorer = FeatureShapingScorer(layer, "react", percentile=85).fit_features(id_features)
    tau = scorer.function.knots_x[0]
    assert tau.item() == pytest.approx(np.percentile(id_features.numpy(), 85), rel=1e-6)
    test = torch.cat([_features(seed=1) * 2, tau.reshape(1, 1).expand(1, 8)])
    torch.testing.assert_close(scorer.shape(test), torch.clamp(test, max=tau), rtol=0, atol=1e-6)
    expected = energy_score(layer(torch.clamp(test, max=tau)).detach())
    torch.testing.assert_close(scorer.score_features(test), expected, rtol=0, atol=1e-5)
    assert FeatureShapingScorer(layer).shaper == ReAct(90.0)  # the default is ReAct at 90


def _vra_reference(z, a, b, gamma):
    return np.where(z < a, 0.0, np.where(z <= b, z + gamma, b))


@pytest.mark.parametrize(
    ("lower", "upper", "gamma", "sparse"),
    [(60.0, 95.0, 0.5, False), (20.0, 70.0, 1.3, False), (10.0, 40.0, 0.7, True)],
)
def test_vra_preset_matches_its_definition(lower, upper, gamma, sparse):
    id_features = _features(seed=0, sparse=sparse)
    scorer = FeatureShapingScorer(
        _layer(), "vra", lower_percentile=lower, upper_percentile=upper, gamma=gamma
    ).fit_features(id_features)
    a, b = scorer.function.knots_x.tolist()
    expected_ab = np.percentile(id_features.numpy(), [lower, upper])
    np.testing.assert_allclose([a, b], expected_ab, rtol=1e-6, atol=1e-7)
    if sparse:
        assert a == b == 0.0  # ties: both knots at 0, the jumps collapse onto one point
    edges = torch.tensor([a, b, a - 1e-3, a + 1e-3, b - 1e-3, b + 1e-3, 0.0, -1.0])
    test = torch.cat([(_features(n=20, seed=2) * 1.5).reshape(-1), edges]).reshape(-1, 8)
    expected = _vra_reference(test.numpy().astype(np.float64), a, b, gamma)
    np.testing.assert_allclose(scorer.shape(test).numpy(), expected, rtol=1e-5, atol=1e-5)


def _plf_reference(value, x1, x2, p):
    """PLF exactly as documented in :class:`PLF`, one element at a time."""
    r = abs(value)
    y1 = p.y_end + p.dy
    if r < x1:
        f = p.y_start + p.m1 * r
    elif r < x2:
        f = y1 + (p.y_end - y1) * (r - x1) / (x2 - x1)
    else:
        f = p.y_end + p.m2 * (r - x2)
    return -f if value < 0 else f


def _random_plf(seed):
    g = torch.Generator().manual_seed(seed)
    draws = torch.rand(len(PLF.search_space), generator=g, dtype=torch.float64).tolist()
    box = PLF.search_space.items()
    return PLF(**{name: lo + d * (hi - lo) for (name, (lo, hi)), d in zip(box, draws)})


@pytest.mark.parametrize(
    ("shaper", "knots"),
    [
        (PLF(), "distinct"),
        (_random_plf(0), "distinct"),
        (_random_plf(1), "distinct"),
        (PLF(q1=0.3, u=0.5, m1=2.0, m2=-1.5, y_start=-2.0, y_end=0.5, dy=1.5), "x1 = 0"),
        (PLF(q1=0.1, u=0.0, m1=0.5, m2=3.0, y_start=-1.0, y_end=2.0, dy=0.5), "x1 = x2 = 0"),
    ],
)
def test_plf_preset_matches_a_per_element_reference(shaper, knots):
    sparse = knots != "distinct"  # about half of the ID values are exactly zero
    g = torch.Generator().manual_seed(3)
    id_features = _features(n=40, seed=0, sparse=sparse) * torch.where(
        torch.rand(40, 8, generator=g) < 0.3, -1.0, 1.0
    )  # signed features: the quantiles are of |z|
    scorer = FeatureShapingScorer(_layer(), shaper).fit_features(id_features)
    _, x1, x2 = scorer.function.knots_x.tolist()
    expected_x = np.quantile(np.abs(id_features.numpy()), [shaper.q1, shaper.q2])
    np.testing.assert_allclose([x1, x2], expected_x, rtol=1e-6, atol=1e-7)
    assert {"distinct": 0.0 < x1 < x2, "x1 = 0": x1 == 0.0 < x2, "x1 = x2 = 0": x1 == x2 == 0.0}[
        knots
    ]
    edges = torch.tensor([x1, -x1, x2, -x2, 0.0, x1 + 1e-3, x2 + 1e-3, x2 - 1e-3])
    test = torch.cat([torch.randn(23 * 8, generator=g) * 2.5, edges]).reshape(-1, 8)
    expected = [_plf_reference(v, x1, x2, shaper) for v in test.reshape(-1).tolist()]
    out = scorer.shape(test).reshape(-1).numpy()
    np.testing.assert_allclose(out, np.array(expected), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- state


@pytest.mark.parametrize("preset", sorted(SHAPERS))
def test_save_load_round_trip_gives_identical_scores(preset, tmp_path):
    layer = _layer()
    params = {"plf": {"q1": 0.4, "m2": -2.0, "dy": 1.0}, "vra": {"gamma": 0.9}}.get(preset, {})
    scorer = FeatureShapingScorer(layer, preset, **params).fit_features(_features(seed=0))
    state = scorer.state_dict()

    def plain(value):
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        return value is None or isinstance(value, (torch.Tensor, bool, int, float, str))

    assert plain(state)
    scorer.save(tmp_path / "scorer.pt")
    restored = FeatureShapingScorer(nn.Linear(8, 5), preset).load(tmp_path / "scorer.pt")
    test = _features(seed=5)
    logits = layer(test).detach()
    assert torch.equal(restored.score(test, logits), scorer.score(test, logits))
    assert restored.shaper == scorer.shaper
    with pytest.raises(ValueError, match="shaper="):
        other = "identity" if preset != "identity" else "react"
        FeatureShapingScorer(layer, other).load(tmp_path / "scorer.pt")


# ----------------------------------------------------------------------------- tuning


def _synthetic(n, ood, g, k=10, d=64):
    """Class-prototype features; OOD has a weaker class signal plus 3 very large activations."""
    prototypes = torch.zeros(k, d)
    for c in range(k):
        prototypes[c, c * 6 : (c + 1) * 6] = 1.0
    labels = torch.randint(k, (n,), generator=g)
    signal = 1.0 if ood else 2.0
    z = torch.relu(signal * prototypes[labels] + 0.5 * torch.randn(n, d, generator=g))
    if ood:
        spikes = torch.rand(n, d, generator=g).argsort(1)[:, :3]
        z.scatter_(1, spikes, 6.0 + 2.0 * torch.rand(n, 3, generator=g))
    return z


@pytest.fixture(scope="module")
def synthetic():
    g = torch.Generator().manual_seed(0)
    weight = torch.zeros(10, 64)
    for c in range(10):
        weight[c, c * 6 : (c + 1) * 6] = 1.0
    weight += 0.1 * torch.randn(10, 64, generator=g)
    layer = (weight, torch.zeros(10))
    held_out = _synthetic(400, False, g), _synthetic(400, True, g)
    test = _synthetic(800, False, g), _synthetic(800, True, g)
    return layer, held_out, test


def test_tuning_is_reproducible_with_a_seed(synthetic):
    layer, (id_val, ood_val), _ = synthetic
    first = tune("vra", id_val, ood_val, layer=layer, n_trials=8, seed=3)
    again = tune("vra", id_val, ood_val, layer=layer, n_trials=8, seed=3)
    other = tune("vra", id_val, ood_val, layer=layer, n_trials=8, seed=4)
    assert first.params == again.params and first.auroc == again.auroc
    assert first.history == again.history and len(first.history) == 8
    assert other.history != first.history
    assert first.auroc == max(auroc for _, auroc in first.history)
    best = first.scorer
    assert best.fitted and best.shaper == VRA(**first.params)


def test_tuned_react_and_plf_beat_the_plain_energy_on_a_test_split(synthetic):
    layer, (id_val, ood_val), (id_test, ood_test) = synthetic
    weight, bias = layer

    def test_auroc(scorer):
        return _auroc(scorer.score_features(id_test), scorer.score_features(ood_test))

    plain = _auroc(
        energy_score(id_test @ weight.T + bias), energy_score(ood_test @ weight.T + bias)
    )
    identity = tune("identity", id_val, ood_val, layer=layer)
    assert len(identity.history) == 1 and test_auroc(identity.scorer) == pytest.approx(plain)
    react = tune("react", id_val, ood_val, layer=layer, n_trials=32, seed=0)
    plf = tune("plf", id_val, ood_val, layer=layer, n_trials=48, seed=0)
    react_test, plf_test = test_auroc(react.scorer), test_auroc(plf.scorer)
    print(
        f"\ntest AUROC: energy {plain:.4f}  ReAct {react_test:.4f} "
        f"(p={react.params['percentile']:.1f}, held-out {react.auroc:.4f})  "
        f"PLF {plf_test:.4f} (held-out {plf.auroc:.4f})"
    )
    assert plain < 0.75
    assert react_test > 0.95 and react_test > plain + 0.2
    assert plf_test > plain + 0.05


def test_tune_with_a_factory_and_fixed_values(synthetic):
    layer, (id_val, ood_val), _ = synthetic

    def factory(**params):
        return FeatureShapingScorer(layer, "plf", **params)

    space = {"q1": 0.5, "u": (0.0, 1.0), "m1": 1.0, "m2": (-1.0, 0.0), "y_start": -1.0}
    space.update(y_end=1.0, dy=(0.0, 2.0))  # every PLF parameter, in PLF's order
    result = tune(factory, id_val, ood_val, search_space=space, n_trials=4, seed=0)
    assert len(result.history) == 4
    for params, _ in result.history:
        assert params["q1"] == 0.5 and -1.0 <= params["m2"] <= 0.0 and set(params) == set(space)
    by_name = tune("plf", id_val, ood_val, layer=layer, search_space=space, n_trials=4, seed=0)
    assert [a for _, a in by_name.history] == [a for _, a in result.history]


# ----------------------------------------------------------------------------- errors


def test_clear_errors_on_bad_input():
    layer = _layer()
    features = _features()
    logits = layer(features).detach()
    labels = logits.argmax(1)
    scorer = FeatureShapingScorer(layer, "react")
    with pytest.raises(RuntimeError, match="not fitted"):
        scorer.score(features, logits)
    with pytest.raises(ValueError, match="D = 6"):
        scorer.fit(features[:, :6], logits, labels)
    scorer.fit(features, logits, labels)
    with pytest.raises(ValueError, match="D = 7"):
        scorer.score_features(torch.randn(4, 7))
    with pytest.raises(ValueError, match="K = 3"):
        scorer.score(features, logits[:, :3])
    bad = features.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        scorer.score(bad, logits)
    with pytest.raises(ValueError, match="NaN"):
        piecewise_linear(bad, [0.0], [0.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        piecewise_linear(features, [1.0, 0.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="Unknown shaper 'ash'"):
        FeatureShapingScorer(layer, "ash")
    with pytest.raises(ValueError, match="Unknown parameter"):
        FeatureShapingScorer(layer, "react", tau=1.0)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        FeatureShapingScorer(layer, "react", percentile=101)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        VRA(lower_percentile=-1.0)
    with pytest.raises(ValueError, match="must not exceed"):
        VRA(lower_percentile=90.0, upper_percentile=80.0)
    with pytest.raises(ValueError, match="q1"):
        PLF(q1=0.95)
    with pytest.raises(ValueError, match=r"\(5,\)"):
        FeatureShapingScorer(layer.weight, bias=torch.zeros(4))
    with pytest.raises(ValueError, match="empty"):
        tune("react", torch.empty(0, 8), features, layer=layer)
    with pytest.raises(ValueError, match="empty"):
        tune("react", features, torch.empty(0, 8), layer=layer)
    with pytest.raises(ValueError, match="same D"):
        tune("react", features, features[:, :4], layer=layer)
    with pytest.raises(ValueError, match="Unknown shaper"):
        tune("ash", features, features, layer=layer)
    with pytest.raises(ValueError, match="needs the classifier"):
        tune("react", features, features)
    with pytest.raises(ValueError, match="search_space"):
        tune(lambda **p: scorer, features, features)
    with pytest.raises(ValueError, match="Unknown search `method`"):
        tune("react", features, features, layer=layer, method="grid")
    with pytest.raises(ValueError, match="low"):
        tune("react", features, features, layer=layer, search_space={"percentile": (90, 80)})


def test_tpe_without_optuna_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # an import of it now fails
    features = _features()
    with pytest.raises(ImportError, match=r"lightning-info\[tune\]"):
        tune("react", features, features, layer=_layer(), method="tpe")


def test_tpe_finds_a_box_point_whose_score_it_reports_and_repeats_per_seed(synthetic):
    layer, (id_val, ood_val), _ = synthetic
    first = tune("react", id_val, ood_val, layer=layer, n_trials=12, seed=3, method="tpe")
    again = tune("react", id_val, ood_val, layer=layer, n_trials=12, seed=3, method="tpe")
    assert [p for p, _ in first.history] == [p for p, _ in again.history]
    assert len(first.history) == 12
    assert first.auroc == max(auroc for _, auroc in first.history)
    low, high = SHAPERS["react"].search_space["percentile"]
    assert low <= first.params["percentile"] <= high
    # the reported AUROC is the scorer's own on the held-out split, recomputed here
    recomputed = _auroc(first.scorer.score_features(id_val), first.scorer.score_features(ood_val))
    assert recomputed == pytest.approx(first.auroc, abs=1e-12)


def _auroc(id_scores, ood_scores) -> float:
    return float(ood_auroc(id_scores, ood_scores))
