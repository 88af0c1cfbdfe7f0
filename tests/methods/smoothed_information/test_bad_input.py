"""Bad input to the smoothed-density estimators fails early with a message naming the argument:
noise variances too small for float64 (relative to the samples' scale) or too large, boolean or
complex samples and times, meta tensors, and a zero ``t`` in Brown's identity; Brown's identity
refuses a negative, non-finite, bool or string Fisher information or MMSE and tensors of
unbroadcastable shapes, and the metrics refuse bad constructor arguments and bool, complex or
non-tensor samples in ``update``."""

from __future__ import annotations

import pytest
import torch

from lightning_info.methods.smoothed_information import (
    SmoothedEntropy,
    SmoothedEstimatorOptions,
    SmoothedFisherInformation,
    SmoothedInformationMonitor,
    SmoothedMutualInformation,
    fisher_from_mmse,
    mmse_from_fisher,
    smoothed_entropy,
    smoothed_fisher_information,
    smoothed_information,
    smoothed_mmse,
    smoothed_mutual_information,
)

FEW = SmoothedEstimatorOptions(num_mc=32)
PLUG_IN = SmoothedEstimatorOptions(num_mc=32, estimator="plug_in")
TOO_SMALL = r"`t` = .* is outside \[.*smallest noise variance these samples allow.*larger t"


def _x(d: int = 1) -> torch.Tensor:
    return torch.randn(20, d, generator=torch.Generator().manual_seed(0)).squeeze(1)


def _updated(metric, samples):
    metric.update(samples)
    return metric.compute()


