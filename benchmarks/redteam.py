"""Red-team table: every adversarial candidate of tests/adversarial through `kforge eval`.

    python benchmarks/redteam.py [--only SUBSTRING] [--as-user 65534] [--json rows.json]

Each row is judged by the real CLI in a subprocess (`kforge eval REF CAND --json`), with a fake
ANTHROPIC_API_KEY in its environment, and printed as

    class | candidate | verdict (state + rules) | expected | OK?

The rows come from the test modules, never copied: every exploit table (EXPLOITS, a dict of
test_exploits.Case) and every list of legitimate kernels (RUNS_HERE: expected `correct`) of a
tests/adversarial/test_*.py module, and the trust-boundary attacks of test_trust_boundary.py
(ATTACKS). A row is also not OK when the
fake key turns up in any file of its run, or the parent wrote the candidate's key file.

`--as-user UID` runs each CLI as that unprivileged uid (and its gid), the way a user without
root would run kforge: `unshare --mount --propagation private` gives the command a mount
namespace of its own, in which /root/.pyenv (where this interpreter lives; /root is mode 700)
is bind-mounted aside, a mode-755 tmpfs is mounted on /root and the bind is moved back onto
/root/.pyenv; then `setpriv --reuid=UID --regid=UID --clear-groups` drops root. HOME,
KFORGE_CACHE and --out are in a temporary folder owned by that uid. Needs root to start.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KEY_NAME = "ANTHROPIC_API_KEY"


@dataclass
class Row:
    kind: str                   # exploit | legitimate | trust-boundary
    name: str
    problem: str
    candidate: str
    target: str
    expected_states: tuple[str, ...]
    expected_rules: tuple[str, ...] | None = None    # when rejected: one of these (None: any)
    exact_rules: bool = False                        # the exploit table's rules are exact
    cli_args: tuple[str, ...] = ()
    compile_baseline: bool = False
    private_cache: bool = False
    timeout_s: float = 600.0
    replace: dict = field(default_factory=dict)
    note: str = ""
    attack: object = None       # the test's Attack, for its own verdict check

    def expected(self) -> str:
        text = "/".join(self.expected_states)
        if self.expected_rules:
            text += " (" + ("" if self.exact_rules else "one of ") + \
                ", ".join(self.expected_rules) + ")"
        return text + (f" [{self.note}]" if self.note else "")


def options_as_cli(options: dict) -> tuple[tuple[str, ...], str]:
    """EvalOptions overrides of a test row as CLI arguments, and what cannot be said there."""
    args: list[str] = []
    unsaid = []
    for key, value in options.items():
        if key == "guardrails":
            for op in value.allow:
                args += ["--allow", op]
            for regex in value.bans:
                args += ["--ban", regex]
            for regex in value.requires:
                args += ["--require", regex]
            if not value.defaults:
                unsaid.append("static rules off is no CLI option: judged with them on")
        elif key == "trials":
            args += ["--trials", str(value)]
        else:
            unsaid.append(f"{key}={value!r} is not passed")
    return tuple(args), "; ".join(unsaid)


def table_modules() -> list:
    """Every module of tests/adversarial with an exploit table (EXPLOITS) or legitimate
    kernels (RUNS_HERE): test_exploits, test_legitimate and each later round's own file."""
    import importlib
    folder = REPO / "tests" / "adversarial"
    modules = [importlib.import_module(f"tests.adversarial.{path.stem}")
               for path in sorted(folder.glob("test_*.py"))]
    return [m for m in modules if hasattr(m, "EXPLOITS") or hasattr(m, "RUNS_HERE")]


def collect_rows() -> list[Row]:
    from tests.adversarial import test_trust_boundary
    from kforge_nb.result import CORRECT, MISMATCH, REJECTED, RUNTIME_ERROR  # noqa: F401
    rows = []
    modules = table_modules()
    for module in modules:
        for name, case in getattr(module, "EXPLOITS", {}).items():
            args, unsaid = options_as_cli(case.options)
            if unsaid:    # the test's exact expectation needs options the CLI lacks
                rows.append(Row("exploit", name, case.problem, case.candidate, case.target,
                                (MISMATCH, REJECTED, RUNTIME_ERROR), None, False, args,
                                note=unsaid))
            else:
                rows.append(Row("exploit", name, case.problem, case.candidate, case.target,
                                (case.state,), tuple(case.rules) if case.rules else
                                (() if case.rules == [] else None), True, args))
    for module in modules:
        for name, (problem, candidate, target, _launches) in \
                getattr(module, "RUNS_HERE", {}).items():
            rows.append(Row("legitimate", name, problem, candidate, target, (CORRECT,), (),
                            True))
    for name, attack in test_trust_boundary.ATTACKS.items():
        rows.append(Row("trust-boundary", name, attack.problem, attack.candidate,
                        attack.target, attack.states, attack.rules, False, attack.cli_args,
                        attack.compile_baseline, attack.private_cache,
                        attack.subprocess_timeout_s, dict(attack.replace),
                        note="may be correct: judged on its side effect"
                        if attack.may_be_correct else "", attack=attack))
    return rows


