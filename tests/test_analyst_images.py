"""The analyst sees pictures of the profile (kernel timeline, roofline) beside its text summary,
as image blocks for providers that take them; recordings keep them and replay them."""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_nb.agents import AgentConfig, make_agents
from kforge_nb.agents.feedback import profile_summary, summary_text
from kforge_nb.agents.pictures import Picture, pictures, user_content
from kforge_nb.options import BENCH, MODEL, RUN, add_options
from kforge_nb.providers.recording import ReplayProvider, request_digest
from kforge_nb.result import Result
from kforge_nb.session import Budget, Session
from kforge_nb.session.config import agents_from_args
from tests.support.evaluator import profiled_result
from tests.support.fake_anthropic import input_tokens
from tests.test_session_anthropic import (FASTER, GOOD, PROBLEM, RECOMMENDATION,  # noqa: F401
                                          answer, api, options, run_session)

pytest.importorskip("matplotlib")
PNG = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parent.parent


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == PNG
    return struct.unpack(">II", png[16:24])


def images_of(body: dict) -> list[bytes]:
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return []
    blocks = [b for b in content if b["type"] == "image"]
    assert all(b["source"]["type"] == "base64" and b["source"]["media_type"] == "image/png"
               for b in blocks)
    return [base64.b64decode(b["source"]["data"], validate=True) for b in blocks]


# --- the pictures themselves -----------------------------------------------------------------

