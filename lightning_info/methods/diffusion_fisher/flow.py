"""Probability-flow ODE tools built on the diffusion Fisher (Wang et al., ICML 2025, section 5).

The probability-flow (PF) ODE of a schedule (:mod:`~lightning_info.diffusion.noise_schedules`) moves
points along

    dx/dt = v(x, t) = f(t) x - 1/2 g^2(t) s_t(x),       s_t = grad log q_t,          (PF-ODE)

and keeps them distributed as ``q_t``. Its Jacobian is a diffusion Fisher away:

    dv/dx = f I + 1/2 g^2 F_t = (f + g^2 / 2 sigma^2) I
            - (alpha^2 g^2 / 2 sigma^4) (E_w[y y^T] - y_hat y_hat^T),               (PF-Jac)

so three quantities that usually need autodiff through the score follow from (DF-trace),
(DF-MVP) and (DF) of :mod:`~lightning_info.methods.diffusion_fisher.functional` in one pass over
the data:

- likelihood (instantaneous change of variables, Chen et al., NeurIPS 2018):
  ``d log q_t(x_t) / dt = -div v = -(d f + 1/2 g^2 tr F_t)``, so
  ``log q_{t0}(x) = log q_{t1}(x_{t1}) + int_{t0}^{t1} (d f + 1/2 g^2 tr F_t) dt``
  (:func:`pf_ode_log_likelihood`, ``divergence="fisher"``). The baseline estimates ``div v``
  by Skilling-Hutchinson, ``E[eps^T (dv/dx) eps]`` with autograd vector-Jacobian products
  (``divergence="hutchinson"``; Grathwohl et al., FFJORD, ICLR 2019);
- adjoint: ``da/dt = -(dv/dx)^T a = -(f a + 1/2 g^2 F a)`` (:func:`pf_ode_adjoint`;
  ``vjp="autograd"`` is the baseline ``a^T dv/dx`` by autograd);
- optimal-transport check: the Jacobian ``A = d x_{t1} / d x_{t0}`` of the flow map solves
  ``A' = B_t A``, ``B_t = dv/dx`` (PF-Jac), ``A_{t0} = I``. A gradient map (an OT map) has a
  symmetric Jacobian; :func:`asymmetry_index` reports ``||A - A^T||_F / (sqrt 2 ||A||_F)``
  (:func:`pf_ode_flow_jacobian`). When all ``B_t`` along the path commute (one data point, or a
  data set that is a rotated Cartesian product of 1-D sets, where every ``F_t = R D_t R^T``) the
  index is 0.

Models: :class:`DataSetDiffusion` is the exact diffusion of an explicit data set (score, Fisher
trace, MVP and matrix from one kernel pass); :class:`ScoreNetworkDiffusion` wraps a trained
score network, with the DF-TM trace when a trace-matching network is given, and otherwise only
the autograd baselines.

The note the project started from, and the reference code of the paper (``OT/ot.py``), write
``B_t = (f - g^2 / 2 sigma^2) I + (alpha^2 g^2 / 2 sigma^4)(E_w[y y^T] - y_hat y_hat^T)``, i.e.
``f I - 1/2 g^2 F``: the ``g^2`` terms have the wrong sign for ``dv/dx`` (``grad s = -F``). This
module uses (PF-Jac), which the tests check against autograd.

The solvers are fixed-step explicit Runge-Kutta methods (Euler, Heun, classical RK4,
:func:`odeint_fixed`), written out here rather than taken from ``torchdiffeq``: that package is
not a dependency, a fixed-step loop is a few lines, and the augmented states (point + log
density, point + adjoint, point + Jacobian) share one Fisher pass per stage. Integrating the
variational equation with the same Runge-Kutta stages gives exactly the Jacobian of the discrete
flow map (differentiation commutes with explicit Runge-Kutta), which the tests use as an oracle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from lightning_info.core.validation import (
    require_bool,
    require_finite_tensor,
    require_int,
    require_positive,
    require_real_floating,
)
from lightning_info.diffusion.noise_schedules import NoiseSchedule
from lightning_info.diffusion.ode import State, odeint_fixed
from lightning_info.measures.kernel_moments import per_point_column
from lightning_info.methods.diffusion_fisher.functional import (
    DiffusionFisherTerms,
    ScoreFn,
    _points,
    _terms,
    _vectors,
    check_data,
    trace_matching_fisher_trace,
)


class DiffusionFlowModel:
    """A score model under a noise schedule, as the PF-ODE tools use it.

    Subclasses give ``score(x, t)`` and, for the Fisher-based tools, ``fisher_trace``,
    ``fisher_mvp`` and ``fisher_matrix``; the ``velocity_and_*`` methods combine them with the
    schedule's ``f`` and ``g^2`` (PF-ODE, PF-Jac). ``t`` is a float, a 0-dim tensor or one time
    per point ``(B,)``.
    """

    schedule: NoiseSchedule
    dim: int | None = None

    def _x(self, x: Tensor) -> Tensor:
        _points(x, "x")
        if self.dim is not None and x.shape[1] != self.dim:
            raise ValueError(f"`x` must have shape (B, {self.dim}), got {tuple(x.shape)}.")
        return x

    def coefficients(self, x: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``alpha_t, sigma_t, f(t), g^2(t)`` as ``(B, 1)`` columns in ``x``'s dtype; a number
        ``t`` must lie in the schedule's ``[t_min, t_max]``."""
        if not isinstance(t, Tensor):
            self.schedule.check_time(t, "t")
        alpha, sigma, f, g2 = self.schedule.coefficients(t)
        batch = x.shape[0]
        return (
            per_point_column(alpha, batch, x, "alpha", positive=False),
            per_point_column(sigma, batch, x, "sigma", positive=True),
            per_point_column(f, batch, x, "f", positive=False),
            per_point_column(g2, batch, x, "g2", positive=False),
        )

    def score(self, x: Tensor, t: float | Tensor) -> Tensor:
        raise NotImplementedError

    def _missing(self, what: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} has no {what}; use the autograd baseline "
            "(divergence='hutchinson', vjp='autograd') or a DataSetDiffusion."
        )

    def fisher_trace(self, x: Tensor, t: float | Tensor) -> Tensor:
        raise self._missing("diffusion-Fisher trace")

    def fisher_mvp(self, x: Tensor, v: Tensor, t: float | Tensor) -> Tensor:
        raise self._missing("diffusion-Fisher matrix-vector product")

    def fisher_matrix(self, x: Tensor, t: float | Tensor) -> Tensor:
        raise self._missing("dense diffusion Fisher")

    def velocity(self, x: Tensor, t: float | Tensor) -> Tensor:
        """PF-ODE velocity ``f x - 1/2 g^2 s_t(x)`` (PF-ODE), ``(B, d)``."""
        x = self._x(x)
        _, _, f, g2 = self.coefficients(x, t)
        return f * x - 0.5 * g2 * self.score(x, t)

    def velocity_and_divergence(self, x: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        """``v`` and ``div v = d f + 1/2 g^2 tr F_t(x)``."""
        _, _, f, g2 = self.coefficients(x, t)
        velocity = f * x - 0.5 * g2 * self.score(x, t)
        return velocity, x.shape[1] * f[:, 0] + 0.5 * g2[:, 0] * self.fisher_trace(x, t)

    def velocity_and_vjp(self, x: Tensor, a: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        """``v`` and ``(dv/dx)^T a = f a + 1/2 g^2 F_t(x) a``."""
        _, _, f, g2 = self.coefficients(x, t)
        velocity = f * x - 0.5 * g2 * self.score(x, t)
        return velocity, f * a + 0.5 * g2 * self.fisher_mvp(x, a, t)

    def velocity_and_jacobian(self, x: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        """``v`` and ``dv/dx = f I + 1/2 g^2 F_t(x)`` (PF-Jac), ``(B, d, d)``."""
        _, _, f, g2 = self.coefficients(x, t)
        velocity = f * x - 0.5 * g2 * self.score(x, t)
        eye = torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
        return velocity, f[:, :, None] * eye + 0.5 * g2[:, :, None] * self.fisher_matrix(x, t)

    def velocity_jacobian(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``dv/dx = f I + 1/2 g^2 F_t(x)`` (PF-Jac), ``(B, d, d)``, symmetric."""
        return self.velocity_and_jacobian(self._x(x), t)[1]

    def prior_log_density(self, x: Tensor, t: float | Tensor, prior: str) -> Tensor:
        """``log p_t(x)`` under ``prior`` (see :func:`pf_ode_log_likelihood`)."""
        if prior == "gaussian":
            second_moment = self.prior_second_moment()
            if second_moment is None:
                raise ValueError(
                    f"prior='gaussian' needs E||x_0||^2 / d: give {type(self).__name__} a "
                    "`second_moment`."
                )
            alpha, sigma, _, _ = self.coefficients(x, t)
            variance = alpha[:, 0] ** 2 * second_moment + sigma[:, 0] ** 2
            return -0.5 * (x * x).sum(1) / variance - 0.5 * x.shape[1] * torch.log(
                2 * math.pi * variance
            )
        if prior == "mixture":
            return self.log_density(x, t)
        raise ValueError(f"`prior` must be 'mixture' or 'gaussian', got {prior!r}.")

    def prior_second_moment(self) -> float | None:
        """``E||x_0||^2 / d`` of the data, for the Gaussian prior; ``None`` if unknown."""
        return None

    def log_density(self, x: Tensor, t: float | Tensor) -> Tensor:
        raise ValueError(
            f"prior='mixture' needs the exact log-density of a DataSetDiffusion; "
            f"{type(self).__name__} has none: use prior='gaussian'."
        )


class DataSetDiffusion(DiffusionFlowModel):
    """The diffusion of an explicit data set under a noise schedule.

        q_t(x) = sum_i pi_i N(x; alpha_t y_i, sigma_t^2 I)

    with its exact score, diffusion Fisher and PF-ODE velocity; every ``velocity_and_*`` is one
    kernel pass. ``data`` ``(N, d)`` is validated once and kept as given (cast to the query
    dtype per call); ``chunk_size`` bounds the memory of a pass.
    """

    def __init__(
        self,
        data: Tensor,
        schedule: NoiseSchedule,
        *,
        data_weights: Tensor | None = None,
        chunk_size: int = 4096,
    ) -> None:
        check_data(data, data_weights)
        if not isinstance(schedule, NoiseSchedule):
            raise TypeError(f"`schedule` must be a NoiseSchedule, got {type(schedule).__name__}.")
        self.data = data
        self.schedule = schedule
        self.data_weights = data_weights
        self.chunk_size = require_int(chunk_size, "chunk_size", 1)
        self.dim = data.shape[1]

    def terms(
        self, x: Tensor, t: float | Tensor, *, vectors: Tensor | None = None, matrix: bool = False
    ) -> DiffusionFisherTerms:
        """:func:`~lightning_info.methods.diffusion_fisher.functional.diffusion_fisher_terms` at
        time ``t``."""
        x = self._x(x)
        vectors = None if vectors is None else _vectors(vectors, x, "vectors")
        return self._pass(x, self.coefficients(x, t), vectors, matrix)

    def _pass(
        self, x: Tensor, coefficients: tuple, vectors: Tensor | None = None, matrix: bool = False
    ) -> DiffusionFisherTerms:
        """One kernel pass with the ``(alpha, sigma, f, g2)`` columns already evaluated."""
        alpha, sigma = coefficients[:2]
        return _terms(
            x, self.data, alpha, sigma, self.data_weights, vectors, matrix, self.chunk_size
        )

    def log_density(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``log q_t(x)``, ``(B,)``."""
        return self.terms(x, t).log_density

    def score(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``grad log q_t(x)``, ``(B, d)`` (differentiable in ``x`` by autograd)."""
        return self.terms(x, t).score

    def fisher_trace(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``tr F_t(x)``, ``(B,)``."""
        return self.terms(x, t).trace

    def fisher_mvp(self, x: Tensor, v: Tensor, t: float | Tensor) -> Tensor:
        """``F_t(x) v``, ``(B, d)``."""
        return self.terms(x, t, vectors=v).mvp

    def fisher_matrix(self, x: Tensor, t: float | Tensor) -> Tensor:
        """``F_t(x)``, ``(B, d, d)``."""
        return self.terms(x, t, matrix=True).matrix

    def velocity_and_divergence(self, x: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        coefficients = self.coefficients(x, t)
        _, _, f, g2 = coefficients
        terms = self._pass(x, coefficients)
        return f * x - 0.5 * g2 * terms.score, x.shape[1] * f[:, 0] + 0.5 * g2[:, 0] * terms.trace

    def velocity_and_vjp(self, x: Tensor, a: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        coefficients = self.coefficients(x, t)
        _, _, f, g2 = coefficients
        terms = self._pass(x, coefficients, vectors=a)
        return f * x - 0.5 * g2 * terms.score, f * a + 0.5 * g2 * terms.mvp

    def velocity_and_jacobian(self, x: Tensor, t: float | Tensor) -> tuple[Tensor, Tensor]:
        coefficients = self.coefficients(x, t)
        _, _, f, g2 = coefficients
        terms = self._pass(x, coefficients, matrix=True)
        eye = torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
        jacobian = f[:, :, None] * eye + 0.5 * g2[:, :, None] * terms.matrix
        return f * x - 0.5 * g2 * terms.score, jacobian

    def prior_second_moment(self) -> float:
        sq = (self.data.to(torch.float64) ** 2).sum(1)
        weights = self.data_weights
        mean = sq.mean() if weights is None else (weights.double() * sq).sum() / weights.sum()
        return float(mean) / self.dim


class ScoreNetworkDiffusion(DiffusionFlowModel):
    """A trained score network under a noise schedule, for the PF-ODE tools.

    ``score_fn(x, t)`` gives ``(B, d)`` (see
    :func:`~lightning_info.methods.diffusion_fisher.functional.score_from_epsilon`). With
    ``sq_norm_fn(x, t) ~
    E[||x_0||^2 | x_t = x]`` the diffusion-Fisher trace is DF-TM
    (:func:`~lightning_info.methods.diffusion_fisher.functional.trace_matching_fisher_trace`), so
    :func:`pf_ode_log_likelihood` runs with ``divergence="fisher"`` without autograd; without it
    only the Hutchinson baseline is available. ``second_moment = E||x_0||^2 / d`` of the training
    data enables ``prior="gaussian"``. Fisher matrix-vector products (DF-EA) need a trajectory
    endpoint per point and are not offered here: the adjoint and the flow Jacobian of a network
    use ``vjp="autograd"``.
    """

    def __init__(
        self,
        score_fn: ScoreFn,
        schedule: NoiseSchedule,
        *,
        sq_norm_fn: Callable[[Tensor, float | Tensor], Tensor] | None = None,
        second_moment: float | None = None,
    ) -> None:
        if not callable(score_fn) or (sq_norm_fn is not None and not callable(sq_norm_fn)):
            raise TypeError("`score_fn` and `sq_norm_fn` must be callables (x, t) -> Tensor.")
        if not isinstance(schedule, NoiseSchedule):
            raise TypeError(f"`schedule` must be a NoiseSchedule, got {type(schedule).__name__}.")
        self.score_fn = score_fn
        self.sq_norm_fn = sq_norm_fn
        self.schedule = schedule
        self.second_moment = (
            None if second_moment is None else require_positive(second_moment, "second_moment")
        )

    def score(self, x: Tensor, t: float | Tensor) -> Tensor:
        if not isinstance(t, Tensor):
            self.schedule.check_time(t, "t")
        return self.score_fn(x, t)

    def fisher_trace(self, x: Tensor, t: float | Tensor) -> Tensor:
        if self.sq_norm_fn is None:
            raise self._missing("trace-matching network (`sq_norm_fn`)")
        alpha, sigma, _, _ = self.coefficients(x, t)
        return trace_matching_fisher_trace(
            x, t, self.score_fn, self.sq_norm_fn, alpha[:, 0], sigma[:, 0]
        )

    def prior_second_moment(self) -> float | None:
        return self.second_moment


@dataclass(frozen=True)
class PFODELikelihood:
    """Result of :func:`pf_ode_log_likelihood`.

    Attributes:
        log_likelihood: ``log q_{t0}(x)`` estimated by the PF-ODE, ``(B,)``.
        prior_log_density: ``log p_{t1}(x_{t1})`` under the chosen prior, ``(B,)``.
        divergence_integral: ``int_{t0}^{t1} div v dt``, ``(B,)``.
        x_end: ``x_{t1}``, ``(B, d)``.
        nfe: velocity evaluations (each one kernel pass for ``"fisher"``; one pass plus
            ``probes`` autograd VJPs for ``"hutchinson"``).
        times: the step grid.
    """

    log_likelihood: Tensor
    prior_log_density: Tensor
    divergence_integral: Tensor
    x_end: Tensor
    nfe: int
    times: Tensor


def _check_model(model: DiffusionFlowModel, x: Tensor) -> Tensor:
    if not isinstance(model, DiffusionFlowModel):
        raise TypeError(
            "`model` must be a DataSetDiffusion or a ScoreNetworkDiffusion, got "
            f"{type(model).__name__}."
        )
    return model._x(x)


def _probes(shape: tuple, probes: int, probe: str, like: Tensor, generator) -> Tensor:
    noise = torch.randn((probes, *shape), generator=generator, dtype=torch.float64)
    if probe == "rademacher":
        noise = torch.sign(noise)
    elif probe != "gaussian":
        raise ValueError(f"`probe` must be 'rademacher' or 'gaussian', got {probe!r}.")
    return noise.to(dtype=like.dtype, device=like.device)


def pf_ode_log_likelihood(
    x: Tensor,
    model: DiffusionFlowModel,
    *,
    steps: int = 64,
    method: str = "rk4",
    spacing: str = "log_snr",
    t_start: float | None = None,
    t_end: float | None = None,
    prior: str = "mixture",
    divergence: str = "fisher",
    probes: int = 1,
    probe: str = "rademacher",
    generator: torch.Generator | None = None,
) -> PFODELikelihood:
    """Log-likelihood of ``x`` at ``t_start`` by integrating the PF-ODE to ``t_end``:

        log q_{t0}(x) = log p_{t1}(x_{t1}) + int_{t0}^{t1} (d f(t) + 1/2 g^2(t) tr F_t(x_t)) dt

    (instantaneous change of variables; ``div v = d f + 1/2 g^2 tr F`` by (PF-Jac)), jointly
    with ``dx/dt = v`` on ``steps`` steps of ``method`` spaced by ``spacing``
    (:meth:`~lightning_info.diffusion.noise_schedules.NoiseSchedule.time_grid`). Defaults: from
    ``t_min`` to ``t_max`` of the schedule.

    ``divergence="fisher"`` uses ``model.fisher_trace``: for a :class:`DataSetDiffusion` the
    exact (DF-trace), one kernel pass per stage for both ``v`` and ``div v``; for a
    :class:`ScoreNetworkDiffusion` DF-TM. ``"hutchinson"`` is the baseline
    ``mean_k eps_k^T (dv/dx) eps_k`` with ``probes`` fixed ``probe`` vectors (Rademacher or
    Gaussian, drawn once from ``generator``) and autograd VJPs through the score.

    ``prior``: ``"mixture"`` is the exact ``log q_{t1}`` of a :class:`DataSetDiffusion`, so the
    result differs from its ``log_density`` at ``t_start`` by the integration error only;
    ``"gaussian"`` is the moment-matched ``N(0, (alpha_{t1}^2 E||x_0||^2 / d + sigma_{t1}^2) I)``,
    what a trained model uses, exact as ``alpha_{t1} -> 0``.
    """
    x = _check_model(model, x)
    probes = require_int(probes, "probes", 1)
    if probe not in ("rademacher", "gaussian"):
        raise ValueError(f"`probe` must be 'rademacher' or 'gaussian', got {probe!r}.")
    if divergence not in ("fisher", "hutchinson"):
        raise ValueError(f"`divergence` must be 'fisher' or 'hutchinson', got {divergence!r}.")
    if prior not in ("mixture", "gaussian"):
        raise ValueError(f"`prior` must be 'mixture' or 'gaussian', got {prior!r}.")
    no_trace = isinstance(model, ScoreNetworkDiffusion) and model.sq_norm_fn is None
    if divergence == "fisher" and no_trace:
        raise model._missing("trace-matching network (`sq_norm_fn`)")
    if prior == "mixture" and type(model).log_density is DiffusionFlowModel.log_density:
        model.log_density(x, t_start)  # raises: the prior is refused before integrating
    if prior == "gaussian" and model.prior_second_moment() is None:
        raise ValueError(
            f"prior='gaussian' needs E||x_0||^2 / d: give {type(model).__name__} a `second_moment`."
        )
    s = model.schedule
    t0 = s.t_min if t_start is None else t_start
    t1 = s.t_max if t_end is None else t_end
    times = s.time_grid(steps, t0, t1, spacing)
    eps = None
    if divergence == "hutchinson":
        eps = _probes(tuple(x.shape), probes, probe, x, generator)

    def fisher_rhs(t: Tensor, state: State) -> State:
        return model.velocity_and_divergence(state[0], t)

    def hutchinson_rhs(t: Tensor, state: State) -> State:
        with torch.enable_grad():
            point = state[0].detach().requires_grad_(True)
            velocity = model.velocity(point, t)
            total = torch.zeros_like(state[1])
            for k in range(probes):
                (vjp,) = torch.autograd.grad(velocity, point, eps[k], retain_graph=k < probes - 1)
                total = total + (vjp * eps[k]).sum(1)
        return velocity.detach(), total.detach() / probes

    rhs = fisher_rhs if divergence == "fisher" else hutchinson_rhs
    with torch.no_grad():
        start = (x.detach(), torch.zeros(x.shape[0], dtype=x.dtype, device=x.device))
        solution = odeint_fixed(rhs, start, times, method)
        x_end, integral = solution.state
        prior_log = model.prior_log_density(x_end, t1, prior)
    return PFODELikelihood(prior_log + integral, prior_log, integral, x_end, solution.nfe, times)


@dataclass(frozen=True)
class PFODEAdjoint:
    """Result of :func:`pf_ode_adjoint`.

    Attributes:
        x: the point at ``t_to``, ``(B, d)``.
        adjoint: ``a`` at ``t_to``, ``(B, d)``: the gradient of the loss with respect to ``x``
            at ``t_to`` when ``a(t_from)`` is its gradient at ``t_from``.
        times: the step grid, ``(steps + 1,)``.
        x_path, adjoint_path: both at every time of the grid, ``(steps + 1, B, d)``.
        nfe: right-hand-side evaluations.
    """

    x: Tensor
    adjoint: Tensor
    times: Tensor
    x_path: Tensor
    adjoint_path: Tensor
    nfe: int


def pf_ode_adjoint(
    x: Tensor,
    adjoint: Tensor,
    model: DiffusionFlowModel,
    *,
    t_from: float,
    t_to: float,
    steps: int = 64,
    method: str = "rk4",
    spacing: str = "log_snr",
    vjp: str = "fisher",
) -> PFODEAdjoint:
    """Propagate an adjoint along the PF-ODE from ``t_from`` to ``t_to`` (either direction):

        dx/dt = v(x, t),    da/dt = -(dv/dx)^T a = -(f a + 1/2 g^2 F_t(x) a)

    (Chen et al., "Neural Ordinary Differential Equations", NeurIPS 2018, eq. 4, with (PF-Jac)).
    Starting from a point ``x`` and ``a = dL/dx`` at ``t_from`` (e.g. a loss on generated
    samples at ``t_min``), ``a`` at ``t_to`` is ``dL/dx_{t_to}`` (e.g. with respect to the
    initial noise at ``t_max``), up to the integration error; ``x`` is re-integrated backwards
    alongside. ``vjp="fisher"`` uses (DF-MVP) in the same kernel pass as the score;
    ``"autograd"`` is the baseline VJP ``a^T dv/dx`` through the score by autograd.
    """
    x = _check_model(model, x)
    adjoint = _vectors(adjoint, x, "adjoint")
    if vjp not in ("fisher", "autograd"):
        raise ValueError(f"`vjp` must be 'fisher' or 'autograd', got {vjp!r}.")
    times = model.schedule.time_grid(steps, t_from, t_to, spacing)

    def fisher_rhs(t: Tensor, state: State) -> State:
        velocity, product = model.velocity_and_vjp(state[0], state[1], t)
        return velocity, -product

    def autograd_rhs(t: Tensor, state: State) -> State:
        point, a = state
        with torch.enable_grad():
            point = point.detach().requires_grad_(True)
            velocity = model.velocity(point, t)
            (product,) = torch.autograd.grad(velocity, point, a)
        return velocity.detach(), -product

    rhs = fisher_rhs if vjp == "fisher" else autograd_rhs
    with torch.no_grad():
        solution = odeint_fixed(rhs, (x.detach(), adjoint), times, method, return_path=True)
    (x_end, a_end), (x_path, a_path) = solution.state, solution.path
    return PFODEAdjoint(x_end, a_end, times, x_path, a_path, solution.nfe)


def asymmetry_index(matrix: Tensor, *, off_diagonal: bool = False) -> Tensor:
    """``||A - A^T||_F / (sqrt 2 ||A||_F)`` per square matrix ``(..., d, d)``.

    With ``A = S + K`` (symmetric plus antisymmetric parts) this is ``sqrt 2 ||K||_F / ||A||_F``,
    in ``[0, sqrt 2]``: 0 for a symmetric ``A``, ``sqrt 2`` for an antisymmetric one.
    ``off_diagonal=True`` takes the norm in the denominator over the off-diagonal entries only,
    as the paper's reference code does; a matrix whose norm is 0 gets 0. ``matrix`` must be a
    finite real floating-point tensor and ``off_diagonal`` a bool.
    """
    if not isinstance(matrix, Tensor) or matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError("`matrix` must be a tensor of square matrices (..., d, d).")
    require_real_floating(matrix, "matrix")
    require_finite_tensor(matrix, "matrix")
    return _asymmetry(matrix, require_bool(off_diagonal, "off_diagonal"))


def _asymmetry(matrix: Tensor, off_diagonal: bool) -> Tensor:
    """:func:`asymmetry_index` without the argument checks; a NaN matrix gives NaN."""
    base = matrix
    if off_diagonal:
        eye = torch.eye(matrix.shape[-1], dtype=torch.bool, device=matrix.device)
        base = matrix.masked_fill(eye, 0)
    numerator = torch.linalg.matrix_norm(matrix - matrix.transpose(-1, -2))
    denominator = math.sqrt(2) * torch.linalg.matrix_norm(base)
    return torch.where(denominator == 0, 0.0, numerator / denominator)


@dataclass(frozen=True)
class PFODEFlowJacobian:
    """Result of :func:`pf_ode_flow_jacobian`.

    Attributes:
        x: the image ``x_{t1}`` of the flow map, ``(B, d)``.
        jacobian: ``A = d x_{t1} / d x_{t0}``, ``(B, d, d)``.
        asymmetry: :func:`asymmetry_index` of ``A``, ``(B,)``.
        times: the step grid.
        nfe: right-hand-side evaluations.
    """

    x: Tensor
    jacobian: Tensor
    asymmetry: Tensor
    times: Tensor
    nfe: int


def pf_ode_flow_jacobian(
    x: Tensor,
    model: DiffusionFlowModel,
    *,
    t_from: float | None = None,
    t_to: float | None = None,
    steps: int = 64,
    method: str = "rk4",
    spacing: str = "log_snr",
    off_diagonal: bool = False,
) -> PFODEFlowJacobian:
    """Jacobian of the PF-ODE flow map ``x_{t0} -> x_{t1}`` and its asymmetry (OT check):

        dx/dt = v(x, t),   dA/dt = B_t A,   A_{t0} = I,
        B_t = (f + g^2 / 2 sigma^2) I - (alpha^2 g^2 / 2 sigma^4)(E_w[y y^T] - y_hat y_hat^T)

    (PF-Jac), with the dense (DF) in the kernel pass of each stage. Defaults follow sampling, from
    ``t_max`` (noise) to ``t_min`` (data). The Runge-Kutta solution is the exact Jacobian of the
    discrete flow map of the same solver.
    """
    x = _check_model(model, x)
    off_diagonal = require_bool(off_diagonal, "off_diagonal")
    s = model.schedule
    t0 = s.t_max if t_from is None else t_from
    t1 = s.t_min if t_to is None else t_to
    times = s.time_grid(steps, t0, t1, spacing)
    eye = torch.eye(x.shape[1], dtype=x.dtype, device=x.device)

    def rhs(t: Tensor, state: State) -> State:
        point, jacobian = state
        velocity, slope = model.velocity_and_jacobian(point, t)
        return velocity, slope @ jacobian

    with torch.no_grad():
        start = (x.detach(), eye.expand(x.shape[0], -1, -1).clone())
        solution = odeint_fixed(rhs, start, times, method)
    x_end, jacobian = solution.state
    asymmetry = _asymmetry(jacobian, off_diagonal)
    return PFODEFlowJacobian(x_end, jacobian, asymmetry, times, solution.nfe)
