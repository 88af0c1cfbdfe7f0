"""What recipes and studies share: ``ComparisonCLI`` (the recipes' one entry point) and the
``Study`` base class a method's extra experiment builds on."""

from lightning_info.experiments.cli import ComparisonCLI, RunResult, run_study_recipe, summarize
from lightning_info.experiments.study import Study, StudyResult

__all__ = [
    "ComparisonCLI",
    "RunResult",
    "Study",
    "StudyResult",
    "run_study_recipe",
    "summarize",
]
