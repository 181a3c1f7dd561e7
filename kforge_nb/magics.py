"""`%%kforge` and `%kforge`: a thin IPython shell over the Session API.

    %load_ext kforge_nb
    %%kforge --target cpp --iterations 4          # the cell is the reference (KernelBench form,
    class Model(nn.Module): ...                   #  or any nn.Module plus --inputs EXPR)

    %kforge last | stop | eval CANDIDATE_VAR_OR_FILE | config

    %kforge resume kforge-runs/20261124-101800-relu-cpp    # go on with a saved run; or
    %%kforge --resume RUN_DIR                      # over the run's own reference (or a comment)

The session is bound to `_kforge` (or `--name`) in the notebook: `_kforge.accept()`, `.edit(text)`,
`.redirect(text)`, `.skip()`, `.stop()`, `.wait()`, `.best`, `.history`, `.export(path)`.
Defaults come from traitlets config (`c.KForgeMagics.target = "cpp"`), then from `kforge run`;
the flags and the traits are both made from the one schema of options (options.py).

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
from IPython.utils.process import arg_split
from traitlets import Bool, Enum, Float, Int, Unicode

from . import options
from .options import MAGIC, RUN

SUBCOMMANDS = ("last, stop, eval CANDIDATE_VAR_OR_FILE, resume RUN_DIR [FLAGS], config, "
               "bench DIR [FLAGS]")


# --- traitlets: c.KForgeMagics.NAME for each option of the schema marked trait=True -----------
CONFIGURABLE = tuple(o for o in options.options(MAGIC) if o.trait)


def trait_name(option) -> str:
    # a --no-X switch is configured the positive way: c.KForgeMagics.compile_baseline = False
    return option.dest.removeprefix("no_") if option.action == "store_true" else option.dest


def trait_value(option, value):
    """The namespace value that a trait's value stands for."""
    return not value if option.action == "store_true" else value


def make_trait(option):
    text = option.help_for(MAGIC)
    if option.action == "store_true":
        return Bool(True, help=f"False is {option.flag}: {text}").tag(config=True)
    # None defers to kforge run's default (`%kforge config` shows it); the magic's own options
    # have no kforge run default, so they default here
    default = None if RUN in option.commands else option.default_for(MAGIC)
    if option.action is argparse.BooleanOptionalAction:
        trait = Bool(default, allow_none=True, help=text)
    elif option.choices:
        trait = Enum(option.choices, default, allow_none=default is None, help=text)
    else:
        kind = {str: Unicode, int: Int, float: Float}[getattr(option.type, "kind", str)]
        trait = kind(default, allow_none=default is None, help=text)
    return trait.tag(config=True)


# traitlets reads traits off the class body: a base class holds the generated ones
ConfigurableMagics = type("ConfigurableMagics", (Magics,),
                          {trait_name(o): make_trait(o) for o in CONFIGURABLE})


