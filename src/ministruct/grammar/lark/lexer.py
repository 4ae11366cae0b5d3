"""Lark text (llguidance's dialect) -> tokens for the LALR parser of dialect.lark.

The token set and the longest-match rule are llguidance's (parser/src/lark/lexer.rs):
blanks and comments (`#` or `//` to the end of the line) are skipped, a run of newlines
is one NL, and `%json`, `%regex`, `%llguidance` (and xgrammar's `%grammar_options`) are
followed by one JSON value that becomes part of their token. `%lark { ... }` takes the
nested grammar's text up to its matching brace. Two readings are ours: a newline right
before `|` is dropped (the alternatives go on, as llguidance's parser allows), and NL
tokens at the start and end of the text are dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lark import Token

from ministruct.grammar.json_text import parse_json_prefix

_SKIP = re.compile(r"(?:[ \t]+|(?:#|//)[^\n]*)+")
# Longest match wins; on a tie, the earlier entry (llguidance lists literals first).
_LITERALS = [
    ("ARROW", "->"),
    ("DCOLON", "::"),
    ("COLON", ":"),
    ("COMMA", ","),
    ("DOTDOT", ".."),
    ("DOT", "."),
    ("LPAR", "("),
    ("RPAR", ")"),
    ("LBRACE", "{"),
    ("RBRACE", "}"),
    ("LSQB", "["),
    ("RSQB", "]"),
    ("TILDE", "~"),
    ("AMP", "&"),
    ("VBAR", "|"),
    ("EQUAL", "="),
]
_PATTERNS = [
    ("DIRECTIVE", re.compile(r"%[a-z_]+")),
    ("OP", re.compile(r"[+*?]")),
    ("RULE", re.compile(r"!?[_?]?[a-z][_a-z0-9\-]*")),
    ("TOKEN", re.compile(r"_?[A-Z][_A-Z0-9\-]*")),
    ("STRING", re.compile(r'"(?:\\(?:["\\/bfnrt]|u[a-fA-F0-9]{4}|x[0-9a-fA-F]{2})|[^"\\\x00-\x1F\x7F])*"i?')),
    ("REGEXP", re.compile(r"/(?:\\.|[^/\\])+/[imslux]*", re.S)),
    ("NUMBER", re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")),
    ("NL", re.compile(r"(?:\r?\n)+")),
    ("SPECIAL", re.compile(r"<[^<>\s]+>")),
    ("GRAMMAR_REF", re.compile(r"@[a-zA-Z0-9_\-]+")),
]
_STARTS = {  # the characters each pattern can start with
    "DIRECTIVE": "%",
    "OP": "+*?",
    "RULE": "!?_abcdefghijklmnopqrstuvwxyz",
    "TOKEN": "_ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "STRING": '"',
    "REGEXP": "/",
    "NUMBER": "+-0123456789",
    "NL": "\r\n",
    "SPECIAL": "<",
    "GRAMMAR_REF": "@",
}
_CANDIDATES: dict[str, list[tuple[str, str, "re.Pattern[str] | None"]]] = {}
for _kind, _lit in _LITERALS:
    _CANDIDATES.setdefault(_lit[0], []).append((_kind, _lit, None))
for _kind, _rx in _PATTERNS:
    for _c in _STARTS[_kind]:
        _CANDIDATES.setdefault(_c, []).append((_kind, "", _rx))
JSON_DIRECTIVES = {
    "%json": "JSON",
    "%regex": "REGEX_EXT",
    "%llguidance": "LLGUIDANCE",
    "%grammar_options": "LLGUIDANCE",
}
WORD_DIRECTIVES = {"%ignore": "IGNORE", "%import": "IMPORT", "%override": "OVERRIDE", "%declare": "DECLARE"}
UNSUPPORTED_DIRECTIVES = {"%if": "conditions (`%if`) belong to parametric rules, which are not supported"}


class LarkLexError(Exception):
    """A character sequence that is no token; `pos` is its offset in the text."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason, self.pos = reason, pos


@dataclass(frozen=True)
class Nested:
    """Where the grammar of a `%lark { ... }` block lies in the whole text."""

    start: int
    end: int