def test_pictures_are_small_pngs_and_the_same_bytes_for_the_same_result():
    result = profiled_result()
    first, second = pictures(result), pictures(result)
    assert [p.name for p in first] == ["timeline", "roofline"]
    assert [p.png for p in first] == [p.png for p in second]
    for picture in first:
        assert png_size(picture.png) == (800, 300) and len(picture.png) < 60_000
    # in another process too (font cache, matplotlib's settings): what the model saw can be
    # drawn again from the saved Result
    code = ("import hashlib, json, sys; from kforge_nb.result import Result; "
            "from kforge_nb.agents.pictures import pictures; "
            "r = Result.from_dict(json.loads(sys.stdin.read())); "
            "print([hashlib.sha256(p.png).hexdigest() for p in pictures(r)])")
    other = subprocess.run([sys.executable, "-c", code], input=json.dumps(result.to_dict()),
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == str([hashlib.sha256(p.png).hexdigest() for p in first])


def test_no_data_no_picture_and_no_matplotlib_no_pictures(monkeypatch):
    assert pictures(Result("correct", "ok")) == []          # no profile, no roofline
    memory_only = pictures(profiled_result(flops=0))         # no FLOPs: bandwidth vs its roof
    assert [p.name for p in memory_only] == ["timeline", "roofline"]
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # as if not installed
    assert pictures(profiled_result()) == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    _, analyst, _, notices = make_agents(AgentConfig(provider="anthropic"))
    assert [n for n in notices if "matplotlib" in n] == [
        "the analyst gets no pictures of the profile: matplotlib is not installed "
        "(pip install matplotlib)"]
    _, _, _, notices = make_agents(AgentConfig(provider="anthropic", images=False))
    assert not [n for n in notices if "matplotlib" in n]


# --- a session against the loopback Anthropic server ------------------------------------------

@pytest.mark.slow
def test_the_analysis_request_carries_the_profile_as_png_images(api, tmp_path):
    server = api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    session = run_session(tmp_path, iterations=2)
    assert [a.result.state for a in session.history] == ["correct", "correct"]
    generation, analysis = server.requests[0]["body"], server.requests[1]["body"]
    assert images_of(generation) == [] and isinstance(generation["messages"][0]["content"], str)
    shown = images_of(analysis)
    assert shown, "no image block in the analysis request"
    for png in shown:
        assert png_size(png) == (800, 300) and len(png) < 60_000
    assert "Profile summary" in server.user_prompts()[1]
    assert "Attached, as a profiler would show them: the kernel timeline" in \
        server.user_prompts()[1]

    # the prompt artifact names the pictures, which lie beside it: what the model saw
    iteration = Path(session.folder) / "iter-01"
    saved = json.loads((iteration / "recommendation.json").read_text())
    assert len(saved["images"]) == len(shown) and "analysis-timeline.png" in saved["images"]
    assert [(iteration / name).read_bytes() for name in saved["images"]] == shown
    assert saved["messages"][1]["content"][0] == {"type": "image",
                                                  "file": "analysis-timeline.png"}
    assert "iVBOR" not in (iteration / "recommendation.json").read_text()   # no base64 PNG

    # tokens are the server's, images included (the fake counts width*height/750 each)
    text_only = [{"role": "user", "content": server.user_prompts()[1]}]
    assert input_tokens(analysis["messages"]) > input_tokens(text_only)
    summary = session.summary()
    assert summary["input_tokens"] == sum(input_tokens(r["body"]["messages"])
                                          for r in server.requests)
    assert summary["cost_usd"] == pytest.approx(
        (summary["input_tokens"] * 3 + summary["output_tokens"] * 15) / 1e6, abs=1e-4)


@pytest.mark.slow
def test_no_images_sends_the_analyst_text_only(api, tmp_path):
    server = api([answer(GOOD), RECOMMENDATION, answer(GOOD)])
    session = run_session(tmp_path, iterations=2, images=False)
    assert isinstance(server.requests[1]["body"]["messages"][0]["content"], str)
    iteration = Path(session.folder) / "iter-01"
    assert json.loads((iteration / "recommendation.json").read_text())["images"] == []
    assert not list(iteration.glob("*.png"))


@pytest.mark.parametrize("command", [RUN, BENCH, MODEL])
def test_the_no_images_flag_reaches_the_agent_config(command):
    parser = argparse.ArgumentParser()
    add_options(parser, command)
    assert agents_from_args(parser.parse_args(["--no-images"])).images is False
    assert agents_from_args(parser.parse_args([])).images is True


@pytest.mark.slow
def test_a_recording_with_pictures_replays_the_same_run(api, tmp_path):
    api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    recording = tmp_path / "with-images.jsonl"
    live = run_session(tmp_path / "live", iterations=2, record=str(recording))
    recorded = [json.loads(line) for line in recording.read_text().splitlines()]
    assert images_of(recorded[1]["request"])                 # kept whole, as sent
    replayed = Session(PROBLEM, "cpp", AgentConfig(replay=str(recording)),
                       Budget(iterations=2, patience=None), options(tmp_path / "replay"),
                       out=tmp_path / "replay")
    replayed.run()
    assert replayed.error is None
    assert [a.result.state for a in replayed.history] == [a.result.state for a in live.history]
    assert [a.code for a in replayed.history] == [a.code for a in live.history]
    assert (Path(replayed.folder) / "iter-01" / "analysis-timeline.png").is_file()


def test_the_digest_counts_pictures_not_their_pixels(tmp_path):
    text = "## Profile summary\nTime: candidate 0.2 ms"
    one, other = (Picture("timeline", PNG + bytes([n]) * 40) for n in (1, 2))
    with_one = request_digest("sys", [{"role": "user", "content": user_content(text, [one])}])
    # re-measured on replay, a picture's pixels differ; that it was there does not
    assert with_one == request_digest("sys", [{"role": "user",
                                               "content": user_content(text, [other])}])
    assert with_one != request_digest("sys", [{"role": "user", "content": text}])
    # a recording made without pictures (before them, or --no-images) replays text only
    for content, takes in ((text, False), (user_content(text, [one]), True)):
        path = tmp_path / f"{takes}.jsonl"
        path.write_text(json.dumps({"call": 0, "role": "analysis", "digest": "x", "request": {
            "system": "sys", "messages": [{"role": "user", "content": content}],
            "max_tokens": 10}, "reply": {"text": "TITLE: t"}}) + "\n")
        assert ReplayProvider(path, "analysis").accepts_images is takes


# --- the OpenAI-compatible provider -----------------------------------------------------------

def test_the_openai_provider_sends_images_as_image_url_parts(monkeypatch):
    pytest.importorskip("openai")
    from kforge_nb.providers.openai import OpenAIProvider
    from tests.test_provider_openai import ChatServer
    server = ChatServer(["TITLE: a", "TITLE: b"])
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    try:
        provider = OpenAIProvider(model="vision-local")
        assert provider.accepts_images
        timeline = pictures(profiled_result())[0]
        provider.complete("sys", [{"role": "user", "content": user_content("look", [timeline])}],
                          100)
        provider.complete("sys", [{"role": "user", "content": "look"}], 100)
    finally:
        server.httpd.shutdown()
    image, text = server.requests[0]["messages"][1]["content"]
    assert text == {"type": "text", "text": "look"}
    assert image["type"] == "image_url"
    prefix, data = image["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/png;base64" and base64.b64decode(data) == timeline.png
    assert server.requests[1]["messages"][1]["content"] == "look"     # text stays a string
