"""The two roles backed by a language model: prompts in, a candidate or a recommendation out."""
from __future__ import annotations

import re

from .. import knowledge as kb
from .. import machine as host
from ..options import DEFAULT_PRECISION
from ..providers.base import sampling
from ..providers.pricing import cost_usd
from ..result import REJECTED
from ..targets import get_target
from . import contract, history
from .base import (AnalysisRequest, Generation, GenerationRequest, Recommendation, Usage)
from .feedback import describe_result, summary_text
from .pictures import pictures, user_content
from .prompts import Prompts

CODE_BLOCK = re.compile(r"```[ \t]*(python|py)?[^\n]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> tuple[str | None, str | None]:
    """The candidate in an answer: the last code block defining ModelNew, else the last block."""
    if not text.strip():
        return None, "empty response"
    blocks = [body for _, body in CODE_BLOCK.findall(text)]
    if not blocks:
        return None, "no code block in the response"
    defining = [b for b in blocks if re.search(r"class\s+(ModelNew|NewModel)\b", b)]
    return (defining or blocks)[-1].strip() + "\n", None


GPU_LANGUAGES = ("triton", "cuda")      # targets told of the GPU, or that there is none
NOTED = ("initial", "optimise")         # the prompts that get knowledge notes


def machine_lines(machine: host.Machine | None, target) -> list[str]:
    """The prompt's machine section: the given machine, else this one (its GPU looked up only
    for a target that runs on one)."""
    device = target.device()
    gpu = target.name in GPU_LANGUAGES
    return (machine or host.describe(with_gpu=gpu)).lines(device, gpu)


def usage_of(reply, model: str) -> Usage:
    cost = cost_usd(reply.model or model, reply.input_tokens, reply.output_tokens)
    return Usage(reply.input_tokens, reply.output_tokens, cost or 0.0, reply.model or model, 1,
                 0 if cost is not None else 1)


class LLMGenerator:
    def __init__(self, provider, prompts: Prompts | None = None, max_tokens: int = 8192,
                 hint: str = "", precision: str = DEFAULT_PRECISION, knowledge: bool = True,
                 knowledge_dirs: list[str] | None = None, notes: int = kb.LIMIT,
                 machine: host.Machine | None = None):
        self.provider, self.prompts = provider, prompts or Prompts()
        self.max_tokens, self.hint, self.precision = max_tokens, hint, precision
        self.knowledge, self.notes = knowledge, notes
        self.user_notes = kb.user_notes(knowledge_dirs)    # read once; a missing folder fails here
        # a provider that takes no temperature (Anthropic's, one of your own) is never sent one
        self.takes_temperature = getattr(provider, "accepts_temperature", False)
        self.machine = machine               # None: this machine, read when first needed

    def chosen_notes(self, request: GenerationRequest, target) -> list[kb.Pick]:
        """The notes for a first or an optimising prompt (a fix prompt is about the error)."""
        if not self.knowledge or request.kind not in NOTED:
            return []
        result = request.previous_result
        return self.notes_for(request.problem, target,
                              result.roofline.bound if result is not None else None)

    def notes_for(self, problem, target, bound: str | None) -> list[kb.Pick]:
        """The notes a prompt gets after a profile with this bottleneck: those whose ISA,
        device and row-length conditions hold here, best first."""
        notes = kb.pool(target.knowledge(), target.name, self.user_notes)
        device = target.device()
        isa = (self.machine or host.describe()).isa if device == "cpu" else None
        where = kb.Where(isa, device, kb.row_length(problem.source))
        return kb.choose(notes, target.name, kb.problem_ops(problem.source), bound,
                         self.notes, where)

    def messages(self, request: GenerationRequest) -> tuple[str, list[dict]]:
        """(system, messages) as they would be sent, without a call (notebook 04 shows the
        prompt a --from seed gives)."""
        system, messages, _ = self._prompt(request)
        return system, messages

    def _prompt(self, request: GenerationRequest) -> tuple[str, list[dict], list[kb.Pick]]:
        target = get_target(request.target)
        # each chosen note whole in every prompt: a request stands alone (no conversation), so
        # a note "sent earlier" is a note this request's model never saw
        picks = self.chosen_notes(request, target)
        line = history.on_line(request.outcomes, request.parent)
        context = dict(
            target=target, problem=request.problem, kind=request.kind, precision=self.precision,
            example=target.example(),
            knowledge=[(p.note.name, p.note.text) for p in picks],
            knowledge_why=[p.why for p in picks], translate_from=request.translate_from,
            previous_code=request.previous_code, instruction=request.instruction,
            feedback=describe_result(request.previous_result) if request.previous_result else "",
            aux=request.aux, hint=self.hint, variation=request.variation,
            machine=machine_lines(self.machine, target),
            contract=contract.lines(target.name, self.precision),
            outcomes=history.lines(line),
            start=history.starting_point(request.parent, request.kind, line),
            # the earlier candidates the request names (a re-apply, another lineage's change)
            referred=history.referred([request.instruction, request.variation],
                                      request.outcomes, but=request.parent),
            # a refusal an estimate or a timeout made: the model may ask for a judging again
            may_ask_again=request.kind == "fix" and request.previous_result is not None and (
                request.previous_result.state == REJECTED or history.refused_by_estimate_or_time(
                    request.previous_result.state, request.previous_result.rules,
                    request.previous_result.error)))
        system = self.prompts.render("generate_system", request.iteration, **context)
        user = self.prompts.render("generate", request.iteration, **context)
        return system, [{"role": "user", "content": user}], picks

    def generate(self, request: GenerationRequest) -> Generation:
        system, messages, picks = self._prompt(request)
        temperature = request.temperature if self.takes_temperature else None
        reply = self.provider.complete(system, messages, self.max_tokens,
                                       deadline=request.deadline, **sampling(temperature))
        usage = usage_of(reply, self.provider.model)
        sent = [{"role": "system", "content": system}, *messages]
        said = dict(knowledge=[p.note.name for p in picks], variation=request.variation,
                    temperature=temperature)
        if reply.truncated:
            return Generation(None, reply.text, sent, usage,
                              f"truncated: the answer hit max_tokens ({self.max_tokens})", **said)
        code, failure = extract_code(reply.text)
        return Generation(code, reply.text, sent, usage, failure, **said)


FIELD = re.compile(r"^(TITLE|RECOMMENDATION|EXPECTED GAIN|ALTERNATIVE|DONE):\s*", re.MULTILINE)
DONE_TITLE = "nothing further worth trying"


def parse_recommendation(text: str) -> dict:
    """The answer's fields: title, recommendation, expected gain, alternatives; or "done"
    (why nothing further is worth trying) where it answers DONE: and recommends nothing."""
    parts = FIELD.split(text)
    pairs = [(parts[i].lower(), parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]
    fields: dict = {key: value for key, value in pairs if key != "alternative"}
    fields["alternatives"] = [value for key, value in pairs if key == "alternative" and value]
    if "done" in fields and "recommendation" not in fields:     # nothing further to try
        why = fields["done"] or DONE_TITLE
        return {"title": fields.get("title") or why.splitlines()[0][:80] or DONE_TITLE,
                "recommendation": why,
                "done": why, "alternatives": []}
    fields.pop("done", None)
    if "recommendation" not in fields:   # a free-form answer: keep it whole
        fields = {"title": text.strip().splitlines()[0][:80] if text.strip() else "",
                  "recommendation": text.strip()}
    return fields


class LLMAnalyst:
    def __init__(self, provider, prompts: Prompts | None = None, max_tokens: int = 2048,
                 images: bool = True, machine: host.Machine | None = None,
                 precision: str = DEFAULT_PRECISION):
        self.provider, self.prompts, self.max_tokens = provider, prompts or Prompts(), max_tokens
        self.machine, self.precision = machine, precision    # machine None: this machine
        # pictures of the profile go to a provider that declares it takes them (--no-images: none)
        self.images = images and getattr(provider, "accepts_images", False)

    def analyse(self, request: AnalysisRequest) -> Recommendation:
        target = get_target(request.target)
        found = pictures(request.result) if self.images else []
        line = history.on_line(request.outcomes, request.candidate)
        context = dict(target=target, code=request.code, summary=request.summary,
                       summary_text=summary_text(request.summary), history=request.history,
                       objective=request.objective, pictures=[p.caption for p in found],
                       alternatives=request.alternatives, elsewhere=request.elsewhere,
                       machine=machine_lines(self.machine, target),
                       contract=contract.lines(target.name, self.precision),
                       candidate=request.candidate,
                       outcomes=history.lines(line, to_analyst=True),
                       recommended=history.with_outcomes(request.history, line),
                       again=history.seen_again(request.candidate, line),
                       judge_again=history.may_be_judged_again(line))
        system = self.prompts.render("analyse_system", request.iteration, **context)
        user = self.prompts.render("analyse", request.iteration, **context)
        messages = [{"role": "user", "content": user_content(user, found)}]
        reply = self.provider.complete(system, messages, self.max_tokens,
                                       deadline=request.deadline)
        fields = parse_recommendation(reply.text)
        return Recommendation(
            title=fields.get("title", ""), text=fields.get("recommendation", ""),
            expected_gain=fields.get("expected gain", ""),
            action={"kind": "done", "why": fields["done"]} if "done" in fields else {},
            alternatives=fields.get("alternatives", [])[:request.alternatives],
            usage=usage_of(reply, self.provider.model),
            messages=[{"role": "system", "content": system},   # pictures named by their files
                      {"role": "user", "content": user_content(user, found, files=True)}],
            response=reply.text, pictures=found)
