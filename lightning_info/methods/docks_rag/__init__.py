"""DocKS-RAG (Xu et al., ICML 2025), in progress: the DocRED-format reader and the official
DocRED evaluation (F1, Ign F1, evidence F1, and the ``DocREDScores`` Metric)."""

from lightning_info.methods.docks_rag.docred import check_document, read_docred, read_relation_info
from lightning_info.methods.docks_rag.evaluation import DocREDScores
from lightning_info.methods.docks_rag.functional import docred_scores, train_fact_names

__all__ = [
    "DocREDScores",
    "check_document",
    "docred_scores",
    "read_docred",
    "read_relation_info",
    "train_fact_names",
]
