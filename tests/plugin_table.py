"""The plugin table: every plugin with a tiny model, tiny data and its kwargs.

Each row inherits the generic tests in ``test_plugin_table.py``: it trains under ``fast_dev_run``;
checkpoint + resume reaches the same weights and plugin state as an uninterrupted run; it runs under
``Trainer(strategy="ddp", devices=2)`` on 2 CPU processes (all rows in one torchrun launch, see
``ddp_plugin_rows.py``) and, where the row says so, matches single-device training on the combined
batch; a callback's ``callbacks/`` YAML attaches it through LightningCLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import torch
from lightning.pytorch import Callback, LightningDataModule, LightningModule

from lightning_info import (
    AsymmetricActorCritic,
    DigitsDataModule,
    FisherConstraint,
    FisherMonitor,
    FisherPenalty,
    FisherPenaltyMixin,
    FisherReselection,
    InceptionTimeClassifier,
    LinearAsymmetricActorCritic,
    LinearSchedule,
    Lookahead,
    MLPClassifier,
    MSPScorer,
    OODShapingReport,
    PosthocScoring,
    PSIScorer,
    ROMEDistillation,
    SmoothedInformationMonitor,
    UCRUEADataModule,
)
from lightning_info.data.multiview import TensorViewsDataModule
from lightning_info.data.synthetic import GaussianMixtureDataModule
from lightning_info.lm.tiny_lm import tiny_causal_lm
from lightning_info.methods.ancestral_search import AncestralGraphSearch, BayesianNetworkDataModule
from lightning_info.methods.asymmetric_ac import A2COptions, SGDSettings
from lightning_info.methods.cacti import (
    CACTI,
    CACTI_OPTIMIZER,
    CACTINetwork,
    SplitOptions,
    TabularImputationDataModule,
)
from lightning_info.methods.cmv_nd import (
    AttributeMissingGraphDataModule,
    GraphFeatureOptions,
    SBMOptions,
)
from lightning_info.methods.diffusion_fisher.module import DiffusionModel
from lightning_info.methods.efg_last_iterate import GameEpisodesDataModule, LastIterateSolver
from lightning_info.methods.prism.auditor import FragmentAuditOptions
from lightning_info.methods.prism.callback import FragmentExtractionAudit
from lightning_info.methods.prism.fragments import build_attack_set, synthetic_records
from lightning_info.methods.prodiff import (
    PRODIFF_OPTIMIZER,
    DiffusionOptions,
    EndpointCondition,
    ProDiff,
    PrototypeOptions,
    SamplingOptions,
    SyntheticCity,
    TrajectoryDataModule,
    TrajectoryEncoder,
    TrajectoryUNet,
)
from lightning_info.methods.rome import (
    AttackOptions,
    DistillationOptions,
    NetworkPoolOptions,
    RobustEvaluationOptions,
    SmallConvNet,
)
from lightning_info.methods.sdcib import SDCIB, ClusteringViewsDataModule, SyntheticViewsOptions
from lightning_info.methods.smoothed_information.functional import SmoothedEstimatorOptions
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.functional import OverlapOptions, TestInstance
from tests import tiny_lm
from tests.methods.adaptive_elicitation import tiny as elicitation_tiny
from tests.methods.docks_rag import tiny as docks_rag_tiny
from tests.methods.graph4mm import tiny as graph4mm_tiny
from tests.methods.rome.tiny_ib import TinyIBClassifier
from tests.tiny import TinyClassifier, TinyDataModule


@dataclass(frozen=True)
class PluginCase:
    id: str
    make_model: Callable[[], LightningModule] = TinyClassifier
    make_callbacks: Callable[[], list[Callback]] = list
    make_data: Callable[[int], LightningDataModule] | None = TinyDataModule
    """Builds the data module for a per-device batch size; ``None``: the model brings its own
    loaders (e.g. environment steps)."""
    callback_yaml: str | None = None
    """Shipped YAML (``lightning_info.configs``) that attaches the plugin to any LightningCLI run
    of the tiny model and data; every YAML is also attached to Lightning's BoringModel in
    ``test_callback_configs.py``."""
    expected_callback: type[Callback] | None = None
    """The Callback class the row exercises."""
    ddp_matches_single_device: bool = False
    """DDP on 2 x batch b must equal one device on batch 2b (no per-rank statistics involved)."""
    trainer_kwargs: dict = field(default_factory=dict)


class TinyPenalisedClassifier(FisherPenaltyMixin, TinyClassifier):
    fisher_penalty = FisherPenalty(weight=0.05)


def tiny_inception_time() -> InceptionTimeClassifier:
    """No dropout: resuming restores the weights and data order, not the global RNG."""
    return InceptionTimeClassifier(6, 4, num_filters=4, depth=3, kernel_size=8, dropout=0.0)


def basic_motions(batch_size: int) -> UCRUEADataModule:
    return UCRUEADataModule("BasicMotions", batch_size=batch_size, val_fraction=0.0)


def tiny_digits(batch_size: int) -> DigitsDataModule:
    return DigitsDataModule(classes=3, batch_size=batch_size)


def tiny_rome() -> ROMEDistillation:
    """Robust distillation with a growing pool trained every step, at toy sizes."""
    data = tiny_digits(8)
    return ROMEDistillation(
        data.train_images,
        data.train_labels,
        images_per_class=2,
        net=partial(SmallConvNet, width=4),
        distillation=DistillationOptions(real_batch=8),
        attack=AttackOptions(eps=0.1, steps=1),
        pool=NetworkPoolOptions(
            num_nets=2, max_nets=3, add_every=2, refresh_every=1, train_steps=1
        ),
        evaluation=RobustEvaluationOptions(epochs=2),
    )


def tiny_tabular_imputation(batch_size: int) -> TabularImputationDataModule:
    """Wine with 30% MNAR missingness and 6-wide TF-IDF context embeddings."""
    return TabularImputationDataModule(
        "wine",
        context="tfidf",
        context_dim=6,
        split=SplitOptions(val_fraction=0.1),
        batch_size=batch_size,
    )


def tiny_cacti() -> CACTI:
    context = tiny_tabular_imputation(8).context_embeddings
    network = CACTINetwork(13, 6, embed_dim=8, encoder_depth=1, decoder_depth=1, num_heads=2)
    return CACTI(
        13, context, network=network, optimizer=replace(CACTI_OPTIMIZER, schedule_steps=40)
    )  # the resume test continues a 2-epoch run to 4 epochs


def tiny_trajectories(batch_size: int) -> TrajectoryDataModule:
    """48 synthetic-city windows of 6 points."""
    return TrajectoryDataModule(
        window_length=6, synthetic=SyntheticCity(num_trajectories=48), batch_size=batch_size
    )


def tiny_prodiff() -> ProDiff:
    """No dropout (resuming restores weights and data order, not the global RNG); a fixed
    schedule horizon for the resume test; a 20-step diffusion. The networks are built in
    ProDiff's order: denoiser, condition, encoder."""
    unet = TrajectoryUNet(
        6, base_channels=4, multipliers=(1, 2), res_blocks=1, attention_lengths=(), dropout=0.0
    )
    return ProDiff(
        denoiser=unet,
        condition=EndpointCondition(3, unet.embed_dim, 8),
        encoder=TrajectoryEncoder(
            6, embed_dim=8, num_layers=1, num_heads=2, feedforward_dim=8, dropout=0.0
        ),
        diffusion=DiffusionOptions(num_steps=20),
        prototype_options=PrototypeOptions(num_prototypes=4),
        sampling=SamplingOptions(steps=4),
        optimizer=replace(PRODIFF_OPTIMIZER, schedule_steps=40),
    )


