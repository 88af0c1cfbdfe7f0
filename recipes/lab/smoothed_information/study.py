"""The smoothed-information recipe's studies: the estimators' error against the truth as ``n``
grows (:class:`RateStudy`), and :class:`SmoothedInformationMonitor` on a trained network
(:class:`MonitorStudy`).

:class:`RateStudy`. For ``X_1..X_n`` i.i.d. from ``f`` and a noise variance ``t``, the plug-in
estimates of ``J(f * phi_t)`` and ``h(f * phi_t)`` are those of the Gaussian KDE of bandwidth
``sqrt(t)``, ``P_n * phi_t``, with no further smoothing
(:func:`~lightning_info.methods.smoothed_information.functional.smoothed_information`: ``J`` by
Brown's identity, ``h`` by de Bruijn's). The baseline is the density-estimation route the
unsmoothed problem needs: a Gaussian KDE ``f_h`` of ``f`` with Silverman's bandwidth
``h = sigma (4 / ((d + 2) n))^(1 / (d + 4))`` (``sigma`` the mean of the coordinates' standard
deviations), then the same functionals of ``f_h * phi_t = P_n * phi_(t + h^2)``, so it is the same
function called at ``t + h^2`` (same samples, same Monte Carlo draws: in ``d > 1``,
``max(num_mc, mc_per_sample * n)`` of them). The mutual information
``I(X; X + sqrt(t) Z) = h(f * phi_t) - (d/2) log(2 pi e t)`` has the error of ``h``, so it gets no
column of its own.

The truths: for ``f = N(0, I_d)``, ``J = d / (1 + t)`` and ``h = (d/2) log(2 pi e (1 + t))``; for
``f`` the ``mixture`` (each coordinate i.i.d. from the equal mixture of the uniforms on
:data:`MIXTURE_INTERVALS`, compactly supported as in the paper), ``d`` times the 1-D values of
:func:`uniform_mixture_information` (quadrature of the exact smoothed density). Every
``(distribution, d, n, seed)`` draws its own sample; the tables give the error per ``n`` (mean ±
std over seeds) and the least-squares slope of ``log RMSE`` (root-mean-square error over seeds)
on ``log n`` (± its standard deviation over bootstrap resamples of the seeds), next to ``-1/2``, the
parametric rate: no estimator's error falls faster at a fixed ``t``, and the paper shows the
plug-in reaches the minimax rate for every ``t > 0`` (the card's Claim).

:class:`MonitorStudy`. An ``MLPClassifier`` is fitted on sklearn's bundled digits with a quiet
trainer and :class:`SmoothedInformationMonitor` attached (the input of the last ``nn.Linear``
applied, i.e. the penultimate features); a recorder reads the monitor's logged ``J``, ``h`` and
``I`` after every validation epoch. After the fit, the same functional on the trained network's
penultimate features of the validation split is compared with the last logged values, and the
fit is timed with and without the monitor.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from lightning.pytorch import Callback, seed_everything
from torch import Tensor

from lab.study import Study, StudyResult, run_jobs
from lightning_info.core.logging import mean_std, metric_key
from lightning_info.core.plotting import pyplot
from lightning_info.core.threads import torch_threads
from lightning_info.core.trainers import lightning_notices_hidden, quiet_trainer
from lightning_info.core.validation import (
    require_choice,
    require_int,
    require_non_negative,
    require_positive,
)
from lightning_info.data.digits import DigitsDataModule
from lightning_info.methods.smoothed_information.callback import SmoothedInformationMonitor
from lightning_info.methods.smoothed_information.functional import (
    SmoothedEstimatorOptions,
    smoothed_information,
)
from lightning_info.nn.mlp import MLPClassifier

DISTRIBUTIONS = ("gaussian", "mixture")
MIXTURE_INTERVALS = ((-2.0, -0.5), (0.5, 2.0))
"""The ``mixture``'s coordinates: equal mixture of the uniforms on these intervals."""
ESTIMATORS = ("plug_in", "kde")
LABELS = {"plug_in": "plug-in P_n * phi_t", "kde": "KDE (Silverman h), t + h^2"}
QUANTITIES = ("J", "h")
QUADRATURE_POINTS = 200_001
QUADRATURE_SDS = 12.0  # the quadrature covers the support +- 12 sqrt(t)


