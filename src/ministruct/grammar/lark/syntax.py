"""Lark text -> the dialect's syntax tree (`Node`s and `Definition`s), with positions.

Lark builds the LALR(1) table of dialect.lark; lexer.py's tokens feed it. Nothing here
gives a meaning: compile.py does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import Lexer

from ministruct.grammar.lark.lexer import LarkLexError, tokenize
from ministruct.grammar.parser_cache import lalr_parser

MAX_NESTING = 200  # groups inside groups, as the GBNF front end


class LarkProblem(Exception):
    """A syntax or meaning error at a token (or at an offset); parse_lark adds the source."""

    def __init__(self, reason: str, tok: Token | None = None, pos: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.tok, self.pos = reason, tok, pos


@dataclass
class Node:
    """One expression: `kind` names it (alt, and, seq, not, rep, str, range, re, ref,
    special, gref, json, regex_ext, nested, alias), `tok` is where it starts."""

    kind: str
    tok: Token
    kids: list["Node"] = field(default_factory=list)
    data: Any = None


@dataclass
class Definition:
    """A rule (lowercase name) or a terminal (uppercase), or a statement (`kind`)."""

    kind: str  # rule | token | ignore | import | override | declare | options
    tok: Token
    name: str = ""
    body: Node | None = None
    priority: Token | None = None
    attributes: list[tuple[Token, Token | None]] = field(default_factory=list)
    data: Any = None


class _Tokens(Lexer):
    """Lark 'lexer' that hands over lexer.py's tokens."""

    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, data: Any) -> Any:  # type: ignore[override]
        return iter(data)


class _Build(Transformer_NonRecursive):
    def start(self, c):
        return c[0]

    def no_items(self, c):
        return []

    def items(self, c):
        out = list(c[0]) if isinstance(c[0], list) else [c[0]]
        if len(c) > 1:
            out.append(c[-1])
        return out

    def _definition(self, kind: str, c: list) -> Definition:
        name_tok = c[0]
        d = Definition(kind, name_tok, str(name_tok), body=c[-1])
        for x in c[1:-1]:
            if isinstance(x, tuple) and x[0] == "priority":
                d.priority = x[1]
            elif isinstance(x, tuple) and x[0] == "attributes":
                d.attributes = x[1]
        return d

    def rule(self, c):
        return self._definition("rule", c)

    def token(self, c):
        return self._definition("token", c)

    def priority(self, c):
        return ("priority", c[0])

    def attributes(self, c):
        return ("attributes", [x for x in c if isinstance(x, tuple)])

    def flag(self, c):
        return (c[0], None)

    def setting(self, c):
        return (c[0], c[2])

    def ignore(self, c):
        return Definition("ignore", c[0], body=c[1])

    def import_path(self, c):
        return [x for x in c if x.type != "DOT"], c[0]

    def import_one(self, c):
        names, _ = c[1]
        return Definition("import", c[0], data=(names[:-1], [(names[-1], names[-1])]))

    def import_alias(self, c):
        names, _ = c[1]
        return Definition("import", c[0], data=(names[:-1], [(names[-1], c[3])]))

    def import_many(self, c):
        names, _ = c[1]
        picked = [x for x in c[2:] if isinstance(x, Token) and x.type in ("RULE", "TOKEN")]
        return Definition("import", c[0], data=(names, [(n, n) for n in picked]))

    def override(self, c):
        return Definition("override", c[0])

    def declare(self, c):
        return Definition("declare", c[0])

    def options(self, c):
        return Definition("options", c[0], data=c[0].payload[1])

    def expansions(self, c):
        alts = [x for x in c if isinstance(x, Node)]
        return alts[0] if len(alts) == 1 else Node("alt", alts[0].tok, alts)

    def alias(self, c):
        return c[0]  # `-> name` only names the tree node: no effect on the language

    def conjunction(self, c):
        parts = [x for x in c if isinstance(x, Node)]
        return parts[0] if len(parts) == 1 else Node("and", c[1], parts)

    def expansion(self, c):
        if len(c) == 1:
            return c[0]
        return Node("seq", c[0].tok if c else Token("NL", ""), list(c))

    def plain(self, c):
        return c[0]

    def negation(self, c):
        return Node("not", c[0], [c[1]])

    def op(self, c):
        lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[str(c[1])]
        return Node("rep", c[1], [c[0]], (lo, hi))

    def rep_exact(self, c):
        return Node("rep", c[1], [c[0]], (c[2], c[2]))

    def rep_min(self, c):
        return Node("rep", c[1], [c[0]], (c[2], None))

    def rep_max(self, c):
        return Node("rep", c[1], [c[0]], (None, c[3]))

    def rep_range(self, c):
        lo, hi = [x for x in c[1:] if isinstance(x, Token) and x.type == "NUMBER"]
        return Node("rep", c[1], [c[0]], (lo, hi))

    def group(self, c):
        return c[1]

    def maybe(self, c):
        return Node("rep", c[0], [c[1]], (0, 1))

    def string(self, c):
        return Node("str", c[0])

    def char_range(self, c):
        return Node("range", c[0], data=(c[0], c[2]))

    def regexp(self, c):
        return Node("re", c[0])

    def rule_ref(self, c):
        return Node("ref", c[0], data=str(c[0]))

    token_ref = rule_ref

    def special(self, c):
        return Node("special", c[0])

    def grammar_ref(self, c):
        return Node("gref", c[0])

    def json(self, c):
        return Node("json", c[0], data=c[0].payload[1])

    def regex_ext(self, c):
        return Node("regex_ext", c[0], data=c[0].payload[1])

    def nested(self, c):
        return Node("nested", c[0], data=c[0].payload)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    text = Path(__file__).with_name("dialect.lark").read_text(encoding="utf-8")
    return lalr_parser(text, lexer=_Tokens, maybe_placeholders=False)


