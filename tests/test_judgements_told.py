"""Judgements told whole to the model, the terminal and the views (issue 35, item 4): a refusal's
reason never cut, why a candidate was not kept (its head-to-head with the best of its time), a
request to re-apply a candidate carrying its code and a refusal an estimate made judged again,
the analyst's "nothing further is worth trying", and the profile note in the analyst's prompt.

Every verdict here is written out (a scripted executor): nothing depends on this machine's speed.
The model is the real `anthropic` SDK talking to the scripted Messages API on 127.0.0.1."""
from __future__ import annotations

import html
import io

import pytest

from kforge_nb.agents import AgentConfig, history
from kforge_nb.agents.base import (AnalysisRequest, Generation, GenerationRequest,
                                   Recommendation)
from kforge_nb.agents.feedback import profile_summary
from kforge_nb.agents.llm import LLMAnalyst, LLMGenerator, parse_recommendation
from kforge_nb.evaluator import EvalOptions
from kforge_nb.machine import Machine
from kforge_nb.providers.anthropic import AnthropicProvider
from kforge_nb.providers.base import Reply
from kforge_nb.providers.recording import request_digest, without_standing
from kforge_nb.result import CORRECT, REJECTED, RUNTIME_ERROR, Result, Timing
from kforge_nb.session import Budget, Session
from kforge_nb.session.records import Attempt
from kforge_nb.session.repeats import Asking, judge_again
from kforge_nb.ui import fallback
from kforge_nb.ui.report import run_record
from kforge_nb.ui.terminal import Progress
from tests.test_session_anthropic import PROBLEM, api  # noqa: F401  (the fixture)

# a refusal's reason of more than 300 characters, its last words unlike any before them
REASON = ("faster than the hardware allows: 0.0123 ms a call is 12x the speed of light of CPU "
          "(2 cores, 2 threads) (0.1476 ms for its memory-bound minimum; rule "
          "`faster-than-hardware`); the peak bandwidth it is measured against came from a "
          "triad timed while the machine was loaded, so the speed of light may be an "
          "underestimate: an estimate refused it, not its outputs, which matched in every "
          "trial - the reason's very last clause")
assert len(REASON) > 300
MACHINE = Machine("Scripted CPU", "x86_64", 2, 2, ("avx2",))
NOTE = ("the candidate's profiled call took 0.91 ms where its timed median is 0.21 ms (4.3x) "
        "(the median of 5 profiled calls): the profiler's own cost or another moment's load is "
        "in the profile; read its events against each other, and the timing for the time")


def timed(speedup: float, ci=None, versus: dict | None = None, **result) -> Result:
    return Result(CORRECT, "ok", timing=Timing(
        real=True, candidate_ms=round(1.0 / speedup, 4), eager_ms=1.0, speedup_vs_eager=speedup,
        speedup_vs_eager_ci=list(ci) if ci else None, versus=versus), **result)


def refused(message: str = REASON, rules=("faster-than-hardware",)) -> Result:
    return Result(REJECTED, message, rules=list(rules))


def timed_out() -> Result:
    return Result(RUNTIME_ERROR, "timeout: no answer within 60 s (see worker.log)",
                  error={"type": "timeout", "text": "no answer within 60 s"})


class Scripted:
    """An executor: a code's verdicts are looked up by its first line ("# A", ...); a list is
    handed out in turn (the last one again once the list is used up). `calls` counts the
    judgings of candidates (a session's other calls, timing two candidates side by side, are
    in `folders` too)."""
    name = "scripted"

    def __init__(self, verdicts: dict):
        self.verdicts = {k: v if isinstance(v, list) else [v] for k, v in verdicts.items()}
        self.calls, self.folders = [], []

    def evaluate(self, problem, code, target, options, folder):
        self.folders.append(str(folder))
        if "iter-" in str(folder):          # a candidate's judging: iter-NN/sample-K
            self.calls.append(code)
        left = self.verdicts[code.splitlines()[0]]
        verdict = left.pop(0) if len(left) > 1 else left[0]
        return Result.from_dict(verdict.to_dict())

    def describe(self) -> str:
        return "scripted"


