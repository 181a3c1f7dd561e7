"""A small C/C++/CUDA/Metal tokenizer: what rules and the native loader read of kernel source.

Static rules must read code, not what a comment or a string literal says about it: a kernel
whose comment reads "no fast-math here" or "we do not call dlsym" is not using either. The
scanner knows C++'s comments (`//`, `/* */`, with line continuations), string and character
literals (with escapes, encoding prefixes and raw strings `R"delim(...)delim"`) and digit
separators (`1'000`), and keeps every line where it was, so a match's line number is the
source's own.

    cpp_tokens(text)                        -> [Token(kind, text, line), ...]
    strip_cpp_comments_and_strings(text)    -> the text with comments and the insides of
                                               string/char literals blanked (same lines)
    strip_cpp_comments(text)                -> the text with comments blanked, literals kept
    preprocessed(text)                      -> the text after the preprocessor (same lines), or
                                               None where g++ is missing or refuses it

Text is not yet code: `#define NS a##t` makes `NS::cpu::_softmax` a libtorch call and
`_Pragma("GCC optimize(\"Ofast\")")` a pragma. `preprocessed` runs the preprocessor the build
runs (g++ -E with the CPU build's flags, so `#if`s take the branches the build takes), without
the headers: what a header declares is not the candidate's code, and reading all of libstdc++
would cost ~100 ms where the candidate's own macros cost ~10. Rules read both texts.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass

IDENT = re.compile(r"[A-Za-z_]\w*")
NUMBER = re.compile(r"\.?\d(?:'?[\w.]|[eEpP][+-])*")
PUNCT = re.compile(r"::|->\*?|\+\+|--|<<=?|>>=?|<=>|[<>!=+\-*/%&|^]=|&&|\|\||\.\.\.|##|"
                   r"\[\[|\]\]|[^\s\w]")
ENCODING_PREFIX = re.compile(r"(?:u8|u|U|L)?R?$")


@dataclass(frozen=True)
class Token:
    kind: str        # "ident", "number", "string", "char", "punct"
    text: str
    line: int        # 1-based, in the text given


def _literal_end(text: str, i: int, quote: str) -> int:
    """Index just past the literal whose opening quote is at i (unterminated: end of line)."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            return j + 1
        if c == "\n":
            return j
        j += 1
    return len(text)


def _raw_end(text: str, i: int) -> int:
    """Index just past the raw string whose opening quote is at i: R"delim( ... )delim"."""
    paren = text.find("(", i + 1)
    if paren < 0 or paren - i - 1 > 16:
        return _literal_end(text, i, '"')
    closing = ")" + text[i + 1:paren] + '"'
    end = text.find(closing, paren + 1)
    return len(text) if end < 0 else end + len(closing)