class Positions:
    """Line and column (1-based) of offsets into one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def line_col(self, pos: int) -> tuple[int, int]:
        import bisect

        i = bisect.bisect_right(self.starts, pos) - 1
        return i + 1, pos - self.starts[i] + 1


class LarkToken(Token):
    """A token that also carries a parsed value (the JSON of `%json`, a Nested block)."""

    payload: Any = None


def _token(kind: str, value: Any, pos: int, where: Positions, end: int) -> Token:
    line, col = where.line_col(pos)
    tok = LarkToken(kind, value if isinstance(value, str) else kind, pos, line, col, None, None, end)
    tok.payload = value
    return tok


def _json_value(text: str, pos: int, directive: str) -> tuple[Any, int]:
    m = re.compile(r"\s*").match(text, pos)
    start = m.end() if m else pos
    try:
        value, end = parse_json_prefix(text, start)
    except json.JSONDecodeError as e:
        raise LarkLexError(f"failed to parse {directive} declaration: {e.msg}", e.pos) from None
    except RecursionError:
        raise LarkLexError(f"{directive}: JSON nests too deeply", start) from None
    return value, end


def _nested_end(text: str, pos: int) -> int:
    """Offset just past the `}` closing the `{` at `pos` (tokens of the nested text counted)."""
    depth = 0
    for tok in tokenize(text, pos, nested=True):
        if tok.type == "LBRACE":
            depth += 1
        elif tok.type == "RBRACE":
            depth -= 1
            if depth == 0:
                return tok.end_pos  # type: ignore[return-value]
    raise LarkLexError("unterminated %lark block: no matching '}'", pos)


def tokenize(text: str, start: int = 0, *, end: int | None = None, nested: bool = False) -> list[Token]:
    """The tokens of `text[start:end]`; `nested` stops after the brace closing the first `{`."""
    where = Positions(text)
    out: list[Token] = []
    pos, n, depth = start, len(text) if end is None else end, 0
    while pos < n:
        m = _SKIP.match(text, pos, n)
        if m:
            pos = m.end()
            if pos >= n:
                break
        best_kind, best_end = "", pos
        for kind, lit, rx in _CANDIDATES.get(text[pos], ()):
            if rx is None:
                if text.startswith(lit, pos, n) and pos + len(lit) > best_end:
                    best_kind, best_end = kind, pos + len(lit)
            else:
                m = rx.match(text, pos, n)
                if m and m.end() > best_end:
                    best_kind, best_end = kind, m.end()
        if not best_kind:
            raise LarkLexError(_bad_char(text, pos), pos)
        value: Any = text[pos:best_end]
        kind = best_kind
        if kind == "DCOLON":
            raise LarkLexError("parametric rules (`name::param`, `%if`) are not supported", pos)
        if kind == "DIRECTIVE":
            kind, value, best_end = _directive(text, pos, best_end, value)
        out.append(_token(kind, value, pos, where, best_end))
        pos = best_end
        if nested:
            depth += {"LBRACE": 1, "RBRACE": -1}.get(kind, 0)
            if depth == 0 and kind == "RBRACE":
                return out
    return out if nested else _tidy(out)


def _directive(text: str, pos: int, end: int, word: str) -> tuple[str, Any, int]:
    if word in JSON_DIRECTIVES:
        value, end = _json_value(text, end, word)
        return JSON_DIRECTIVES[word], (word, value), end
    if word == "%lark":
        m = re.compile(r"\s*\{").match(text, end)
        if not m:
            raise LarkLexError("%lark must be followed by a grammar in braces: %lark { ... }", end)
        close = _nested_end(text, m.end() - 1)
        return "NESTED", Nested(m.end(), close - 1), close
    if word in WORD_DIRECTIVES:
        return WORD_DIRECTIVES[word], word, end
    if word in UNSUPPORTED_DIRECTIVES:
        raise LarkLexError(UNSUPPORTED_DIRECTIVES[word], pos)
    raise LarkLexError(f"unknown directive {word}", pos)


def _bad_char(text: str, pos: int) -> str:
    c = text[pos]
    if c == '"':
        return "unterminated or invalid string literal"
    if c == "/":
        return "unterminated regular expression"
    if c == "<":
        return "unterminated special token"
    return f"unexpected character {c!r}"


def _tidy(tokens: list[Token]) -> list[Token]:
    """Drop NL at the ends and before `|`; `~` before a number is a repetition (TILDE_REP);
    refuse parametric rules and templates, which no later stage can mean."""
    out: list[Token] = []
    for i, t in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if t.type == "LBRACE" and out and out[-1].type in ("RULE", "TOKEN"):
            if nxt is None or nxt.type not in ("NUMBER", "COMMA"):
                raise LarkLexError("Lark templates (`name{...}`) are not supported", out[-1].start_pos)
        if t.type == "TILDE" and nxt is not None and nxt.type == "NUMBER":
            t = Token.new_borrow_pos("TILDE_REP", t.value, t)
        if t.type == "NL":
            if not out or nxt is None or nxt.type == "VBAR" or out[-1].type == "NL":
                continue
        out.append(t)
    return out