def asia_with_a_hidden_node(batch_size: int) -> BayesianNetworkDataModule:
    """Asia (8 nodes) with "either" hidden, 2,000 samples, one search move an epoch (the batch
    size does not apply: a step is one move), so the resume test's 2 + 2 epochs stop short of
    the search's convergence."""
    return BayesianNetworkDataModule(
        "asia", num_samples=2000, hidden=["either"], data_seed=1, moves=1
    )


def tiny_deep_actor_critic() -> AsymmetricActorCritic:
    """Masked CartPole (no velocities), a 2-observation window, short episodes."""
    return AsymmetricActorCritic(
        "CartPole-v1",
        keep=[0, 2],
        window=2,
        max_episode_steps=20,
        hidden=8,
        a2c=A2COptions(num_envs=2),
        steps_per_epoch=2,
        eval_episodes=2,
    )


def tiny_linear_actor_critic() -> LinearAsymmetricActorCritic:
    return LinearAsymmetricActorCritic(
        window=2, critic=SGDSettings(num_steps=50, batch_size=16), steps_per_epoch=2
    )


def tiny_overlap() -> TrainTestOverlap:
    """Overlap between a few fixed texts, one instance planted in the training texts."""
    texts = [
        "the quick brown fox jumps over the lazy dog near the river bank today",
        "a completely different sentence about numbers and tensors on two cores",
    ]
    instances = [
        TestInstance("0", "the quick brown fox jumps over the lazy dog", ("near the river",)),
        TestInstance("1", "nothing here appears in the training texts at all", ("no",)),
    ]
    options = OverlapOptions(n=5, n_values=(5,), progress=True)
    return TrainTestOverlap(train_texts=texts, test_instances=instances, options=options)


