"""``LikelihoodStudy``: the diffusion-Fisher recipe's study, likelihoods and the OT check.

After the grid has fitted a small diffusion model on 2-D data, :meth:`LikelihoodStudy.run` builds
three tables:

- exact data model (the training set as the data distribution): PF-ODE log-likelihood of test
  points with the diffusion-Fisher trace against Skilling-Hutchinson (1 and ``probes`` probes),
  each against the closed-form ``log q_{t_min}``: mean absolute error and time;
- trained network: the same with the trace-matching head (DF-TM, no autograd) against
  Hutchinson through the network, compared with a ``reference_probes``-probe Hutchinson run;
- OT check: asymmetry of the PF-ODE flow-map Jacobian on the data set for several schedules.

and one figure (``plots``: samples and per-point log-likelihoods), which ``ComparisonCLI``
prints, writes and logs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from lightning_info.core.plotting import pyplot
from lightning_info.diffusion.noise_schedules import noise_schedule
from lightning_info.diffusion.ode import odeint_fixed
from lightning_info.experiments.study import Study, StudyResult
from lightning_info.methods.diffusion_fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)


@dataclass
class LikelihoodStudy(Study):
    """PF-ODE likelihoods with each divergence estimator, on the exact data model and the trained
    network, and the OT check (module docstring)."""

    test_points: int = 256
    t_start: float = 0.05
    steps: int = 32
    probes: int = 10
    reference_probes: int = 200
    ot_schedules: list[str] = field(default_factory=lambda: ["vp", "sub_vp", "ve", "edm"])
    ot_points: int = 16
    ot_data_points: int = 512
    samples: int = 1000
    seed: int = 0

    def run(self, cli) -> StudyResult:
        return likelihood_tables(self, cli.model, cli.datamodule)


def likelihood_tables(config: LikelihoodStudy, model, data) -> StudyResult:
    """The study's three tables and its figure for a fitted ``DiffusionModel`` and its data."""
    model = model.eval()
    generator = torch.Generator().manual_seed(config.seed)
    train = data.train_data.double()
    test = data.test_data[: config.test_points].double()
    schedule = model.schedule
    exact = DataSetDiffusion(train, schedule)
    truth = exact.log_density(test, config.t_start)
    rows_exact, per_point = [], {"exact": truth}
    methods = {"DF trace": ("fisher", 1), "Hutchinson 1": ("hutchinson", 1)}
    methods[f"Hutchinson {config.probes}"] = ("hutchinson", config.probes)

    def likelihood(points, diffusion, **options):
        """Seconds and result of the PF-ODE log-likelihood with the study's steps and t."""
        start = time.perf_counter()
        result = pf_ode_log_likelihood(
            points,
            diffusion,
            steps=config.steps,
            t_start=config.t_start,
            generator=generator,
            **options,
        )
        return time.perf_counter() - start, result

    for name, (divergence, probes) in methods.items():
        seconds, result = likelihood(test, exact, divergence=divergence, probes=probes)
        per_point[name] = result.log_likelihood
        error = (result.log_likelihood - truth).abs().mean()
        rows_exact.append([name, f"{float(error):.2e}", f"{seconds:.2f}", result.nfe])
    base = float(rows_exact[0][2])
    for row in rows_exact:
        row.insert(3, f"{float(row[2]) / base:.1f}x")

    network = _network_model(model, train)
    test_f = test.float()
    _, reference = likelihood(
        test_f,
        network,
        prior="gaussian",
        divergence="hutchinson",
        probes=config.reference_probes,
        probe="gaussian",
    )
    rows_network = []
    for name, (divergence, probes) in methods.items():
        label = "DF-TM trace" if divergence == "fisher" else name
        seconds, result = likelihood(
            test_f, network, prior="gaussian", divergence=divergence, probes=probes
        )
        nll = -result.log_likelihood.mean() / test.shape[1]
        gap = (result.log_likelihood - reference.log_likelihood).abs().mean()
        rows_network.append([label, f"{float(nll):.4f}", f"{float(gap):.2e}", f"{seconds:.2f}"])
    base = float(rows_network[0][3])
    for row in rows_network:
        row.append(f"{float(row[3]) / base:.1f}x")
    reference_nll = float(-reference.log_likelihood.mean() / test.shape[1])

    rows_ot = []
    data_subset = train[: config.ot_data_points]
    for name in config.ot_schedules:
        other = DataSetDiffusion(data_subset, noise_schedule(name))
        start = torch.randn(config.ot_points, train.shape[1], generator=generator).double()
        start = start * float(other.schedule.sigma(other.schedule.t_max))
        flow = pf_ode_flow_jacobian(start, other, steps=config.steps)
        rows_ot.append(
            [name, f"{float(flow.asymmetry.mean()):.4f}", f"{float(flow.asymmetry.max()):.4f}"]
        )

    tables = {
        f"exact data model: PF-ODE log q_t of {len(test)} test points at t = {config.t_start} "
        f"({config.steps} RK4 steps) vs the closed form": (
            ["divergence", "mean |error| (nats)", "seconds", "x DF", "NFE"],
            rows_exact,
        ),
        f"trained network: NLL (nats/dim) and gap to a {config.reference_probes}-probe "
        f"Hutchinson reference (NLL {reference_nll:.4f})": (
            ["divergence", "NLL", "mean |gap| (nats)", "seconds", "x DF-TM"],
            rows_network,
        ),
        f"OT check: flow-map Jacobian asymmetry from {config.ot_points} noise points": (
            ["schedule", "mean asymmetry", "max asymmetry"],
            rows_ot,
        ),
    }
    figure = _figure(network, train, per_point, config, generator)
    return StudyResult(tables, figures={"plots": figure})


def _network_model(model, train: Tensor) -> ScoreNetworkDiffusion:
    def score(x, t):
        return model.score(x.float(), t).to(x.dtype)

    def sq_norm(x, t):
        return model.expected_sq_norm(x.float(), t).to(x.dtype)

    second = float((train**2).sum(1).mean() / train.shape[1])
    return ScoreNetworkDiffusion(score, model.schedule, sq_norm_fn=sq_norm, second_moment=second)


def _figure(network, train, per_point, config, generator):
    s = network.schedule
    noise = torch.randn(config.samples, train.shape[1], generator=generator)
    start = noise * float(s.sigma(s.t_max))
    times = s.time_grid(config.steps, s.t_max, s.t_min, "log_snr")
    with torch.no_grad():
        samples = odeint_fixed(
            lambda t, state: (network.velocity(state[0], t),), (start,), times, "rk4"
        ).state[0]
    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    left.scatter(*train[:2000].T, s=2, alpha=0.4, label="data")
    left.scatter(*samples.T, s=2, alpha=0.4, label="PF-ODE samples")
    left.set(title="data and samples", aspect="equal")
    left.legend(markerscale=4)
    exact = per_point.pop("exact")
    for name, values in per_point.items():
        right.scatter(exact, values, s=4, label=name)
    right.set(xlabel="closed-form log q", ylabel="PF-ODE estimate", title="exact data model")
    right.legend(markerscale=3)
    figure.tight_layout()
    return figure
