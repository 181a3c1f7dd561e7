"""Make notebooks/data/softmax_session.jsonl: a real kforge session, recorded by kforge itself.

The "model" is tests/support/fake_anthropic.py, a loopback server on 127.0.0.1 that speaks the
Anthropic Messages API and plays a script: a first candidate with a C++ syntax error, its fix,
an analyst's recommendation, and the optimised candidate. kforge talks to it through the real
`anthropic` SDK (ANTHROPIC_BASE_URL points at it, with a fake key), and `--record` writes every
request and response. The key is never written: the script checks that too.

    .venv/bin/python notebooks/data/make_recording.py          # from the repository root

The cell below must stay byte-for-byte what 06_replay_a_session.ipynb's `%%kforge` cell holds,
and FLAGS its flags: a replay checks each prompt against the recorded one.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fake_anthropic import FakeAnthropic  # noqa: E402

EXAMPLES = ROOT / "kforge_nb" / "targets" / "examples"
CELL = (EXAMPLES / "softmax.py").read_text()
GOOD = (EXAMPLES / "cpp_softmax.py").read_text()
BROKEN = GOOD.replace("row_sum += row_out[c];", "row_sum += row_out[c]")    # a missing ';'
FASTER = GOOD.replace("schedule(static)", "schedule(static, 4)")
FLAGS = "--target cpp --iterations 3 --trials 2 --no-compile-baseline --patience 10"
RECORDING = HERE / "softmax_session.jsonl"
FAKE_KEY = "sk-ant-fake-key-for-the-loopback-server"


def answer(code: str, words: str) -> dict:
    return {"text": f"{words}\n\n```python\n{code}```\n"}


SCRIPT = [
    answer(BROKEN, "Here is a row-parallel softmax: one OpenMP thread per row, max, exp-sum, "
                   "scale."),
    answer(GOOD, "The compiler is right: a ';' was missing after the sum. Fixed:"),
    {"text": "TITLE: chunk the rows\nRECOMMENDATION: give each thread 4 rows at a time "
             "(schedule(static, 4)) to cut OpenMP scheduling overhead on short rows.\n"
             "EXPECTED GAIN: ~1.1x"},
    answer(FASTER, "Applied the recommendation: rows are handed out in chunks of 4."),
]


def main() -> None:
    from IPython.testing import globalipapp
    with FakeAnthropic(SCRIPT) as server, tempfile.TemporaryDirectory() as out:
        os.environ["ANTHROPIC_API_KEY"] = FAKE_KEY
        os.environ["ANTHROPIC_BASE_URL"] = server.url
        shell = globalipapp.start_ipython() or globalipapp.get_ipython()
        shell.run_line_magic("load_ext", "kforge_nb")
        RECORDING.unlink(missing_ok=True)
        shell.run_cell_magic("kforge", f"{FLAGS} --provider anthropic --block "
                             f"--record {RECORDING} --out {out}", CELL)
        session = shell.user_ns["_kforge"]
        session.wait()
        states = [a.result.state for a in session.history]
        print("verdicts:", states, "| model calls:", len(server.requests))
        assert states == ["compile_failure", "correct", "correct"], states
    text = RECORDING.read_text()
    assert FAKE_KEY not in text and "sk-ant" not in text, "the recording holds the key"
    print(f"wrote {RECORDING.relative_to(ROOT)} ({len(text.splitlines())} lines, no key)")


if __name__ == "__main__":
    main()
