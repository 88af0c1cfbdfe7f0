"""FisherSFT: information-gain subset selection for supervised fine-tuning (Deb et al., ICML 2025).

See README.md in this folder."""

from lightning_info.methods.fisher_sft.dask_select import (
    dask_two_round_select,
    store_two_round_select,
)
from lightning_info.methods.fisher_sft.datamodule import (
    FisherSubsetDataModule,
    PromptResponseColumns,
    SubsetSelectionOptions,
)
from lightning_info.methods.fisher_sft.feature_store import FeatureStore
from lightning_info.methods.fisher_sft.functional import (
    FeatureSketch,
    Selection,
    fisher_greedy_select,
    k_center_select,
    log_det_objective,
    random_select,
    sketch_features,
)
from lightning_info.methods.fisher_sft.reselection_callback import FisherReselection
from lightning_info.methods.fisher_sft.sampler import (
    FisherSubsetSampler,
    load_selection,
    save_selection,
    select_subset,
    selection_fingerprint,
)

__all__ = [
    "FisherReselection",
    "FeatureSketch",
    "FeatureStore",
    "FisherSubsetDataModule",
    "FisherSubsetSampler",
    "PromptResponseColumns",
    "Selection",
    "SubsetSelectionOptions",
    "dask_two_round_select",
    "fisher_greedy_select",
    "k_center_select",
    "load_selection",
    "log_det_objective",
    "random_select",
    "save_selection",
    "select_subset",
    "selection_fingerprint",
    "sketch_features",
    "store_two_round_select",
]
