"""No `%ignore` gap before the first lexeme: llguidance puts gaps between lexemes only.

Rules are built with a gap before every lexeme; `LeadingGaps.root(start)` is the same
language without the gap before the first one. Both are written
as "first" variants of the rules: F(e) holds the non-empty strings of `e` whose first
character is no gap, F(gap) is nothing, and a part that may be empty is skipped only
when it matches the empty string exactly (a lexeme that matches nothing is no lexeme).
"""

from __future__ import annotations

from ministruct.grammar.analysis import is_nullable, nullable_rules
from ministruct.grammar.ir import (
    EMPTY,
    NOTHING,
    Alt,
    CharClass,
    Expr,
    Grammar,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    TokenRef,
    alt,
    alt_some,
    seq,
    walk,
)
from ministruct.grammar.regex.anchors import nonempty


class LeadingGaps:
    """The "first" variants of the grammar rules in `own` (the others are lexemes)."""

    def __init__(self, rules: dict[str, Expr], own: set[str], gap: str, fresh) -> None:
        self.rules, self.own, self.gap, self.fresh = rules, own, gap, fresh
        self.nullable = nullable_rules(Grammar(dict(rules)))
        self.first: dict[str, str] = {}
        self.solid: dict[str, str] = {}

    def _lexeme(self, name: str) -> Expr:
        """A lexeme rule without its empty match (kept whole when it cannot be split)."""
        if name not in self.nullable:
            return RuleRef(name)
        if name not in self.solid:
            body = self.rules[name]
            if any(isinstance(x, RuleRef) for x in walk(body)):
                return RuleRef(name)  # built with & or ~: its empty match stays a lexeme
            self.solid[name] = self.fresh(f"{name}-nonempty")
            self.rules[self.solid[name]] = nonempty(body)
        return RuleRef(self.solid[name])

    def f(self, e: Expr) -> Expr:
        if isinstance(e, RuleRef):
            if e.name == self.gap:
                return NOTHING
            if e.name not in self.own:
                return self._lexeme(e.name)
            if e.name not in self.first:
                self.first[e.name] = self.fresh(f"{e.name}-first")
                self.rules[self.first[e.name]] = NOTHING  # (recursion meets the name first)
                self.rules[self.first[e.name]] = self.f(self.rules[e.name])
            return RuleRef(self.first[e.name])
        if isinstance(e, (Literal, CharClass)):
            return nonempty(e)
        if isinstance(e, TokenRef):
            return e
        if isinstance(e, Alt):
            return alt_some(*(self.f(x) for x in e.options))
        if isinstance(e, Seq):
            opts = []
            for i, x in enumerate(e.items):
                first = self.f(x)
                if first != NOTHING:  # (a gap: the first lexeme is further on)
                    opts.append(seq(first, *e.items[i + 1 :]))
                if not is_nullable(x, self.nullable):
                    break
            return alt_some(*opts)
        assert isinstance(e, Repeat)
        if e.max == 0:
            return NOTHING
        rest = Repeat(e.item, max(e.min - 1, 0), None if e.max is None else e.max - 1)
        return seq(self.f(e.item), rest) if rest.max != 0 else self.f(e.item)

    def root(self, start: str) -> Expr:
        """The start rule's language with no gap before the first lexeme."""
        body = self.f(RuleRef(start))
        return alt(body, EMPTY) if start in self.nullable else body
