"""The options of `kforge eval | run | bench | model` and of the `%%kforge` magic, written once.

OPTIONS is the schema: one record per flag, naming the commands that take it. Everything else
is made from it: the argparse flags of the CLI (`add_options`), the magic's parsers
(`magic_parser`, `bench_parser`), its traitlets (magics.py, from the records with trait=True)
and `defaults(command)`, the defaults the library reads without parsing a command line.

Nothing heavy is imported here: `kforge --help` and `%load_ext kforge_nb` need no torch.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .baselines import MODES as BASELINES
from .knowledge import folder_argument

EVAL, RUN, BENCH, MODEL, MAGIC = "eval", "run", "bench", "model", "magic"   # MAGIC: %%kforge
COMMANDS = (EVAL, RUN, BENCH, MODEL, MAGIC)

JUDGING = frozenset(COMMANDS)               # how candidates are evaluated: every command
AGENT = frozenset({RUN, BENCH, MODEL, MAGIC})   # the agent loop and its budget (per part in
                                                # a whole model)
WHOLE_MODEL = frozenset({MODEL, MAGIC})     # `kforge model` and `%%kforge --whole-model`
SESSION = frozenset({RUN, MAGIC})           # one problem's session, its recordings and resume

# the evaluator's precision policies (evaluator/worker/correctness.py POLICIES, kept equal by
# tests/test_options.py), named here so that parsing a command line needs no torch
PRECISIONS = ("strict", "tf32", "bf16", "fp16")
DEFAULT_PRECISION = "strict"              # full fp32, the reference's own precision


def positive(kind):
    """An argparse type: a number above zero, said plainly when it is not (exit 2)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    parse.kind = kind                       # the value's type, for the magic's traitlets
    return parse


def temperatures(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated sampling temperatures, each from 0 to 2."""
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers "
                                         "(e.g. 1.0,0.6,0.2)") from None
    wrong = [t for t in values if not 0 <= t <= 2]
    if wrong:
        raise argparse.ArgumentTypeError(f"a temperature lies from 0 to 2, not {wrong[0]:g}")
    return values


def at_least_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


at_least_zero.kind = int


def part_ids(text: str) -> list[int]:
    """`0,2,5` -> [0, 2, 5]."""
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of part numbers such as "
                                         "0,2,5") from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give part numbers 0 or more, e.g. 0,2,5")
    return ids


@dataclass(frozen=True)
class Option:
    """One flag. `help` may say "{default}": each command's own default fills it in."""
    flag: str
    help: str
    commands: frozenset[str]
    type: Callable[[str], Any] | None = None
    default: Any = None
    action: str | type[argparse.Action] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    dest: str = ""                                  # "": the flag's name, --wall-time -> wall_time
    command_defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)  # {BENCH: 3}
    trait: bool = False                             # configurable as c.KForgeMagics.NAME

    def __post_init__(self):
        if not self.dest:
            object.__setattr__(self, "dest", self.flag.lstrip("-").replace("-", "_"))

    def default_for(self, command: str) -> Any:
        if self.action == "store_true":
            return False
        if self.action == "append":
            return []                       # a fresh list for every parser and every caller
        return self.command_defaults.get(command, self.default)

    def help_for(self, command: str) -> str:
        return self.help.format(default=self.default_for(command))

    def add_to(self, parser: argparse.ArgumentParser, command: str) -> None:
        # the magic's flags default to None: what its line leaves out comes from traitlets
        # config, then from defaults(MAGIC) (see KForgeMagics._arguments)
        default = None if command == MAGIC else self.default_for(command)
        given = dict(type=self.type, action=self.action, choices=self.choices,
                     metavar=self.metavar)
        parser.add_argument(self.flag, dest=self.dest, default=default,
                            help=self.help_for(command),
                            **{key: value for key, value in given.items() if value is not None})


