"""GBNF text that llama.cpp takes: what `convert --to gbnf` prints and the fleet sends.

llama.cpp expands `X*` (and `X+`, `X{m,}`) into a rule `R ::= X R | ` and refuses a
grammar where X can match the empty string: R would be left-recursive. ministruct's own
engine takes such repetitions (`(""|"a")*` is `"a"*`), so before printing, each unbounded
repetition of a nullable item repeats the item without its empty string instead (a rule
`NAME-nonempty` per nullable rule it goes through). The language is the same.
"""

from __future__ import annotations

from ministruct.grammar.analysis import is_nullable, nullable_rules
from ministruct.grammar.ir import (
    EMPTY,
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
    seq,
    walk,
)


def llama_gbnf(grammar: Grammar) -> str:
    """`grammar` as GBNF text llama.cpp accepts (see the module docstring). A grammar with
    greedy lexemes (Grammar.lexer) has no GBNF text: its superset with a skip allowed
    before every lexeme and at the end (`with_gaps`) is printed instead (for servers,
    whose outputs are then checked against the grammar itself)."""
    return llama_compatible(with_gaps(grammar)).to_gbnf()


def with_gaps(grammar: Grammar) -> Grammar:
    """A grammar without a lexer whose language holds the greedy one's: each lexeme may be
    preceded by its skips, and the text followed by the last ones (the language over the
    terminals, with gaps wherever a skip could stand). Grammars without a lexer: themselves."""
    lex = grammar.lexer
    if lex is None:
        return grammar
    skip_of = dict(lex.skip)
    lexemes = set(lex.lexemes) - set(skip_of.values()) - {lex.top_skip}
    gaps = {n: [k] for n, k in skip_of.items()}
    top = [lex.top_skip] if lex.top_skip is not None else []
    if lex.classes:  # (nested blocks: after a block's lexeme its skip may come before the enclosing grammar's)
        below: dict[int, list[str]] = {}
        for k, skip in enumerate(lex.class_skips):
            up = k
            while up >= 0:
                if skip is not None and skip not in below.setdefault(up, []):
                    below[up].append(skip)
                up = lex.class_parents[up]
        gaps = {n: below.get(k, []) for n, k in lex.classes}
        top = below.get(0, [])

    def gapped(e: Expr) -> Expr:
        if isinstance(e, RuleRef):
            if e.name in lexemes and gaps.get(e.name):
                return seq(Repeat(alt(*(RuleRef(k) for k in gaps[e.name])), 0, None), e)
            return e
        if isinstance(e, Seq):
            return seq(*(gapped(x) for x in e.items))
        if isinstance(e, Alt):
            return alt(*(gapped(x) for x in e.options))
        if isinstance(e, Repeat):
            return Repeat(gapped(e.item), e.min, e.max)
        return e

    rules = {n: (b if n in lex.lexemes else gapped(b)) for n, b in grammar.rules.items()}
    root = grammar.root
    if top:
        rules[root] = seq(rules[root], Repeat(alt(*(RuleRef(k) for k in top)), 0, None))
    return Grammar(rules, root=root, source=grammar.source, warnings=list(grammar.warnings))


def llama_compatible(grammar: Grammar) -> Grammar:
    """The same language with no unbounded repetition of an item that matches the empty string."""
    nullable = nullable_rules(grammar)
    if not _has_nullable_star(grammar, nullable):
        return grammar
    return _Rewrite(grammar, nullable).grammar()


def _has_nullable_star(grammar: Grammar, nullable: set[str]) -> bool:
    return any(
        isinstance(e, Repeat) and e.max is None and is_nullable(e.item, nullable)
        for body in grammar.rules.values()
        for e in walk(body)
    )


