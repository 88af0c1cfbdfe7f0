"""What recipes and studies share: ``ComparisonCLI`` (the recipes' one entry point) and the
``Study`` base class a method's extra experiment builds on."""

from lab.cli import ComparisonCLI, RunResult, run_study_recipe, summarize
from lab.study import Study, StudyResult

__all__ = [
    "ComparisonCLI",
    "RunResult",
    "Study",
    "StudyResult",
    "run_study_recipe",
    "summarize",
]
