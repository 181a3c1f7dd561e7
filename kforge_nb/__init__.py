"""kforge-nb: interactive kernel engineering for PyTorch modules, in Jupyter and on the CLI."""
__version__ = "0.1.0"


def load_ipython_extension(ipython):  # `%load_ext kforge_nb`
    from .magics import KForgeMagics
    from .ui.report import register_display
    ipython.register_magics(KForgeMagics)
    register_display(ipython)      # `_kforge` alone in a cell shows its report
