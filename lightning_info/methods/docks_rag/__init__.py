"""DocKS-RAG (Xu et al., ICML 2025): document-level relation extraction by hybrid-prompt tuning
of a causal LM on a document knowledge graph (DocKG) and retrieved sentences (SetRAG).

See README.md in this folder."""

from lightning_info.methods.docks_rag.datamodule import (
    DocKGOptions,
    DocREDDataModule,
    DocREDSource,
    HybridPromptOptions,
)
from lightning_info.methods.docks_rag.docred import check_document, read_docred, read_relation_info
from lightning_info.methods.docks_rag.functional import docred_scores, train_fact_names
from lightning_info.methods.docks_rag.metrics import DocREDScores
from lightning_info.methods.docks_rag.module import DocKSRAG
from lightning_info.methods.docks_rag.synthetic import synthetic_docred

__all__ = [
    "DocKGOptions",
    "DocKSRAG",
    "DocREDDataModule",
    "DocREDScores",
    "DocREDSource",
    "HybridPromptOptions",
    "check_document",
    "docred_scores",
    "read_docred",
    "read_relation_info",
    "synthetic_docred",
    "train_fact_names",
]
