"""Fisher-information methods: the FIC-TSC constraint and penalty, FisherSFT selection, the
diffusion Fisher (trace, matrix-vector products, PF-ODE tools) and the Fisher information,
entropy and mutual information of Gaussian-smoothed densities."""

from lightning_info.fisher.constraint import FisherConstraint
from lightning_info.fisher.diffusion import (
    diffusion_fisher_matrix,
    diffusion_fisher_mvp,
    diffusion_fisher_trace,
    diffusion_log_density,
    diffusion_score,
    endpoint_fisher_mvp,
    endpoint_fisher_trace,
    trace_matching_fisher_trace,
)
from lightning_info.fisher.diffusion_module import DiffusionModel
from lightning_info.fisher.flow import (
    DataSetDiffusion,
    ScoreNetworkDiffusion,
    asymmetry_index,
    pf_ode_adjoint,
    pf_ode_flow_jacobian,
    pf_ode_log_likelihood,
)
from lightning_info.fisher.functional import (
    constrain_fisher_trace_,
    empirical_fisher_trace,
    fisher_penalty,
)
from lightning_info.fisher.kernel import KernelMoments, kernel_moments
from lightning_info.fisher.noise_schedules import (
    DDIMScaledLinearSchedule,
    EDMSchedule,
    NoiseSchedule,
    SubVPSchedule,
    VESchedule,
    VPSchedule,
    noise_schedule,
)
from lightning_info.fisher.penalty import (
    FisherPenalty,
    FisherPenaltyMixin,
    double_backward_attention,
)
from lightning_info.fisher.selection import (
    Selection,
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    random_select,
)
from lightning_info.fisher.smoothed import (
    SmoothedEntropy,
    SmoothedFisherInformation,
    SmoothedInformation,
    SmoothedMutualInformation,
    fisher_from_mmse,
    mmse_from_fisher,
    smoothed_entropy,
    smoothed_fisher_information,
    smoothed_information,
    smoothed_mmse,
    smoothed_mutual_information,
)
from lightning_info.fisher.smoothed_callback import SmoothedInformationMonitor
from lightning_info.fisher.subset import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
)
from lightning_info.fisher.subset_datamodule import FisherSubsetDataModule

__all__ = [
    "DDIMScaledLinearSchedule",
    "DataSetDiffusion",
    "DiffusionModel",
    "EDMSchedule",
    "KernelMoments",
    "NoiseSchedule",
    "ScoreNetworkDiffusion",
    "SmoothedEntropy",
    "SmoothedFisherInformation",
    "SmoothedInformation",
    "SmoothedInformationMonitor",
    "SmoothedMutualInformation",
    "SubVPSchedule",
    "VESchedule",
    "VPSchedule",
    "asymmetry_index",
    "diffusion_fisher_matrix",
    "diffusion_fisher_mvp",
    "diffusion_fisher_trace",
    "diffusion_log_density",
    "diffusion_score",
    "endpoint_fisher_mvp",
    "endpoint_fisher_trace",
    "fisher_from_mmse",
    "kernel_moments",
    "mmse_from_fisher",
    "noise_schedule",
    "pf_ode_adjoint",
    "pf_ode_flow_jacobian",
    "pf_ode_log_likelihood",
    "smoothed_entropy",
    "smoothed_fisher_information",
    "smoothed_information",
    "smoothed_mmse",
    "smoothed_mutual_information",
    "trace_matching_fisher_trace",
    "FisherConstraint",
    "FisherSubsetDataModule",
    "FisherSubsetSampler",
    "Selection",
    "fisher_greedy_select",
    "k_center_select",
    "load_selection",
    "log_det_objective",
    "random_select",
    "save_selection",
    "select_subset",
    "FisherPenalty",
    "FisherPenaltyMixin",
    "double_backward_attention",
    "constrain_fisher_trace_",
    "empirical_fisher_trace",
    "fisher_penalty",
]
