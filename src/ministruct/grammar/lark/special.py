"""Special tokens of the Lark dialect: `<|name|>` (a token by its text) and `<[ids]>`
(by id: `<[5]>`, ranges and lists `<[1-3,7]>`, one negated id `<[^5]>`), as the GBNF
front end's token atoms (TokenRef)."""

from __future__ import annotations

import re

from lark import Token

from ministruct.grammar.ir import Expr, TokenRef, alt
from ministruct.grammar.lark.syntax import LarkProblem

MAX_TOKEN_IDS = 100_000  # ids in one `<[...]>` set
MAX_TOKEN_ID = 2**31 - 1
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def special_token(tok: Token) -> Expr:
    """The TokenRef(s) a SPECIAL token stands for."""
    text = str(tok)
    if not (text.startswith("<[") and text.endswith("]>")):
        return TokenRef(name=text)
    spec = text[2:-2]
    if spec == "*":
        raise LarkProblem("the wildcard token set <[*]> (any token) is not supported; name the tokens", tok)
    if spec.startswith("*"):
        raise LarkProblem("wildcard token range '*' must not contain additional tokens", tok)
    negated = spec.startswith("^")
    ids: list[int] = []
    parts = spec[1:] if negated else spec
    if not parts.strip(","):
        raise LarkProblem("empty numeric special-token range", tok)
    for part in parts.split(","):
        m = _RANGE.fullmatch(part)
        if not m:
            raise LarkProblem(f"invalid token range {part!r}: expected N or N-M", tok)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi > MAX_TOKEN_ID:
            raise LarkProblem(f"invalid token range {part!r}", tok)
        if len(ids) + hi - lo + 1 > MAX_TOKEN_IDS:
            raise LarkProblem(f"special-token range is too large (more than {MAX_TOKEN_IDS:,} ids)", tok)
        ids.extend(range(lo, hi + 1))
    ids = sorted(set(ids))
    if negated:
        if len(ids) != 1:
            raise LarkProblem(
                "a negated set of more than one token (<[^a,b]>) is not supported: a token atom negates one id", tok
            )
        return TokenRef(token_id=ids[0], negated=True)
    return alt(*(TokenRef(token_id=i) for i in ids))