def kernel(tag: str) -> str:
    """Code whose verdict is `tag`'s; kernels of other tags differ in more than comments."""
    return f"{tag}\nclass ModelNew:\n    tag = {tag[2:]!r}\n"


def answer(code: str, words: str = "Here is the kernel.") -> dict:
    return {"text": f"{words}\n\n```python\n{code}```\n"}


def attempt(iteration: int, result: Result, parent=None, change=None, sample=0,
            code="x = 1\n") -> Attempt:
    advice = Recommendation(change, change) if change else None
    return Attempt(iteration, sample, "optimise" if parent else "initial", code, result,
                   recommendation=advice, parent=parent, applied=advice)


def fastest(attempts):
    return min((a for a in attempts if a.result.state == CORRECT), key=lambda a: a.speed,
               default=None)


class Capture:
    """A provider that keeps what it was sent and answers `text`."""
    name, model, accepts_images, accepts_temperature = "capture", "m", False, False

    def __init__(self, text: str = "TITLE: t\nRECOMMENDATION: r\nEXPECTED GAIN: g"):
        self.text, self.sent = text, []

    def complete(self, system, messages, max_tokens, deadline=None, temperature=None):
        self.sent.append((system, messages))
        return Reply(self.text, 1, 1, self.model)


def user_text(messages) -> str:
    content = messages[-1]["content"]
    return content if isinstance(content, str) else \
        "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


# --- 1. a refusal's reason, whole --------------------------------------------------------------

def test_a_refusals_reason_reaches_both_prompts_whole():
    attempts = [attempt(0, timed(1.2, (1.1, 1.3))),
                attempt(1, refused(), "0.0", "stream the rows", code="# B\n")]
    found = history.outcomes(attempts, fastest)
    assert found[1].message == REASON
    assert f"- 1.0 (from 0.0 on your advice 'stream the rows'): rejected: {REASON}; " \
           "not kept: refused" in history.lines(found, to_analyst=True)

    provider = Capture()
    LLMAnalyst(provider, machine=MACHINE).analyse(AnalysisRequest(
        PROBLEM, "cpp", "x = 1\n", attempts[0].result, profile_summary(attempts[0].result),
        candidate="0.0", outcomes=found, iteration=2))
    analyst_prompt = user_text(provider.sent[0][1])
    assert REASON in analyst_prompt
    # the analyst is told it may have a refusal an estimate made judged again
    assert "1.0 was refused by an estimate or a timeout, not by its output" in analyst_prompt

    request = GenerationRequest(PROBLEM, "cpp", "fix", iteration=2, previous_code="# B\n",
                                previous_result=attempts[1].result, parent="1.0",
                                outcomes=found)
    _, messages = LLMGenerator(Capture(), machine=MACHINE).messages(request)
    prompt = user_text(messages)
    assert prompt.count(REASON) >= 2          # the evaluator's verdict and the earlier attempts
    assert 'say "judge it again"' in prompt   # a refusal: it may ask for a judging again


def test_a_refusals_reason_is_whole_in_the_terminal_and_the_views(tmp_path):
    s = Session(PROBLEM, "cpp", out=tmp_path, executor=Scripted({"# A": refused(
        REASON + "\nand a second line of the refusal")}))
    stream = io.StringIO()
    s.subscribe(Progress(stream), replay=False)
    s.evaluate_code(kernel("# A"))
    printed = stream.getvalue()
    assert REASON + " and a second line of the refusal" in printed

    record = run_record(s)
    assert REASON in record["status"]
    page = fallback.to_html(record)
    assert html.escape(REASON) in page       # right below its first words
    assert '<details data-role="reason">' in page


# --- 2. why a candidate was not kept ----------------------------------------------------------

SLOWER = {"id": "0.0", "ratio": 1 / 1.12, "ci": [1 / 1.15, 1 / 1.08], "verdict": "slower",
          "noise": 0.03, "stat": "median of paired ratios", "rounds": 12}
