"""Shared LightningCLI entry points for the recipes in ``recipes/``."""

from lightning_info.recipes.cli import ComparisonCLI, RunResult, recipe_cli, summarize

__all__ = ["ComparisonCLI", "RunResult", "recipe_cli", "summarize"]
