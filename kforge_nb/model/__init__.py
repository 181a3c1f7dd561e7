"""Whole models: decompose into parts, optimise each part, recompose, judge end to end."""
from .session import ModelError, ModelSession, decompose, order_of_work

__all__ = ["ModelError", "ModelSession", "decompose", "order_of_work"]