def tiny_fragment_audit() -> FragmentExtractionAudit:
    """PRISM at fit end with untrained tiny shadow and world models of the row's tokenizer."""
    records = synthetic_records(12, seed=0)
    attack = build_attack_set(records[:6], records[6:], n_unseen=2, seed=0)
    tokenizer = tiny_lm.tokenizer()

    def model(seed):
        return tiny_causal_lm(tokenizer, n_layer=1, n_embd=16, n_head=2, n_positions=256, seed=seed)

    options = FragmentAuditOptions(n_splits=2)
    return FragmentExtractionAudit(attack, model(1), [model(2)], tokenizer, options)


def tiny_tensor_views(batch_size: int) -> TensorViewsDataModule:
    g = torch.Generator().manual_seed(0)
    views = [torch.randn(48, 5, generator=g), torch.randn(48, 3, generator=g)]
    return TensorViewsDataModule(views, torch.arange(48) % 3, batch_size=batch_size)


EXEMPT = {
    "SFTPipelineDataModule": "the composed pipeline's data module needs a tokenizer, a pool and a "
    "test set on disk and a causal LM; tests/pipelines/test_sft.py runs it with its report under "
    "2-process DDP, from a mid-epoch checkpoint and through the recipe's YAML; its "
    "FisherSubsetDataModule base has a row",
    "SFTPipelineReport": "reads the SFTPipelineDataModule's scan and the audit callback's report; "
    "covered with its data module in tests/pipelines/test_sft.py (DDP, resume, every stage logged)",
}
"""Lightning classes of the package without a row, and why (checked by discovery)."""

