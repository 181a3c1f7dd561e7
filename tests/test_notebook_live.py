"""A live kernel, driven the way JupyterLab drives it: execute requests with allow_stdin=True, and
a button click sent as the comm message a browser sends. No frontend is mocked: this test is
the frontend.

It checks what a person in JupyterLab relies on: the `%%kforge` cell returns at once in review
mode; clicking the dashboard's Accept button reaches the session; and the report bundle keeps
updating in place in the magic's own cell (update_display_data with that cell's parent header)
after the cell has returned.
"""
from __future__ import annotations

import time
from queue import Empty

import pytest
from jupyter_client.manager import KernelManager

from tests.test_magic import FAST, FASTER, GOOD, SOFTMAX_CELL, answer, api, recommendation  # noqa: F401

MIME = "application/vnd.kforge.run+json"


@pytest.fixture
def kernel(tmp_path):
    """kernel() starts a kernel (after the test has set its environment) and returns a client."""
    started = []

    def start():
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        started.append((km, kc))
        return kc
    yield start
    for km, kc in started:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def messages(kc, until, timeout: float = 120.0) -> list[dict]:
    """IOPub messages until `until(msg)` is true for one of them."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except Empty:
            continue
        seen.append(msg)
        if until(msg):
            return seen
    last = [m["content"].get("data", {}).get("text/plain", m["msg_type"]) for m in seen[-3:]]
    raise AssertionError(f"timed out; last messages: {last}")


def idle(msg_id):
    return lambda m: (m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                      and m["parent_header"].get("msg_id") == msg_id)


def click(kc, comm_id: str) -> None:
    """What @jupyter-widgets/base sends when a person clicks a Button."""
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id,
                                      "data": {"method": "custom", "content": {"event": "click"}}})
    kc.shell_channel.send(msg)


def test_review_mode_in_a_live_kernel_buttons_and_in_place_report(api, kernel, tmp_path):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    kc = kernel()
    setup = kc.execute("%load_ext kforge_nb", allow_stdin=True)
    messages(kc, idle(setup))

    cell = kc.execute(f"%%kforge {FAST} --iterations 2 --mode review --out runs\n{SOFTMAX_CELL}",
                      allow_stdin=True)
    started = time.monotonic()
    seen = messages(kc, idle(cell))
    assert time.monotonic() - started < 30                      # returned; the loop runs on
    buttons = {m["content"]["data"]["state"].get("description"): m["content"]["comm_id"]
               for m in seen if m["msg_type"] == "comm_open"
               and m["content"]["data"]["state"].get("_model_name") == "ButtonModel"}
    shown = [m for m in seen if m["msg_type"] == "display_data" and MIME in m["content"]["data"]]
    assert len(shown) == 1
    display_id = shown[0]["content"]["transient"]["display_id"]

    def report_update(predicate):
        return lambda m: (m["msg_type"] == "update_display_data" and
                          m["content"]["transient"]["display_id"] == display_id and
                          predicate(m["content"]["data"][MIME]))

    waiting = messages(kc, report_update(lambda r: any(e["kind"] == "recommendation"
                                                       for e in r["events"])))
    assert all(m["parent_header"]["msg_id"] == cell for m in waiting
               if m["msg_type"] == "update_display_data")         # routed to the magic's cell
    other = kc.execute("unrelated = 1", allow_stdin=True)     # another cell runs meanwhile
    messages(kc, idle(other))
    click(kc, buttons["Accept"])
    final = messages(kc, report_update(lambda r: not r["running"] and r["summary"]["reason"]))
    record = final[-1]["content"]["data"][MIME]
    assert final[-1]["parent_header"]["msg_id"] == cell
    assert [e["data"]["kind"] for e in record["events"] if e["kind"] == "decision"] == ["accept"]
    assert [a["decision"] for a in record["history"]] == [None, "accept"]
    assert "<table" in final[-1]["content"]["data"]["text/html"]