BAD_INPUT = [
    pytest.param(
        lambda: smoothed_fisher_information(_x(), 1e-300),
        ValueError,
        TOO_SMALL,
        id="fisher-1d-t-1e-300",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(_x(), 1e-30),
        ValueError,
        TOO_SMALL,
        id="fisher-1d-t-below-rounding",
    ),
    pytest.param(
        lambda: smoothed_information(_x(2), 1e-300, FEW),
        ValueError,
        TOO_SMALL,
        id="information-2d-t-1e-300",
    ),
    pytest.param(
        lambda: smoothed_entropy(_x(2), 1e-30, PLUG_IN),
        ValueError,
        TOO_SMALL,
        id="plug-in-entropy-t-below-rounding",
    ),
    pytest.param(
        lambda: smoothed_mutual_information(_x(2), 1e-30, PLUG_IN),
        ValueError,
        TOO_SMALL,
        id="plug-in-mi-t-below-rounding",
    ),
    pytest.param(
        lambda: smoothed_mmse(_x(2), [1.0, 1e-300], FEW),
        ValueError,
        TOO_SMALL,
        id="mmse-t-1e-300",
    ),
    pytest.param(
        lambda: smoothed_information(_x(), 1e300),
        ValueError,
        r"`t` = 1e\+300 is outside \[.*, 1e\+100\]",
        id="information-t-1e300",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(_x().double() * 1e200, 1.0),
        ValueError,
        r"`samples` are too large: their squared norms overflow float64; rescale them",
        id="samples-overflow",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(_x(), torch.tensor([True])),
        TypeError,
        r"`t` must hold real noise variances, got dtype torch.bool",
        id="t-bool-tensor",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(_x(), float("nan")),
        ValueError,
        r"`t` must be finite, got nan",
        id="t-nan",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(torch.tensor([1.0, float("nan"), 2.0]), 1.0),
        ValueError,
        r"`samples` contains 1 NaN/inf value\(s\)",
        id="samples-nan",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(torch.tensor([True, False, True]), 1.0),
        TypeError,
        r"`samples` must be real numbers, got dtype torch.bool",
        id="samples-bool",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(torch.randn(5, dtype=torch.cfloat), 1.0),
        TypeError,
        r"`samples` must be real numbers, got dtype torch.complex64.*\.real",
        id="samples-complex",
    ),
    pytest.param(
        lambda: smoothed_fisher_information(torch.empty(5, device="meta"), 1.0),
        ValueError,
        r"`samples` is on the meta device .*materialise it",
        id="samples-meta",
    ),
    pytest.param(
        lambda: fisher_from_mmse(0.5, 0.0, 1),
        ValueError,
        r"`t` must be > 0, got 0.0",
        id="fisher-from-mmse-t-zero",
    ),
    pytest.param(
        lambda: SmoothedInformationMonitor(t="0.1"),
        TypeError,
        r"`t` must be a real number, got '0.1'",
        id="monitor-t-string",
    ),
    pytest.param(
        lambda: mmse_from_fisher(-1.0, 1.0, 1),
        ValueError,
        r"`fisher` must be >= 0, got -1.0",
        id="mmse-from-fisher-negative-fisher",
    ),
    pytest.param(
        lambda: mmse_from_fisher(float("nan"), 1.0, 1),
        ValueError,
        r"`fisher` must be finite, got nan",
        id="mmse-from-fisher-nan-fisher",
    ),
    pytest.param(
        lambda: mmse_from_fisher(True, 1.0, 1),
        TypeError,
        r"`fisher` must be a real number, got True",
        id="mmse-from-fisher-bool-fisher",
    ),
    pytest.param(
        lambda: mmse_from_fisher("1", 1.0, 1),
        TypeError,
        r"`fisher` must be a real number, got '1'",
        id="mmse-from-fisher-string-fisher",
    ),
    pytest.param(
        lambda: mmse_from_fisher(1.0, 1.0, 2.0),
        TypeError,
        r"`dim` must be an int, got 2.0",
        id="mmse-from-fisher-dim-float",
    ),
    pytest.param(
        lambda: mmse_from_fisher(torch.tensor(1.0), torch.tensor(-1.0), 1),
        ValueError,
        r"`t` must be > 0, got -1",
        id="mmse-from-fisher-negative-t-tensor",
    ),
    pytest.param(
        lambda: mmse_from_fisher(torch.ones(3), torch.ones(2), 1),
        ValueError,
        r"`fisher` \(3,\) and `t` \(2,\) must have broadcastable shapes",
        id="mmse-from-fisher-mismatched-lengths",
    ),
    pytest.param(
        lambda: fisher_from_mmse(-1.0, 1.0, 1),
        ValueError,
        r"`mmse` must be >= 0, got -1.0",
        id="fisher-from-mmse-negative-mmse",
    ),
    pytest.param(
        lambda: fisher_from_mmse(torch.tensor([1.0, float("inf")]), 1.0, 1),
        ValueError,
        r"`mmse` contains 1 NaN/inf",
        id="fisher-from-mmse-inf-tensor",
    ),
    pytest.param(
        lambda: SmoothedFisherInformation(True),
        TypeError,
        r"`t` must be a real number, got True",
        id="fisher-metric-t-bool",
    ),
    pytest.param(
        lambda: SmoothedFisherInformation(1.0, max_samples=2.0),
        TypeError,
        r"`max_samples` must be an int, got 2.0",
        id="fisher-metric-max-samples-float",
    ),
    pytest.param(
        lambda: SmoothedFisherInformation(1.0, FEW).compute(),
        ValueError,
        r"SmoothedFisherInformation has no samples: call `update\(samples\)`",
        id="fisher-metric-compute-before-update",
    ),
    pytest.param(
        lambda: _updated(SmoothedFisherInformation(1.0, FEW), torch.tensor([True, False])),
        TypeError,
        r"`samples` must be real numbers, got dtype torch.bool",
        id="fisher-metric-bool-samples",
    ),
    pytest.param(
        lambda: _updated(SmoothedFisherInformation(1.0, FEW), torch.zeros(2, 2, 2)),
        ValueError,
        r"`samples` must have shape \(B,\) or \(B, d\), got \(2, 2, 2\)",
        id="fisher-metric-3d-samples",
    ),
    pytest.param(
        lambda: SmoothedEntropy([]),
        ValueError,
        r"`t` must hold at least one noise level",
        id="entropy-metric-no-t",
    ),
    pytest.param(
        lambda: SmoothedEntropy(1.0, {"num_mc": 32}),
        TypeError,
        r"`options` must be a SmoothedEstimatorOptions, got dict",
        id="entropy-metric-options-dict",
    ),
    pytest.param(
        lambda: _updated(SmoothedEntropy(1.0, FEW), torch.tensor([1 + 1j, 2j])),
        TypeError,
        r"`samples` must be real numbers, got dtype torch.complex64",
        id="entropy-metric-complex-samples",
    ),
    pytest.param(
        lambda: _updated(SmoothedEntropy(1.0, FEW), [1.0, 2.0]),
        TypeError,
        r"`samples` must be a tensor, got list",
        id="entropy-metric-list-samples",
    ),
    pytest.param(
        lambda: SmoothedMutualInformation(float("nan")),
        ValueError,
        r"`t` must be finite, got nan",
        id="mutual-information-metric-t-nan",
    ),
    pytest.param(
        lambda: SmoothedMutualInformation(1.0, seed=-1),
        ValueError,
        r"`seed` must be >= 0, got -1",
        id="mutual-information-metric-seed-negative",
    ),
    pytest.param(
        lambda: _updated(SmoothedMutualInformation(1.0, FEW), torch.tensor([1.0, float("nan")])),
        ValueError,
        r"`samples` contains 1 NaN/inf",
        id="mutual-information-metric-nan-samples",
    ),
]


