"""`%%kforge` and `%kforge`: a thin IPython shell over the Session API.

    %load_ext kforge_nb
    %%kforge --target cpp --iterations 4          # the cell is the reference (KernelBench form,
    class Model(nn.Module): ...                   #  or any nn.Module plus --inputs EXPR)

    %kforge last | stop | eval CANDIDATE_VAR_OR_FILE | config

    %kforge resume kforge-runs/20261124-101800-relu-cpp    # go on with a saved run; or
    %%kforge --resume RUN_DIR                      # over the run's own reference (or a comment)

The session is bound to `_kforge` (or `--name`) in the notebook: `_kforge.accept()`, `.edit(text)`,
`.redirect(text)`, `.skip()`, `.stop()`, `.wait()`, `.best`, `.history`, `.export(path)`.
Defaults come from traitlets config (`c.KForgeMagics.target = "cpp"`), then from `kforge run`.

When the cell blocks: with `--mode auto` and no person at the frontend, the cell waits for the
session to end, so an executed notebook holds the whole run. "No person" is read off the kernel's
current execute request: nbclient, papermill and `jupyter nbconvert --execute` send
`allow_stdin=False` (they cannot answer input()); JupyterLab, Notebook and VS Code send True.
A terminal IPython (no kernel) also blocks in auto mode. `--block`/`--no-block`,
`c.KForgeMagics.block` or the environment variable KFORGE_BLOCK=1/0 override the detection.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, Enum, Float, Int, Unicode
from .cli import positive

SUBCOMMANDS = "last, stop, eval CANDIDATE_VAR_OR_FILE, resume RUN_DIR [FLAGS], config"
# trait name -> attribute of the `kforge run` namespace it sets
TRAITS = {"target": "target", "provider": "provider", "model": "model",
          "analysis_model": "analysis_model", "iterations": "iterations", "samples": "samples",
          "mode": "mode", "out": "out", "precision": "precision", "timeout": "timeout",
          "trials": "trials", "hint": "hint", "prompts": "prompts", "patience": "patience"}


@magics_class
class KForgeMagics(Magics):
    target = Unicode(None, allow_none=True, help="cpp, triton, cuda, metal or auto").tag(config=True)
    provider = Unicode(None, allow_none=True, help="anthropic, openai, replay, builtin or auto"
                       ).tag(config=True)
    model = Unicode(None, allow_none=True, help="generation model").tag(config=True)
    analysis_model = Unicode(None, allow_none=True, help="analysis model").tag(config=True)
    iterations = Int(None, allow_none=True, help="rounds per session").tag(config=True)
    samples = Int(None, allow_none=True, help="candidates per round").tag(config=True)
    mode = Enum(["auto", "review"], "auto", help="auto: accept every recommendation; review: "
                "wait for a decision").tag(config=True)
    out = Unicode(None, allow_none=True, help="artifacts folder").tag(config=True)
    precision = Unicode(None, allow_none=True, help="strict, tf32, bf16 or fp16").tag(config=True)
    timeout = Float(None, allow_none=True, help="seconds a candidate may take").tag(config=True)
    trials = Int(None, allow_none=True, help="correctness trials").tag(config=True)
    hint = Unicode(None, allow_none=True, help="added to every generation prompt").tag(config=True)
    prompts = Unicode(None, allow_none=True, help="folder of Jinja2 templates").tag(config=True)
    patience = Int(None, allow_none=True, help="rounds without improvement before stopping"
                   ).tag(config=True)
    compile_baseline = Bool(True, help="time torch.compile as a baseline (~30 s on a small CPU)"
                            ).tag(config=True)
    name = Unicode("_kforge", help="notebook variable the Session is bound to").tag(config=True)
    block = Bool(None, allow_none=True, help="wait for the session in the cell (None: detect)"
                 ).tag(config=True)

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self.session = None          # the last session started here
        self.widget = None           # its live view (at a frontend)
        self.report = None
        self.sessions: dict[str, object] = {}

    @magic_arguments()
    @argument("--target", help="cpp, triton, cuda, metal or auto (triton with a CUDA GPU, cpp "
              "otherwise)")
    @argument("--provider", help="anthropic, openai, replay, builtin or auto")
    @argument("--model", help="generation model")
    @argument("--analysis-model", help="analysis model (default: --model)")
    @argument("--analysis-provider", help="analysis provider (default: --provider)")
    @argument("--iterations", type=positive(int), help="rounds (kforge run's default: 8)")
    @argument("--samples", type=positive(int), help="candidates per round")
    @argument("--mode", choices=["auto", "review"], help="auto accepts every recommendation; "
              "review waits for Accept/Edit/Redirect/Skip/Stop")
    @argument("--hint", help="an instruction added to every generation prompt")
    @argument("--ban", action="append", metavar="REGEX", help="reject candidates matching REGEX")
    @argument("--require", action="append", metavar="REGEX", help="reject candidates not "
              "matching REGEX")
    @argument("--allow", action="append", metavar="OP", help="allow a torch op in ModelNew.forward")
    @argument("--aux", action="append", metavar="PATH", help="a file for every generation prompt")
    @argument("--from", dest="translate_from", metavar="RUN_OR_FILE", help="a verified kernel "
              "for another target to translate")
    @argument("--record", metavar="FILE", help="record every model call to FILE")
    @argument("--replay", metavar="FILE", help="replay a recording instead of calling a model")
    @argument("--prompts", metavar="DIR", help="Jinja2 templates overriding the built-in ones")
    @argument("--precision", help="strict (default), tf32, bf16 or fp16")
    @argument("--trials", type=positive(int), help="correctness trials")
    @argument("--timeout", type=positive(float), help="seconds a candidate may take")
    @argument("--wall-time", type=positive(float), help="stop after this many seconds")
    @argument("--max-tokens", type=positive(int), help="stop once this many tokens are used")
    @argument("--max-cost", type=positive(float), help="stop once this many USD are spent")
    @argument("--target-speedup", type=float, help="stop once the best beats eager this much")
    @argument("--patience", type=int, help="optimisation rounds without improvement")
    @argument("--no-compile-baseline", action="store_true", default=None,
              help="skip the torch.compile baseline (~30 s on a small CPU)")
    @argument("--no-shape-check", action="store_true", default=None,
              help="skip the extra trial at another batch size")
    @argument("--out", help="artifacts folder (default kforge-runs)")
    @argument("--name", help="variable to bind the Session to (default _kforge)")
    @argument("--resume", metavar="RUN_DIR", help="go on with the run saved in RUN_DIR "
              "(interrupted by a kernel restart, or ended) from its next iteration")
    @argument("--inputs", metavar="EXPR", help="forward arguments from the notebook, for a cell "
              "that defines an nn.Module but no get_inputs()")
    @argument("--init-inputs", metavar="EXPR", help="constructor arguments from the notebook")
    @argument("--module", metavar="CLASS", help="which nn.Module class of the cell to optimise")
    @argument("--block", action=argparse.BooleanOptionalAction, default=None,
              help="wait in the cell until the session ends (default: only when headless)")
    @line_cell_magic
    def kforge(self, line: str, cell: str | None = None):
        """Generate, judge and improve kernels for the PyTorch module in this cell.

        Cell magic: `%%kforge [flags]` over a reference in KernelBench form (Model, get_inputs,
        get_init_inputs), or any nn.Module class with --inputs EXPR. Line magic:
        `%kforge last` (show the last run again), `%kforge stop`, `%kforge eval
        CANDIDATE_VAR_OR_FILE` (judge your own ModelNew against the last cell's reference),
        `%kforge config` (the defaults in force).
        """
        if cell is None:
            return self._subcommand(line)
        return self._run(line, cell)

    # --- %%kforge -----------------------------------------------------------------------------
    def _run(self, line: str, cell: str):
        from .problem import ProblemError
        from .providers import ProviderError, resolve
        from .session.config import session_from_args
        from .targets import UnknownTarget
        from .ui.cell import CellError, problem_from_cell
        args = self._arguments(line)
        previous = self.sessions.get(args.name)
        if previous is not None and previous.running:
            # nothing lost: the running session goes on until it is stopped on purpose
            raise UsageError(
                f"%%kforge: a session is still running as {args.name} ({previous.problem.name} "
                f"on {previous.target.name}). Stop it first with `%kforge stop` (or "
                f"{args.name}.stop()), or start this one beside it with --name OTHER.")
        try:
            if args.resume:
                session = self._resumed(args, cell)
            else:
                if not args.replay:
                    resolve(args.provider)
                if args.replay and not Path(args.replay).is_file():
                    raise FileNotFoundError(f"--replay {args.replay!r}: no such recording")
                problem = problem_from_cell(cell, self.shell.user_ns, args.out, args.inputs,
                                            args.init_inputs, args.module)
                session = session_from_args(problem, args)
        except (CellError, ProblemError, UnknownTarget, ProviderError, FileNotFoundError,
                ValueError) as err:
            raise UsageError(f"%%kforge: {err}") from None
        self._show(session)
        self.shell.user_ns[args.name] = session
        self.sessions[args.name] = self.session = session
        session.start()
        if self._should_block(args):
            self._wait(session)
        elif args.mode == "review" and not interactive_frontend(self.shell):
            print(f"kforge: review mode and no one at a frontend: decide each recommendation "
                  f"with {args.name}.accept(), .edit(text), .redirect(text), .skip() or .stop()",
                  file=sys.stderr)

    def _resumed(self, args, cell: str):
        """The saved run of --resume; a cell that is not empty must hold the run's reference."""
        from .session.config import resume_from_args
        from .ui.cell import problem_from_cell
        session = resume_from_args(args, mode=args.mode)    # this cell's mode: auto unless asked
        if any(line.strip() and not line.lstrip().startswith("#") for line in cell.splitlines()):
            problem = problem_from_cell(cell, self.shell.user_ns, args.out, args.inputs,
                                        args.init_inputs, args.module)
            if problem.source.strip() != session.problem.source.strip():
                raise ValueError(f"this cell's module differs from the reference of "
                                 f"{args.resume}: --resume goes on with the run's own "
                                 f"reference; empty the cell (or start a new run without "
                                 f"--resume)")
        return session

    def _arguments(self, line: str) -> argparse.Namespace:
        """kforge run's defaults, then traitlets config, then this line's flags."""
        from .session.config import run_defaults
        try:
            # posix splitting: --hint "use vector loads" arrives without its quotes
            given = self.kforge.parser.parse_args(arg_split(line, posix=True))
        except UsageError as err:
            raise UsageError(f"%%kforge: {err}. The flags mirror `kforge run` (see `%%kforge?`); "
                             f"line-magic subcommands are: {SUBCOMMANDS}.") from None
        args = run_defaults()
        for trait, attr in TRAITS.items():
            if getattr(self, trait) is not None:
                setattr(args, attr, getattr(self, trait))
        args.no_compile_baseline = not self.compile_baseline
        args.name, args.block = self.name, self.block
        for key, value in vars(given).items():
            if value is not None or not hasattr(args, key):
                setattr(args, key, value)
        if not args.name.isidentifier():
            raise UsageError(f"%%kforge: --name {args.name!r} is not a Python identifier")
        return args

    def _show(self, session) -> None:
        """At a frontend: the live widget while the session runs, then the report that a saved
        notebook keeps (see ui/report.py ReportView). Headless (nbclient, papermill): the
        report alone. In a terminal: progress lines."""
        from .ui.report import ReportView
        self.widget = None
        self.report = ReportView(session, self.shell)
        if not in_kernel(self.shell):
            from .ui.terminal import Progress
            session.subscribe(Progress(sys.stdout))
            return
        if interactive_frontend(self.shell):
            self.widget = live_widget(session)
        self.report.show(self.widget)

    def _should_block(self, args) -> bool:
        if args.block is not None:
            return bool(args.block)
        env = os.environ.get("KFORGE_BLOCK", "").strip().lower()
        if env:
            return env not in ("0", "false", "no", "off")
        return args.mode == "auto" and not interactive_frontend(self.shell)

    def _wait(self, session) -> None:
        try:
            while session.running:
                session.wait(0.5)
        except KeyboardInterrupt:
            session.stop()
            print("kforge: interrupted; stopping the session after the current step",
                  file=sys.stderr)
            session.wait()
        if not in_kernel(self.shell):
            from .ui.fallback import to_text
            from .ui.report import run_record
            print(f"{to_text(run_record(session))}\n{session.history!r}")
        if session.error:
            print(f"kforge: {session.error}", file=sys.stderr)

    # --- %kforge SUBCOMMAND -----------------------------------------------------------------
    def _subcommand(self, line: str):
        command, _, rest = line.strip().partition(" ")
        handler = {"last": self._last, "stop": self._stop, "eval": self._eval,
                   "config": self._config, "resume": self._resume}.get(command)
        if handler is None:
            raise UsageError(f"%kforge: unknown subcommand {command!r}; use one of: "
                             f"{SUBCOMMANDS}. To start a session, use the cell magic %%kforge "
                             f"over a cell holding the reference module.")
        return handler(rest.strip())

    def _need_session(self, what: str):
        if self.session is None:
            raise UsageError(f"%kforge {what}: no session yet; run a %%kforge cell first")
        return self.session

    def _last(self, _rest: str) -> None:
        from .ui.fallback import to_text
        from .ui.report import ReportView, run_record
        session = self._need_session("last")
        if in_kernel(self.shell):     # the live view while it runs, and the report
            live = session.running and interactive_frontend(self.shell)
            ReportView(session, self.shell).show(self.widget if live else None)
        else:
            print(f"{to_text(run_record(session))}\n{session.history!r}")

    def _resume(self, rest: str) -> None:
        if not rest:
            raise UsageError("%kforge resume: name a run folder (`kforge runs` lists them)")
        return self._run(f"--resume {rest}", "")

    def _stop(self, _rest: str) -> None:
        session = self._need_session("stop")
        if not session.running:
            print(f"kforge: the session has already finished ({session.finish_reason})")
            return
        session.stop()
        print("kforge: stopping after the current step (an evaluation in flight finishes first)")

    def _eval(self, rest: str) -> None:
        session = self._need_session("eval")
        if not rest:
            raise UsageError("%kforge eval: name a variable holding candidate code, or a .py file")
        value = self.shell.user_ns.get(rest)
        if isinstance(value, str) and "ModelNew" in value:
            code = value
        elif Path(rest).is_file():
            code = Path(rest).read_text()
        elif isinstance(value, (str, Path)) and Path(value).is_file():
            code = Path(value).read_text()
        else:
            raise UsageError(f"%kforge eval: {rest!r} is neither a notebook variable holding "
                             f"candidate code (a string defining ModelNew) nor a file")
        attempt = session.evaluate_code(code, label="manual")
        print(f"kforge eval (against {session.problem.name} on {session.target.name}): "
              f"{attempt.result.summary()}\nnow {self.name_of(session)}.history[-1]")

    def name_of(self, session) -> str:
        return next((n for n, s in self.sessions.items() if s is session), self.name)

    def _config(self, _rest: str) -> None:
        from .session.config import run_defaults
        defaults = vars(run_defaults())
        rows = []
        for trait in [*TRAITS, "compile_baseline", "name", "block"]:
            value = getattr(self, trait)
            default = defaults.get(TRAITS.get(trait, ""), "detect" if trait == "block" else "")
            rows.append(f"  c.KForgeMagics.{trait:<16} = {value!r:<14}"
                        + (f"  (None: kforge run's default, {default!r})" if value is None else ""))
        print("kforge magic configuration (set in ipython_config.py or with %config "
              "KForgeMagics.NAME = VALUE; a flag on the %%kforge line wins):\n" + "\n".join(rows))


def live_widget(session):
    """The session's live view, or None (and why) where anywidget is missing."""
    try:
        from .ui.widget import RunWidget
    except ImportError as err:
        print(f"kforge: no live view ({err}); pip install 'kforge-nb[notebook]'. The report "
              f"below still follows the run.", file=sys.stderr)
        return None
    return RunWidget(session)


def in_kernel(shell) -> bool:
    return getattr(shell, "kernel", None) is not None


def interactive_frontend(shell) -> bool:
    """Whether a person is at the frontend: the execute request allows stdin (see the module
    docstring). Headless executors and a terminal shell answer False."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    try:
        parent = kernel.get_parent()
    except Exception:
        return True
    return bool((parent or {}).get("content", {}).get("allow_stdin", True))
