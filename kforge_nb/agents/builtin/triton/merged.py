"""Two passes over a looped row merged into one read of it (Triton, a row too long for registers).

A group's kernel reads a long row once per pass (kernel.py): softmax reads it for the max, again
for the sum of exp(x - max), and a third time to write; a norm reads it for the mean, again for
the mean of (x - mean)^2, and a third time to write. Both pairs have a one-pass form that keeps
a few numbers per lane (per element of the BLOCK_SIZE-wide step) and merges the lanes once the
row is read, so the row is read twice instead of three times:

* online softmax: per lane the running max m and the sum l of exp(x - m), rescaled whenever m
  moves: m' = max(m, x), l = l * exp(m - m') + exp(x - m'); merged as M = max(m) and
  L = sum(l * exp(m - M)).
* Welford: per lane the mean and M2 = sum((x - mean)^2), updated per element: at step t every
  lane still in the row has seen t elements, so d = x - mean, mean += d / (t + 1),
  M2 += d * (x - mean); merged exactly by the parallel-axis rule, mean = sum(n * mean_l) / N,
  M2 = sum(M2_l + n * (mean_l - mean)^2), with no sum of squares to cancel (a mean of 100 and
  a spread of 1 keep their digits).

The pairs are found in the group's own nodes (the converters write softmax as max, sub, exp,
sum and a variance as mean, sub, mul, mean), so what is merged computes the same values.
"""
from __future__ import annotations

NEG_INF = 'float("-inf")'


def merged_kind(plan, number: int) -> str | None:
    """"softmax" or "welford" when pass `number` and the next merge into one read, else None."""
    if number + 1 >= len(plan.passes) or len(plan.passes[number]) != 1 or \
            len(plan.passes[number + 1]) != 1:
        return None
    first, second = plan.passes[number][0], plan.passes[number + 1][0]
    src = plan.source
    x = src(first.args[0])
    value = src(second.args[0])
    if first.fn == "max" and second.fn == "sum" and value.op == "pointwise" and \
            value.fn == "exp":
        shifted = src(value.args[0])
        if shifted.op == "pointwise" and shifted.fn == "sub" and \
                src(shifted.args[0]) is x and src(shifted.args[1]) is first:
            return "softmax"
    if first.fn == "mean" and not first.attrs.get("correction") and second.fn == "mean" and \
            value.op == "pointwise" and value.fn == "mul" and \
            src(value.args[0]) is src(value.args[1]):
        centred = src(value.args[0])
        if centred.op == "pointwise" and centred.fn == "sub" and \
                src(centred.args[0]) is x and src(centred.args[1]) is first:
            return "welford"
    return None


def write_merged(w, number: int) -> bool:
    """Write passes `number` and `number + 1` of writer `w` (a TritonGroupKernel on its looped
    path) as one loop, then the per-row values after both; False when they do not merge."""
    p = w.plan
    kind = merged_kind(p, number)
    if kind is None:
        return False
    first, second = p.passes[number][0], p.passes[number + 1][0]
    a, b = first.name, second.name
    shape = "[ROWS, BLOCK_SIZE]" if w.rows2d else "[BLOCK_SIZE]"
    label = "online softmax: the max and the sum of exp(x - max)" if kind == "softmax" else \
        "Welford: the mean and the sum of squared deviations"
    w.emit(f"# passes {number + 1} and {number + 2} in one read ({label}): "
           f"{first.fn} ({a}), {second.fn} ({b})")
    if kind == "softmax":
        w.emit(f"{a}_acc = tl.full({shape}, {NEG_INF}, tl.float32)")
    else:
        w.emit(f"{a}_acc = tl.zeros({shape}, tl.float32)")
        w.emit(f"{a}_n = tl.zeros({shape}, tl.float32)")
    w.emit(f"{b}_acc = tl.zeros({shape}, tl.float32)")
    w.open_reduce_loop()
    w.compute(p.element_values([first.args[0]]), mask="in_range")
    x = w.masked(first)            # the lanes past the row's end: -inf (max) or 0 (mean)
    if kind == "softmax":
        w.emit(f"{a}_new = tl.maximum({a}_acc, {x})")
        w.emit(f"{a}_base = tl.where({a}_new == {NEG_INF}, 0.0, {a}_new)   # no lane yet: no NaN")
        w.emit(f"{b}_acc = {b}_acc * tl.exp({a}_acc - {a}_base) + tl.exp({x} - {a}_base)")
        w.emit(f"{a}_acc = {a}_new")
    else:
        w.emit(f"{a}_x = {x}")
        w.emit(f"{a}_d = tl.where(in_range, {a}_x - {a}_acc, 0.0)")
        w.emit(f"{a}_acc += {a}_d * (1.0 / (start // BLOCK_SIZE + 1))   # every lane in the "
               "row has seen the same count")
        w.emit(f"{b}_acc += {a}_d * tl.where(in_range, {a}_x - {a}_acc, 0.0)")
        w.emit(f"{a}_n += in_range.to(tl.float32)")
    w.close_reduce_loop()
    w.done |= {first, second}
    if kind == "softmax":
        w.emit(f"{a} = {w.reduce_call('max', a + '_acc')}")
        rescaled = f"tl.where({a}_acc == {NEG_INF}, 0.0, {b}_acc * tl.exp({a}_acc - {a}))"
        w.emit(f"{b} = {w.reduce_call('sum', rescaled)}")
    else:
        w.emit(f"{a} = {w.reduce_call('sum', f'{a}_n * {a}_acc')} / reduce_count")
        spread = f"{b}_acc + {a}_n * ({a}_acc - {a}) * ({a}_acc - {a})"
        correction = second.attrs.get("correction") or 0
        divisor = f"(reduce_count - {correction})" if correction else "reduce_count"
        w.emit(f"{b} = {w.reduce_call('sum', spread)} / {divisor}")
    w.compute_kept_after(number)
    w.compute_kept_after(number + 1)
    return True
