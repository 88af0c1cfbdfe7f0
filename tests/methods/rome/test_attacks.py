"""FGSM and PGD in pixel space: bounds, hand-computed steps, effect on a trained model, hygiene."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lightning_info.methods.rome.attacks import fgsm, next_class_targets, pgd
from tests.methods.rome.conftest import shuffled_digits


@pytest.fixture(scope="module")
def digits():
    """A small MLP trained on sklearn's bundled 8x8 digits (pixels scaled to [0, 1]), test split."""
    x, y = shuffled_digits()
    train, test = slice(0, 1400), slice(1400, None)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        optimizer.zero_grad()
        F.cross_entropy(model(x[train]), y[train]).backward()
        optimizer.step()
    model.zero_grad(set_to_none=True)
    return model, x[test], y[test]


def _accuracy(model, x, y) -> float:
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def _images(n=16, seed=0):
    """Random 3x6x6 images whose first pixels sit exactly on the bounds 0 and 1."""
    x = torch.rand(n, 3, 6, 6, generator=torch.Generator().manual_seed(seed))
    x[:, 0, 0, :3] = 0.0
    x[:, 0, 0, 3:] = 1.0
    return x, torch.arange(n) % 5


def _conv_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 5))


@pytest.mark.parametrize("random_start", [True, False])
@pytest.mark.parametrize("eps", [0.0, 8 / 255, 0.3])
def test_linf_pgd_and_fgsm_stay_in_the_ball_and_the_pixel_range(eps, random_start):
    x, y = _images()
    model = _conv_model()
    outputs = [
        pgd(model, x, y, eps, steps=5, random_start=random_start, generator=torch.Generator()),
        fgsm(model, x, y, eps),
    ]
    for x_adv in outputs:
        assert x_adv.shape == x.shape and x_adv.dtype == x.dtype
        assert (x_adv - x).abs().max() <= eps + 1e-6
        assert x_adv.min() >= 0.0 and x_adv.max() <= 1.0


@pytest.mark.parametrize("random_start", [True, False])
@pytest.mark.parametrize("eps", [0.0, 0.5, 3.0])
def test_l2_pgd_stays_in_the_ball_and_the_pixel_range(eps, random_start):
    x, y = _images()
    x_adv = pgd(
        _conv_model(), x, y, eps, steps=5, norm="l2", random_start=random_start, generator=None
    )
    norms = (x_adv - x).flatten(1).norm(dim=1)
    assert norms.max() <= eps + 1e-5
    assert x_adv.min() >= 0.0 and x_adv.max() <= 1.0
    if eps > 0:
        assert norms.max() > 0.5 * eps, "the attack should use a good part of its budget"


def test_random_starts_are_draws_inside_the_ball():
    x = torch.full((64, 100), 0.5)
    y = torch.zeros(64, dtype=torch.long)
    model = nn.Linear(100, 3)
    linf = pgd(model, x, y, 0.2, steps=1, step_size=0.0, generator=torch.Generator().manual_seed(1))
    delta = linf - x
    assert delta.abs().max() <= 0.2 + 1e-6
    assert delta.max() > 0.19 and delta.min() < -0.19 and abs(delta.mean()) < 0.01
    l2_start = pgd(model, x, y, 2.0, steps=1, step_size=0.0, norm="l2", generator=None)
    l2 = l2_start - x
    radii = l2.norm(dim=1)
    # uniform in a 100-dimensional ball: the radius is eps * u**(1/100), close to eps
    assert radii.max() <= 2.0 + 1e-5 and radii.min() > 1.7
    directions = l2 / radii[:, None]
    assert directions.mean(dim=0).norm() < 0.3, "directions should spread over the sphere"


def test_fgsm_is_the_sign_of_the_analytic_gradient_of_a_linear_model():
    torch.manual_seed(0)
    model = nn.Linear(12, 4)
    x = torch.rand(8, 12, generator=torch.Generator().manual_seed(2))
    y = torch.tensor([0, 1, 2, 3, 3, 2, 1, 0])
    eps = 0.1
    with torch.no_grad():
        probs = model(x).softmax(dim=1)
        # d/dx of mean_i CE(W x_i + b, y_i) = (softmax - onehot) W / N
        grad = (probs - F.one_hot(y, 4).float()) @ model.weight / len(y)
    expected = (x + eps * grad.sign()).clamp(0, 1)
    torch.testing.assert_close(fgsm(model, x, y, eps), expected, rtol=0, atol=0)
    expected_targeted = (x - eps * grad.sign()).clamp(0, 1)
    torch.testing.assert_close(fgsm(model, x, y, eps, targeted=True), expected_targeted)
    one_step = pgd(model, x, y, eps, steps=1, step_size=eps, random_start=False)
    torch.testing.assert_close(one_step, expected)


