"""The Session API: one loop, used by the CLI (`kforge run`) and the notebook magic alike."""
from .core import Attempt, Budget, Session
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP, AutoPolicy, Decision, QueuePolicy
from .events import Event

__all__ = ["Session", "Budget", "Attempt", "Event", "Decision", "AutoPolicy", "QueuePolicy",
           "ACCEPT", "EDIT", "REDIRECT", "SKIP", "STOP"]
