"""The change a request asks of the builtin generator, as data, and how it changes the knobs.

An action is a dict such as `{"kind": "block_size", "value": 4096}`. It travels as data on
the request (`GenerationRequest.action`: the accepted recommendation's `action`;
`variation_action`: the change a sample makes instead). Where only text came (a person's
words in review mode, a recommendation recorded as text, a caller that sets no action), the
text is read once, when the request comes in (`asked`): a JSON object after `action:` (as
BuiltinAnalyst writes it), else the words clause by clause (`read_words`), each clause a few
plain-word forms or nothing the agent has a knob for. Everything after works on the data, and
says what it did with each clause (`apply_all`): applied (the written code changed), already
so, or not applied, with what it can change in this kernel (`SAYABLE` phrases that do).
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass


def parse_action(instruction: str | None) -> dict:
    """The action dict in a recommendation's text, or one read off plain words."""
    text = instruction or ""
    match = re.search(r"action:\s*(\{.*\})", text, re.S)
    if match:
        try:
            return json.loads(match.group(1))
        except ValueError:
            pass
    low = text.lower()
    number = re.search(r"\b(\d{2,6})\b", low)
    value = int(number.group(1)) if number else None
    if "autotun" in low:
        return {"kind": "autotune", "enable": True}
    if re.search(r"avx-?512|zmm|512[- ]?bit|\b512\b.*vector|vector.*\b512\b", low):
        return {"kind": "vector_width", "value": 512}
    if "num_warps" in low or "warps" in low:
        return {"kind": "warps", "value": value or 8}
    if "num_stages" in low or "stages" in low:
        return {"kind": "num_stages", "value": value or 3}
    if "block_size" in low or "block size" in low:
        return {"kind": "block_size", "value": value or 2048}
    if "vector" in low or "simd" in low:
        return {"kind": "vector_math", "enable": True}
    if "one thread" in low or "single thread" in low or "serial" in low:
        return {"kind": "min_parallel_work", "value": value or 131072}
    if "lane" in low:
        return {"kind": "lane_block", "value": value or 1024}
    if "double" in low:
        return {"kind": "accumulate", "value": "double"}
    if "dynamic" in low:
        return {"kind": "schedule", "value": "dynamic"}
    if "tensor core" in low or "tf32" in low:
        return {"kind": "tensor_cores"}
    return {"kind": "none"}


# where a person's words part into requests: "unroll by 4 and use 512-bit vectors"
CLAUSE_BREAK = re.compile(r"[;,\n]+|\.(?:\s+|$)|\b(?:and then|then|and|also|plus)\b", re.I)
NO_KNOB = "the builtin agent cannot do this: it writes each kernel one way and turns a few knobs"
SAME_CODE = ("the builtin agent cannot apply it here: no loop of the kernel it writes for this "
             "problem takes that knob, so the code would come out the same")
# words a person can type that parse_action reads, one per knob change it can make: those
# that change the kernel at hand are offered where a request could not be done
SAYABLE = ("use a dynamic schedule", "run the whole call on one thread", "accumulate in double",
           "use 512-bit vectors", "use vectorised maths", "lane block 1024", "lane block 64",
           "block size 4096", "block size 256", "num_warps 8", "num_warps 2", "num_stages 3",
           "autotune the block size")


def read_words(text: str) -> tuple[list[dict], list[str]]:
    """A person's words, clause by clause: the actions of the clauses a knob answers (in
    order, each once), and the clauses none does (as written). Words no knob answers at all
    are one request, kept whole ("the row mean and variance in one pass" is not two)."""
    if re.search(r"action:\s*\{", text or ""):      # the analyst's own action, kept as data
        return [parse_action(text)], []
    actions, unknown = [], []
    for clause in CLAUSE_BREAK.split(text or ""):
        clause = clause.strip(" \t.:-")
        if not clause:
            continue
        action = parse_action(clause)
        if action["kind"] == "none":
            unknown.append(clause)
        elif action not in actions:
            actions.append(action)
    if not actions and unknown:
        unknown = [" ".join((text or "").split()).strip(" .:-")]
    return actions, unknown


@dataclass(frozen=True)
class Asked:
    """What one request asks for, as data."""
    action: dict                 # the change to apply to the parent's knobs ("optimise")
    own_change: bool             # the sample makes a change of its own instead of the
    #                              instruction's (the analyst's next-ranked, another lineage's)
    more: tuple = ()             # further changes a person's words asked for, after `action`
    unknown: tuple = ()          # the clauses of a person's words no knob answers

    @property
    def actions(self) -> list[dict]:
        return [self.action, *self.more]


def asked(request) -> Asked:
    """The request's action: carried as data where the caller set it, else read off its text
    (the only place the builtin agent reads an instruction's words)."""
    given = getattr(request, "variation_action", None)
    own_change = given is not None or "action:" in (request.variation or "")
    if own_change:
        return Asked(given if given is not None else parse_action(request.variation), True)
    given = getattr(request, "action", None)
    if given is not None:
        return Asked(given, False)
    actions, unknown = read_words(request.instruction or "")
    return Asked(actions[0] if actions else {"kind": "none"}, False, tuple(actions[1:]),
                 tuple(unknown))


