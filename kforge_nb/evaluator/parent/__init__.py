"""The parent's side of a judging: every verdict is decided here, from what the workers report
(the package docstring, kforge_nb/evaluator/__init__.py, maps each module)."""