_LOCK = threading.Lock()
_WORDS = {
    "COLON": "':'",
    "RPAR": "')'",
    "RSQB": "']'",
    "RBRACE": "'}'",
    "NL": "a new line",
    "VBAR": "'|'",
    "RULE": "a rule name",
    "TOKEN": "a terminal name",
    "NUMBER": "a number",
    "STRING": "a string",
}


def _nesting(tokens: list[Token]) -> None:
    depth = 0
    for t in tokens:
        if t.type in ("LPAR", "LSQB"):
            depth += 1
            if depth > MAX_NESTING:
                raise LarkProblem(f"groups nested deeper than {MAX_NESTING} levels", t)
        elif t.type in ("RPAR", "RSQB"):
            depth -= 1


def parse_items(text: str, start: int = 0, end: int | None = None) -> list[Definition]:
    """The definitions and statements of `text[start:end]` (positions in the whole text)."""
    try:
        tokens = tokenize(text, start, end=end)
    except LarkLexError as e:
        raise LarkProblem(e.reason, pos=e.pos) from None
    _nesting(tokens)
    try:
        with _LOCK:
            tree = _parser().parse(tokens)
        return _Build().transform(tree)
    except UnexpectedToken as e:
        raise LarkProblem(_unexpected(e), e.token if e.token.type != "$END" else None, pos=end) from None
    except UnexpectedInput as e:
        raise LarkProblem(f"syntax error: {e}", pos=end) from None
    except VisitError as e:
        raise e.orig_exc from None
    except RecursionError:
        raise LarkProblem("grammar nested too deeply", pos=start) from None


def _unexpected(e: UnexpectedToken) -> str:
    tok = e.token
    got = "the end of the grammar" if tok.type == "$END" else repr(str(tok)) if tok.type != "NL" else "a new line"
    expected = sorted({_WORDS[x] for x in e.expected if x in _WORDS})
    msg = f"unexpected {got}"
    if expected:
        msg += "; expected " + " or ".join(expected)
    return msg
