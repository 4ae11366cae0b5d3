"""Terminals: the regular languages of a Lark grammar's strings (`"..."i` folding case as
llguidance), regexes (Python's syntax with the peers' escapes), ranges and UPPERCASE
definitions, their references inlined; `&` (intersection) and `~` (complement) are
computed as one DFA (grammar/schema/complement.py).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Callable

from lark import Token

from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.ir import EMPTY, CharClass, Expr, Literal, Repeat, RuleRef, alt, seq, walk
from ministruct.grammar.lark.gaps import NOTHING
from ministruct.grammar.lark.substring import regex_ext
from ministruct.grammar.lark.syntax import LarkProblem, Node
from ministruct.grammar.regex import parse_regex
from ministruct.grammar.regex.printer import inline_root
from ministruct.grammar.schema.complement import ComplementError, build_dfa, live_states

_STRING_ESCAPES = re.compile(r"\\(\\|x([0-9a-fA-F]{2}))")


def decode_string(tok: Token) -> tuple[str, bool]:
    """The text of a STRING token (JSON syntax, plus \\xHH) and whether it ends in `i`."""
    raw = str(tok)
    icase = raw.endswith("i")
    body = raw[:-1] if icase else raw
    body = _STRING_ESCAPES.sub(lambda m: "\\\\" if m.group(2) is None else f"\\u00{m.group(2)}", body)
    try:
        text = json.loads(body)
    except json.JSONDecodeError as e:
        raise LarkProblem(f"invalid string literal: {e.msg}", tok) from None
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise LarkProblem("invalid string literal: a lone surrogate \\u escape", tok)
    return text, icase


def _regex_expr(pattern: str, tok: Token, what: str) -> Expr:
    try:
        g = parse_regex(pattern, source=what)
    except GrammarSyntaxError as e:
        raise LarkProblem(f"failed to compile regular expression {str(tok)[:60]}: {e.reason}", tok) from None
    return inline_root(g)


_BRACED_HEX = re.compile(r"[0-9a-fA-F]{1,8}\}")
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*>")


def peer_regex_syntax(pattern: str, tok: Token) -> str:
    """`pattern` with the peers' regex syntax that Python's `re` lacks written its way:
    `\\u{HEX}`, `\\x{HEX}`, `\\U{HEX}` (llguidance's Rust regexes), `\\cX` (a control
    character, as ECMAScript and XGrammar), named groups `(?<name>...)`."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            m = _BRACED_HEX.match(pattern, i + 3) if nxt in "uxU" and pattern[i + 2 : i + 3] == "{" else None
            if m is not None:
                cp = int(m.group()[:-1], 16)
                if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                    raise LarkProblem(
                        f"failed to compile regular expression: \\{nxt}{{{m.group()} is no character", tok
                    )
                out.append(f"\\U{cp:08X}")
                i = m.end()
                continue
            if nxt == "c" and i + 2 < n and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
                out.append(f"\\x{ord(pattern[i + 2]) % 32:02X}")
                i += 3
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            for lead in ("^", "]"):  # (a `]` first in a class is literal)
                if pattern[i : i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        elif pattern.startswith("(?<", i) and _GROUP_NAME.match(pattern, i + 3):
            out.append("(?P<")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def regexp(tok: Token) -> Expr:
    """The language of a `/pattern/flags` token (Python `re` syntax and flags, with the
    peers' escapes and named groups: peer_regex_syntax)."""
    raw = str(tok)
    cut = raw.rfind("/")
    body, flags = peer_regex_syntax(raw[1:cut], tok), raw[cut + 1 :]
    if "l" in flags:
        raise LarkProblem("regular-expression flag 'l' (locale) is not supported: patterns are Unicode text", tok)
    scoped = "".join(sorted(set(flags) - {"u"}))  # u: Python's str patterns are Unicode already
    return _regex_expr(f"(?{scoped}:{body})" if scoped else body, tok, "regex")


def _simple_fold(ch: str) -> str:
    """Unicode simple case folding of one character (one character out, as Rust's regex
    `(?i)` and so llguidance: `ſ` is `s`, but `ı` and `İ` are not `i`)."""
    for f in (ch.casefold(), ch.lower()):
        if len(f) == 1:
            return f
    return ch


@lru_cache(maxsize=4096)
def case_class(ch: str) -> Expr:
    """The characters `"ch"i` matches: those with ch's simple case folding."""
    py = inline_root(parse_regex("(?i:" + re.escape(ch) + ")"))  # a superset: Python's re folds more
    ranges = py.code_point_ranges() if isinstance(py, CharClass) else ((ord(ch), ord(ch)),)
    fold = _simple_fold(ch)
    cps = [cp for a, b in ranges for cp in range(a, b + 1) if _simple_fold(chr(cp)) == fold]
    return Literal(ch) if cps == [ord(ch)] else CharClass(tuple((cp, cp) for cp in cps))


def _count(tok: Token) -> int:
    try:
        return int(str(tok))
    except ValueError:
        raise LarkProblem(f"a repetition count must be a whole number, not {tok}", tok) from None


def repeat(n: Node, item: Expr) -> Expr:
    """`item` repeated as the `rep` node `n` says (its counts checked)."""
    lo_tok, hi_tok = n.data
    lo = _count(lo_tok) if isinstance(lo_tok, Token) else (lo_tok or 0)
    hi = _count(hi_tok) if isinstance(hi_tok, Token) else hi_tok
    if lo < 0:
        raise LarkProblem("range start must be >= 0", lo_tok)
    if hi is not None and hi < lo:
        raise LarkProblem("range end must be >= start", hi_tok)
    if hi == 0:
        return EMPTY
    return Repeat(item, lo, hi)


class Terminals:
    """The terminals of one grammar (the whole text, one `%lark {}` block, or common.lark):
    `token_defs` their definitions, `token_exprs` the languages known so far; the DFA
    rules of `&` and `~` are added to `rules`, named by `fresh`."""

    def __init__(
        self,
        token_defs: dict[str, Node],
        token_exprs: dict[str, Expr],
        rules: dict[str, Expr],
        fresh: Callable[[str], str],
    ) -> None:
        self.token_defs, self.token_exprs = token_defs, token_exprs
        self.rules, self.fresh = rules, fresh

    def token_expr(self, name: str, at: Node, stack: tuple[str, ...]) -> Expr:
        """The language of terminal `name`, every reference inlined."""
        if name in self.token_exprs:
            return self.token_exprs[name]
        if name in stack:
            raise LarkProblem(f"terminal '{name}' is recursive ({' -> '.join(stack + (name,))})", at.tok)
        body = self.token_defs.get(name)
        if body is None:
            raise LarkProblem(f"unknown name: '{name}'", at.tok)
        e = self.term(body, stack + (name,))
        self.token_exprs[name] = e
        return e

    def term(self, n: Node, stack: tuple[str, ...]) -> Expr:
        """A regular expression for `n` inside a terminal."""
        k = n.kind
        if k == "seq":
            return seq(*(self.term(x, stack) for x in n.kids))
        if k == "alt":
            return alt(*(self.term(x, stack) for x in n.kids))
        if k == "rep":
            return repeat(n, self.term(n.kids[0], stack))
        if k in ("and", "not"):
            return self._boolean(n, stack)
        if k == "ref":
            if n.tok.type == "RULE":
                owner = f"terminal '{stack[-1]}'" if stack else "a terminal"
                raise LarkProblem(f"{owner} cannot reference rule '{n.data}'", n.tok)
            return self.token_expr(n.data, n, stack)
        if k == "str":
            text, icase = decode_string(n.tok)
            if not icase:
                return Literal(text)
            return seq(*(case_class(ch) for ch in text))
        if k == "range":
            return self._range(n)
        if k == "re":
            return regexp(n.tok)
        if k == "regex_ext":
            return regex_ext(n.data, n.tok)
        what = {"special": "special tokens", "gref": "grammar references", "json": "%json", "nested": "%lark"}[k]
        raise LarkProblem(f"{what} cannot be used in terminals", n.tok)

    def _range(self, n: Node) -> Expr:
        a_tok, b_tok = n.data
        (a, ai), (b, bi) = decode_string(a_tok), decode_string(b_tok)
        if ai or bi:
            raise LarkProblem("flags are not allowed on character ranges", a_tok if ai else b_tok)
        if len(a) != 1:
            raise LarkProblem("range start must be a single character", a_tok)
        if len(b) != 1:
            raise LarkProblem("range end must be a single character", b_tok)
        if ord(a) > ord(b):
            raise LarkProblem(f"range {a!r}..{b!r} is empty: its start comes after its end", a_tok)
        return CharClass(((ord(a), ord(b)),))

    def _boolean(self, n: Node, stack: tuple[str, ...]) -> Expr:
        leaves: list[Expr] = []

        def formula(x: Node) -> Callable[[frozenset[int]], bool]:
            if x.kind == "and":
                parts = [formula(y) for y in x.kids]
                return lambda lab: all(p(lab) for p in parts)
            if x.kind == "not":
                inner = formula(x.kids[0])
                return lambda lab: not inner(lab)
            e = self.term(x, stack)
            if any(isinstance(y, RuleRef) for y in walk(e)):
                raise LarkProblem("`&` and `~` of a terminal that itself uses `&` or `~` is not supported", x.tok)
            i = len(leaves)
            leaves.append(e)
            return lambda lab: i in lab

        pred = formula(n)
        try:
            dfa = build_dfa(leaves)
        except ComplementError as e:
            raise LarkProblem(f"`&`/`~` too large to compute: {e}", n.tok) from None
        good = {s for s, lab in enumerate(dfa.labels) if pred(lab)}
        live = live_states(dfa, good)
        if 0 not in live:
            return NOTHING
        names = {s: self.fresh(f"{stack[-1] if stack else 'T'}-dfa") for s in sorted(live)}
        for s in sorted(live):
            opts = [seq(CharClass(rs), RuleRef(names[t])) for rs, t in dfa.states[s] if t in live]
            if s in good:
                opts.append(EMPTY)
            self.rules[names[s]] = alt(*opts) if opts else NOTHING
        return RuleRef(names[0])
