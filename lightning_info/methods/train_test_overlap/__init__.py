"""Train-test overlap: what developers should publish (Zhang et al., ICML 2025).

See README.md in this folder."""

from lightning_info.methods.train_test_overlap.batches import TextBatch
from lightning_info.methods.train_test_overlap.callback import TrainTestOverlap
from lightning_info.methods.train_test_overlap.encoding import character_tokenize
from lightning_info.methods.train_test_overlap.files import read_test_instances
from lightning_info.methods.train_test_overlap.functional import (
    ChunkCounts,
    OverlapIndex,
    OverlapOptions,
    TestInstance,
    compute_overlap,
    contaminated_documents,
)
from lightning_info.methods.train_test_overlap.methodologies import (
    llama2_contamination,
    substring_overlap,
)
from lightning_info.methods.train_test_overlap.report import (
    OverlapReport,
    UndetectableInstancesWarning,
    write_report,
)
from lightning_info.methods.train_test_overlap.sharded import (
    overlap_files_with_dask,
    overlap_with_dask,
    overlap_with_datasets,
)
from lightning_info.methods.train_test_overlap.text_batches import read_text_batches

__all__ = [
    "ChunkCounts",
    "OverlapIndex",
    "OverlapOptions",
    "OverlapReport",
    "TestInstance",
    "TextBatch",
    "TrainTestOverlap",
    "UndetectableInstancesWarning",
    "character_tokenize",
    "compute_overlap",
    "contaminated_documents",
    "llama2_contamination",
    "overlap_files_with_dask",
    "overlap_with_dask",
    "overlap_with_datasets",
    "read_test_instances",
    "read_text_batches",
    "substring_overlap",
    "write_report",
]