# --- running one row --------------------------------------------------------------------------


def as_user_prefix(uid: int, stage: Path) -> list[str]:
    """A command prefix: private mount namespace, the interpreter made reachable, root dropped."""
    script = ('set -e; mount --bind /root/.pyenv "$1"; '
              'mount -t tmpfs -o mode=755 tmpfs /root; mkdir -p /root/.pyenv; '
              'mount --move "$1" /root/.pyenv; shift; '
              f'exec setpriv --reuid={uid} --regid={uid} --clear-groups "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            str(stage)]


def run_row(row: Row, scratch: Path, shared_cache: Path, uid: int | None) -> dict:
    from tests.adversarial.support import candidate_file, problem_file
    from tests.adversarial.test_trust_boundary import KEY_FILE_LINE
    folder = Path(tempfile.mkdtemp(prefix="row-", dir=scratch))
    secret = f"sk-ant-test-{secrets.token_hex(16)}"
    key_file = Path(f"/tmp/kforge-redteam-key-{secrets.token_hex(8)}")
    text = candidate_file(row.candidate).read_text()
    for old, new in row.replace.items():
        text = text.replace(old, new)
    text = text.replace(KEY_FILE_LINE, f"KEY_FILE = {str(key_file)!r}")
    candidate = folder / f"{row.candidate}.py"
    candidate.write_text(text)
    reference = folder / "reference" / f"{row.problem}.py"
    reference.parent.mkdir()
    shutil.copy(problem_file(row.problem), reference)
    cache = folder / "kforge-cache" if row.private_cache else shared_cache
    cache.mkdir(exist_ok=True)
    home = folder / "home"
    home.mkdir()
    out = folder / "runs"
    command = [sys.executable, "-m", "kforge_nb.cli", "eval", str(reference), str(candidate),
               "--target", row.target, "--json", "--out", str(out),
               *(() if row.compile_baseline else ("--no-compile-baseline",)), *row.cli_args]
    env = {**os.environ, KEY_NAME: secret, "KFORGE_CACHE": str(cache), "HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
    if uid is not None:
        stage = folder / "pyenv-stage"
        stage.mkdir()
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, uid, uid)
        command = as_user_prefix(uid, stage) + command
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=row.timeout_s)
        hung = False
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        hung = True
    wall = time.monotonic() - started
    result: dict = {}
    if stdout.strip():
        try:
            result = json.loads(stdout.strip().splitlines()[-1])
        except json.JSONDecodeError:
            result = {}
    leaked = [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
              and secret.encode() in p.read_bytes()]
    payload_ran = key_file.exists()
    check_failed = ""
    if result and row.attack is not None and row.attack.check is not None:
        from tests.adversarial.test_trust_boundary import Run    # the test's own side checks
        try:
            row.attack.check(result, Run(folder, secret, key_file,
                                         cache if row.private_cache else None))
        except AssertionError as failed:
            check_failed = str(failed).split("\n")[0][:300]
    key_file.unlink(missing_ok=True)
    return {"result": result, "hung": hung, "wall_s": round(wall, 1), "exit": proc.returncode,
            "stderr_tail": stderr[-1500:], "leaked": leaked, "payload_ran": payload_ran,
            "check_failed": check_failed, "folder": str(folder)}