TIE = {"id": "0.0", "ratio": 1.01, "ci": [0.98, 1.04], "verdict": "tie", "noise": 0.03,
       "stat": "median of paired ratios", "rounds": 12}
FASTER = {"id": "0.0", "ratio": 1.21, "ci": [1.15, 1.27], "verdict": "faster", "noise": 0.03,
          "stat": "median of paired ratios", "rounds": 12}


def told(child: Result) -> list[str]:
    attempts = [attempt(0, timed(1.2, (1.1, 1.3))), attempt(1, child, "0.0", "tile it")]
    return history.lines(history.outcomes(attempts, fastest), to_analyst=True)


def test_not_kept_says_by_how_much_slower_a_tie_or_kept_faster():
    assert told(timed(1.05, (1.0, 1.1), SLOWER))[1].endswith(
        "not kept: 12 % slower than 0.0 timed side by side (95 % interval 8-15 %)")
    assert told(timed(1.19, (1.15, 1.23), TIE))[1].endswith(
        "not kept: a tie with 0.0 timed side by side (within ±3 %, the noise of a kernel timed "
        "against itself)")
    assert told(timed(1.5, (1.45, 1.55), FASTER))[1].endswith(
        "kept as the best: 1.21x faster than 0.0 timed side by side (95 % interval "
        "1.15-1.27x); the best now")
    assert told(timed(1.05, (1.0, 1.1)))[1].endswith("0.88x of 0.0, not kept")   # no versus
    assert told(refused())[1].endswith(f"rejected: {REASON}; not kept: refused")


def test_the_head_to_head_reaches_the_generators_prompt_and_replays_alike():
    def prompts(child: Result) -> list[str]:
        attempts = [attempt(0, timed(1.2, (1.1, 1.3))),
                    attempt(1, child, "0.0", "tile it", code="# B\n")]
        found = history.outcomes(attempts, fastest)
        request = GenerationRequest(PROBLEM, "cpp", "optimise", iteration=2,
                                    previous_code="x = 1\n", previous_result=attempts[0].result,
                                    instruction="unroll by 4", parent="0.0", outcomes=found)
        _, messages = LLMGenerator(Capture(), machine=MACHINE, knowledge=False).messages(request)
        provider = Capture()
        LLMAnalyst(provider, machine=MACHINE).analyse(AnalysisRequest(
            PROBLEM, "cpp", "x = 1\n", attempts[0].result, profile_summary(attempts[0].result),
            history=["tile it"], candidate="0.0", outcomes=found, iteration=2))
        return [user_text(messages), user_text(provider.sent[0][1])]

    slower, tie = prompts(timed(1.05, (1.0, 1.1), SLOWER)), prompts(timed(1.19, (1.1, 1.3), TIE))
    assert "1.0 on 'tile it' was correct at" in slower[0]
    assert "12 % slower than 0.0 timed side by side (95 % interval 8-15 %)" in slower[0]
    assert "not kept: 12 % slower than 0.0 timed side by side" in slower[1]
    assert "not kept: a tie with 0.0 timed side by side (within ±3 %" in tie[1]
    # a measurement decided these words: a replay compares the prompts without them
    for one, other in zip(slower, tie):
        assert "timed side by side" not in without_standing(one)
        assert request_digest("s", [{"role": "user", "content": one}]) == \
            request_digest("s", [{"role": "user", "content": other}])


# --- 3. a re-apply carries the code; a refusal by an estimate is judged again -----------------