# --------------------------------------------------------------------------------------------
# Truths and samples
# --------------------------------------------------------------------------------------------


def uniform_mixture_information(
    intervals: tuple[tuple[float, float], ...], t: float, points: int = QUADRATURE_POINTS
) -> tuple[float, float]:
    """``J`` and ``h`` (nats) of ``f * phi_t`` in 1-D, ``f`` the equal mixture of the uniforms on
    ``intervals``, by Simpson's rule on ``points`` nodes over the support ``+- 12 sqrt(t)``.

    A component on ``(a, b)`` smoothed is ``(Phi((y - a)/s) - Phi((y - b)/s)) / (b - a)``
    (``s = sqrt(t)``), evaluated in log space from whichever side keeps its relative accuracy
    (``log_ndtr`` of the nearer tail), and its derivative is
    ``(phi((y - a)/s) - phi((y - b)/s)) / (s (b - a))``; the score ``f'/f`` is formed from log
    terms, so the tails contribute without underflow.
    """
    if points % 2 == 0:
        points += 1
    s = math.sqrt(t)
    low = min(a for a, _ in intervals) - QUADRATURE_SDS * s
    high = max(b for _, b in intervals) + QUADRATURE_SDS * s
    y = torch.linspace(low, high, points, dtype=torch.float64)
    log_weight = -math.log(len(intervals))
    log_parts, a_terms, b_terms = [], [], []
    for a, b in intervals:
        upper, lower = (y - a) / s, (y - b) / s  # Phi(upper) - Phi(lower), upper > lower
        left = y < (a + b) / 2  # left of the middle: Phi(upper) - Phi(lower) directly
        big = torch.where(left, upper, -lower)
        small = torch.where(left, lower, -upper)
        log_big, log_small = torch.special.log_ndtr(big), torch.special.log_ndtr(small)
        log_mass = log_big + torch.log1p(-torch.exp(log_small - log_big))
        log_parts.append(log_weight + log_mass - math.log(b - a))
        scale = log_weight - math.log(s * (b - a)) - 0.5 * math.log(2 * math.pi)
        a_terms.append(scale - upper**2 / 2)
        b_terms.append(scale - lower**2 / 2)
    log_f = torch.logsumexp(torch.stack(log_parts), 0)
    score = sum(torch.exp(ta - log_f) - torch.exp(tb - log_f) for ta, tb in zip(a_terms, b_terms))
    density = torch.exp(log_f)
    weights = torch.ones_like(y)
    weights[1:-1:2] = 4
    weights[2:-1:2] = 2
    step = (high - low) / (points - 1) / 3
    fisher = float((weights * density * score**2).sum() * step)
    entropy = float(-(weights * density * log_f).sum() * step)
    return fisher, entropy


def true_information(distribution: str, dim: int, t: float) -> tuple[float, float]:
    """``J(f * phi_t)`` and ``h(f * phi_t)`` (nats) of the study's distributions in ``d`` dims."""
    if distribution == "gaussian":
        return dim / (1 + t), 0.5 * dim * math.log(2 * math.pi * math.e * (1 + t))
    if distribution == "mixture":
        fisher, entropy = uniform_mixture_information(MIXTURE_INTERVALS, t)
        return dim * fisher, dim * entropy  # independent coordinates: both add up
    raise ValueError(f"`distribution` must be one of {DISTRIBUTIONS}, got {distribution!r}.")


