"""Efficiently accessing the diffusion Fisher (Wang et al., ICML 2025).

See README.md in this folder."""

from lightning_info.methods.diffusion_fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    asymmetry_index,
    pf_ode_adjoint,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)
from lightning_info.methods.diffusion_fisher.functional import (
    diffusion_fisher_matrix,
    diffusion_fisher_mvp,
    diffusion_fisher_trace,
    diffusion_log_density,
    diffusion_score,
    endpoint_fisher_mvp,
    endpoint_fisher_trace,
    trace_matching_fisher_trace,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel, TimeConditionedMLP

__all__ = [
    "DataSetDiffusion",
    "DiffusionModel",
    "ScoreNetworkDiffusion",
    "TimeConditionedMLP",
    "asymmetry_index",
    "diffusion_fisher_matrix",
    "diffusion_fisher_mvp",
    "diffusion_fisher_trace",
    "diffusion_log_density",
    "diffusion_score",
    "endpoint_fisher_mvp",
    "endpoint_fisher_trace",
    "pf_ode_adjoint",
    "pf_ode_flow_jacobian",
    "pf_ode_log_likelihood",
    "trace_matching_fisher_trace",
]
