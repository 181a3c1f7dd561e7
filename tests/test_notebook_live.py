"""A live kernel, driven the way JupyterLab drives it: execute requests with allow_stdin=True, and
a click sent as the comm message the view's `model.send` makes in a browser. No frontend is
mocked: this test is the frontend.

It checks what a person in JupyterLab relies on: the `%%kforge` cell returns at once in review
mode and shows one output, the live widget (whose text/plain is one line, not a widget repr);
the widget's record follows the session and Accept reaches it; nothing else is displayed while
the run goes (one channel per run: no report beside the widget to reconcile in the browser);
at the end the finished report takes the widget's place under its display id, in the magic's
own cell (update_display_data with that cell's parent header, after the cell has returned): the
cell's one output, so a saved notebook keeps no widget (no "model not found" later).
"""
from __future__ import annotations

import time
from queue import Empty

import pytest
from jupyter_client.manager import KernelManager

from tests.test_magic import FAST, FASTER, GOOD, SOFTMAX_CELL, answer, api, recommendation  # noqa: F401

pytestmark = pytest.mark.slow     # a live IPython kernel running a %%kforge session

MIME = "application/vnd.kforge.run+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


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


def widget_record(comm_id: str, predicate):
    """A state update of the widget whose record satisfies `predicate`."""
    def check(m):
        if m["msg_type"] != "comm_msg" or m["content"]["comm_id"] != comm_id:
            return False
        data = m["content"]["data"]
        return data.get("method") == "update" and "record" in data.get("state", {}) and \
            predicate(data["state"]["record"])
    return check


def send(kc, comm_id: str, content: dict) -> None:
    """What the browser sends for the view's model.send(content)."""
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id,
                                      "data": {"method": "custom", "content": content}})
    kc.shell_channel.send(msg)


def test_review_mode_in_a_live_kernel_widget_messages_and_in_place_report(api, kernel):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    kc = kernel()
    setup = kc.execute("%load_ext kforge_nb", allow_stdin=True)
    messages(kc, idle(setup))

    cell = kc.execute(f"%%kforge {FAST} --iterations 2 --mode review --out runs\n{SOFTMAX_CELL}",
                      allow_stdin=True)
    seen = messages(kc, idle(cell))   # the cell returned while the run waits for a decision
    opened = [m for m in seen if m["msg_type"] == "comm_open" and
              m["content"]["data"]["state"].get("_anywidget_id") == "kforge_nb.ui.widget.RunWidget"]
    assert len(opened) == 1
    comm_id = opened[0]["content"]["comm_id"]
    assert opened[0]["content"]["data"]["state"]["record"]["state"] == "running"

    shown = [m["content"] for m in seen if m["msg_type"] == "display_data"]
    assert len(shown) == 1 and WIDGET in shown[0]["data"]            # the widget alone
    assert MIME not in shown[0]["data"]
    assert shown[0]["data"][WIDGET]["model_id"] == comm_id
    plain = shown[0]["data"]["text/plain"]
    assert "\n" not in plain and len(plain) <= 110 and plain.startswith("kforge live view")
    display_id = shown[0]["transient"]["display_id"]

    waiting = messages(kc, widget_record(comm_id, lambda r: r["pending"]))
    assert not [m for m in seen + waiting if m["msg_type"] in ("update_display_data",
                                                               "clear_output")]
    other = kc.execute("unrelated = 1", allow_stdin=True)     # another cell runs meanwhile
    messages(kc, idle(other))
    send(kc, comm_id, {"action": "accept"})

    done = {"widget": None, "report": None}
    outputs = []

    def all_finished(m):
        if widget_record(comm_id, lambda r: r["state"] == "finished")(m):
            done["widget"] = m
        if m["msg_type"] in ("display_data", "update_display_data", "clear_output"):
            outputs.append(m)
        if m["msg_type"] == "update_display_data" and \
                m["content"]["transient"]["display_id"] == display_id:
            done["report"] = m                   # in the widget's place: the cell's one output
        return all(done.values())
    messages(kc, all_finished)
    assert outputs == [done["report"]]          # nothing else was displayed, nothing cleared
    record = done["widget"]["content"]["data"]["state"]["record"]
    assert [d["kind"] for d in record["decisions"]] == ["accept"]
    assert [a["id"] for a in record["history"]] == ["0.0", "1.0"]
    assert record["status"].startswith("finished: iteration budget used")
    report = done["report"]
    assert report["parent_header"]["msg_id"] == cell          # routed to the magic's cell
    assert WIDGET not in report["content"]["data"]
    final = report["content"]["data"][MIME]
    assert final["state"] == "finished"
    assert [a["decision"] for a in final["history"]] == [None, "accept"]
    assert "<table" in report["content"]["data"]["text/html"]


def test_review_mode_with_no_one_at_the_frontend_says_how_to_decide_on_stdout(api, kernel):
    """A headless executor (no stdin) gets the way to decide in the cell's output, not in a red
    stderr box that reads as the magic's failure."""
    api([answer(GOOD), recommendation()])
    kc = kernel()
    messages(kc, idle(kc.execute("%load_ext kforge_nb")))
    cell = kc.execute(f"%%kforge {FAST} --iterations 2 --mode review --name kf --out runs\n"
                      f"{SOFTMAX_CELL}", allow_stdin=False)
    streams = [m["content"] for m in messages(kc, idle(cell)) if m["msg_type"] == "stream"]
    assert [s["name"] for s in streams] == ["stdout"], streams
    assert "decide each recommendation with kf.accept()" in streams[0]["text"]
    messages(kc, idle(kc.execute("kf.stop(); kf.wait()")))


def test_a_headless_notebook_saves_the_finished_report_of_a_run_it_did_not_block_on(api, tmp_path):
    """nbclient (nbval, papermill) runs `%%kforge --no-block`, then a cell that waits: the
    magic's cell is saved with the finished report, not the state it had when it returned."""
    import nbformat
    from nbclient import NotebookClient
    api([answer(GOOD)])
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext kforge_nb"),
        nbformat.v4.new_code_cell(f"%%kforge {FAST} --iterations 1 --no-block --name kf "
                                  f"--out runs\n{SOFTMAX_CELL}"),
        nbformat.v4.new_code_cell("kf.wait()\nkf.history[-1].result.state")])
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    report = [o for o in nb.cells[1].outputs if MIME in o.get("data", {})]
    assert len(report) == 1 and report[0]["data"][MIME]["state"] == "finished"
    assert nb.cells[2].outputs[-1]["data"]["text/plain"] == "'correct'"