PLUGINS = [
    PluginCase(
        id="Lookahead",
        make_callbacks=lambda: [Lookahead(k=2, alpha=0.5)],
        callback_yaml="lookahead.yaml",
        expected_callback=Lookahead,
        ddp_matches_single_device=True,
    ),
    PluginCase(
        id="FisherConstraint",
        # A bound the tiny model's gradients exceed, so the rescaling is exercised every step.
        make_callbacks=lambda: [FisherConstraint(max_fisher=1e-2)],
        callback_yaml="fisher_constraint.yaml",
        expected_callback=FisherConstraint,
        ddp_matches_single_device=True,
    ),
    PluginCase(
        id="FisherConstraint-schedule",
        make_callbacks=lambda: [FisherConstraint(max_fisher=LinearSchedule(1e-1, 1e-3, 10))],
        expected_callback=FisherConstraint,
        ddp_matches_single_device=True,
    ),
    PluginCase(
        id="FisherMonitor",
        # Every step measured and due: the running sums and the binding count are in the state.
        make_callbacks=lambda: [FisherMonitor(every_n_steps=1, max_fisher=1e-2)],
        callback_yaml="fisher_monitor.yaml",
        expected_callback=FisherMonitor,
        ddp_matches_single_device=True,
    ),
    PluginCase(id="FisherPenaltyMixin", make_model=TinyPenalisedClassifier),
    PluginCase(
        id="UCRUEADataModule-InceptionTime",
        make_model=tiny_inception_time,
        make_data=basic_motions,
    ),
    PluginCase(
        id="FisherSubsetDataModule-CausalLMFineTuner-LoRA",
        make_model=tiny_lm.finetuner,
        make_data=tiny_lm.subset_data,
    ),
    PluginCase(
        id="FisherReselection-FisherSubsetDataModule",
        make_model=partial(tiny_lm.finetuner, lora=False),  # features that move: new subsets
        make_data=tiny_lm.subset_data,
        # every epoch: the resume points fall before, between and after re-selections
        make_callbacks=lambda: [FisherReselection(every_n_epochs=1)],
        expected_callback=FisherReselection,
        trainer_kwargs={"reload_dataloaders_every_n_epochs": 1},
    ),
    PluginCase(id="InformationBottleneckMixin", make_model=TinyIBClassifier),
    PluginCase(
        id="ROMEDistillation-DigitsDataModule",
        make_model=tiny_rome,
        make_data=tiny_digits,
        trainer_kwargs={"limit_train_batches": 3},
    ),
    PluginCase(
        id="DiffusionModel-trace-matching",
        make_model=lambda: DiffusionModel(hidden=16, layers=2),
        make_data=lambda batch_size: GaussianMixtureDataModule(
            num_samples=80, batch_size=batch_size, val_fraction=0.1, test_fraction=0.1
        ),
    ),
    PluginCase(
        id="SmoothedInformationMonitor",
        make_callbacks=lambda: [
            SmoothedInformationMonitor(
                "net.1", t=[0.5], options=SmoothedEstimatorOptions(num_mc=64)
            )
        ],
        callback_yaml="smoothed_information.yaml",
        expected_callback=SmoothedInformationMonitor,
    ),
    PluginCase(
        id="TrainTestOverlap",
        make_callbacks=lambda: [tiny_overlap()],
        expected_callback=TrainTestOverlap,
    ),
    PluginCase(
        id="FragmentExtractionAudit-CausalLMFineTuner",
        make_model=lambda: tiny_lm.finetuner(lora=False),
        make_callbacks=lambda: [tiny_fragment_audit()],
        make_data=tiny_lm.subset_data,
        expected_callback=FragmentExtractionAudit,
    ),
    PluginCase(
        id="PosthocScoring",
        make_callbacks=lambda: [PosthocScoring(scorers=[MSPScorer(), PSIScorer(num_directions=4)])],
        callback_yaml="posthoc_scoring.yaml",
        expected_callback=PosthocScoring,
    ),
    PluginCase(
        id="OODShapingReport-DigitsDataModule",
        make_model=lambda: MLPClassifier(64, 3, hidden=[8]),
        make_callbacks=lambda: [OODShapingReport(shapers=["identity", "react"], tune_trials=2)],
        make_data=tiny_digits,
        expected_callback=OODShapingReport,
    ),
    PluginCase(
        id="MLPClassifier-DigitsDataModule",
        make_model=lambda: MLPClassifier(64, 3, hidden=[8]),
        make_data=tiny_digits,
    ),
    PluginCase(
        id="SDCIB-ClusteringViewsDataModule",
        make_model=lambda: SDCIB([32, 32, 32], 3, hidden=(8, 4)),
        make_data=lambda batch_size: ClusteringViewsDataModule(
            "synthetic",
            SyntheticViewsOptions(num_samples=48, latent_clusters=3),
            batch_size=batch_size,
        ),
    ),
    PluginCase(
        id="SDCIB-TensorViewsDataModule",
        make_model=lambda: SDCIB([5, 3], 3, hidden=(6,), deep=False),
        make_data=tiny_tensor_views,
    ),
    PluginCase(
        id="SDCIB-AttributeMissingGraphDataModule-cmv_nd",
        make_model=lambda: SDCIB([8, 8, 8], 3, hidden=(8, 4)),
        make_data=lambda batch_size: AttributeMissingGraphDataModule(
            num_hops=2,
            sbm=SBMOptions(num_nodes=60, num_classes=3),
            features=GraphFeatureOptions(feature_dim=8),
            batch_size=batch_size,
        ),
    ),
    PluginCase(
        id="CACTI-TabularImputationDataModule",
        make_model=tiny_cacti,
        make_data=tiny_tabular_imputation,
    ),
    PluginCase(
        id="ProDiff-TrajectoryDataModule",
        make_model=tiny_prodiff,
        make_data=tiny_trajectories,
    ),
    PluginCase(
        id="AncestralGraphSearch-BayesianNetworkDataModule",
        make_model=AncestralGraphSearch,
        make_data=asia_with_a_hidden_node,
    ),
    PluginCase(
        id="LastIterateSolver-GameEpisodesDataModule",
        make_model=lambda: LastIterateSolver(nash_conv_every=2),
        make_data=lambda batch_size: GameEpisodesDataModule(
            "kuhn_poker", batch_size=batch_size, episodes_per_epoch=32
        ),
        ddp_matches_single_device=True,
    ),
    PluginCase(
        id="DocKSRAG-DocREDDataModule-LoRA",
        make_model=docks_rag_tiny.module,
        make_data=docks_rag_tiny.data,
    ),
    PluginCase(
        id="ElicitationLM-ElicitationDataModule",
        make_model=elicitation_tiny.module,
        make_data=elicitation_tiny.data,
    ),
    PluginCase(
        id="Graph4MM-MultimodalGraphDataModule",
        make_model=graph4mm_tiny.module,
        make_data=graph4mm_tiny.data,
    ),
    PluginCase(
        id="AsymmetricActorCritic-CartPole", make_model=tiny_deep_actor_critic, make_data=None
    ),
    PluginCase(
        id="LinearAsymmetricActorCritic-TMaze",
        make_model=tiny_linear_actor_critic,
        make_data=None,
    ),
]