def test_untargeted_pgd_raises_the_loss_and_breaks_a_trained_model(digits):
    model, x, y = digits
    clean_accuracy = _accuracy(model, x, y)
    assert clean_accuracy > 0.9
    clean_loss = F.cross_entropy(model(x), y, reduction="none").detach()
    for norm, eps in (("linf", 0.1), ("linf", 0.2), ("l2", 1.0)):
        x_adv = pgd(model, x, y, eps, norm=norm, generator=torch.Generator().manual_seed(0))
        adv_loss = F.cross_entropy(model(x_adv), y, reduction="none").detach()
        assert (adv_loss >= clean_loss - 1e-6).all()
        assert _accuracy(model, x_adv, y) < 0.5 * clean_accuracy
    assert _accuracy(model, fgsm(model, x, y, 0.2), y) < 0.2
    weak = _accuracy(model, pgd(model, x, y, 0.05), y)
    strong = _accuracy(model, pgd(model, x, y, 0.3), y)
    assert strong <= weak < clean_accuracy


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_zero_budget_returns_the_input(digits, norm):
    model, x, y = digits
    assert torch.equal(pgd(model, x, y, 0.0, norm=norm), x)
    assert torch.equal(fgsm(model, x, y, 0.0), x)


def test_targeted_pgd_raises_the_target_probability(digits):
    model, x, y = digits
    target = next_class_targets(y, 10)
    x_adv = pgd(model, x, target, 0.2, targeted=True, generator=torch.Generator().manual_seed(0))

    def target_probability(inputs):
        with torch.no_grad():
            return model(inputs).softmax(dim=1).gather(1, target[:, None]).squeeze(1)

    assert (target_probability(x_adv) > target_probability(x)).float().mean() > 0.95
    assert target_probability(x_adv).mean() > 0.5 > target_probability(x).mean()
    targeted_fgsm = fgsm(model, x, target, 0.1, targeted=True)
    assert target_probability(targeted_fgsm).mean() > target_probability(x).mean()