def draw(distribution: str, size: int, dim: int, generator: torch.Generator) -> Tensor:
    """``size`` i.i.d. samples ``(size, dim)``, float64, of ``N(0, I_d)`` or the ``mixture``."""
    if distribution == "gaussian":
        return torch.randn(size, dim, generator=generator, dtype=torch.float64)
    bounds = torch.tensor(MIXTURE_INTERVALS, dtype=torch.float64)
    component = torch.randint(len(MIXTURE_INTERVALS), (size, dim), generator=generator)
    u = torch.rand(size, dim, generator=generator, dtype=torch.float64)
    a, b = bounds[component, 0], bounds[component, 1]
    return a + (b - a) * u


def silverman_bandwidth(samples: Tensor) -> float:
    """Silverman's rule ``sigma (4 / ((d + 2) n))^(1 / (d + 4))`` for a Gaussian KDE of
    ``(n, d)`` samples, ``sigma`` the mean of the coordinates' standard deviations."""
    size, dim = samples.shape
    sigma = float(samples.std(0).mean())
    return sigma * (4 / ((dim + 2) * size)) ** (1 / (dim + 4))


def fitted_slope(sizes: list[int], errors: list[float]) -> float:
    """Least-squares slope of ``log error`` on ``log n``."""
    return float(np.polyfit(np.log(sizes), np.log(errors), 1)[0])


def job_seed(seed: int, size: int, dim: int) -> int:
    """The seed of the sample (and Monte Carlo draws) of one ``(seed, n, d)``."""
    return 1_000_000 * seed + 10 * size + dim


@dataclass(frozen=True)
class RateJob:
    """One sample of a :class:`RateStudy`: its ``(distribution, d, n, seed)``, the noise
    variances ``times``, the Monte Carlo draws and the truths at each ``t``
    (``{"J": [...], "h": [...]}``)."""

    distribution: str
    dim: int
    size: int
    seed: int
    times: list[float]
    num_mc: int
    truth: dict[str, list[float]]


def estimate(job: RateJob) -> dict[str, Any]:
    """Both estimators at every ``t`` on one sample: the job's fields, values, errors and
    seconds (one thread)."""
    with torch_threads(1):
        return _estimate(job)


def _estimate(job: RateJob) -> dict[str, Any]:
    seed = job_seed(job.seed, job.size, job.dim)
    x = draw(job.distribution, job.size, job.dim, torch.Generator().manual_seed(seed))
    options = SmoothedEstimatorOptions(num_mc=job.num_mc)
    times = job.times
    bandwidth = silverman_bandwidth(x)
    levels = {"plug_in": times, "kde": [t + bandwidth**2 for t in times]}
    values, seconds = {}, {}
    for name, at in levels.items():
        start = time.perf_counter()
        info = smoothed_information(x, at, options, generator=torch.Generator().manual_seed(seed))
        seconds[name] = time.perf_counter() - start
        values[name] = {"J": info.fisher.tolist(), "h": info.entropy.tolist()}
    errors = {
        name: {q: [v - job.truth[q][k] for k, v in enumerate(vs[q])] for q in QUANTITIES}
        for name, vs in values.items()
    }
    return {
        **asdict(job),
        "bandwidth": bandwidth,
        "values": values,
        "errors": errors,
        "seconds": seconds,
    }


# --------------------------------------------------------------------------------------------
# The rate study
# --------------------------------------------------------------------------------------------


