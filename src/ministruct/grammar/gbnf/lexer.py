"""GBNF text -> reductions: a lexer with llama.cpp's newline rules, and an LALR(1) driver.

Lark builds the LALR(1) table from gbnf.lark; `LalrDriver` runs that table over the
tokens of `GbnfLexer`, calling one builder method per reduction. `GbnfLexer` is also a
Lark custom lexer, so `Lark(gbnf.lark, parser="lalr", lexer=GbnfLexer)` parses the same
text with Lark's own loop (the tests check both agree); the driver is that loop
without its generality, about a quarter less time on a 1 MB grammar.

Newlines: llama.cpp (src/llama-grammar.cpp, parse_space) skips them inside
parentheses, right after `::=` and `|`, at the start and end of the text, and in runs
of blank lines; every other newline ends the current rule. Digits are INT between
`{` and `}` and NAME elsewhere, as Lark's contextual lexer would decide for gbnf.lark.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from lark.lexer import Lexer
from lark.parsers.lalr_analysis import Shift

MAX_PAREN_DEPTH = 200

_SKIP = r"(?:[ \t]+|#[^\r\n\x00]*)*"
_ESC = r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[tnr\"\[\]\-\\])"
# The terminals of gbnf.lark (tests/grammar/test_gbnf_lexer.py checks they agree).
TERMINALS = {
    "LITERAL": rf'"(?:[^"\\\x00]|{_ESC})*"',
    "CLASS": rf"\[(?:[^\]\\\x00]|{_ESC})*\]",
    "TOKEN_ID": r"!?<\[[0-9]+\]>",
    "TOKEN_TEXT": r"!?<(?!\[)[^>\x00]*>",
    "DEFINE": r"::=",
    "NAME": r"[a-zA-Z0-9\-]+",
    "INT": r"[0-9]+",
    "NL": r"\r\n|\r|\n",
    "VBAR": r"\|",
    "LPAR": r"\(",
    "RPAR": r"\)",
    "DOT": r"\.",
    "STAR": r"\*",
    "PLUS": r"\+",
    "QMARK": r"\?",
    "LBRACE": r"\{",
    "RBRACE": r"\}",
    "COMMA": r",",
}


def _scanner(names: list[str]) -> "re.Pattern[str]":
    """Blanks and comments, then (optionally) one of `names`: it always matches."""
    return re.compile(_SKIP + "(?:" + "|".join(f"(?P<{n}>{TERMINALS[n]})" for n in names) + ")?")


_ANYWHERE = _scanner([n for n in TERMINALS if n != "INT"])
_BRACES = _scanner(["INT", "COMMA", "RBRACE", "NL"])
_MAY_SPAN_LINES = frozenset({"LITERAL", "CLASS", "TOKEN_TEXT", "NL"})
_NESTERS = frozenset({"LPAR", "STAR", "PLUS", "QMARK", "LBRACE"})


class ParenDepthError(Exception):
    """Parentheses nested deeper than MAX_PAREN_DEPTH (line and column of the '(')."""

    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"parentheses nested more than {MAX_PAREN_DEPTH} deep")
        self.line, self.column = line, column


def _token(
    kind: str, value: str, start: int, end: int, line: int, column: int, end_line: int, end_column: int
) -> Token:
    tok = str.__new__(Token, value)
    tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, start, end
    tok.line, tok.column, tok.end_line, tok.end_column = line, column, end_line, end_column
    return tok


class GbnfLexer(Lexer):
    """Tokens of gbnf.lark, with llama.cpp's newline rules applied.

    `nesters` counts '(' and quantifiers in the current rule (it bounds the rule's IR
    depth); it is reset when a rule-ending newline is handed to the parser.
    """

    __future_interface__ = 2

    def __init__(self, lexer_conf: Any = None) -> None:
        self.nesters = 0

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        """Lark's custom-lexer entry point."""
        text = getattr(lexer_state.text, "text", lexer_state.text)
        states = parser_state.parse_conf.states if parser_state is not None else {}
        return self.tokens(text, lambda: {k for k in states.get(parser_state.position, ()) if k.isupper()})

    def tokens(self, text: str, expected: Callable[[], set[str]]) -> Iterator[Token]:
        """The tokens of `text`; `expected()` names the terminals the parser accepts now (for errors)."""
        end = len(text)
        anywhere, braces = _ANYWHERE.match, _BRACES.match
        may_span, nesters_kinds = _MAY_SPAN_LINES, _NESTERS
        new_str = str.__new__
        pos = 0
        line, line_start = 1, 0
        depth = 0
        in_braces = False
        prev = None  # kind of the last token handed to the parser
        pending = None  # a rule-ending newline, handed over only if a token follows
        self.nesters = 0
        while True:
            m = braces(text, pos) if in_braces else anywhere(text, pos)
            kind = m.lastgroup
            if kind is None and in_braces:
                m = anywhere(text, pos)  # not a brace's content: let the parser reject it
                kind = m.lastgroup
            if kind is None:
                pos = m.end()
                if pos >= end:
                    return
                raise UnexpectedCharacters(
                    text, pos, line, pos - line_start + 1, allowed=(expected() - {"$END"}) | {"NL"}
                )
            start, pos = m.span(kind)
            value = m.group(kind)
            tok_line, column = line, start - line_start + 1
            if kind in may_span and "\n" in value:
                line += value.count("\n")
                line_start = start + value.rfind("\n") + 1
            if kind == "NL":
                if depth == 0 and pending is None and prev is not None and prev != "VBAR" and prev != "DEFINE":
                    pending = _token(kind, value, start, pos, tok_line, column, line, pos - line_start + 1)
                continue
            if pending is not None:
                yield pending  # the parser finishes the rule (and reads self.nesters) here
                pending = None
                self.nesters = 0
            if kind in nesters_kinds:
                self.nesters += 1
                if kind == "LPAR":
                    depth += 1
                    if depth > MAX_PAREN_DEPTH:
                        raise ParenDepthError(tok_line, column)
                elif kind == "LBRACE":
                    in_braces = True
            elif kind == "RPAR":
                if depth:
                    depth -= 1
            elif kind == "RBRACE":
                in_braces = False
            tok = new_str(Token, value)  # _token inlined: this loop runs once per token
            tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, start, pos
            tok.line, tok.column, tok.end_line, tok.end_column = tok_line, column, line, pos - line_start + 1
            prev = kind
            yield tok