class _Rewrite:
    def __init__(self, grammar: Grammar, nullable: set[str]) -> None:
        self.g, self.nullable = grammar, nullable
        self.nonempty_rules: dict[str, str] = {}  # rule -> its rule without the empty string
        self.extra: dict[str, Expr] = {}
        self.nonempty_langs = self._nonempty_languages()

    def grammar(self) -> Grammar:
        rules = {name: self.fix(body) for name, body in self.g.rules.items()}
        rules.update(self.extra)
        return Grammar(rules, root=self.g.root, source=self.g.source, warnings=list(self.g.warnings))

    def _nonempty_languages(self) -> set[str]:
        """Rules that derive some non-empty string."""
        good: set[str] = set()

        def ok(e: Expr) -> bool:
            t = type(e)
            if t is RuleRef:
                return e.name in good  # type: ignore[union-attr]
            if t is Literal:
                return e.text != ""  # type: ignore[union-attr]
            if t is CharClass or t is TokenRef:
                return True
            if t is Seq:
                return any(ok(x) for x in e.items)  # type: ignore[union-attr]
            if t is Alt:
                return any(ok(x) for x in e.options)  # type: ignore[union-attr]
            return e.max != 0 and ok(e.item)  # type: ignore[union-attr]

        changed = True
        while changed:
            changed = False
            for name, body in self.g.rules.items():
                if name not in good and ok(body):
                    good.add(name)
                    changed = True
        return good

    def fix(self, e: Expr) -> Expr:
        """`e` with every unbounded repetition of a nullable item made llama.cpp-safe."""
        t = type(e)
        if t is Seq:
            return seq(*[self.fix(x) for x in e.items])  # type: ignore[union-attr]
        if t is Alt:
            return alt(*[self.fix(x) for x in e.options])  # type: ignore[union-attr]
        if t is Repeat:
            item = self.fix(e.item)  # type: ignore[union-attr]
            if e.max is None and is_nullable(item, self.nullable):  # type: ignore[union-attr]
                ne = self.nonempty(item)
                return EMPTY if ne is None else Repeat(ne, 0, None)  # X{m,} = (X without "")* when "" is in X
            return Repeat(item, e.min, e.max)  # type: ignore[union-attr]
        return e

    def nonempty(self, e: Expr) -> Expr | None:
        """An expression for the strings of `e` but the empty one (None when that is all it has)."""
        t = type(e)
        if t is Literal:
            return e if e.text else None  # type: ignore[union-attr]
        if t is CharClass or t is TokenRef:
            return e
        if t is RuleRef:
            name = e.name  # type: ignore[union-attr]
            if name not in self.nullable:
                return e
            if name not in self.nonempty_langs:
                return None
            return RuleRef(self._nonempty_rule(name))
        if t is Alt:
            opts = [x for x in (self.nonempty(o) for o in e.options) if x is not None]  # type: ignore[union-attr]
            return alt(*opts) if opts else None
        if t is Seq:
            items = list(e.items)  # type: ignore[union-attr]
            if not items:
                return None
            head, tail = items[0], seq(*items[1:]) if len(items) > 1 else EMPTY
            opts = []
            ne_head = self.nonempty(head)
            if ne_head is not None:
                opts.append(seq(ne_head, tail))
            if is_nullable(head, self.nullable):
                ne_tail = self.nonempty(tail)
                if ne_tail is not None:
                    opts.append(ne_tail)
            return alt(*opts) if opts else None
        if t is Repeat:
            if e.max == 0:  # type: ignore[union-attr]
                return None
            ne = self.nonempty(e.item)  # type: ignore[union-attr]
            if ne is None:
                return None
            if not is_nullable(e.item, self.nullable):  # type: ignore[union-attr]
                return Repeat(e.item, max(1, e.min), e.max)  # type: ignore[union-attr]
            return Repeat(ne, 1, e.max)  # type: ignore[union-attr]
        return e

    def _nonempty_rule(self, name: str) -> str:
        if name in self.nonempty_rules:
            return self.nonempty_rules[name]
        new, k = f"{name}-nonempty", 1
        while new in self.g.rules or new in self.extra:
            k += 1
            new = f"{name}-nonempty{k}"
        self.nonempty_rules[name] = new
        self.extra[new] = EMPTY  # placeholder while its body is built (it may refer to itself)
        body = self.nonempty(self.fix(self.g.rules[name]))
        self.extra[new] = body if body is not None else CharClass(())
        return new
