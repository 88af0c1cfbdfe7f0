"""One package per paper: its functional core, its Lightning shell and its card (README.md). The
studies that reproduce a paper's tables live beside the recipes, in ``recipes/lab``."""
