"""`%regex {...}`: llguidance's structured regexes, where they map onto our front ends.

- {"regex": "..."}: a regex (the regex front end).
- {"substring_chunks": [c0, c1, ...]}: c_i c_(i+1) ... c_j for i <= j, or nothing.
- {"substring_chars": "text"}: the same over the text's characters (any substring).
- {"substring_words": "text"}: the same over its words and the characters between
  them (chunks `\\w+` and single non-word characters).
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from ministruct.grammar.ir import EMPTY, Expr, Literal, Repeat, alt, seq
from ministruct.grammar.lark.syntax import LarkProblem
from ministruct.grammar.regex import parse_regex
from ministruct.grammar.regex.printer import inline_root

MAX_CHUNKS = 10_000
_FIELDS = ("regex", "substring_words", "substring_chars", "substring_chunks")


def substrings(chunks: list[str]) -> Expr:
    """Runs of consecutive chunks, the empty run included (linear in size: suffixes shared)."""
    tails: list[Expr] = []
    rest: Expr | None = None
    for c in reversed(chunks):
        rest = Literal(c) if rest is None else seq(Literal(c), Repeat(rest, 0, 1))
        tails.append(rest)
    return alt(EMPTY, *reversed(tails))


def regex_ext(value: Any, tok: Token) -> Expr:
    """The language of a `%regex {...}` value."""
    if not isinstance(value, dict):
        raise LarkProblem("%regex takes a JSON object", tok)
    unknown = [k for k in value if k not in _FIELDS]
    if unknown:
        raise LarkProblem(f"unknown field {unknown[0]!r} in %regex", tok)
    if not value:
        raise LarkProblem("no fields set on %regex", tok)
    if len(value) > 1:
        raise LarkProblem("only one field can be set on %regex", tok)
    ((key, v),) = value.items()
    if key == "substring_chunks":
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise LarkProblem("substring_chunks must be an array of strings", tok)
        chunks = v
    elif not isinstance(v, str):
        raise LarkProblem(f"{key} must be a string", tok)
    elif key == "regex":
        try:
            return inline_root(parse_regex(v, source="%regex"))
        except ValueError as e:
            raise LarkProblem(f"%regex: {e}", tok) from None
    elif key == "substring_chars":
        chunks = list(v)
    else:
        chunks = re.findall(r"\w+|\W", v)
    if len(chunks) > MAX_CHUNKS:
        raise LarkProblem(f"%regex {key}: more than {MAX_CHUNKS:,} chunks", tok)
    return substrings(chunks)
