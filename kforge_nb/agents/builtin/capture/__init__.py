"""Stage one of the builtin agent: a KernelBench reference captured with torch.fx, lowered to
the agent's graph (ir.py) and partitioned into fused groups (partition.py); what no converter
handles stays a torch call."""
from .errors import CaptureError
from .fx import Captured, capture
from .partition import PartitionError, Schedule, partition

__all__ = ["CaptureError", "Captured", "capture", "PartitionError", "Schedule", "partition"]
