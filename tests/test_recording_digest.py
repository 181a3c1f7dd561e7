"""A replay matches a prompt by its words, not by what was measured: runs on a busy and an
idle machine print different numbers (and sort the top kernels differently)."""
from kforge_nb.providers.recording import request_digest


def prompt(speedup: str, ms: str, kernels: list[str], shape: str = "64, 1000") -> list[dict]:
    lines = [f"get_inputs: torch.randn({shape})", f"Time: candidate {ms}, speedup {speedup} vs eager",
             "Top kernels (share of the candidate's time):"] + [f"  - {k}" for k in kernels]
    return [{"role": "user", "content": "\n".join(lines)}]


def test_measurements_and_their_order_do_not_change_the_digest():
    idle = prompt("0.98x", "0.31 ms", ["cpu::softmax 70%", "aten::empty 30%"])
    busy = prompt("1x", "123 ms", ["aten::empty 51%", "cpu::softmax 49%"])
    assert request_digest("system", idle) == request_digest("system", busy)


def test_a_different_problem_size_changes_the_digest():
    assert request_digest("system", prompt("1x", "1 ms", ["k 100%"])) != \
        request_digest("system", prompt("1x", "1 ms", ["k 100%"], shape="32, 1000"))


def test_the_machine_a_prompt_names_does_not_change_the_digest():
    from kforge_nb.providers.recording import request_digest
    def prompt(device):
        return [{"role": "user", "content": f"cpp on {device}\nProfile summary: 1.2 ms"}]
    laptop = request_digest("sys", prompt("CPU (2 cores, 2 threads) (in cache)"))
    assert laptop == request_digest("sys", prompt("CPU (16 cores, 32 threads)"))
    assert request_digest("sys", prompt("NVIDIA H100 80GB HBM3")) == \
        request_digest("sys", prompt("NVIDIA H200"))
    assert laptop != request_digest("sys", [{"role": "user", "content": "triton on CPU"}])
