"""The exceptions of capturing a reference: the reference as a whole cannot be captured, or one
op cannot be lowered (and stays a torch call).
"""


class CaptureError(Exception):
    """The reference cannot be traced or run; the message says why."""


class Unlowerable(Exception):
    """A converter met something it cannot express; the op stays in torch."""

