"""Fisher information, entropy and MI of Gaussian-smoothed densities against closed forms and
high-resolution quadrature of exact densities; metrics and the monitor callback."""

import math
import socket

import numpy as np
import pytest
import torch
from lightning.pytorch import Trainer
from scipy.special import ndtr
from torch import nn

from lightning_info.core.logging import metric_key
from lightning_info.methods.smoothed_information.callback import SmoothedInformationMonitor
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    fisher_from_mmse,
    mmse_from_fisher,
    smoothed_entropy,
    smoothed_fisher_information,
    smoothed_information,
    smoothed_mmse,
    smoothed_mutual_information,
)
from lightning_info.methods.smoothed_information.metrics import (
    SampleReservoir,
    SmoothedEntropy,
    SmoothedFisherInformation,
    SmoothedMutualInformation,
)
from tests.tiny import QUIET, TinyClassifier, TinyDataModule


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_torch_thread): ...


def _gauss(n, d=1, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(n, d, generator=g, dtype=torch.float64)
    return x[:, 0] if d == 1 else x


def _uniform(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 2 * torch.rand(n, generator=g, dtype=torch.float64) - 1


def _gaussian_entropy(variance, d=1):
    return 0.5 * d * math.log(2 * math.pi * math.e * variance)


def _uniform_truth(t):
    """J and h of Uniform[-1, 1] * N(0, t): the exact density 0.5 (Phi((x+1)/sd) - Phi((x-1)/sd))
    and its derivative on a 1e-5 grid over [0, 1 + 12 sd] (the density is even)."""
    sd = math.sqrt(t)
    x = np.linspace(0.0, 1 + 12 * sd, 400_001)
    # survival-function differences keep the tail accurate
    f = np.where(
        x > 1,
        0.5 * (ndtr(-(x - 1) / sd) - ndtr(-(x + 1) / sd)),
        0.5 * (ndtr((x + 1) / sd) - ndtr((x - 1) / sd)),
    )
    density = np.exp(-(((x + 1) / sd) ** 2) / 2) - np.exp(-(((x - 1) / sd) ** 2) / 2)
    derivative = density / (2 * sd * math.sqrt(2 * math.pi))
    keep = f > 0
    fisher = 2 * np.trapezoid((derivative**2 / np.where(keep, f, 1))[keep], x[keep])
    entropy = -2 * np.trapezoid((f * np.log(np.where(keep, f, 1)))[keep], x[keep])
    return fisher, entropy


# -- Fisher information ----------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.25, 1.0])
@pytest.mark.parametrize("scale", [0.5, 1.0])
def test_gaussian_fisher_1d_quadrature_within_5_percent(t, scale):
    x = _gauss(2000, scale=scale, seed=1)
    truth = 1 / (scale**2 + t)
    assert float(smoothed_fisher_information(x, t)) == pytest.approx(truth, rel=0.05)


@pytest.mark.parametrize("t", [0.5, 1.0])
def test_gaussian_fisher_3d_monte_carlo_within_5_percent(t):
    x = _gauss(2000, d=3, seed=1)
    assert float(smoothed_fisher_information(x, t)) == pytest.approx(3 / (1 + t), rel=0.05)


def test_plug_in_fisher_is_biased_upward_at_small_t_in_3d():
    """At d=3, t=0.25, n=2000 the plug-in is ~6.7% high (J is convex in the density, so
    E J(f_t) >= J(f * phi_t)); the bias falls roughly as 1/n."""
    truth = 3 / 1.25
    errors = [
        float(
            smoothed_fisher_information(
                _gauss(n, d=3, seed=2), 0.25, SmoothedEstimatorOptions(num_mc=2048)
            )
        )
        / truth
        - 1
        for n in (500, 4000)
    ]
    assert 0.08 < errors[0] < 0.3 and 0 < errors[1] < 0.06


def test_fisher_error_decreases_with_n():
    truth = 1 / 1.25
    mean_abs_error = [
        np.mean(
            [
                abs(float(smoothed_fisher_information(_gauss(n, seed=s), 0.25)) - truth)
                for s in range(5)
            ]
        )
        for n in (100, 1000, 10_000)
    ]
    assert mean_abs_error[0] > mean_abs_error[1] > mean_abs_error[2]
    assert mean_abs_error[2] < 0.015


def test_quadrature_converges_for_isolated_samples_at_small_t():
    x = torch.tensor([-3.0, -2.9, 0.0, 0.05, 4.0], dtype=torch.float64)
    for t in (1e-3, 0.1):
        coarse = smoothed_fisher_information(x, t)
        fine = smoothed_fisher_information(x, t, SmoothedEstimatorOptions(grid=64))
        torch.testing.assert_close(coarse, fine, rtol=1e-9, atol=0)


def test_monte_carlo_estimators_agree_with_quadrature_in_1d():
    x = _uniform(300, seed=3)
    exact = float(smoothed_fisher_information(x, 0.1))
    for estimator in ("posterior", "score"):
        values = [
            float(
                smoothed_fisher_information(
                    x,
                    0.1,
                    SmoothedEstimatorOptions(
                        method="monte_carlo", mc_estimator=estimator, num_mc=2000
                    ),
                    generator=torch.Generator().manual_seed(s),
                )
            )
            for s in range(4)
        ]
        spread = np.std(values, ddof=1) / 2  # standard error of the mean of 4
        assert abs(np.mean(values) - exact) < 4 * spread + 1e-3 * exact


def test_single_sample_is_a_gaussian():
    x = torch.tensor([[0.3, -1.0, 2.0]], dtype=torch.float64)
    info = smoothed_information(x, [0.5, 2.0])
    torch.testing.assert_close(info.fisher, torch.tensor([6.0, 1.5], dtype=torch.float64))
    torch.testing.assert_close(
        info.entropy,
        torch.tensor([_gaussian_entropy(0.5, 3), _gaussian_entropy(2.0, 3)], dtype=torch.float64),
    )
    torch.testing.assert_close(info.mutual_information, torch.zeros(2, dtype=torch.float64))


# -- entropy, MI, MMSE -------------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.25, 1.0])
def test_gaussian_entropy_and_mi_1d_within_3_percent(t):
    info = smoothed_information(_gauss(2000, scale=1.5, seed=4), t)
    assert float(info.entropy) == pytest.approx(_gaussian_entropy(2.25 + t), rel=0.03)
    assert float(info.mutual_information) == pytest.approx(0.5 * math.log(1 + 2.25 / t), rel=0.03)


def test_gaussian_entropy_and_mi_3d_monte_carlo_within_3_percent():
    info = smoothed_information(
        _gauss(2000, d=3, seed=5), 0.25, SmoothedEstimatorOptions(num_mc=2048)
    )
    assert float(info.entropy) == pytest.approx(_gaussian_entropy(1.25, 3), rel=0.03)
    assert float(info.mutual_information) == pytest.approx(1.5 * math.log(1 + 4), rel=0.03)
    plug_in = smoothed_entropy(
        _gauss(2000, d=3, seed=5), 0.25, SmoothedEstimatorOptions(estimator="plug_in")
    )
    assert float(plug_in) == pytest.approx(_gaussian_entropy(1.25, 3), rel=0.03)


@pytest.mark.parametrize("t", [0.25, 1.0])
def test_uniform_fisher_and_entropy_against_exact_density(t):
    fisher, entropy = _uniform_truth(t)
    x = _uniform(4000, seed=6)
    assert float(smoothed_fisher_information(x, t)) == pytest.approx(fisher, rel=0.03)
    assert float(smoothed_entropy(x, t)) == pytest.approx(entropy, rel=0.01)


def test_de_bruijn_entropy_equals_direct_plug_in_entropy_in_1d():
    """Both compute h(f_t) of the same density: they differ only by quadrature error."""
    for x in (_uniform(500, seed=7), torch.tensor([-3.0, 0.0, 0.1, 5.0], dtype=torch.float64)):
        times = [1e-2, 0.3, 2.0]
        info = smoothed_information(x, times)
        direct = smoothed_entropy(x, times, SmoothedEstimatorOptions(estimator="plug_in"))
        torch.testing.assert_close(info.entropy, direct, rtol=0, atol=1e-4)
        torch.testing.assert_close(
            info.fisher, smoothed_fisher_information(x, times), rtol=1e-8, atol=0
        )
        mi = smoothed_mutual_information(x, times, SmoothedEstimatorOptions(estimator="plug_in"))
        torch.testing.assert_close(info.mutual_information, mi, rtol=0, atol=1e-4)


def test_mutual_information_is_between_zero_and_log_n():
    for x in (_gauss(50, seed=8), _uniform(200, seed=9), _gauss(100, d=2, seed=10)):
        mi = smoothed_mutual_information(x, [1e-4, 1.0, 1e4])
        assert (mi >= 0).all() and (mi <= math.log(x.shape[0]) + 1e-6).all()
        assert float(mi[2]) < 1e-3  # noise swamps the input
    # atoms 1 apart seen through noise of sd 0.03 are told apart: I = H(X_I) = log n
    grid = torch.arange(20, dtype=torch.float64)
    assert float(smoothed_mutual_information(grid, 1e-3)) == pytest.approx(math.log(20), rel=1e-4)
    plane = torch.cartesian_prod(grid[:5], grid[:4])
    mi = smoothed_mutual_information(plane, 1e-3)
    assert float(mi) == pytest.approx(math.log(20), rel=0.01)  # Monte Carlo: ~0.5% at 4096


def test_brown_identity_plug_in_mmse_matches_fisher():
    """E||X - E[X|Y]||^2 under the empirical prior equals t d - t^2 J(f_t)."""
    x = _uniform(400, seed=11)
    for t in (0.05, 0.5):
        expected = mmse_from_fisher(float(smoothed_fisher_information(x, t)), t, 1)
        values = [
            float(
                smoothed_mmse(
                    x,
                    t,
                    SmoothedEstimatorOptions(num_mc=4000),
                    generator=torch.Generator().manual_seed(s),
                )
            )
            for s in range(3)
        ]
        assert np.mean(values) == pytest.approx(expected, rel=0.03)
    y = _gauss(300, d=2, seed=12)
    fisher = smoothed_fisher_information(y, 0.3, SmoothedEstimatorOptions(num_mc=8000))
    mmse = smoothed_mmse(y, 0.3, SmoothedEstimatorOptions(num_mc=8000))
    assert float(mmse) == pytest.approx(float(mmse_from_fisher(fisher, 0.3, 2)), rel=0.05)


def test_brown_identity_helpers():
    # Gaussian prior N(0, s^2 I_d): J = d / (s^2 + t), mmse = d s^2 t / (s^2 + t)
    s2, t, d = 2.0, 0.7, 3
    assert mmse_from_fisher(d / (s2 + t), t, d) == pytest.approx(d * s2 * t / (s2 + t))
    assert fisher_from_mmse(d * s2 * t / (s2 + t), t, d) == pytest.approx(d / (s2 + t))


# -- shapes and arguments ----------------------------------------------------------------------


def test_shapes_translation_invariance_and_no_mutation():
    x = _uniform(200, seed=13)
    before = x.clone()
    many = smoothed_fisher_information(x, [0.5, 0.1])
    assert many.shape == (2,) and many.dtype == torch.float64
    assert float(many[1]) == float(smoothed_fisher_information(x, 0.1))
    torch.testing.assert_close(smoothed_fisher_information(x[:, None] + 100.0, [0.5, 0.1]), many)
    assert torch.equal(x, before)
    assert smoothed_entropy(x.float(), torch.tensor(0.5)).shape == ()


def test_bad_arguments():
    x = _uniform(10)
    with pytest.raises(ValueError, match="NaN"):
        smoothed_fisher_information(torch.tensor([0.0, float("nan")]), 1.0)
    with pytest.raises(ValueError, match="empty"):
        smoothed_entropy(torch.zeros(0, 2), 1.0)
    with pytest.raises(ValueError, match=r"\(n,\) or \(n, d\)"):
        smoothed_entropy(torch.zeros(4, 2, 2), 1.0)
    with pytest.raises(ValueError, match="`t` must be > 0"):
        smoothed_fisher_information(x, [1.0, 0.0])
    with pytest.raises(ValueError, match="monte_carlo"):
        smoothed_fisher_information(
            torch.zeros(5, 2), 1.0, SmoothedEstimatorOptions(method="quadrature")
        )
    with pytest.raises(ValueError, match="method"):
        smoothed_fisher_information(x, 1.0, SmoothedEstimatorOptions(method="exact"))
    with pytest.raises(ValueError, match="estimator"):
        smoothed_entropy(x, 1.0, SmoothedEstimatorOptions(estimator="knn"))
    with pytest.raises(ValueError, match="tail_factor"):
        smoothed_information(x, 1.0, SmoothedEstimatorOptions(tail_factor=1.0))
    with pytest.raises(TypeError, match="SmoothedEstimatorOptions"):
        smoothed_information(x, 1.0, {"num_mc": 64})


# -- metrics -----------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2])
def test_metrics_on_batches_equal_the_functions_on_the_concatenation(d):
    x = _gauss(120, d=d, seed=14)
    options = SmoothedEstimatorOptions(num_mc=512)
    metrics = {
        smoothed_fisher_information: SmoothedFisherInformation([0.3, 1.0], options),
        smoothed_entropy: SmoothedEntropy(0.3, options),
        smoothed_mutual_information: SmoothedMutualInformation(0.3, options),
    }
    for function, metric in metrics.items():
        for batch in x.split(50):
            metric.update(batch)
        expected = function(x, metric.t, options, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(metric.compute(), expected, rtol=0, atol=0)


def test_reservoir_keeps_a_seeded_uniform_subset():
    x = _gauss(1000, d=2, seed=15)

    def subset(seed):
        metric = SampleReservoir(max_samples=100, seed=seed)
        for batch in x.split(30):  # prunes whenever more than 200 rows are held
            metric.update(batch)
        return metric.compute()

    kept = subset(0)
    assert kept.shape == (100, 2)
    assert torch.equal(kept, subset(0)) and not torch.equal(kept, subset(1))
    positions = (kept[:, None] == x[None]).all(-1).nonzero()[:, 1]
    assert positions.unique().numel() == 100  # distinct rows of the data, in data order
    assert torch.equal(positions, positions.sort().values)
    assert 300 < float(positions.double().mean()) < 700  # spread over the stream, not its start
    metric = SmoothedFisherInformation(0.5, SmoothedEstimatorOptions(num_mc=256), max_samples=100)
    for batch in x.split(30):
        metric.update(batch)
    expected = smoothed_fisher_information(kept, 0.5, SmoothedEstimatorOptions(num_mc=256))
    torch.testing.assert_close(metric.compute(), expected, rtol=0, atol=0)


def _fake_gather(other: SampleReservoir | None):
    """A stand-in for the all-gather of 2 processes: this one's state, then ``other``'s (states
    are gathered in the order rows, keys, dim; a process that saw no rows sends empty tensors)."""
    if other is None:
        states = [torch.zeros(0, dtype=torch.float64)] * 2 + [torch.tensor(0)]
    else:
        empty = [torch.zeros(0, dtype=torch.float64)]
        states = [torch.cat(other.rows), torch.cat(other.keys or empty), other.dim]
    states = iter(states)
    return lambda tensor, group=None: [tensor, next(states)]


def test_metric_states_gather_across_processes():
    x = _gauss(90, d=3, seed=16)
    second = SmoothedEntropy(0.5, SmoothedEstimatorOptions(num_mc=256))
    second.update(x[40:])
    first = SmoothedEntropy(
        0.5,
        SmoothedEstimatorOptions(num_mc=256),
        dist_sync_fn=_fake_gather(second),
        distributed_available_fn=lambda: True,
    )
    first.update(x[:40])
    expected = smoothed_entropy(x, 0.5, SmoothedEstimatorOptions(num_mc=256))
    torch.testing.assert_close(first.compute(), expected, rtol=0, atol=0)
    # with a cap, next to a process that saw no rows
    alone = SampleReservoir(
        max_samples=50, dist_sync_fn=_fake_gather(None), distributed_available_fn=lambda: True
    )
    alone.update(x)
    assert alone.compute().shape == (50, 3)


def test_metric_rejects_changing_dimension_and_empty_compute():
    metric = SmoothedFisherInformation(1.0)
    metric.update(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="d=2"):
        metric.update(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="no samples"), pytest.warns(UserWarning):
        SmoothedFisherInformation(1.0).compute()


# -- callback ----------------------------------------------------------------------------------


def _trainer(callback, **kwargs):
    return Trainer(
        max_epochs=1,
        limit_train_batches=2,
        num_sanity_val_steps=0,
        callbacks=[callback],
        **QUIET,
        **kwargs,
    )


def test_monitor_logs_fisher_entropy_and_mi_per_layer_and_t():
    torch.manual_seed(0)
    monitor = SmoothedInformationMonitor(
        ["net.1", "net.2"], t=[0.1, 1.0], max_dim=4, options=SmoothedEstimatorOptions(num_mc=256)
    )
    trainer = _trainer(monitor)
    trainer.fit(TinyClassifier(), TinyDataModule())
    logged = trainer.callback_metrics
    for layer in ("net.1", "net.2"):
        for t in ("0.1", "1"):
            for symbol in ("J", "h", "I"):
                assert torch.isfinite(logged[metric_key("info", layer, f"{symbol}_t={t}")])
            assert 0 <= float(logged[metric_key("info", layer, f"I_t={t}")]) <= math.log(64) + 1e-4
    # net.1 (16 tanh units) is seen through 4 orthonormal directions: J <= d / t
    assert float(logged["info/net.1/j_t_0.1"]) <= 4 / 0.1 + 1e-3
    assert not monitor._handles  # hooks removed after the epoch


def test_monitor_on_a_probe_batch_matches_the_functions():
    torch.manual_seed(0)
    probe = torch.randn(40, 6, generator=torch.Generator().manual_seed(1))
    monitor = SmoothedInformationMonitor(
        "net.2", t=0.5, probe=probe, max_dim=None, options=SmoothedEstimatorOptions(num_mc=256)
    )
    model = TinyClassifier()
    trainer = _trainer(monitor)
    trainer.fit(model, TinyDataModule())
    with torch.no_grad():
        outputs = model.eval()(probe)
    info = smoothed_information(outputs, 0.5, SmoothedEstimatorOptions(num_mc=256, log_step=0.5))
    logged = trainer.callback_metrics
    assert float(logged["info/net.2/j_t_0.5"]) == pytest.approx(float(info.fisher), rel=1e-5)
    assert float(logged["info/net.2/i_t_0.5"]) == pytest.approx(
        float(info.mutual_information), rel=1e-5
    )


def test_monitor_raises_for_an_unknown_layer_before_training():
    model = TinyClassifier()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = _trainer(SmoothedInformationMonitor("encoder"))
    with pytest.raises(ValueError, match="no submodule.*encoder.*net.0"):
        trainer.fit(model, TinyDataModule())
    assert trainer.global_step == 0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="layers"):
        SmoothedInformationMonitor([])
    with pytest.raises(ValueError, match="`t` must be > 0"):
        SmoothedInformationMonitor("net.1", t=[1.0, -1.0])


def test_monitor_default_reads_the_input_of_the_last_linear():
    """``net.2`` is TinyClassifier's last Linear; its input is the output of ``net.1``."""
    logged = {}
    for layers in (None, "net.1"):
        torch.manual_seed(0)
        trainer = _trainer(
            SmoothedInformationMonitor(
                layers, t=0.5, max_dim=4, options=SmoothedEstimatorOptions(num_mc=128)
            )
        )
        trainer.fit(TinyClassifier(), TinyDataModule())
        logged[layers] = trainer.callback_metrics
    for symbol in ("J", "h", "I"):
        default = logged[None][metric_key("info/input_of_net.2", f"{symbol}_t=0.5")]
        assert float(default) == float(logged["net.1"][metric_key("info/net.1", f"{symbol}_t=0.5")])


class DictLayer(nn.Module):
    def forward(self, x):
        return {"hidden": x}


class DictOutputClassifier(TinyClassifier):
    def __init__(self):
        super().__init__()
        self.probe = DictLayer()

    def forward(self, x):
        return super().forward(self.probe(x)["hidden"])


def test_monitor_rejects_a_non_tensor_layer_before_the_first_step():
    model = DictOutputClassifier()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = _trainer(SmoothedInformationMonitor("probe"))
    with pytest.raises(TypeError, match="layer 'probe' gives dict"):
        trainer.fit(model, TinyDataModule())
    assert trainer.global_step == 0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_monitor_warns_when_there_is_no_validation_loop():
    trainer = _trainer(SmoothedInformationMonitor(), limit_val_batches=0)
    with pytest.warns(UserWarning, match="no validation loop"):
        trainer.fit(TinyClassifier(), TinyDataModule())
    assert not any(key.startswith("info/") for key in trainer.callback_metrics)


def _gather_worker(rank, port, queue):
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2
    )
    try:
        x = _gauss(90, d=3, seed=16)
        metric = SmoothedEntropy(0.5, SmoothedEstimatorOptions(num_mc=256))
        metric.update(x[:40] if rank == 0 else x[40:])
        capped = SampleReservoir(max_samples=30)
        if rank == 0:  # rank 1 sees nothing
            capped.update(x)
        # numpy arrays travel by value; a tensor would travel as a shared-memory handle that
        # dies with this process if the parent reads it after the worker has exited
        queue.put((rank, metric.compute().numpy(), capped.compute().numpy()))
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def test_metric_states_gather_over_two_real_processes():
    context = torch.multiprocessing.get_context("fork")
    queue = context.Queue()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    workers = [context.Process(target=_gather_worker, args=(r, port, queue)) for r in range(2)]
    for worker in workers:
        worker.start()
    received = (queue.get(timeout=60) for _ in workers)
    results = {rank: (torch.from_numpy(h), torch.from_numpy(rows)) for rank, h, rows in received}
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    expected = smoothed_entropy(_gauss(90, d=3, seed=16), 0.5, SmoothedEstimatorOptions(num_mc=256))
    for rank in (0, 1):
        torch.testing.assert_close(results[rank][0], expected, rtol=0, atol=0)
        assert results[rank][1].shape == (30, 3)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=0, atol=0)
