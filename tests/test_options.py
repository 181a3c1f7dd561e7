"""The one schema of options (kforge_nb/options.py) and what is made from it: the CLI's parsers,
the `%%kforge` parser and traitlets, `%kforge bench`'s parser and the library's defaults."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kforge_nb.cli import build_parser
from kforge_nb.options import (BENCH, EVAL, MAGIC, PRECISIONS, RUN, bench_parser, defaults,
                               options as options_of)
from tests.support.evaluator import PROBLEMS, REPO
from tests.test_magic import ip  # noqa: F401  (a real IPython shell with kforge_nb loaded)


def flags_in_help(text: str) -> set[str]:
    # argparse starts each option's line with two spaces and its flag; a flag merely named in
    # another option's help text is not at the start of a line
    return set(re.findall(r"^  (?:-h, )?(--[a-z][a-z-]*)", text, re.M))


def python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          check=True, timeout=120).stdout


@pytest.mark.parametrize("command", [EVAL, RUN, BENCH])
@pytest.mark.slow     # a `kforge --help` process per command
def test_the_cli_help_lists_exactly_the_options_of_its_command(kforge_cli, command):
    done = kforge_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    expected = {o.flag for o in options_of(command)} | {"--help"}
    assert flags_in_help(done.stdout) == expected


def test_the_magic_help_lists_runs_options_and_its_own(ip):
    from kforge_nb.magics import KForgeMagics
    shown = flags_in_help(KForgeMagics.kforge.__doc__)       # what `%%kforge?` prints
    assert shown == {o.flag for o in options_of(MAGIC)}
    run_only = {o.flag for o in options_of(RUN)} - shown
    assert run_only == {"--review", "--json"}       # the terminal prompt and stdout: not a cell's


@pytest.mark.parametrize("command, line, positionals", [
    (EVAL, ["eval", "ref.py", "cand.py"], ["reference", "candidate"]),
    (RUN, ["run"], ["reference"]),
    (BENCH, ["bench", "suite"], ["problems"]),
])
def test_defaults_are_what_a_line_without_flags_parses_to(command, line, positionals):
    parsed = vars(build_parser().parse_args(line))
    for name in ["command", "func", *positionals]:
        del parsed[name]
    assert parsed == vars(defaults(command))


def test_bench_and_run_have_their_own_defaults_for_the_same_flags():
    run, bench = build_parser().parse_args(["run"]), build_parser().parse_args(["bench", "d"])
    assert (run.provider, run.iterations) == ("auto", 8)
    assert (bench.provider, bench.iterations) == ("builtin", 3)
    assert (bench.workers, bench.candidates, bench.restart) == (1, None, False)
    assert run.patience == bench.patience == 3


def test_magic_flags_not_on_the_line_are_none_so_config_can_fill_them(ip):
    from kforge_nb.magics import KForgeMagics
    given = vars(KForgeMagics.kforge.parser.parse_args([]))
    assert given.keys() == vars(defaults(MAGIC)).keys()
    assert set(given.values()) == {None}
    # what the line leaves out falls back to kforge run's defaults, then to the magic's own
    run, magic = vars(defaults(RUN)), vars(defaults(MAGIC))
    assert all(magic[name] == run[name] for name in magic.keys() & run.keys())
    assert (defaults(MAGIC).mode, defaults(MAGIC).name) == ("auto", "_kforge")


def test_the_magic_checks_values_as_the_cli_does(ip, kforge_main):
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="must be 0 or more, not -1"):
        ip.run_cell_magic("kforge", "--patience -1", "# a reference")
    with pytest.raises(UsageError, match="invalid choice: 'fp8'"):
        ip.run_cell_magic("kforge", "--precision fp8", "# a reference")
    done = kforge_main("run", "x.py", "--patience", "-1")
    assert done.returncode == 2 and "must be 0 or more, not -1" in done.stderr


def test_a_trait_from_traitlets_config_reaches_the_session(ip, tmp_path):
    config = {"iterations": "1", "trials": "1", "compile_baseline": "False",
              "provider": "'builtin'", "target": "'cpp'", "name": "'relu_run'"}
    for trait, value in config.items():
        ip.run_line_magic("config", f"KForgeMagics.{trait} = {value}")
    try:
        # the line's --trials beats the configured one
        ip.run_cell_magic("kforge", f"--out {tmp_path} --trials 2 --no-shape-check",
                          (PROBLEMS / "relu.py").read_text())
    finally:
        for trait in config:
            default = {"compile_baseline": "True", "name": "'_kforge'"}.get(trait, "None")
            ip.run_line_magic("config", f"KForgeMagics.{trait} = {default}")
    session = ip.user_ns["relu_run"]
    assert session.error is None and session.target.name == "cpp"
    assert session.budget.iterations == 1 and session.agents_config.provider == "builtin"
    assert session.options.baselines == ("eager",) and session.options.trials == 2


def test_percent_kforge_bench_parses_as_kforge_bench_does():
    from IPython.core.error import UsageError
    line = ["suite", "more.py", "--workers", "2", "--candidates", "mine", "--target", "cpp"]
    cli = vars(build_parser().parse_args(["bench", *line]))
    del cli["command"], cli["func"]
    assert vars(bench_parser().parse_args(line)) == cli
    with pytest.raises(UsageError, match="must be above 0"):     # an error, never sys.exit
        bench_parser().parse_args(["suite", "--workers", "0"])


def test_the_precisions_are_the_evaluators():
    from kforge_nb.evaluator.worker.correctness import POLICIES
    assert PRECISIONS == POLICIES


def test_the_library_takes_its_defaults_without_the_cli():
    imported = python("import sys, kforge_nb.session.config\n"
                      "print(sorted(m for m in sys.modules if m.startswith('kforge_nb.cli')))")
    assert imported.strip() == "[]"
    # and the schema alone pulls in neither torch nor IPython: `kforge --help` stays quick
    heavy = python("import sys, kforge_nb.options\n"
                   "print(sorted({'torch', 'IPython'} & set(sys.modules)))")
    assert heavy.strip() == "[]"


