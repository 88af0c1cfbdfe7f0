"""Several methods composed in one Lightning run. A pipeline imports the methods it composes, so
it stands above them (no method imports a pipeline).

- :mod:`~lightning_info.pipelines.sft`: decontaminate (train-test overlap), select (FisherSFT),
  train with LoRA under ``FisherConstraint``, audit (fragment extraction) and evaluate on the
  clean and the contaminated test items; ``recipes/sft_pipeline.py`` runs it.
"""

from lightning_info.pipelines.sft import SFTPipelineDataModule, SFTPipelineReport

__all__ = ["SFTPipelineDataModule", "SFTPipelineReport"]
