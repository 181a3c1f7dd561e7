"""What a session says of itself: its summary (`kforge run --json`, the views' header) and its
advice when the best kernel is slower than PyTorch. `session` is the Session."""
from __future__ import annotations

from ..agents.feedback import profile_summary, why_slower_than_eager
from ..intervals import timing_speedup


def summary_of(session) -> dict:
    best = session.best
    t = best.result.timing if best else None
    return {
        "problem": session.problem.name, "target": session.target.name,
        "device": session.target.device(),
        "provider": session.provider_description, "reason": session.finish_reason,
        "best_state": best.result.state if best else (
            session.history[-1].result.state if session.history else None),
        "best_iteration": best.iteration if best else None,
        "candidate_ms": t.candidate_ms if t else None,
        "speedup_vs_eager": t.speedup_vs_eager if t else None,
        "speedup_vs_compile": t.speedup_vs_compile if t else None,
        "speedup_vs_eager_ci": t.speedup_vs_eager_ci if t else None,
        "speedup_vs_compile_ci": t.speedup_vs_compile_ci if t else None,
        "noisy": t.noisy if t else False, "noise_note": t.noise_note if t else "",
        "busy": t.busy if t else False, "busy_note": t.busy_note if t else "",
        "speedup_vs_eager_policy": t.speedup_vs_eager_policy if t else None,
        "speedup_vs_compile_policy": t.speedup_vs_compile_policy if t else None,
        "timing_real": t.real if t else None,
        "iterations": len({a.iteration for a in session.history}),
        "candidates": len(session.history),
        "input_tokens": session.usage.input_tokens, "output_tokens": session.usage.output_tokens,
        "cost_usd": round(session.usage.cost_usd, 4),
        "unpriced_calls": session.usage.unpriced_calls,
        "elapsed_s": round(session.elapsed(), 2),
        "artifacts": str(session.folder), "error": session.error,
        "advice": advice_of(session),
        "measures": best.result.measures if best else {},
    }

def advice_of(session) -> str | None:
    """Said plainly when the best kernel is slower than PyTorch: keep the module as it is,
    and why (the analyst's reason when it gave one, else one read off the profile)."""
    best = session.best
    t = best.result.timing if best else None
    if t is None or not t.real or t.speedup_vs_eager is None or t.speedup_vs_eager >= 1.0:
        return None
    last = session._last_recommendation
    reason = last.action.get("why") if last and \
        last.action.get("verdict") == "keep_pytorch" else None
    # the run may end (patience, budget) before the analyst says why: read it off the profile
    reason = reason or why_slower_than_eager(profile_summary(best.result))
    return (f"best left in PyTorch: the best candidate runs at {timing_speedup(t)} "
            f"eager ({reason})")