def _then_end(tokens: Iterator[Token]) -> Iterator[Token]:
    """The tokens, then Lark's `$END` placed where the last token ends."""
    tok = None
    for tok in tokens:
        yield tok
    if tok is None:
        yield _token("$END", "", 0, 0, 1, 1, 1, 1)
    else:
        yield _token("$END", "", tok.end_pos, tok.end_pos, tok.end_line, tok.end_column, tok.end_line, tok.end_column)


class LalrDriver:
    """Runs Lark's LALR(1) table for a grammar, calling `builder.<alias>(children)` per reduction."""

    def __init__(self, lark: Lark, builder: object, start: str = "start") -> None:
        table = lark.parser.parser._parse_table  # Lark's own analysis of the grammar
        self.start_state = table.start_states[start]
        self.actions: dict[Any, dict[str, tuple]] = {}
        self.gotos: dict[Any, dict[str, Any]] = {}
        for state, row in table.states.items():
            acts, gotos = {}, {}
            for sym, (action, arg) in row.items():
                symbol = str(sym)  # Lark's names are Token objects, slower as dict keys
                if action is Shift and not symbol.isupper() and symbol != "$END":
                    gotos[symbol] = arg
                elif action is Shift:
                    acts[symbol] = (True, arg, None, None)
                else:
                    name = arg.alias or arg.origin.name
                    acts[symbol] = (False, len(arg.expansion), getattr(builder, name), str(arg.origin.name))
            self.actions[state], self.gotos[state] = acts, gotos

    def expected(self, state: Any) -> set[str]:
        """Terminals the table has an action for in `state` (some may fail after reductions)."""
        return set(self.actions[state])

    def accepts(self, states: list) -> set[str]:
        """Terminals that would be shifted from this stack (after any reductions): exact."""
        out = set()
        for terminal in self.actions[states[-1]]:
            stack = list(states)
            while True:
                act = self.actions[stack[-1]].get(terminal)
                if act is None:
                    break
                if act[0] or (terminal == "$END" and act[3] == "start"):
                    out.add(terminal)
                    break
                if act[1]:
                    del stack[-act[1] :]
                stack.append(self.gotos[stack[-1]][act[3]])
        return out

    def parse(self, tokens: Iterator[Token], stack: list) -> Any:
        """Feed every token, then end of input; return the start rule's value."""
        actions, gotos = self.actions, self.gotos
        values: list = []
        push_state, push_value = stack.append, values.append
        state = self.start_state
        push_state(state)
        for tok in _then_end(tokens):
            kind = tok.type
            while True:
                act = actions[state].get(kind)
                if act is None:
                    raise self._unexpected(tok, stack)
                if act[0]:
                    state = act[1]
                    push_state(state)
                    push_value(tok)
                    break
                size = act[1]
                if size:
                    children = values[-size:]
                    del values[-size:]
                    del stack[-size:]
                else:
                    children = []
                value = act[2](children)
                if act[3] == "start":  # only ever reduced at the end of input
                    return value
                state = gotos[stack[-1]][act[3]]
                push_state(state)
                push_value(value)
        raise AssertionError("the LALR table ended without reducing the start rule")

    def _unexpected(self, tok: Token, stack: list) -> UnexpectedToken:
        return UnexpectedToken(tok, self.accepts(stack))
