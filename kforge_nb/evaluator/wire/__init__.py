"""What crosses between kforge's processes: the one message table (messages.py), the frames on
the sockets (frames.py), the fork server that starts workers (zygote.py), and outputs streamed
from the candidate's worker to the judge's (transfer.py). Never pickle."""