def judge_row(row: Row, outcome: dict) -> tuple[str, bool, str]:
    """(verdict text, OK?, why not)."""
    result = outcome["result"]
    if outcome["hung"]:
        return "HANG", False, f"no verdict within {row.timeout_s:g} s"
    if outcome["exit"] is None:
        return "MISSING", False, outcome["stderr_tail"]
    if not result:
        last = (outcome["stderr_tail"].strip().splitlines() or ["?"])[-1]
        return f"CRASH (exit {outcome['exit']})", False, f"no verdict; stderr: {last[:200]}"
    state, rules = result.get("state", "?"), result.get("rules") or []
    verdict = state + (f" ({', '.join(rules)})" if rules else "")
    why = []
    if outcome["payload_ran"]:
        why.append("the parent ran the candidate's payload (key file written)")
    if outcome["leaked"]:
        why.append(f"the key is in {outcome['leaked'][:2]}")
    if outcome.get("check_failed"):
        why.append(outcome["check_failed"])
    if row.attack is not None:
        from tests.adversarial.test_trust_boundary import verdict_problems
        why += verdict_problems(row.name, row.attack, result)
    else:
        if state not in row.expected_states:
            why.append(f"state {state}")
        elif state == "rejected" and row.expected_rules is not None:
            if row.exact_rules and list(rules) != list(row.expected_rules):
                why.append(f"rules {rules}")
            if not row.exact_rules and not set(rules) & set(row.expected_rules):
                why.append(f"rules {rules}")
        if state == "correct" and "correct" not in row.expected_states:
            why.append("judged correct")
    return verdict, not why, "; ".join(why)


# --- the table --------------------------------------------------------------------------------


def table(lines: list[list[str]]) -> str:
    header = ["class", "candidate", "verdict (state + rules)", "expected", "OK?"]
    rows = [header] + lines
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(len(header))]
    out = []
    for k, r in enumerate(rows):
        out.append(" | ".join(c[:w].ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[],
                        help="run rows whose name or candidate contains this (repeatable)")
    parser.add_argument("--kind", choices=("exploit", "legitimate", "trust-boundary"),
                        action="append", help="run only rows of this kind (repeatable)")
    parser.add_argument("--as-user", type=int, metavar="UID",
                        help="run each CLI as this unprivileged uid (e.g. 65534); needs root")
    parser.add_argument("--json", metavar="FILE", help="write the rows (and their outcomes) here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    parser.add_argument("--list", action="store_true", help="list the rows and stop")
    args = parser.parse_args(argv)
    if args.as_user is not None and os.geteuid() != 0:
        parser.error("--as-user needs root (to unshare and mount, then drop to the uid)")

    rows = [r for r in collect_rows()
            if (not args.only or any(s in r.name or s in r.candidate for s in args.only))
            and (not args.kind or r.kind in args.kind)]
    if args.list:
        for r in rows:
            print(f"{r.kind:15} {r.candidate:34} {r.name}")
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="kforge-redteam-"))
    shared_cache = scratch / "kforge-cache"
    shared_cache.mkdir()
    if args.as_user is not None:
        os.chmod(scratch, 0o755)
        os.chown(shared_cache, args.as_user, args.as_user)
    lines, records, bad = [], [], 0
    try:
        for i, row in enumerate(rows, 1):
            print(f"[{i}/{len(rows)}] {row.kind}: {row.name} ...", file=sys.stderr, flush=True)
            try:
                outcome = run_row(row, scratch, shared_cache, args.as_user)
            except FileNotFoundError as missing:    # a table row whose file is not there yet
                outcome = {"result": {}, "hung": False, "wall_s": 0.0, "exit": None,
                           "stderr_tail": f"missing: {missing}", "leaked": [],
                           "payload_ran": False}
            verdict, ok, why = judge_row(row, outcome)
            bad += not ok
            lines.append([row.kind, row.candidate, verdict, row.expected(),
                          "OK" if ok else f"NO: {why}"])
            message = (outcome["result"] or {}).get("message", "")
            print(f"    -> {verdict} in {outcome['wall_s']} s{'' if ok else ': ' + why}"
                  f"\n       {message[:300]}", file=sys.stderr, flush=True)
            records.append({**{k: v for k, v in asdict(row).items() if k != "attack"},
                            "verdict": verdict, "ok": ok, "why": why,
                            "message": message, "wall_s": outcome["wall_s"],
                            "hung": outcome["hung"], "payload_ran": outcome["payload_ran"],
                            "leaked": outcome["leaked"], "timing": (outcome["result"] or {})
                            .get("timing"), "sandbox": (outcome["result"] or {}).get("sandbox"),
                            "stderr_tail": "" if outcome["result"] else
                            outcome["stderr_tail"]})
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps({"as_user": args.as_user, "rows": records},
                                                  indent=1, default=str))
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(table(lines))
    print(f"\n{len(rows) - bad} of {len(rows)} rows as expected"
          + (f" (as uid {args.as_user})" if args.as_user is not None else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
