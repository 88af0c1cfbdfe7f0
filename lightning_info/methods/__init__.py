"""One package per paper; each holds its functional core, Lightning shell, study and card."""