@magics_class
class KForgeMagics(ConfigurableMagics):
    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self.session = None          # the last session started here
        self.widget = None           # its live view (at a frontend)
        self.report = None           # its one output in the cell (ui/report.py RunDisplay)
        self.sessions: dict[str, object] = {}

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

    # as IPython's @magic_arguments would: the parser on the function, its help for `%%kforge?`
    kforge.parser = options.magic_parser(description=kforge.__doc__)
    kforge.__doc__ = kforge.parser.format_help()

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
        if args.whole_model:
            return self._whole_model(args, cell)
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
            return
        self._interruptible(session)
        if args.mode == "review" and not interactive_frontend(self.shell):
            self._tell(f"kforge: review mode and no one at a frontend: decide each "
                       f"recommendation with {args.name}.accept(), .edit(text), .redirect(text), "
                       f".skip() or .stop()")

    def _whole_model(self, args, cell: str):
        """`%%kforge --whole-model`: the cell's Model split into parts, each optimised, the
        recomposed model judged end to end (as `kforge model`); bound to --name. The parts
        table is drawn as soon as the model is decomposed; `NAME.skip(part)` leaves a part
        as written if its session has not started; `NAME.stop()` ends the run early. (_run
        has refused a name whose session is still running.)"""
        from .model import ModelError
        from .problem import ProblemError
        from .providers import ProviderError, resolve
        from .session.config import model_session_from_args
        from .targets import UnknownTarget
        from .ui.cell import CellError, problem_from_cell
        unsupported = [flag for flag, on in (("--resume", args.resume), ("--replay", args.replay),
                                             ("--record", args.record),
                                             ("--mode review", args.mode == "review")) if on]
        if unsupported:
            raise UsageError(f"%%kforge --whole-model: {', '.join(unsupported)} works on one "
                             "module's session; run a part's file with %%kforge for that")
        try:
            resolve(args.provider)
            problem = problem_from_cell(cell, self.shell.user_ns, args.out, args.inputs,
                                        args.init_inputs, args.module)
            session = model_session_from_args(problem, args)
        except (CellError, ProblemError, UnknownTarget, ProviderError, ValueError) as err:
            raise UsageError(f"%%kforge: {err}") from None
        if in_kernel(self.shell):
            from .ui.model_view import NotebookModelView
            session.subscribe(NotebookModelView(session))
        else:
            from .ui.model_view import TerminalModelProgress
            session.subscribe(TerminalModelProgress(sys.stdout))
        self.shell.user_ns[args.name] = session
        self.sessions[args.name] = session     # a second cell with the same --name is refused
        if args.list_parts:
            try:
                session.decompose()
            except ModelError as err:
                raise UsageError(f"%%kforge: {err}") from None
            return None
        session.start()
        if self._should_block(args):
            from .ui.model_view import summary_text
            self._wait_for(session, "stopping after the part under way",
                           lambda: summary_text(session.summary()))
        else:
            self._interruptible(session)
        return None

    def _interruptible(self, run) -> None:
        """Kernel > Interrupt stops this run once the cell has returned (ui/interrupt.py), as
        Ctrl-C stops a blocking one."""
        if in_kernel(self.shell):
            from .ui.interrupt import INTERRUPTS
            INTERRUPTS.watch(self.shell.kernel, run)

    def _wait_for(self, run, stopping: str, final_text) -> None:
        """Block the cell until a model run or a bench ends (Ctrl-C stops it, then waits);
        in a terminal shell print its final table."""
        try:
            run.wait()
        except KeyboardInterrupt:
            run.stop()
            print(f"kforge: interrupted; {stopping}", file=sys.stderr)
            run.wait()
        if not in_kernel(self.shell):
            print(final_text())
        if run.error:       # a notebook's report already heads with it: no red stderr box
            self._tell(f"kforge: {run.error}")

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
        try:
            # posix splitting: --hint "use vector loads" arrives without its quotes
            given = self.kforge.parser.parse_args(arg_split(line, posix=True))
        except UsageError as err:
            raise UsageError(f"%%kforge: {err}. The flags mirror `kforge run` (see `%%kforge?`); "
                             f"line-magic subcommands are: {SUBCOMMANDS}.") from None
        args = options.defaults(MAGIC)
        for option in CONFIGURABLE:
            value = getattr(self, trait_name(option))
            if value is not None:
                setattr(args, option.dest, trait_value(option, value))
        for key, value in vars(given).items():
            if value is not None:
                setattr(args, key, value)
        if not args.name.isidentifier():
            raise UsageError(f"%%kforge: --name {args.name!r} is not a Python identifier")
        return args

    def _show(self, session) -> None:
        """At a frontend: the live widget while the session runs, replaced by the report that a
        saved notebook keeps when it ends (see ui/report.py RunDisplay). Headless (nbclient,
        papermill): the report alone. In a terminal: progress lines."""
        from .ui.report import RunDisplay
        self.widget = None
        self.report = RunDisplay(session, self.shell)
        if not in_kernel(self.shell):
            from .ui.terminal import Progress
            session.subscribe(Progress(sys.stdout))
            return
        headless = not interactive_frontend(self.shell)
        if not headless:
            self.widget = live_widget(session)
        self.report.show(self.widget, headless=headless)

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
            self._tell(f"kforge: {session.error}")

    def _tell(self, line: str) -> None:
        """A line for the person: stderr in a terminal; stdout in a notebook, beside the report
        that already says it (a stderr box reads as the magic's own failure)."""
        print(line, file=sys.stdout if in_kernel(self.shell) else sys.stderr)

    # --- %kforge SUBCOMMAND -----------------------------------------------------------------
    def _subcommand(self, line: str):
        command, _, rest = line.strip().partition(" ")
        handler = {"last": self._last, "stop": self._stop, "eval": self._eval,
                   "config": self._config, "resume": self._resume,
                   "bench": self._bench}.get(command)
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
        from .ui.report import RunDisplay, run_record
        session = self._need_session("last")
        if in_kernel(self.shell):     # the live view while it runs, else the report
            live = session.running and interactive_frontend(self.shell)
            RunDisplay(session, self.shell).show(self.widget if live else None)
        else:
            print(f"{to_text(run_record(session))}\n{session.history!r}")

    def _resume(self, rest: str) -> None:
        if not rest:
            raise UsageError("%kforge resume: name a run folder (`kforge runs` lists them)")
        return self._run(f"--resume {rest}", "")

    def _bench(self, rest: str):
        """`%kforge bench DIR [kforge bench's flags]`: the suite with a progress widget, then
        its table and a speedup plot; bound to `_kforge_bench` (.wait(), .stop(), .report()).
        It blocks the cell when headless, as %%kforge does."""
        from .bench.config import bench_from_args
        from .executors import ExecutorError
        from .options import bench_parser
        previous = self.shell.user_ns.get("_kforge_bench")
        if getattr(previous, "running", False):
            raise UsageError("%kforge bench: a bench is still running as _kforge_bench; wait "
                             "for it (_kforge_bench.wait()) or stop it (_kforge_bench.stop())")
        try:
            args = bench_parser("%kforge bench").parse_args(arg_split(rest, posix=True))
            bench = bench_from_args(args)
        except (UsageError, ValueError, FileNotFoundError, ExecutorError) as err:
            raise UsageError(f"%kforge bench: {err}") from None
        if in_kernel(self.shell):
            from .ui.bench_views import NotebookView
            view = NotebookView(live=interactive_frontend(self.shell))
            view.show()
        else:
            from .ui.bench_views import TerminalBar
            view = TerminalBar(sys.stdout)
        self.shell.user_ns["_kforge_bench"] = bench.start(view)
        if self._should_block(argparse.Namespace(block=None, mode="auto")):
            from .bench.report import table
            self._wait_for(bench, "stopping the bench after the evaluations under way "
                           "(finished problems are saved)", lambda: table(bench.rows()))
        else:
            self._interruptible(bench)
        return None

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
        defaults = vars(options.defaults(RUN))
        rows = []
        for option in CONFIGURABLE:
            trait = trait_name(option)
            value = getattr(self, trait)
            default = defaults.get(option.dest, "detect")    # only --block: no run default
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