class _ModeSpy(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: list[bool] = []

    def forward(self, x):
        self.seen.append(self.training)
        return x


def test_parameters_mode_and_input_are_left_as_they_were():
    torch.manual_seed(0)
    spy = _ModeSpy()
    model = nn.Sequential(
        spy, nn.Linear(10, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 3)
    )
    model.train()
    model[3].eval()
    existing = torch.randn_like(model[1].weight)
    model[1].weight.grad = existing.clone()
    modes = [module.training for module in model.modules()]
    running_mean = model[2].running_mean.clone()
    x = torch.rand(6, 10)
    x_before = x.clone()
    y = torch.tensor([0, 1, 2, 0, 1, 2])

    outputs = [
        pgd(model, x, y, 0.1, steps=3),
        pgd(model, x, y, 0.5, norm="l2", steps=3, targeted=True),
        fgsm(model, x, y, 0.1),
    ]

    assert spy.seen and not any(spy.seen), "the model must run in eval mode during the attack"
    assert [module.training for module in model.modules()] == modes
    torch.testing.assert_close(model[1].weight.grad, existing, rtol=0, atol=0)
    assert all(p.grad is None for name, p in model.named_parameters() if name != "1.weight")
    torch.testing.assert_close(model[2].running_mean, running_mean, rtol=0, atol=0)
    assert torch.equal(x, x_before) and not x.requires_grad
    for x_adv in outputs:
        assert not x_adv.requires_grad and x_adv.grad_fn is None


def test_attacks_run_under_no_grad_and_from_inputs_that_require_grad():
    model = _conv_model()
    x, y = _images()
    with torch.no_grad():
        plain = pgd(model, x, y, 0.1, random_start=False)
    leaf = x.clone().requires_grad_(True)
    assert torch.equal(pgd(model, leaf, y, 0.1, random_start=False), plain)
    assert leaf.grad is None
    assert torch.equal(fgsm(model, leaf, y, 0.1), fgsm(model, x, y, 0.1))


def test_default_step_size_and_seeded_random_start():
    model = _conv_model()
    x, y = _images()
    for norm, eps in (("linf", 8 / 255), ("l2", 0.5)):
        default = pgd(
            model, x, y, eps, steps=4, norm=norm, generator=torch.Generator().manual_seed(3)
        )
        explicit = pgd(
            model,
            x,
            y,
            eps,
            steps=4,
            step_size=2.5 * eps / 4,
            norm=norm,
            generator=torch.Generator().manual_seed(3),
        )
        assert torch.equal(default, explicit)
        other = pgd(
            model, x, y, eps, steps=4, norm=norm, generator=torch.Generator().manual_seed(4)
        )
        assert not torch.equal(default, other)


def test_clip_none_leaves_the_range_open():
    model = nn.Linear(4, 2)
    x = torch.tensor([[2.0, -3.0, 0.5, 10.0]])
    x_adv = pgd(model, x, torch.tensor([0]), 0.5, clip=None, random_start=False)
    assert (x_adv - x).abs().max() <= 0.5 + 1e-6
    custom = pgd(model, x, torch.tensor([0]), 0.5, clip=(-5.0, 10.0), random_start=False)
    assert custom.max() <= 10.0


def test_next_class_targets_uses_the_given_number_of_classes():
    y = torch.tensor([0, 9, 10, 98, 99])
    assert next_class_targets(y, 100).tolist() == [1, 10, 11, 99, 0]
    assert next_class_targets(torch.tensor([0, 9]), 10).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        next_class_targets(y, 10)
    with pytest.raises(TypeError, match="integer class labels"):
        next_class_targets(torch.tensor([0.0, 1.0]), 10)
    with pytest.raises(ValueError, match="num_classes"):
        next_class_targets(y, 1)
    with pytest.raises(TypeError):
        next_class_targets(y)  # type: ignore[call-arg]


def test_arguments_are_checked_with_clear_errors():
    model = nn.Linear(4, 2)
    x, y = torch.rand(3, 4), torch.tensor([0, 1, 0])
    cases = [
        (dict(eps=-0.1), ValueError, "eps"),
        (dict(eps=float("nan")), ValueError, "eps"),
        (dict(eps=float("inf")), ValueError, "eps"),
        (dict(eps=0.1, steps=0), ValueError, "steps"),
        (dict(eps=0.1, steps=2.0), TypeError, "steps"),
        (dict(eps=0.1, norm="l1"), ValueError, "norm"),
        (dict(eps=0.1, step_size=-1.0), ValueError, "step_size"),
        (dict(eps=0.1, clip=(1.0, 0.0)), ValueError, "low < high"),
        (dict(eps=0.1, clip=(0.0, float("nan"))), ValueError, "clip"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            pgd(model, x, y, **kwargs)
    with pytest.raises(ValueError, match="eps"):
        fgsm(model, x, y, -1.0)
    with pytest.raises(ValueError, match="NaN"):
        pgd(model, torch.full((3, 4), float("nan")), y, 0.1)
    normalised = (x - 0.5) / 0.25
    with pytest.raises(ValueError, match="normalisation inside the model"):
        fgsm(model, normalised, y, 0.1)
    with pytest.raises(TypeError, match="floating-point"):
        pgd(model, torch.ones(3, 4, dtype=torch.long), y, 0.1)
    with pytest.raises(ValueError, match="batch"):
        pgd(model, x, y[:2], 0.1)


def test_shifted_targets_map_each_class_by_the_shift():
    from lightning_info.methods.rome.attacks import shifted_targets

    y = torch.tensor([0, 1, 4, 9])
    assert torch.equal(shifted_targets(y, 10, 1), next_class_targets(y, 10))
    assert shifted_targets(y, 10, -1).tolist() == [9, 0, 3, 8]
    assert shifted_targets(y, 10, 2).tolist() == [2, 3, 6, 1]
    with pytest.raises(ValueError, match="onto itself"):
        shifted_targets(y, 10, 20)


def test_targeted_attacks_reach_the_shifted_class_on_a_linear_model():
    from lightning_info.methods.rome.evaluation import attacked_predictions

    # three well-separated classes along the axes; a radius of the whole pixel range reaches any
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.eye(3))
    x = torch.eye(3).repeat(4, 1) * 0.9 + 0.05
    y = torch.arange(3).repeat(4)
    for shift in (1, -1):
        out = attacked_predictions(
            net, x, y, ["fgsm", "pgd"], eps=1.0, steps=5, target_shift=shift, num_classes=3
        )
        for name in ("fgsm", "pgd"):
            assert out[name].tolist() == ((y + shift) % 3).tolist(), (name, shift)
    with pytest.raises(ValueError, match="num_classes"):
        attacked_predictions(net, x, y, ["pgd"], target_shift=1)
