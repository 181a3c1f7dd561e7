"""A --measure hook: tokens per second of a sequence model, and its latency per forward.

    kforge model model.py --measure benchmarks/hooks/tokens_per_s.py --objective tokens_per_s

`inputs[0]` is (batch, sequence, ...): tokens = batch x sequence (a 2-D input counts rows). The
forward is called a few times to warm up, then timed over at least `SECONDS` of calls, with
the device synchronised so that queued GPU work counts.
"""
import time

import torch

SECONDS = 0.2


def sync(x):
    if isinstance(x, torch.Tensor) and x.is_cuda:
        torch.cuda.synchronize(x.device)


def measure(model, inputs):
    x = inputs[0]
    tokens = x.shape[0] * (x.shape[1] if x.dim() > 2 else 1)
    for _ in range(2):
        model(*inputs)
    sync(x)
    calls, start = 0, time.perf_counter()
    while True:
        model(*inputs)
        calls += 1
        sync(x)
        elapsed = time.perf_counter() - start
        if elapsed >= SECONDS and calls >= 3:
            break
    return {"tokens_per_s": tokens * calls / elapsed, "latency_ms": elapsed / calls * 1e3}
