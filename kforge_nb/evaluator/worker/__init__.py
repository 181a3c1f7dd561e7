"""The two worker processes, forked by the fork server (wire/zygote.py): the judge runs the
reference and compares, the candidate's worker runs model-written code in its sandbox. No
verdict is decided here (the package docstring, kforge_nb/evaluator/__init__.py, maps each
module)."""
