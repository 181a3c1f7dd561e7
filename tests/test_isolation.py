"""Candidate code runs in child processes forked from one server: a crash ends that child only,
and candidates judged at once (as a session does) each get their own verdict."""
import os
import signal
import socket
import threading
from pathlib import Path

import pytest

from kforge_nb.evaluator import evaluate
from kforge_nb.evaluator.parent import process
from kforge_nb.evaluator.wire.framing import recv, send
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, MISMATCH, RUNTIME_ERROR
from tests.support.evaluator import candidate_source, load_problem


def test_candidate_code_runs_in_a_child_process_not_the_callers(judge, options, tmp_path):
    source = candidate_source("cpp_relu").replace("import torch\n", "import os\n\nimport torch\n")
    source += ("\nwith open(os.path.join(os.environ['HOME'], 'pid'), 'w') as f:\n"
               "    f.write(str(os.getppid()) + ' ' + str(os.getpid()))\n")
    result = evaluate(load_problem("relu"), source, "cpp", options(measure=False))
    assert result.state == CORRECT
    # it ran in its own folder (HOME is inside it), in a process that is not ours
    parent, pid = (Path(result.artifacts) / "sandbox" / "pid").read_text().split()
    assert int(pid) != os.getpid() and int(parent) != os.getpid()


def test_a_crashed_candidate_does_not_stop_the_next_evaluation(judge):
    assert judge("relu", "cpp_null_pointer_write").state == RUNTIME_ERROR
    assert judge("relu", "cpp_relu", measure=False).state == CORRECT


def test_fork_server_messages_sent_back_to_back_are_each_received():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        send(theirs, ("exit", 101, -11))      # a child's end and the next fork's
        send(theirs, ("pid", 102))            # pid, in one write burst
        ours.settimeout(5)
        assert recv(ours) == ["exit", 101, -11]
        assert recv(ours) == ["pid", 102]


def stopped_fork_server() -> process.Zygote:
    """A real fork server, started and then stopped (SIGSTOP): it reads no request, as one
    still importing torch or warming torch.compile on a machine whose cores are taken."""
    server = process.Zygote()
    assert server.ready.wait(120), "the fork server never started"
    os.kill(server.process.pid, signal.SIGSTOP)
    return server


@pytest.mark.slow        # starts fork servers of its own (torch imported in each)
def test_a_fork_server_that_never_answers_is_a_clear_timeout_and_is_stopped(monkeypatch):
    monkeypatch.setattr(process, "FORK_WAIT_S", 3.0)
    server = stopped_fork_server()
    with pytest.raises(process.WorkerFailure) as failure:
        server.fork("candidate_main", {}, os.open(os.devnull, os.O_WRONLY))
    assert failure.value.kind == "timeout"
    assert "fork server started no worker within 3 s" in str(failure.value)
    assert server.process.wait(10) == -signal.SIGKILL      # no late pid can be taken


@pytest.mark.slow
def test_a_fork_server_slower_than_a_second_is_waited_for(monkeypatch):
    """Its answer comes after several 1 s polls (it resumes 3 s after the request): the pid
    is the worker's, not an error."""
    monkeypatch.setattr(process, "FORK_WAIT_S", 120.0)
    server = stopped_fork_server()
    threading.Timer(3.0, os.kill, (server.process.pid, signal.SIGCONT)).start()
    log = os.open(os.devnull, os.O_WRONLY)
    try:
        pid, channel = server.fork("candidate_main", {}, log)
        assert pid > 0
        channel.close()
    finally:
        server.sock.close()                                  # the server ends with its socket
        os.close(log)
        server.process.wait(60)


def test_candidates_judged_at_once_each_get_their_own_verdict(options):
    expected = {"cpp_relu": (CORRECT, ""), "cpp_leaky_relu": (MISMATCH, ""),
                "cpp_null_pointer_write": (RUNTIME_ERROR, "SIGSEGV"),
                "cpp_abort": (RUNTIME_ERROR, "SIGABRT")}
    problem = load_problem("relu")
    for seed in range(3):                             # a fresh reference each round
        results = {}

        def judge_one(name):
            results[name] = evaluate(problem, candidate_source(name), "cpp",
                                     options(seed=100 + seed, timeout_s=60, measure=False))
        threads = [threading.Thread(target=judge_one, args=(n,)) for n in expected]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, (state, says) in expected.items():
            assert results[name].state == state, (name, results[name].message)
            assert says in results[name].message