def test_a_request_to_reapply_a_candidate_carries_its_code():
    b_code = "# B\nclass ModelNew:  # the refused one's own code\n    pass\n"
    attempts = [attempt(0, timed(1.2, (1.1, 1.3))),
                attempt(1, refused(), "0.0", "stream the rows", code=b_code)]
    found = history.outcomes(attempts, fastest)
    for instruction, variation in (
            ("Re-apply candidate 1.0 and judge it again: its refusal was an estimate.", ""),
            ("unroll by 4", "Instead of the recommendation above, apply this change; it made "
                            "candidate 1.0 1.30x faster in another lineage:\nstream the rows")):
        request = GenerationRequest(PROBLEM, "cpp", "optimise", iteration=2,
                                    previous_code="x = 1\n", previous_result=attempts[0].result,
                                    instruction=instruction, variation=variation, parent="0.0",
                                    outcomes=found)
        _, messages = LLMGenerator(Capture(), machine=MACHINE, knowledge=False).messages(request)
        prompt = user_text(messages)
        assert f"## Candidate 1.0, named above\n```python\n{b_code}" in prompt
    plain = GenerationRequest(PROBLEM, "cpp", "optimise", iteration=2, previous_code="x = 1\n",
                              previous_result=attempts[0].result, instruction="unroll by 4",
                              parent="0.0", outcomes=found)
    _, messages = LLMGenerator(Capture(), machine=MACHINE, knowledge=False).messages(plain)
    assert "named above" not in user_text(messages)


def test_a_repeat_of_a_refusal_by_an_estimate_is_judged_again(tmp_path):
    executor = Scripted({"# A": [refused(), timed(1.5, (1.4, 1.6))],
                         "# G": refused("guardrail fired: no-torch-ops: torch.matmul in forward",
                                        ["no-torch-ops"])})
    s = Session(PROBLEM, "cpp", out=tmp_path, executor=executor)
    first = s.evaluate_code(kernel("# A"))
    again = s.evaluate_code(kernel("# A"))
    assert first.result.state == REJECTED and len(executor.calls) == 2
    assert again.same_as is None and again.result.state == CORRECT and s.best is again
    third = s.evaluate_code(kernel("# A"))     # judged correct now: its verdict is taken
    assert third.same_as == again.id and len(executor.calls) == 2
    # a guardrail's refusal nobody asked to judge again: the earlier verdict, not judged again
    s.evaluate_code(kernel("# G"))
    repeat = s.evaluate_code(kernel("# G"))
    assert repeat.same_as is not None and len(executor.calls) == 3


def test_a_timeout_is_judged_again_only_when_the_model_asks():
    earlier = attempt(1, timed_out(), code="# T\n")
    said = Generation("# T\n", "Here it is.")
    assert not judge_again(earlier, Asking.of(2, "1.0", "fix", said))
    said = Generation("# T\n", "The code is right; the machine was busy. Judge it again.")
    assert judge_again(earlier, Asking.of(2, "1.0", "fix", said))
    assert not judge_again(earlier, Asking.of(1, "1.0", "fix", said))   # at most once a round
    named = Asking.of(2, "0.0", "optimise", recommendation=Recommendation(
        "re-apply 1.0", "Re-apply candidate 1.0: it timed out on a busy machine."))
    assert judge_again(earlier, named)
    other = Asking.of(2, "0.0", "optimise", recommendation=Recommendation(
        "re-apply 1.3", "Re-apply candidate 1.3: it timed out on a busy machine."))
    assert not judge_again(earlier, other)      # another candidate's judging asked for


