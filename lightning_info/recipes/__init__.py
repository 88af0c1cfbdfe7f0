"""The recipes' one entry point, ``ComparisonCLI``, and its hook for a method's extra study."""

from lightning_info.recipes.cli import ComparisonCLI, RunResult, run_study_recipe, summarize
from lightning_info.recipes.study import Study, StudyResult

__all__ = [
    "ComparisonCLI",
    "RunResult",
    "Study",
    "StudyResult",
    "run_study_recipe",
    "summarize",
]