def apply_all(options, ask: Asked, conservative, runs=None) -> tuple[object, list[str]]:
    """Each asked change applied in turn; what was done with each, one phrase apiece:
    "applied: ...", "already so: ..." (the knob had the value asked for), and "not applied:
    ..." (no knob for the words, or, where `runs(options)` tells what the written kernel runs,
    a knob that leaves it as it was: a claim of "applied" is true of the code). Where
    something was not done, the last such phrase says what can be (`offer`)."""
    said = []
    for action in ask.actions:
        if action.get("kind") == "none" and (ask.unknown or ask.more):
            continue                       # the words asked something: said below
        changed, sentence = apply_action(options, action, conservative)
        if action.get("kind") in ("none", "done"):
            said.append(sentence)
        elif "does not apply" in sentence:
            said.append(f"not applied: {sentence}")
        elif changed == options:
            said.append("already so: " + sentence.replace(" set to ", " is ", 1))
        elif same_code(runs, options, changed):
            said.append(f"not applied: {sentence} ({SAME_CODE})")
            continue                       # the header must not claim a knob that did nothing
        else:
            said.append(f"applied: {sentence}{caveat(action)}")
        options = changed
    said += [f"not applied: {clause} ({NO_KNOB})" for clause in ask.unknown]
    if runs is not None and any(p.startswith("not applied:") for p in said):
        said = with_offer(said, offer(options, conservative, runs))
    return options, said


def same_code(runs, before, after) -> bool:
    """Whether the kernel written with `after` runs exactly what `before`'s does (never where
    nothing can be written: then there is no code to tell)."""
    if runs is None:
        return False
    written = runs(before)
    return written is not None and runs(after) == written


def offer(options, conservative, runs) -> list[str]:
    """The SAYABLE phrases that would change the kernel written with `options`."""
    found = []
    for words in SAYABLE:
        changed, sentence = apply_action(options, parse_action(words), conservative)
        if changed != options and "does not apply" not in sentence and \
                not same_code(runs, options, changed):
            found.append(words)
    return found


def with_offer(said: list[str], offers: list[str]) -> list[str]:
    """`said`, its last "not applied" phrase followed by what the agent can change instead
    (one phrase still: a view splits the answer at "; ")."""
    last = max(i for i, p in enumerate(said) if p.startswith("not applied:"))
    can = (", ".join(f'"{words}"' for words in offers) if offers else
           "nothing: it has no other knob that changes this kernel (a model, --provider "
           "anthropic or openai, reads any words)")
    said = list(said)
    said[last] += f". What it can change in this kernel, in words it reads: {can}"
    return said


def caveat(action: dict) -> str:
    """What an applied change cannot do on this machine, where that is known."""
    if action.get("kind") == "vector_width" and action.get("value") == 512:
        from .cpp.knobs import host_has_avx512
        if not host_has_avx512():
            return (" (this CPU has no AVX-512: the guarded pragma asks for 512-bit vectors "
                    "only where the compiler targets AVX-512)")
    return ""


def apply_action(options, action: dict, conservative) -> tuple[object, str]:
    """New options and one sentence saying what changed (or why nothing did).
    `conservative()` gives the target's fix options."""
    kind = action.get("kind", "none")
    fields = {f.name for f in dataclasses.fields(options)}
    value = action.get("value")
    if kind in ("vector_math", "autotune") and kind in fields:
        enable = bool(action.get("enable", True))
        return dataclasses.replace(options, **{kind: enable}), f"{kind} set to {enable}"
    if kind == "matmul" and "matmul" in fields and value in ("vendor", "kernel"):
        changes = {"matmul": value}
        if "dot" in action:
            changes["dot"] = action["dot"]
        return dataclasses.replace(options, **changes), f"matmul set to {changes}"
    if kind == "warps" and "row_warps" in fields and value is not None:
        # every program of the candidate: flat ones and row ones
        return dataclasses.replace(options, num_warps=value, row_warps=value), \
            f"num_warps and row_warps set to {value}"
    if kind in fields and value is not None:
        return dataclasses.replace(options, **{kind: value}), f"{kind} set to {value}"
    if kind == "matmul_tiles" and "block_m" in fields:
        changes = {k.lower(): int(v) for k, v in action.items()
                   if k.lower() in ("block_m", "block_n", "block_k", "group_m")}
        return dataclasses.replace(options, **changes), f"matmul tiles set to {changes}"
    if kind == "tensor_cores" and "dot" in fields:
        value = value if value in ("tf32", "bf16", "fp16") else "tf32"
        return dataclasses.replace(options, matmul="kernel", dot=value), \
            f"matmul is the Triton GEMM with tl.dot in {value} (valid only under the " \
            f"{value} precision policy)"
    if kind in ("none", "done"):
        return options, "no change requested"
    if kind == "fix":
        return conservative(), "conservative version"
    return options, f"action {kind!r} does not apply to this target; candidate unchanged"