@pytest.mark.slow
def test_the_loop_judges_again_a_refusal_the_model_asks_about(api, tmp_path):  # noqa: F811
    """Round 0: 0.0 is correct. Round 1: 1.0 is refused by an estimate. Round 2: the analyst,
    told so, asks to re-apply 1.0; the generator's prompt carries 1.0's code and the reason
    whole; it answers with that code, which is judged again (not 'same as 1.0')."""
    server = api([
        answer(kernel("# A")),
        {"text": "TITLE: stream the rows\nRECOMMENDATION: stream the rows once.\n"
                 "EXPECTED GAIN: ~1.3x"},
        answer(kernel("# B")),
        {"text": "TITLE: re-apply 1.0\nRECOMMENDATION: Re-apply candidate 1.0 and judge it "
                 "again: an estimate refused it, its outputs matched.\nEXPECTED GAIN: ~1.3x"},
        answer(kernel("# B"), "The same kernel as candidate 1.0: judge it again."),
    ])
    executor = Scripted({"# A": timed(1.0, (0.95, 1.05)),
                         "# B": [refused(), timed(1.3, (1.25, 1.35))]})
    s = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                Budget(iterations=3, patience=None, confirm=0),
                EvalOptions(baselines=("eager",), out_dir=tmp_path), out=tmp_path,
                executor=executor)
    s.run()
    assert s.error is None, s.finish_reason
    assert [a.result.state for a in s.history] == [CORRECT, REJECTED, CORRECT]
    assert len(executor.calls) == 3 and s.history[2].same_as is None
    prompts = server.user_prompts()
    assert REASON in prompts[3]                   # the analyst's, after the refusal
    assert "1.0 was refused by an estimate or a timeout" in prompts[3]
    assert f"## Candidate 1.0, named above\n```python\n{kernel('# B')}" in prompts[4]
    assert REASON in prompts[4]


# --- 4. the analyst may answer that nothing further is worth trying ---------------------------

def test_done_is_parsed_from_a_real_sdk_response(api):  # noqa: F811
    why = "the kernel streams its rows at 95 % of the memory bandwidth: nothing left to win"
    server = api([{"text": f"DONE: {why}"}])
    result = timed(1.4, (1.3, 1.5))
    advice = LLMAnalyst(AnthropicProvider(), machine=MACHINE).analyse(AnalysisRequest(
        PROBLEM, "cpp", "x = 1\n", result, profile_summary(result), candidate="0.0"))
    assert advice.action == {"kind": "done", "why": why}
    assert advice.text == why and advice.title == why
    system = server.requests[0]["body"]["system"]
    system = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    assert "DONE: <why nothing further is worth trying>" in system
    # a recommendation beside a DONE line is a recommendation
    both = parse_recommendation("TITLE: t\nRECOMMENDATION: r\nDONE: maybe")
    assert "done" not in both and both["recommendation"] == "r"


@pytest.mark.slow
def test_the_loop_ends_when_the_analyst_answers_done_and_it_read_the_profile_note(
        api, tmp_path):  # noqa: F811
    server = api([answer(kernel("# A")),
                  {"text": "DONE: at the memory bandwidth already; the profile note says the "
                           "profiled call is not the timed one"}])
    executor = Scripted({"# A": timed(1.4, (1.3, 1.5), profile={"note": NOTE})})
    s = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                Budget(iterations=4, patience=None, confirm=0),
                EvalOptions(baselines=("eager",), out_dir=tmp_path), out=tmp_path,
                executor=executor)
    s.run()
    assert s.error is None and len(server.requests) == 2 and len(s.history) == 1
    assert s.finish_reason.startswith("the analyst has nothing further to recommend (at the "
                                      "memory bandwidth already")
    # --- 5. the profile note reached the analyst's prompt
    assert f"Profile note: {NOTE}" in server.user_prompts()[1]


def test_the_profile_note_is_in_the_summary_and_left_out_of_a_replays_comparison():
    result = timed(1.4, (1.3, 1.5), profile={"note": NOTE})
    assert profile_summary(result)["profile_note"] == NOTE
    provider = Capture()
    LLMAnalyst(provider, machine=MACHINE).analyse(AnalysisRequest(
        PROBLEM, "cpp", "x = 1\n", result, profile_summary(result), candidate="0.0"))
    prompt = user_text(provider.sent[0][1])
    assert f"Profile note: {NOTE}" in prompt
    quiet = timed(1.4, (1.3, 1.5))
    provider = Capture()
    LLMAnalyst(provider, machine=MACHINE).analyse(AnalysisRequest(
        PROBLEM, "cpp", "x = 1\n", quiet, profile_summary(quiet), candidate="0.0"))
    assert request_digest("s", [{"role": "user", "content": prompt}]) == \
        request_digest("s", [{"role": "user", "content": user_text(provider.sent[0][1])}])
