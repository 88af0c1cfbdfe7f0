"""``LikelihoodStudy``: the diffusion-Fisher recipe's study: likelihoods and the OT check, seeds.

For each seed a ring-mixture data set is drawn (``GaussianMixtureDataModule``), a small
``DiffusionModel`` with the DF-TM trace head is trained on it and tested (denoising and
trace-matching losses), then three measurements are taken:

- exact data model (the training set as the data distribution): PF-ODE log-likelihood of test
  points with the diffusion-Fisher trace against Skilling-Hutchinson (1 and ``probes`` probes),
  each against the closed-form ``log q_{t_min}``: mean absolute error and time;
- trained network: the same with the trace-matching head (DF-TM, no autograd) against
  Hutchinson through the network, compared with a ``reference_probes``-probe Hutchinson run;
- OT check: asymmetry of the PF-ODE flow-map Jacobian on the data set for several schedules.

Every table cell is mean ± std over the seeds (``lightning_info.core.logging.mean_std``); the
per-seed numbers are the study's records. One figure (``plots``: samples and per-point
log-likelihoods, first seed), which ``ComparisonCLI`` prints, writes and logs.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from lab.study import Study, StudyResult, run_jobs, seeded_trainer
from lightning_info.core.logging import mean_std
from lightning_info.core.optional import import_object
from lightning_info.core.plotting import pyplot
from lightning_info.data.synthetic import GaussianMixtureDataModule
from lightning_info.diffusion.noise_schedules import noise_schedule
from lightning_info.diffusion.ode import odeint_fixed
from lightning_info.methods.diffusion_fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel

__all__ = [
    "LikelihoodJob",
    "LikelihoodStudy",
    "likelihood_tables",
    "measure_likelihoods",
    "run_seed",
]


@dataclass
class LikelihoodStudy(Study):
    """Train one diffusion model per seed, then PF-ODE likelihoods with each divergence
    estimator on the exact data model and the trained network, and the OT check (module
    docstring).

    Args:
        seeds: each draws its own data set, network initialisation, training noise and probes.
        model: ``DiffusionModel`` arguments (``seed`` is the run's); ``eps_net`` may be given as
            ``{class_path, init_args}``.
        data: ``GaussianMixtureDataModule`` arguments (``seed`` is the run's).
        max_steps: training steps of each model.
        test_points, t_start, steps, probes, reference_probes: the likelihood measurements.
        ot_schedules, ot_points, ot_data_points: the OT check.
        samples: PF-ODE samples drawn for the figure.
        workers: processes running seeds side by side (1: in this process; the seconds columns
            are only comparable within one run on an otherwise idle machine); threads: torch
            threads in each.
    """

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 3000
    test_points: int = 256
    t_start: float = 0.05
    steps: int = 32
    probes: int = 10
    reference_probes: int = 200
    ot_schedules: list[str] = field(default_factory=lambda: ["vp", "sub_vp", "ve", "edm"])
    ot_points: int = 16
    ot_data_points: int = 512
    samples: int = 1000
    workers: int = 1
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) < len(self.seeds):
            raise ValueError(f"`seeds` must be non-empty and distinct, got {self.seeds}.")
        if self.max_steps < 1:
            raise ValueError(f"`max_steps` must be at least 1, got {self.max_steps}.")
        if "seed" in self.model or "seed" in self.data:
            raise ValueError("`model` and `data` take their `seed` from `seeds`; leave it out.")

    def run(self, cli=None) -> StudyResult:
        root = str(cli.output_dir) if cli is not None else None
        settings = copy.deepcopy(self)
        jobs = [
            LikelihoodJob(seed=s, settings=settings, figure=i == 0, root=root)
            for i, s in enumerate(self.seeds)
        ]

        def describe(r: dict[str, Any]) -> str:
            return (
                f"seed={r['seed']}: test/denoising {r['test_denoising']:.4f}, DF trace error "
                f"{r['exact']['DF trace']['error']:.2e} nats"
            )

        records = run_jobs(run_seed, jobs, self.workers, describe)
        figure_data = records[0].pop("figure_data")
        for record in records[1:]:
            record.pop("figure_data", None)
        return StudyResult(
            likelihood_tables(self, records),
            figures={"plots": _figure(figure_data)},
            records=records,
        )


@dataclass(frozen=True)
class LikelihoodJob:
    """One seed of a :class:`LikelihoodStudy`: the seed, (a copy of) the study's settings,
    whether to keep the figure's data, and the folder of the run's files."""

    seed: int
    settings: LikelihoodStudy
    figure: bool
    root: str | None

    @property
    def epochs(self) -> int:
        """No bound on the epochs: ``settings.max_steps`` ends the training."""
        return -1


def run_seed(job: LikelihoodJob) -> dict[str, Any]:
    """One seed: draw the data, train and test the model, then :func:`measure_likelihoods`."""
    config = job.settings
    torch.set_num_threads(config.threads)
    seed = job.seed
    trainer = seeded_trainer(
        job, accelerator="cpu", max_steps=config.max_steps, limit_val_batches=0
    )
    model_args = dict(config.model)  # a network given by class is built after the seeding
    eps_net = model_args.get("eps_net")
    if isinstance(eps_net, dict):
        model_args["eps_net"] = import_object(eps_net["class_path"])(**eps_net.get("init_args", {}))
    data = GaussianMixtureDataModule(**config.data, seed=seed)
    model = DiffusionModel(**model_args, seed=seed)
    trainer.fit(model, datamodule=data)
    (losses,) = trainer.test(model, datamodule=data, verbose=False)
    measured = measure_likelihoods(config, model, data, seed, figure=job.figure)
    return {
        "seed": seed,
        "test_denoising": float(losses["test/denoising"]),
        "test_trace_matching": float(losses.get("test/trace_matching", float("nan"))),
        **measured,
    }


def measure_likelihoods(
    config: LikelihoodStudy, model, data, seed: int, figure: bool = False
) -> dict[str, Any]:
    """The study's numbers for one fitted ``DiffusionModel`` and its data: ``exact``
    (``{divergence: {error, seconds, nfe}}``), ``network`` (``{divergence: {nll, gap,
    seconds}}``), ``reference_nll`` and ``ot`` (``{schedule: {mean, max}}``); with ``figure``
    also ``figure_data`` for :func:`_figure`."""
    model = model.eval()
    generator = torch.Generator().manual_seed(seed)
    train = data.train_data.double()
    test = data.test_data[: config.test_points].double()
    exact = DataSetDiffusion(train, model.schedule)
    truth = exact.log_density(test, config.t_start)
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

    out: dict[str, Any] = {"exact": {}, "network": {}, "ot": {}}
    per_point = {"exact": truth}
    for name, (divergence, probes) in methods.items():
        seconds, result = likelihood(test, exact, divergence=divergence, probes=probes)
        per_point[name] = result.log_likelihood
        error = float((result.log_likelihood - truth).abs().mean())
        out["exact"][name] = {"error": error, "seconds": seconds, "nfe": int(result.nfe)}

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
    dim = test.shape[1]
    for name, (divergence, probes) in methods.items():
        label = "DF-TM trace" if divergence == "fisher" else name
        seconds, result = likelihood(
            test_f, network, prior="gaussian", divergence=divergence, probes=probes
        )
        out["network"][label] = {
            "nll": float(-result.log_likelihood.mean() / dim),
            "gap": float((result.log_likelihood - reference.log_likelihood).abs().mean()),
            "seconds": seconds,
        }
    out["reference_nll"] = float(-reference.log_likelihood.mean() / dim)

    data_subset = train[: config.ot_data_points]
    for name in config.ot_schedules:
        other = DataSetDiffusion(data_subset, noise_schedule(name))
        start = torch.randn(config.ot_points, dim, generator=generator).double()
        start = start * float(other.schedule.sigma(other.schedule.t_max))
        flow = pf_ode_flow_jacobian(start, other, steps=config.steps)
        out["ot"][name] = {
            "mean": float(flow.asymmetry.mean()),
            "max": float(flow.asymmetry.max()),
        }
    if figure:
        out["figure_data"] = {
            "train": train[:2000].tolist(),
            "samples": _samples(network, dim, config, generator).tolist(),
            "per_point": {k: v.tolist() for k, v in per_point.items()},
        }
    return out


def likelihood_tables(config: LikelihoodStudy, records: list[dict[str, Any]]) -> dict:
    """The study's four tables, each cell mean ± std over the seeds of ``records``."""
    n = len(records)

    def cells(section: str, name: str, *keys: str, scale: float = 1.0) -> list[str]:
        return [mean_std([scale * r[section][name][key] for r in records]) for key in keys]

    def ratio(section: str, name: str, base: str) -> str:
        return mean_std(
            [r[section][name]["seconds"] / r[section][base]["seconds"] for r in records]
        )

    losses = (
        ["model", "test/denoising", "test/trace_matching", "seeds"],
        [
            [
                "DiffusionModel",
                mean_std([r["test_denoising"] for r in records]),
                mean_std([r["test_trace_matching"] for r in records]),
                n,
            ]
        ],
    )
    names = list(records[0]["exact"])
    rows_exact = [
        [
            name,
            *cells("exact", name, "error", scale=1e3),
            *cells("exact", name, "seconds"),
            ratio("exact", name, names[0]),
            "/".join(str(v) for v in sorted({r["exact"][name]["nfe"] for r in records})),
        ]
        for name in names
    ]
    labels = list(records[0]["network"])
    rows_network = [
        [
            label,
            *cells("network", label, "nll", "gap", "seconds"),
            ratio("network", label, labels[0]),
        ]
        for label in labels
    ]
    reference = mean_std([r["reference_nll"] for r in records])
    rows_network.append([f"Hutchinson {config.reference_probes} (reference)", reference, *"---"])
    rows_ot = [[name, *cells("ot", name, "mean", "max")] for name in records[0]["ot"]]
    over = f"mean ± std over {n} seed{'s' if n > 1 else ''}"
    return {
        f"trained models: test losses ({over})": losses,
        f"exact data model: PF-ODE log q_t of {config.test_points} test points at t = "
        f"{config.t_start} ({config.steps} RK4 steps) vs the closed form ({over})": (
            ["divergence", "mean |error| (1e-3 nats)", "seconds", "x DF", "NFE"],
            rows_exact,
        ),
        f"trained network: NLL (nats/dim) and gap to a {config.reference_probes}-probe "
        f"Hutchinson reference ({over})": (
            ["divergence", "NLL", "mean |gap| (nats)", "seconds", "x DF-TM"],
            rows_network,
        ),
        f"OT check: flow-map Jacobian asymmetry from {config.ot_points} noise points ({over})": (
            ["schedule", "mean asymmetry", "max asymmetry"],
            rows_ot,
        ),
    }


def _network_model(model, train: Tensor) -> ScoreNetworkDiffusion:
    def score(x, t):
        return model.score(x.float(), t).to(x.dtype)

    def sq_norm(x, t):
        return model.expected_sq_norm(x.float(), t).to(x.dtype)

    second = float((train**2).sum(1).mean() / train.shape[1])
    return ScoreNetworkDiffusion(score, model.schedule, sq_norm_fn=sq_norm, second_moment=second)


def _samples(network, dim: int, config: LikelihoodStudy, generator) -> Tensor:
    s = network.schedule
    noise = torch.randn(config.samples, dim, generator=generator)
    start = noise * float(s.sigma(s.t_max))
    times = s.time_grid(config.steps, s.t_max, s.t_min, "log_snr")
    with torch.no_grad():
        return odeint_fixed(
            lambda t, state: (network.velocity(state[0], t),), (start,), times, "rk4"
        ).state[0]


def _figure(figure_data: dict[str, Any]):
    train = torch.tensor(figure_data["train"])
    samples = torch.tensor(figure_data["samples"])
    per_point = {k: torch.tensor(v) for k, v in figure_data["per_point"].items()}
    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5))
    left.scatter(*train.T, s=2, alpha=0.4, label="data")
    left.scatter(*samples.T, s=2, alpha=0.4, label="PF-ODE samples")
    left.set(title="data and samples (first seed)", aspect="equal")
    left.legend(markerscale=4)
    exact = per_point.pop("exact")
    for name, values in per_point.items():
        right.scatter(exact, values, s=4, label=name)
    right.set(xlabel="closed-form log q", ylabel="PF-ODE estimate", title="exact data model")
    right.legend(markerscale=3)
    figure.tight_layout()
    return figure
