"""Search-and-score causal discovery for ancestral graphs (Lagrange & Isambert, ICML 2025):
MIIC's information scores, the node and edge search steps, graph utilities (m-separation, the
MAG and oracle PAG of a DAG with latents, causal-learn and networkx conversions, scores), the
``AncestralGraphSearch`` LightningModule and ``BayesianNetworkDataModule`` (see README.md).
"""

from lightning_info.methods.ancestral_search.datamodule import (
    BayesianNetworkDataModule,
    equal_frequency_bins,
)
from lightning_info.methods.ancestral_search.graphs import (
    from_causallearn,
    graph_scores,
    m_separated,
    mag_from_dag,
    pag_from_dag,
    pag_from_mag,
    to_causallearn,
    to_networkx,
)
from lightning_info.methods.ancestral_search.information import (
    InformationCache,
    shifted_information,
)
from lightning_info.methods.ancestral_search.module import AncestralGraphSearch

__all__ = [
    "AncestralGraphSearch",
    "BayesianNetworkDataModule",
    "InformationCache",
    "from_causallearn",
    "graph_scores",
    "m_separated",
    "mag_from_dag",
    "equal_frequency_bins",
    "pag_from_dag",
    "pag_from_mag",
    "shifted_information",
    "to_causallearn",
    "to_networkx",
]