def test_the_smallest_accepted_t_still_gives_finite_estimates():
    """At the documented floor (1e-10 x the largest squared norm) the estimates are finite and
    the Fisher information is ``d / t`` to leading order (the samples are far apart there)."""
    x = _x(2)
    centred = x.double() - x.double().mean(0)
    t = 1.01e-10 * float((centred * centred).sum(1).max())
    fisher = smoothed_fisher_information(x, t, FEW)
    assert torch.isfinite(fisher)
    assert float(fisher) == pytest.approx(2 / t, rel=1e-6)


from lightning_info.methods.smoothed_information import functional as _core  # noqa: E402

BAD_INPUT += [
    pytest.param(
        lambda: _core.check_estimator_options({"num_mc": 16}),
        TypeError,
        r"`options` must be a SmoothedEstimatorOptions, got dict",
        id="check-estimator-options-dict",
    ),
    pytest.param(
        lambda: _core.check_sample_dtype(torch.tensor([True, False])),
        TypeError,
        r"`samples` must be real numbers, got dtype torch.bool",
        id="check-sample-dtype-bool",
    ),
    pytest.param(
        lambda: _core.check_sample_dtype([1.0, 2.0]),
        TypeError,
        r"`samples` must be a tensor, got list",
        id="check-sample-dtype-list",
    ),
    pytest.param(
        lambda: _core.check_times([1.0, 0.0]),
        ValueError,
        r"`t` must be > 0, got 0.0",
        id="check-times-zero",
    ),
    pytest.param(
        lambda: _core.check_times([True]),
        TypeError,
        r"`t` must be a real number, got True",
        id="check-times-bool",
    ),
    pytest.param(
        lambda: _core.check_times("1.0"),
        TypeError,
        r"`t` must be a real number, got '1.0'",
        id="check-times-string",
    ),
    pytest.param(
        lambda: _core.check_times(torch.ones(2, 2)),
        ValueError,
        r"`t` must be a number or 1-D, got shape \(2, 2\)",
        id="check-times-matrix",
    ),
    pytest.param(
        lambda: _core.check_times([]),
        ValueError,
        r"`t` must hold at least one noise level",
        id="check-times-empty",
    ),
]


def test_check_times_reads_numbers_and_vectors():
    assert _core.check_times(0.5) == ([0.5], True)
    assert _core.check_times(torch.tensor([0.25, 2.0])) == ([0.25, 2.0], False)