OPTIONS: tuple[Option, ...] = (
    Option("--resume", "go on with the run saved in RUN_DIR (interrupted, or ended): its problem "
           "and options, from its next iteration; --iterations, --wall-time, --max-tokens, "
           "--max-cost, --patience raise its budget", SESSION, metavar="RUN_DIR"),
    Option("--provider", "anthropic, openai, replay, builtin or auto (default {default}; auto: "
           "anthropic with ANTHROPIC_API_KEY, builtin otherwise)", AGENT, default="auto",
           command_defaults={BENCH: "builtin"}, trait=True),
    Option("--model", "generation model (default: the provider's)", AGENT, trait=True),
    Option("--analysis-model", "analysis model (default: --model)", AGENT, trait=True),
    Option("--analysis-provider", "analysis provider (default: --provider)", AGENT),
    Option("--iterations", "rounds (default {default})", AGENT, type=positive(int), default=8,
           command_defaults={BENCH: 3}, trait=True),
    Option("--samples", "candidates per round, evaluated concurrently; the best is kept "
           "(default {default})", AGENT, type=positive(int), default=1, trait=True),
    Option("--search", "which candidates a round expands: greedy (the best), beam (the best of "
           "each of the --beam best lineages) or evolve (--beam parents by tournament, with "
           "changes that worked in one lineage tried on the others) (default {default})", AGENT,
           choices=("greedy", "beam", "evolve"), default="greedy", trait=True),
    Option("--beam", "parents a round expands for --search beam or evolve, each with "
           "--samples children (default 2)", AGENT, type=positive(int), metavar="K"),
    Option("--confirm", "before naming the best, judge the N fastest candidates again, 3 times "
           "each side by side, and keep the highest median speedup vs eager (default 3 for "
           "beam and evolve, 0 for greedy; 0 turns it off)", AGENT, type=at_least_zero,
           metavar="N"),
    Option("--from", "a verified kernel (file, or run folder) for another target to translate",
           SESSION, dest="translate_from", metavar="RUN_OR_FILE"),
    Option("--review", "ask on the terminal before applying each recommendation",
           frozenset({RUN}), action="store_true"),
    Option("--record", "record every model call to FILE (JSONL)", SESSION, metavar="FILE"),
    Option("--replay", "replay a recording instead of calling a model", SESSION, metavar="FILE"),
    Option("--aux", "a file to include in generation prompts: PATH for every iteration, PATH@0,2 "
           "for iterations 0 and 2 (repeatable)", SESSION, action="append", metavar="PATH"),
    Option("--hint", "an instruction added to every generation prompt", AGENT, default="",
           trait=True),
    Option("--knowledge", "a folder of knowledge notes (Markdown with front matter) that join "
           "the built-in ones; a prompt gets the few that fit its target, ops and bottleneck "
           "(repeatable)", AGENT, type=folder_argument, action="append", metavar="DIR"),
    Option("--prompts", "folder of Jinja2 templates overriding the built-in ones (generate.j2, "
           "generate.iter3.j2, analyse.j2, ...)", AGENT, metavar="DIR", trait=True),
    Option("--no-images", "send the analysis agent the profile as text only, without its "
           "pictures (kernel timeline, roofline)", AGENT, action="store_true"),
    Option("--no-ncu", "send the analysis agent no Nsight Compute counters (read where ncu is "
           "on the PATH, for candidates faster than their parent; ~13 s each on an H100)",
           AGENT, action="store_true"),
    Option("--temperatures", "the sampling temperature of each of a round's samples for an "
           "OpenAI-compatible model, e.g. 1.0,0.6,0.2 (cycled); default with several samples: "
           "from 1.0 down to 0.2, with one: the model's own (Anthropic's API takes none)",
           AGENT, type=temperatures, metavar="T1,T2,..."),
    Option("--wall-time", "stop after this many seconds", AGENT, type=positive(float)),
    Option("--max-tokens", "stop once this many tokens are used", AGENT, type=positive(int)),
    Option("--max-cost", "stop once this many USD are spent", AGENT, type=positive(float)),
    Option("--target-speedup", "stop once the best is this much faster than eager", AGENT,
           type=positive(float)),
    Option("--patience", "stop after this many optimisation rounds without improvement "
           "(default {default})", AGENT, type=at_least_zero, default=3, trait=True),

    # the bench's own
    Option("--candidates", "evaluate the candidates in DIR (same relative paths/names as the "
           "problems) instead of running the agent", frozenset({BENCH}), metavar="DIR"),
    Option("--workers", "evaluation worker processes; one GPU each when several are present "
           "(default {default})", frozenset({BENCH}), type=positive(int), default=1,
           metavar="N"),
    Option("--cluster", "a Dask scheduler, tcp://HOST:PORT: candidates are evaluated on its "
           "workers", frozenset({BENCH}), metavar="ADDRESS"),
    Option("--restart", "start the bench over instead of resuming its results",
           frozenset({BENCH}), action="store_true"),

    # a whole model's own
    Option("--whole-model", "treat the cell's Model as a whole model: split it into parts, "
           "optimise each, recompose and judge it end to end (as `kforge model`)",
           frozenset({MAGIC}), action="store_true"),
    Option("--parts", "optimise only these parts, e.g. 0,2,5 (see --list; default: every "
           "part with compute, biggest time share first)", WHOLE_MODEL, type=part_ids,
           metavar="IDS"),
    Option("--top", "optimise only the K parts with the biggest share of the model's time",
           WHOLE_MODEL, type=positive(int), metavar="K"),
    Option("--use", "which kernels the recomposed model takes: faster (correct and faster than "
           "the part's own eager code; default) or correct (every correct kernel)",
           WHOLE_MODEL, choices=("faster", "correct"), default="faster"),
    Option("--list", "decompose the model, show its parts (time share, ops, files) and stop",
           WHOLE_MODEL, action="store_true", dest="list_parts"),

    # --json says something else per command
    Option("--json", "print one JSON object (the Result)", frozenset({EVAL}), action="store_true"),
    Option("--as-judged", "judge with the flags the run that made the candidate used (its "
           "'# kforge-judged-with:' line: --target, --precision, --allow only)",
           frozenset({EVAL}), action="store_true"),
    Option("--json", "print a JSON summary at the end", frozenset({RUN}), action="store_true"),
    Option("--json", "print one JSON object: the bench's folder, its totals (correctness, "
           "fast_p, geomeans) and rows", frozenset({BENCH}), action="store_true"),
    Option("--json", "print one JSON object: the parts (state, speedups, whether the "
           "recomposed model uses their kernel) and end_to_end", frozenset({MODEL}),
           action="store_true"),

    # how candidates are judged
    Option("--target", "cpp, triton, cuda, metal or auto (triton with a CUDA GPU, cpp otherwise)",
           JUDGING, default="auto", trait=True),
    Option("--trials", "correctness trials, each with fresh random inputs (default {default})",
           JUDGING, type=positive(int), default=5, trait=True),
    Option("--timeout", "seconds a candidate may take (default {default:g})", JUDGING,
           type=positive(float), default=180.0, trait=True),
    Option("--out", "artifacts folder (default {default})", JUDGING, default="kforge-runs",
           trait=True),
    Option("--precision", "precision policy: {default} fp32 by default; tf32/bf16/fp16 loosen "
           "tolerances and allow casts", JUDGING, choices=PRECISIONS, default=DEFAULT_PRECISION,
           trait=True),
    Option("--ban", "reject candidates whose source matches REGEX (repeatable)", JUDGING,
           action="append", metavar="REGEX"),
    Option("--require", "reject candidates whose source does not match REGEX (repeatable)",
           JUDGING, action="append", metavar="REGEX"),
    Option("--allow", "allow a torch op in ModelNew.forward, e.g. conv2d (repeatable); '*' allows "
           "any and requires no kernel of the candidate's own (baselines, sweeps)", JUDGING,
           action="append", metavar="OP"),
    Option("--measure", "your own measurement: FILE.py defines measure(model, inputs) -> "
           "dict[str, float], run on the reference and on each correct candidate", JUDGING,
           metavar="FILE"),
    Option("--objective", "rank correct candidates by this key of your --measure hook: NAME, "
           "NAME:max (the default) or NAME:min", JUDGING, metavar="NAME"),
    Option("--no-sandbox", "run candidates with your environment, network and files (the verdict "
           "says so): for kernels that need something the sandbox denies", JUDGING,
           action="store_true"),
    # a trait as compile_baseline = False (see magics.py)
    Option("--no-compile-baseline", "skip timing torch.compile (its first compile takes ~30 s on "
           "a small CPU)", JUDGING, action="store_true", trait=True),
    Option("--baseline", "what 'vs compile' is timed against: compile (torch.compile's default "
           "mode) or max-autotune (torch.compile(mode=\"max-autotune\"), what a user picks for "
           "the fastest compiled model; minutes of compiling on a CPU) (default {default})",
           JUDGING, choices=tuple(BASELINES), default="compile", trait=True),
    Option("--no-shape-check", "skip the extra trial at another batch size", JUDGING,
           action="store_true"),

    # the magic's own
    Option("--mode", "auto accepts every recommendation; review waits for "
           "Accept/Edit/Redirect/Skip/Stop (default {default})", frozenset({MAGIC}),
           choices=("auto", "review"), default="auto", trait=True),
    Option("--name", "variable to bind the Session to (default {default})", frozenset({MAGIC}),
           default="_kforge", trait=True),
    Option("--inputs", "forward arguments from the notebook, for a cell that defines an "
           "nn.Module but no get_inputs()", frozenset({MAGIC}), metavar="EXPR"),
    Option("--init-inputs", "constructor arguments from the notebook", frozenset({MAGIC}),
           metavar="EXPR"),
    Option("--module", "which nn.Module class of the cell to optimise", frozenset({MAGIC}),
           metavar="CLASS"),
    Option("--block", "wait in the cell until the session ends (default: only when headless)",
           frozenset({MAGIC}), action=argparse.BooleanOptionalAction, trait=True),
)