@dataclass
class RateStudy(Study):
    """Error of the plug-in estimators and of the KDE baseline against the truth as ``n`` grows
    (module docstring).

    Args:
        distributions: ``gaussian`` and/or ``mixture``.
        dims: dimensions ``d`` (1-D by quadrature, more by Monte Carlo).
        times: noise variances ``t``.
        sizes: sample sizes ``n``.
        mc_max_size: sizes above it run for ``d = 1`` only (Monte Carlo costs ``num_mc * n``).
        seeds: one sample per seed and ``(distribution, d, n)``.
        num_mc: Monte Carlo draws for ``d > 1``, at least.
        mc_per_sample: at least this many draws per sample (``max(num_mc, mc_per_sample * n)``
            draws), so that the Monte Carlo error falls with ``n`` like the sampling error
            instead of putting a floor under the curve.
        tail_sizes: the second slope is fitted over this many largest sizes.
        bootstrap: resamples of the seeds for the slopes' standard deviation.
        workers: processes running the estimates side by side.
    """

    distributions: list[str] = field(default_factory=lambda: list(DISTRIBUTIONS))
    dims: list[int] = field(default_factory=lambda: [1, 2])
    times: list[float] = field(default_factory=lambda: [0.05, 0.25, 1.0])
    sizes: list[int] = field(default_factory=lambda: [100, 300, 1000, 3000, 10000])
    mc_max_size: int = 3000
    seeds: list[int] = field(default_factory=lambda: list(range(10)))
    num_mc: int = 1024
    mc_per_sample: float = 1.0
    tail_sizes: int = 3
    bootstrap: int = 200
    workers: int = 1

    def __post_init__(self) -> None:
        if not (self.distributions and self.dims and self.times and self.seeds):
            raise ValueError("`distributions`, `dims`, `times` and `seeds` must be non-empty.")
        for distribution in self.distributions:
            require_choice(distribution, "distributions", DISTRIBUTIONS)
        for t in self.times:
            require_positive(t, "times")
        for size in self.sizes:
            require_int(size, "sizes", 2)
        for dim in self.dims:
            require_int(dim, "dims", 1)
            if len(self.sizes_for(dim)) < 2:
                raise ValueError(
                    f"d={dim} would run sizes {self.sizes_for(dim)}; a slope needs two (sizes "
                    f"above mc_max_size={self.mc_max_size} run for d = 1 only)."
                )
        require_int(self.num_mc, "num_mc", 1)
        require_non_negative(self.mc_per_sample, "mc_per_sample")
        require_int(self.tail_sizes, "tail_sizes", 2)
        require_int(self.bootstrap, "bootstrap", 2)
        require_int(self.workers, "workers", 1)

    def sizes_for(self, dim: int) -> list[int]:
        """The sizes run in ``d`` dimensions, ascending."""
        return sorted(n for n in self.sizes if dim == 1 or n <= self.mc_max_size)

    @property
    def settings(self) -> list[tuple[str, int]]:
        return [(dist, dim) for dist in self.distributions for dim in self.dims]

    def run(self, cli=None) -> StudyResult:
        truths = {}
        for dist, dim in self.settings:
            with torch_threads(1):  # element-wise work on 200k nodes: threads only contend
                values = [true_information(dist, dim, t) for t in self.times]
            truths[dist, dim] = {q: [v[i] for v in values] for i, q in enumerate(QUANTITIES)}
        jobs = [
            RateJob(
                distribution=dist,
                dim=dim,
                size=size,
                seed=seed,
                times=list(self.times),
                num_mc=max(self.num_mc, math.ceil(self.mc_per_sample * size)),
                truth=truths[dist, dim],
            )
            for dist, dim in self.settings
            for size in self.sizes_for(dim)
            for seed in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            worst = max(abs(e) for e in r["errors"]["plug_in"]["J"])
            return (
                f"{r['distribution']} d={r['dim']} n={r['size']} seed={r['seed']}: "
                f"max |J error| {worst:.4f}"
            )

        records = run_jobs(estimate, jobs, self.workers, describe)
        curves = self._curves(records)
        tables = {
            "error against the truth (estimate - truth; mean ± std over seeds)": self._errors(
                records, truths
            ),
            f"log-log slope of RMSE on n (± bootstrap sd; all n, and the {self.tail_sizes} "
            "largest n); the parametric rate is -0.5": self._slopes(curves),
        }
        return StudyResult(
            tables,
            {"rates": self._figure(curves)},
            {"truths": {f"{k[0]}-{k[1]}d": v for k, v in truths.items()}, "runs": records},
            self._line_plots(curves),
        )

    def _runs(self, records, dist, dim, size):
        return [r for r in records if (r["distribution"], r["dim"], r["size"]) == (dist, dim, size)]

    def _errors(self, records, truths):
        columns = ["distribution", "d", "t", "n", "J truth"]
        columns += [f"J error: {LABELS[e]}" for e in ESTIMATORS] + ["h truth"]
        columns += [f"h error: {LABELS[e]}" for e in ESTIMATORS]
        rows = []
        for dist, dim in self.settings:
            for k, t in enumerate(self.times):
                for size in self.sizes_for(dim):
                    runs = self._runs(records, dist, dim, size)
                    row = [dist, dim, f"{t:g}", size]
                    for q in QUANTITIES:
                        row.append(f"{truths[dist, dim][q][k]:.4f}")
                        row += [mean_std([r["errors"][e][q][k] for r in runs]) for e in ESTIMATORS]
                    rows.append(row)
        return columns, rows

    def _curves(self, records) -> dict[tuple, dict[str, Any]]:
        """Per ``(distribution, d, t, quantity, estimator)``: sizes, RMSE over seeds, the slopes
        over all sizes and the largest ``tail_sizes``, and their bootstrap standard deviations."""
        generator = np.random.default_rng(0)
        curves = {}
        for dist, dim in self.settings:
            sizes = self.sizes_for(dim)
            tail = sizes[-self.tail_sizes :]
            for k, t in enumerate(self.times):
                for q in QUANTITIES:
                    for e in ESTIMATORS:
                        # errors[size index, seed index]
                        errors = np.array(
                            [
                                [r["errors"][e][q][k] for r in self._runs(records, dist, dim, n)]
                                for n in sizes
                            ]
                        )
                        rmse = np.sqrt((errors**2).mean(1))
                        picks = generator.integers(
                            0, errors.shape[1], (self.bootstrap, errors.shape[1])
                        )
                        boot = np.sqrt((errors[:, picks] ** 2).mean(2)).T  # (bootstrap, sizes)
                        slopes = [fitted_slope(sizes, b) for b in boot]
                        tails = [fitted_slope(tail, b[-len(tail) :]) for b in boot]
                        curves[dist, dim, t, q, e] = {
                            "sizes": sizes,
                            "rmse": rmse.tolist(),
                            "slope": fitted_slope(sizes, rmse),
                            "slope_sd": float(np.std(slopes, ddof=1)),
                            "tail_slope": fitted_slope(tail, rmse[-len(tail) :]),
                            "tail_slope_sd": float(np.std(tails, ddof=1)),
                        }
        return curves

    def _slopes(self, curves):
        columns = ["distribution", "d", "t", "quantity"]
        for e in ESTIMATORS:
            columns += [f"slope {LABELS[e]}", f"slope, largest n: {LABELS[e]}"]
        columns += ["RMSE at the largest n: plug-in / KDE"]
        rows = []
        for dist, dim in self.settings:
            for t in self.times:
                for q in QUANTITIES:
                    row = [dist, dim, f"{t:g}", q]
                    for e in ESTIMATORS:
                        c = curves[dist, dim, t, q, e]
                        row.append(f"{c['slope']:+.2f} ± {c['slope_sd']:.2f}")
                        row.append(f"{c['tail_slope']:+.2f} ± {c['tail_slope_sd']:.2f}")
                    ours, kde = (curves[dist, dim, t, q, e]["rmse"][-1] for e in ESTIMATORS)
                    row.append(f"{ours:.2e} / {kde:.2e}")
                    rows.append(row)
        return columns, rows

    def _line_plots(self, curves):
        plots = {}
        for dist, dim in self.settings:
            for q in QUANTITIES:
                series = {
                    f"{e} t={t:g}": curves[dist, dim, t, q, e]["rmse"]
                    for t in self.times
                    for e in ESTIMATORS
                }
                plots[f"rmse_{q}_{dist}_{dim}d"] = ("n", self.sizes_for(dim), series)
        return plots

    def _figure(self, curves):
        plt = pyplot()
        settings = self.settings
        figure, axes = plt.subplots(
            len(QUANTITIES), len(settings), figsize=(4 * len(settings), 6.4), squeeze=False
        )
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for column, (dist, dim) in enumerate(settings):
            for row, q in enumerate(QUANTITIES):
                axis = axes[row][column]
                for k, t in enumerate(self.times):
                    for e, style in zip(ESTIMATORS, ("-", "--")):
                        c = curves[dist, dim, t, q, e]
                        label = f"{'plug-in' if e == 'plug_in' else 'KDE'} t={t:g}"
                        axis.plot(
                            c["sizes"],
                            c["rmse"],
                            style,
                            marker="o",
                            color=colors[k % len(colors)],
                            label=label,
                        )
                anchor = curves[dist, dim, self.times[-1], q, "plug_in"]
                sizes = np.array(anchor["sizes"], dtype=float)
                reference = anchor["rmse"][-1] * (sizes / sizes[-1]) ** -0.5
                axis.plot(sizes, reference, ":", color="gray", label="n^-1/2")
                axis.set(
                    title=f"{dist}, d={dim}: {q}",
                    xscale="log",
                    yscale="log",
                    xlabel="n",
                    ylabel=f"RMSE of {q}",
                )
        axes[0][0].legend(fontsize=6)
        figure.tight_layout()
        return figure


# --------------------------------------------------------------------------------------------
# The monitor on a trained network
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonitorJob:
    """One seed of a :class:`MonitorStudy`, with the study's network, training and monitor
    settings."""

    seed: int
    epochs: int
    hidden: list[int]
    times: list[float]
    num_mc: int
    lr: float
    batch_size: int


class EpochRecorder(Callback):
    """After every validation epoch (and after the monitor logged), the epoch, the validation
    accuracy and every logged ``info/...`` value (``epochs``: one dict per epoch)."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def on_validation_end(self, trainer, module) -> None:
        if not trainer.sanity_checking:
            m = trainer.callback_metrics
            row = {k: float(v) for k, v in m.items() if k.startswith("info/")}
            self.epochs.append(
                {"epoch": trainer.current_epoch + 1, "acc": float(m["val/acc"]), **row}
            )


def logged_key(symbol: str, t: float) -> str:
    """The name under which the monitor logs ``symbol`` (``"J"``, ``"h"``, ``"I"``) at noise
    variance ``t`` for the digits MLP's penultimate features: ``info/input_of_head/i_t_0.1``."""
    return metric_key("info", "input_of_head", f"{symbol}_t={t:g}")


def _fit_classifier(job: MonitorJob, options: SmoothedEstimatorOptions, with_monitor: bool):
    """The digits MLP of ``job``'s seed fitted (``SmoothedInformationMonitor`` attached when
    ``with_monitor``): the model in eval mode, the data, the recorded epochs and the fit's
    seconds."""
    data = DigitsDataModule(classes=10, batch_size=job.batch_size, split_seed=job.seed)
    seed_everything(job.seed, verbose=False)
    model = MLPClassifier(64, data.num_classes, hidden=job.hidden, lr=job.lr)
    recorder = EpochRecorder()
    callbacks = [recorder]
    if with_monitor:
        monitor = SmoothedInformationMonitor(t=job.times, options=options, seed=job.seed)
        callbacks.insert(0, monitor)
    trainer = quiet_trainer(
        max_epochs=job.epochs, accelerator="cpu", devices=1, callbacks=callbacks
    )
    start = time.perf_counter()
    trainer.fit(model, datamodule=data)
    return model.eval(), data, recorder.epochs, time.perf_counter() - start


def monitor_run(job: MonitorJob) -> dict[str, Any]:
    """One seed: the digits classifier fitted with and without the monitor; the logged values
    after every validation epoch and the functional recomputed on the trained features (one
    thread)."""
    with torch_threads(1), warnings.catch_warnings(), lightning_notices_hidden():
        # a tensor data set in the main process; a deprecation inside Lightning's own code
        warnings.filterwarnings("ignore", message=".*(does not have many workers|LeafSpec).*")
        return _monitor_run(job)


def _monitor_run(job: MonitorJob) -> dict[str, Any]:
    seed, times = job.seed, job.times
    options = SmoothedEstimatorOptions(num_mc=job.num_mc)
    _, _, _, plain_seconds = _fit_classifier(job, options, with_monitor=False)
    model, data, epochs, seconds = _fit_classifier(job, options, with_monitor=True)
    with torch.no_grad():
        features = model.body(data.val_images).double()  # the input of `head`, the last Linear
    start = time.perf_counter()
    info = smoothed_information(
        features, times, options, generator=torch.Generator().manual_seed(seed)
    )
    estimator_seconds = time.perf_counter() - start
    recomputed = {}
    for k, t in enumerate(times):
        for symbol, values in (
            ("J", info.fisher),
            ("h", info.entropy),
            ("I", info.mutual_information),
        ):
            recomputed[logged_key(symbol, t)] = float(values[k])
    return {
        "seed": seed,
        "epochs": epochs,
        "recomputed": recomputed,
        "features": list(features.shape),
        "feature_variance": float(features.var(0).mean()),
        "fit_seconds": seconds,
        "plain_fit_seconds": plain_seconds,
        "estimator_seconds": estimator_seconds,
    }


@dataclass
class MonitorStudy(Study):
    """``SmoothedInformationMonitor`` on an MLP trained on the digits (module docstring).

    Args:
        seeds: one split, initialisation and fit per seed.
        epochs: training epochs (a validation epoch after each).
        hidden: the MLP's hidden widths; the last is the measured feature dimension (the
            monitor projects wider features onto 16 directions; keep it at most 16 so that the
            recomputation reads the same coordinates).
        times: the monitor's noise variances, on the scale of the features.
        num_mc: Monte Carlo draws of the monitor's estimator.
        lr: AdamW learning rate.
        batch_size: batch size of every loader.
        report_every: the table shows every this many epochs and the last.
        workers: processes running seeds side by side.
    """

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    epochs: int = 20
    hidden: list[int] = field(default_factory=lambda: [64, 16])
    times: list[float] = field(default_factory=lambda: [0.1, 1.0, 10.0])
    num_mc: int = 1024
    lr: float = 1e-3
    batch_size: int = 128
    report_every: int = 5
    workers: int = 1

    def __post_init__(self) -> None:
        if not self.seeds or not self.times:
            raise ValueError("`seeds` and `times` must be non-empty.")
        require_int(self.epochs, "epochs", 1)
        for t in self.times:
            require_positive(t, "times")
        require_int(self.report_every, "report_every", 1)
        if not self.hidden or self.hidden[-1] > 16:
            raise ValueError(
                f"the last hidden width must be at most 16 (the monitor's max_dim), got "
                f"{self.hidden}."
            )

    def run(self, cli=None) -> StudyResult:
        jobs = [
            MonitorJob(
                seed=seed,
                epochs=self.epochs,
                hidden=list(self.hidden),
                times=list(self.times),
                num_mc=self.num_mc,
                lr=self.lr,
                batch_size=self.batch_size,
            )
            for seed in self.seeds
        ]

        def describe(r: dict[str, Any]) -> str:
            last = r["epochs"][-1]
            shown = ", ".join(f"I_t={t:g} {last[logged_key('I', t)]:.3f}" for t in self.times)
            return f"digits MLP seed={r['seed']}: val acc {last['acc']:.3f}, {shown}"

        records = run_jobs(monitor_run, jobs, self.workers, describe)
        rows, dim = records[0]["features"]
        tables = {
            "SmoothedInformationMonitor on the digits MLP: logged values of the penultimate "
            f"features, {rows} validation rows x {dim} (mean ± std over seeds; the plug-in I is "
            f"at most log n = {math.log(rows):.2f} nats, J at most d / t; h_t = I_t + (d/2) "
            "log(2 pi e t))": self._logged(records),
            "the last logged values against the functional on the trained features; cost": (
                self._check(records)
            ),
        }
        return StudyResult(
            tables, {"monitor": self._figure(records)}, records, self._line_plots(records)
        )

    def _reported_epochs(self) -> list[int]:
        shown = set(range(self.report_every, self.epochs + 1, self.report_every))
        return sorted(shown | {1, self.epochs})

    def _keys(self, symbols: tuple[str, ...] = ("I", "J", "h")) -> list[tuple[str, str]]:
        return [
            (f"{symbol}_t={t:g}", logged_key(symbol, t)) for symbol in symbols for t in self.times
        ]

    def _logged(self, records):
        keys = self._keys(("I", "J"))  # h_t = I_t + (d/2) log(2 pi e t) exactly
        columns = ["epoch", "val acc", *(name for name, _ in keys)]
        rows = []
        for epoch in self._reported_epochs():
            points = [r["epochs"][epoch - 1] for r in records]
            row = [epoch, mean_std([p["acc"] for p in points])]
            row += [mean_std([p[key] for p in points]) for _, key in keys]
            rows.append(row)
        return columns, rows

    def _check(self, records):
        columns = [
            "seed",
            "features",
            "feature variance per coordinate",
            "max |logged - functional| / |functional|",
            "estimator seconds per validation epoch",
            "fit seconds with monitor",
            "fit seconds without",
        ]
        rows = []
        for r in records:
            last = r["epochs"][-1]
            gap = max(
                abs(last[key] - r["recomputed"][key]) / abs(r["recomputed"][key])
                for _, key in self._keys()
            )
            rows.append(
                [
                    r["seed"],
                    "x".join(str(s) for s in r["features"]),
                    f"{r['feature_variance']:.3g}",
                    f"{gap:.1e}",
                    f"{r['estimator_seconds']:.2f}",
                    f"{r['fit_seconds']:.1f}",
                    f"{r['plain_fit_seconds']:.1f}",
                ]
            )
        return columns, rows

    def _mean_curve(self, records, key) -> list[float]:
        return [float(np.mean([r["epochs"][i][key] for r in records])) for i in range(self.epochs)]

    def _line_plots(self, records):
        epochs = list(range(1, self.epochs + 1))
        return {
            "monitor_I": (
                "epoch",
                epochs,
                {f"I_t={t:g}": self._mean_curve(records, logged_key("I", t)) for t in self.times},
            ),
            "monitor_acc": ("epoch", epochs, {"val acc": self._mean_curve(records, "acc")}),
        }

    def _figure(self, records):
        plt = pyplot()
        figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
        epochs = list(range(1, self.epochs + 1))
        for t in self.times:
            for symbol, axis in (("I", left), ("J", right)):
                key = logged_key(symbol, t)
                axis.plot(epochs, self._mean_curve(records, key), marker="o", label=f"t={t:g}")
        left.set(xlabel="epoch", ylabel="I(X; X + sqrt(t) Z) (nats)", title="logged I_t")
        right.set(xlabel="epoch", ylabel="J(f * phi_t)", yscale="log", title="logged J_t")
        left.legend()
        figure.tight_layout()
        return figure


__all__ = [
    "DISTRIBUTIONS",
    "MIXTURE_INTERVALS",
    "EpochRecorder",
    "MonitorJob",
    "MonitorStudy",
    "RateJob",
    "RateStudy",
    "draw",
    "estimate",
    "fitted_slope",
    "job_seed",
    "logged_key",
    "monitor_run",
    "silverman_bandwidth",
    "true_information",
    "uniform_mixture_information",
]
