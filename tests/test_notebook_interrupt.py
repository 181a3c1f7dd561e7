"""Kernel > Interrupt and a `%%kforge` run that goes on after its cell returned (issue 38).

A real kernel, driven as JupyterLab drives it (execute requests with allow_stdin=True, Interrupt
as the server sends it: SIGINT to the kernel). The run is the builtin agent's, in review mode,
so it waits at its first recommendation for as long as the test needs: no timing decides
anything here.
"""
from __future__ import annotations

import pytest
from jupyter_client.manager import KernelManager

from tests.test_magic import FAST, SOFTMAX_CELL
from tests.test_notebook_live import idle, messages, widget_record

pytestmark = pytest.mark.slow     # a real kernel running a whole builtin-agent session

RUN = f"%%kforge {FAST} --provider builtin --iterations 6 --mode review --out runs\n{SOFTMAX_CELL}"
WIDGET = "kforge_nb.ui.widget.RunWidget"
STEP_S = 300.0        # one candidate judged on a busy 2-core machine, at most


@pytest.fixture
def lab_kernel(tmp_path):
    """(manager, client) of a kernel with kforge loaded."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    messages(kc, idle(kc.execute("%load_ext kforge_nb", allow_stdin=True)), timeout=STEP_S)
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def started_waiting(kc) -> str:
    """Run the review cell (it returns at once) and wait for its first recommendation; the
    widget's comm id."""
    seen = messages(kc, idle(kc.execute(RUN, allow_stdin=True)), timeout=STEP_S)
    comm_id = next(m["content"]["comm_id"] for m in seen if m["msg_type"] == "comm_open" and
                   m["content"]["data"]["state"].get("_anywidget_id") == WIDGET)
    messages(kc, widget_record(comm_id, lambda r: r["pending"]), timeout=STEP_S)
    return comm_id


def value_of(kc, expression: str) -> str:
    """The text/plain of `expression` evaluated in the kernel."""
    seen: list[dict] = []
    reply = kc.execute_interactive(expression, timeout=STEP_S, allow_stdin=True,
                                   output_hook=seen.append)
    assert reply["content"]["status"] == "ok", reply["content"]
    return [m["content"]["data"]["text/plain"] for m in seen
            if m["msg_type"] == "execute_result"][-1]


def test_interrupt_stops_a_run_whose_cell_has_returned(lab_kernel):
    km, kc = lab_kernel
    comm_id = started_waiting(kc)
    km.interrupt_kernel()                        # Kernel > Interrupt, while no cell runs
    finished = messages(kc, widget_record(comm_id, lambda r: r["state"] == "finished"),
                        timeout=STEP_S)
    record = finished[-1]["content"]["data"]["state"]["record"]
    assert record["summary"]["reason"] == "stopped by the user"
    assert any(n.startswith("Kernel > Interrupt: stopping after the current step")
               for n in record["notices"])
    assert value_of(kc, "1 + 1") == "2"          # the kernel itself goes on


def test_interrupt_during_another_cell_stops_that_cell_not_the_run(lab_kernel):
    km, kc = lab_kernel
    comm_id = started_waiting(kc)
    sleeping = kc.execute("import time\nprint('asleep', flush=True)\n"
                          "for _ in range(600): time.sleep(0.5)", allow_stdin=True)
    messages(kc, lambda m: m["msg_type"] == "stream" and "asleep" in m["content"]["text"]
             and m["parent_header"].get("msg_id") == sleeping, timeout=STEP_S)
    km.interrupt_kernel()
    seen = messages(kc, idle(sleeping), timeout=STEP_S)
    errors = [m["content"]["ename"] for m in seen if m["msg_type"] == "error"]
    assert errors == ["KeyboardInterrupt"]
    assert value_of(kc, "_kforge.running, _kforge.pending") == "(True, True)"
    assert comm_id                                # the run still waits for its decision
    # and an Interrupt between cells then stops it
    km.interrupt_kernel()
    messages(kc, widget_record(comm_id, lambda r: r["state"] == "finished"), timeout=STEP_S)
    assert value_of(kc, "_kforge.finish_reason") == "'stopped by the user'"
