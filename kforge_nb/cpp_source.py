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
"""
from __future__ import annotations

import re
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
