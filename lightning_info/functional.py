"""``lightning_info.functional``: every method's pure core in one namespace.

Each paper's loss, estimator, update rule and score is a function on tensors in its folder's
``functional.py`` (no Lightning, no global state), tested there against its oracle; the Metrics,
Callbacks and LightningModules call it. This namespace gathers them, as ``composer.functional``
does::

    import lightning_info.functional as F

    F.prism_score(...)                  # one function, by its name
    F.prodiff.prototype_attention(...)  # or a method's whole core, by the method's folder name
    F.efg_last_iterate.METHODS          # constants through the method's core only

Names resolve on first use (PEP 562): importing this module loads no method.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

CORES: dict[str, tuple[str, ...]] = {
    "adaptive_elicitation": (
        "batched_information_gain",
        "batched_lookahead_scores",
        "check_index",
        "entropy",
        "expected_information_gain",
        "lookahead_scores",
        "POLICIES",
        "PredictiveModel",
        "select_question",
        "select_questions",
        "target_entropy",
    ),
    "ancestral_search": (
        "best_conditioning_set",
        "BIDIRECTED",
        "choose_move",
        "DIRECTED",
        "edge_deltas",
        "edge_step",
        "fci_pag",
        "initial_graph",
        "is_ancestral",
        "marks_from_types",
        "node_step",
        "UNDIRECTED",
        "with_type",
    ),
    "asymmetric_ac": (
        "ActorCriticHistory",
        "critic_feature_index",
        "m_step_td",
        "natural_actor_critic",
        "npg_direction",
        "SGDSettings",
        "softmax_policy",
    ),
    "cacti": (
        "copy_masks",
        "encoder_length",
        "imputation_scores",
        "inference_layout",
        "kept_mask",
        "median_truncation",
        "random_masking",
        "reconstruction_loss",
    ),
    "cmv_nd": (
        "graph_adjacency",
        "mean_impute",
        "neighbourhood_views",
        "normalized_adjacency",
        "sign_views",
    ),
    "diffusion_fisher": (
        "check_data",
        "diffusion_fisher_matrix",
        "diffusion_fisher_mvp",
        "diffusion_fisher_terms",
        "diffusion_fisher_trace",
        "diffusion_log_density",
        "diffusion_score",
        "DiffusionFisherTerms",
        "endpoint_fisher_mvp",
        "endpoint_fisher_trace",
        "score_from_epsilon",
        "trace_matching_fisher_trace",
        "trace_matching_loss",
    ),
    "docks_rag": (
        "answer_text",
        "count_facts",
        "COUNTS",
        "docred_scores",
        "document_text",
        "EDGE_TYPES",
        "entity_name",
        "entity_pairs",
        "hybrid_prompt",
        "kg_subgraph",
        "mention_graph",
        "mentions",
        "NO_RELATION",
        "pair_relations",
        "scores_from_counts",
        "sentence_text",
        "serialise_triples",
        "train_fact_names",
        "without_query",
    ),
    "efg_last_iterate": (
        "balanced_plan",
        "best_response_values",
        "dilated_omd_step",
        "episode_uniforms",
        "Episodes",
        "expected_returns",
        "implicit_exploration_losses",
        "log_sequence_plan",
        "METHODS",
        "nash_conv",
        "negentropy_gradient",
        "Rates",
        "require_game_tree",
        "sample_episodes",
        "sequence_payoffs",
        "solver_update",
        "SolverRates",
        "virtual_transition",
    ),
    "fic_tsc": (
        "constrain_fisher_trace_",
        "empirical_fisher_trace",
        "fisher_penalty",
        "gradient_norm",
    ),
    "fisher_sft": (
        "as_token_blocks",
        "FeatureSketch",
        "fisher_greedy_select",
        "gaussian_sketch",
        "k_center_select",
        "log_det_objective",
        "merge_shard_selections",
        "METHODS",
        "POOLINGS",
        "prepare_blocks",
        "random_select",
        "SEGMENT_OVERHEAD_FLOPS",
        "Selection",
        "sketch_features",
        "two_round_greedy_select",
    ),
    "graph4mm": (
        "adjacency_mask",
        "check_hop_weights",
        "diffuse",
        "hop_diffused_attention",
        "masked_softmax_transition",
        "masked_transition",
        "ppr_weights",
        "renormalised_rows",
    ),
    "ood_shaping": (
        "energy_score",
        "FeatureQuantiles",
        "Identity",
        "make_shaper",
        "piecewise_linear",
        "PiecewiseLinear",
        "PLF",
        "ReAct",
        "Shaper",
        "SHAPERS",
        "VRA",
    ),
    "pointwise_confidence": (
        "adaptive_calibration_error",
        "aupr_error",
        "aupr_success",
        "aurc",
        "brier_score",
        "e_aurc",
        "expected_calibration_error",
        "failure_auroc",
        "FAILURE_CLASSES",
        "failure_fpr_at_95_tpr",
        "negative_log_likelihood",
        "optimal_aurc",
        "top_label_confidence",
    ),
    "prism": (
        "attack_metrics",
        "check_prior",
        "data_aware_scores",
        "DEFAULT_FPR_LEVELS",
        "encode_prompt_fragment",
        "fragment_log_probability",
        "fragment_token_statistics",
        "FragmentTokens",
        "likelihood_ratio",
        "loss_score",
        "min_k_plus_plus_score",
        "min_k_score",
        "negatives_for_fpr",
        "posterior",
        "prism_score",
        "reference_ratio_score",
        "roc_auc",
        "tpr_at_fpr",
        "world_log_probability",
        "zlib_score",
    ),
    "prodiff": (
        "classifier_free_guidance",
        "endpoints_only",
        "epsilon_from_x0",
        "great_circle_interpolation",
        "interior_fractions",
        "interior_l1_loss",
        "INTERIOR_TIMES",
        "kmeans",
        "linear_interpolation",
        "match_clusters",
        "prototype_attention",
        "prototype_contrastive_loss",
        "prototype_cross_entropy",
    ),
    "rome": (
        "ATTACKS",
        "check_attacks",
        "check_real",
        "image_grid",
        "predicted_classes",
        "rome_alignment",
    ),
    "sdcib": (
        "aligned_vote",
        "assignment_mi",
        "cluster_contrast",
        "prior_kl",
        "sdcib_loss",
        "SDCIBLoss",
    ),
    "smoothed_information": (
        "check_estimator_options",
        "check_sample_dtype",
        "check_times",
        "ENTROPY_ESTIMATORS",
        "fisher_from_mmse",
        "MC_ESTIMATORS",
        "METHODS",
        "mmse_from_fisher",
        "smoothed_entropy",
        "smoothed_fisher_information",
        "smoothed_information",
        "smoothed_mmse",
        "smoothed_mutual_information",
        "SmoothedEstimatorOptions",
        "SmoothedInformation",
    ),
    "train_test_overlap": (
        "check_overlap_options",
        "ChunkCounts",
        "compute_overlap",
        "contaminated_documents",
        "default_tokenize",
        "janitor_tokenize",
        "light_tokenize",
        "METRICS",
        "ngram_metrics",
        "NgramIndex",
        "OverlapIndex",
        "OverlapOptions",
        "PARTS",
        "reject_bare_text",
        "resolve_tokenizer",
        "summarize",
        "TestInstance",
        "token_overlap",
        "TOKENIZERS",
    ),
}
"""Each method folder's public core: ``lightning_info.methods.<folder>.functional.__all__``."""

_OWNER = {
    name: method
    for method, names in CORES.items()
    for name in names
    if not name.isupper() and name not in CORES
}
"""The names reachable flat: functions and classes. Constants, and a function named as its
method's folder (``smoothed_information``), are reached through the method's core."""

__all__ = sorted([*CORES, *_OWNER], key=str.lower)


def _core(method: str) -> ModuleType:
    return importlib.import_module(f"lightning_info.methods.{method}.functional")


def __getattr__(name: str) -> Any:
    if name in CORES:
        return _core(name)
    if name in _OWNER:
        return getattr(_core(_OWNER[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