def options(command: str) -> tuple[Option, ...]:
    """The records of `command`, in the order its --help lists them."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    return tuple(o for o in OPTIONS if command in o.commands)


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the flags of `command` (eval, run, bench, model or magic) to `parser`."""
    for option in options(command):
        option.add_to(parser, command)


def defaults(command: str) -> argparse.Namespace:
    """Every option of `command` at its default: what a line without flags parses to (for the
    magic, what its line's None values fall back to)."""
    return argparse.Namespace(**{o.dest: o.default_for(command) for o in options(command)})


BENCH_SUMMARY = ("the agent (or the evaluator on given candidates) over a suite of problems: "
                 "one table with fast_p, CSV and JSON results, resumable")


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """`kforge bench` and `%kforge bench`: the problems, then the bench's flags."""
    parser.add_argument("problems", nargs="+", help="problem files or folders of them")
    add_options(parser, BENCH)


def magic_parser(description: str | None = None) -> argparse.ArgumentParser:
    """`%%kforge [flags]`: a bad line raises IPython's UsageError instead of exiting."""
    from IPython.core.magic_arguments import MagicArgumentParser
    parser = MagicArgumentParser(prog="kforge", description=description)
    add_options(parser, MAGIC)
    return parser


def bench_parser(prog: str = "kforge bench") -> argparse.ArgumentParser:
    """`%kforge bench DIR [flags]`: `kforge bench`'s arguments and defaults; a bad line raises
    IPython's UsageError instead of exiting."""
    from IPython.core.magic_arguments import MagicArgumentParser
    parser = MagicArgumentParser(prog=prog, description=BENCH_SUMMARY)
    add_bench_arguments(parser)
    return parser