def _scan(text: str):
    """Yield (kind, start, end) for every comment, literal and token of `text`."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\f\v":
            i += 1
        elif c == "\\" and text.startswith("\n", i + 1):      # a line continuation
            i += 2
        elif text.startswith("//", i):
            j = i
            while True:                                        # `\` at the end continues it
                nl = text.find("\n", j)
                if nl < 0:
                    j = n
                    break
                if text[nl - 1] == "\\" or (text[nl - 1] == "\r" and text[nl - 2] == "\\"):
                    j = nl + 1
                    continue
                j = nl
                break
            yield "comment", i, j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            yield "comment", i, j
            i = j
        elif c == '"':
            yield "string", i, _literal_end(text, i, '"')
            i = _literal_end(text, i, '"')
        elif c == "'":
            j = _literal_end(text, i, "'")
            yield "char", i, j
            i = j
        elif c.isalpha() or c == "_":
            m = IDENT.match(text, i)
            j = m.end()
            word = m.group(0)
            if j < n and text[j] in "\"'" and ENCODING_PREFIX.fullmatch(word) and word:
                # u8"..", L'x', R"(..)": the prefix belongs to the literal
                raw = word.endswith("R") and text[j] == '"'
                end = _raw_end(text, j) if raw else _literal_end(text, j, text[j])
                yield ("string" if text[j] == '"' else "char"), i, end
                i = end
                continue
            yield "ident", i, j
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = NUMBER.match(text, i).end()
            yield "number", i, j
            i = j
        else:
            j = PUNCT.match(text, i).end()
            yield "punct", i, j
            i = j


def cpp_tokens(text: str) -> list[Token]:
    """The tokens of C/C++/CUDA/Metal source, comments dropped, literals as one token each."""
    tokens, line, last = [], 1, 0
    for kind, start, end in _scan(text):
        line += text.count("\n", last, start)
        last = start
        if kind != "comment":
            tokens.append(Token(kind, text[start:end], line))
    return tokens


def _blank(piece: str) -> str:
    """Spaces for a piece of text, its newlines kept (so line numbers stay where they were)."""
    return re.sub(r"[^\n]", " ", piece)


@functools.lru_cache(maxsize=256)     # every native rule reads the same few kernel strings
def strip_cpp_comments_and_strings(text: str, strings: bool = True) -> str:
    """`text` with every comment blanked and (when `strings`) the inside of every string and
    character literal blanked; the quotes stay, so `extern "C"` reads `extern " "`. Lines and
    columns are unchanged."""
    out, last = [], 0
    for kind, start, end in _scan(text):
        if kind == "comment":
            out += [text[last:start], _blank(text[start:end])]
            last = end
        elif strings and kind in ("string", "char"):
            literal = text[start:end]
            quote = "'" if kind == "char" else '"'
            first = literal.find(quote)
            closed = len(literal) > first + 1 and literal.endswith(quote)
            inner = literal[first + 1:-1] if closed else literal[first + 1:]
            out += [text[last:start], literal[:first + 1], _blank(inner),
                    quote if closed else ""]
            last = end
    out.append(text[last:])
    return "".join(out)


def strip_cpp_comments(text: str) -> str:
    """`text` with every comment blanked; string literals kept as they are."""
    return strip_cpp_comments_and_strings(text, strings=False)


def line_at(text: str, offset: int) -> int:
    """1-based line of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


# Directives whose effect is outside the text (a header, the diagnostics, the line numbers):
# blanked before preprocessing. `%:` is the digraph of `#`.
OUTSIDE_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(?:include|include_next|import|error|"
                               r"warning|line)\b")
LINE_MARKER = re.compile(r'^# (\d+) "(.*)"(?: \d+)*$')


def _without_outside_directives(text: str) -> str:
    """`text` (comments blanked) with every #include, #error, #warning and #line blanked,
    continuation lines with them; lines stay where they were."""
    lines = strip_cpp_comments(text).split("\n")
    continued = False
    for i, line in enumerate(lines):
        if continued or OUTSIDE_DIRECTIVE.match(line):
            continued = line.rstrip().endswith("\\")
            lines[i] = ""
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def preprocessed(text: str) -> str | None:
    """`text` as the compiler reads it after the preprocessor: macros expanded (the file's
    own; headers are not read), `_Pragma("x")` as `#pragma x`, branches the build's flags
    choose. Line N holds what source line N became (a macro call over several lines lands on
    its first). None where no compiler runs or it refuses the text: then only the text is
    read."""
    from .runtime.cpp import FLAGS          # the build's own flags: its predefined macros
    compiler = os.environ.get("CXX", "g++")
    try:
        done = subprocess.run([compiler, *FLAGS, "-E", "-x", "c++", "-"],
                              input=_without_outside_directives(text), capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    lines = [""] * (text.count("\n") + 1)
    here, number = False, 1
    for line in done.stdout.split("\n"):
        marker = LINE_MARKER.match(line)
        if marker:
            here, number = marker.group(2) == "<stdin>", int(marker.group(1))
            continue
        if here and 0 < number <= len(lines) and line.strip():
            lines[number - 1] = f"{lines[number - 1]} {line}".strip()
        number += 1
    return "\n".join(lines)
