"""One package per paper: its functional core, Lightning shell, card (README.md) and, where the
recipe needs more than fit and test, its study."""
