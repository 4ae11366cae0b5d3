"""Left recursion removed, the language kept: `remove_left_recursion`.

Lark grammars (llguidance's and XGrammar's Earley parsers take them) are written with
left recursion (`sum: sum "+" product | product`); the engine's stacks are a top-down
parser's and cannot hold it. Each group of rules that reach one another first (a cycle
of the left-corner graph) is rewritten in the classic order (Paull's algorithm): a
rule's alternatives are spread out until each starts with a rule of the group or cannot
reach one, those starting with an earlier rule of the group take that rule's
alternatives, and a rule's own left recursion `A: A a | b` becomes `A: b a*` (the least
solution of A = A a | b, for any languages a and b). A member that may match the empty
string is first written as its non-empty strings or nothing (`A+ | ""`, A+ a rule of its
own), so that nothing empty stands in front of a member. Every step keeps each rule's
language: the grammar is the same language, not an approximation. A group whose rewrite
passes the size limits is refused with its cycle.
"""

from __future__ import annotations

from typing import Callable

from ministruct.errors import GrammarError
from ministruct.grammar.analysis import is_nullable, left_corner_graph, left_refs, nullable_rules
from ministruct.grammar.ir import (
    EMPTY,
    NOTHING,
    Alt,
    Expr,
    Grammar,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    alt,
    alt_some,
    seq,
    seq_all,
    substitute_refs,
)

MAX_ALTERNATIVES = 4_000  # per rule of a group, while it is spread out
MAX_STEPS = 5_000  # alternatives looked at for one group

Items = tuple[Expr, ...]


def remove_left_recursion(
    rules: dict[str, Expr],
    names: "set[str] | None" = None,
    source: str = "<grammar>",
    fresh: "Callable[[str], str] | None" = None,
) -> None:
    """Rewrite, in place, the rules among `names` (default: all) that are left-recursive
    so that none is, each keeping its language; `fresh(hint)` names new rules (the
    non-empty strings of a rule that may match the empty string). GrammarError names a
    cycle that cannot be rewritten."""
    own = set(rules) if names is None else names & set(rules)
    groups = _groups(rules, own)
    if not groups:
        return
    nullable = nullable_rules(Grammar(rules))
    if any(n in nullable for group in groups for n in group):
        # first no member matches the empty string: A becomes A+ | "" with A+ its
        # non-empty strings, so that nothing empty stands in front of a member
        plus = _NonEmpty(rules, nullable, fresh or _namer(rules))
        split = {n: alt(RuleRef(plus.rule(n)), EMPTY) for group in groups for n in group if n in nullable}
        own |= plus.made
        memo: dict[int, Expr] = {}
        for n in own:
            rules[n] = substitute_refs(rules[n], split, memo)
        groups = _groups(rules, own)
        nullable = nullable_rules(Grammar(rules))
    for group in groups:
        _Group(rules, group, nullable, source).rewrite()
    for group in _groups(rules, own):  # (none: a member that still comes first is a bug)
        _refuse(group, group[0], "it is still left-recursive after the rewrite", source)


def _groups(rules: dict[str, Expr], own: set[str]) -> list[list[str]]:
    graph = left_corner_graph(Grammar(rules))
    return _cycles({n: [r for r in graph[n] if r in own] for n in rules if n in own})


def _namer(rules: dict[str, Expr]) -> Callable[[str], str]:
    def fresh(hint: str) -> str:
        k = 1
        while f"{hint}-{k}" in rules:
            k += 1
        return f"{hint}-{k}"

    return fresh


class _NonEmpty:
    """Rules for the non-empty strings of rules that may match the empty string."""

    def __init__(self, rules: dict[str, Expr], nullable: set[str], fresh: Callable[[str], str]) -> None:
        self.rules, self.nullable, self.fresh = rules, nullable, fresh
        self.of: dict[str, str] = {}
        self.made: set[str] = set()

    def rule(self, name: str) -> str:
        """The name of a rule holding the non-empty strings of rule `name`."""
        if name not in self.of:
            made = self.of[name] = self.fresh(f"{name}-nonempty")
            self.made.add(made)
            self.rules[made] = NOTHING  # (recursion meets the name first)
            self.rules[made] = self.expr(self.rules[name])
        return self.of[name]

    def expr(self, e: Expr) -> Expr:
        if not is_nullable(e, self.nullable):
            return e
        if isinstance(e, RuleRef):
            return RuleRef(self.rule(e.name))
        if isinstance(e, Alt):
            return alt_some(*(self.expr(o) for o in e.options))
        if isinstance(e, Seq):  # (every item may be empty): the first non-empty one, and the rest
            return alt_some(*(seq_all(self.expr(x), *e.items[i + 1 :]) for i, x in enumerate(e.items)))
        if isinstance(e, Repeat):
            if e.max == 0:
                return NOTHING
            if e.max == 1:
                return self.expr(e.item)
            return seq_all(self.expr(e.item), Repeat(e.item, max(e.min - 1, 0), None if e.max is None else e.max - 1))
        return NOTHING  # the empty literal


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components with a cycle, each after those it reaches
    (Tarjan's order), members in definition order; without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    order = {n: i for i, n in enumerate(graph)}
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.append(sorted(comp, key=order.__getitem__))
    return out


class _Group:
    """One cycle of the left-corner graph, rewritten rule by rule."""

    def __init__(self, rules: dict[str, Expr], members: list[str], nullable: set[str], source: str) -> None:
        self.rules, self.members, self.nullable, self.source = rules, members, nullable, source
        self.member_set = set(members)
        self.done: dict[str, list[Items]] = {}  # rewritten members: their alternatives
        self.steps = 0

    def rewrite(self) -> None:
        for name in self.members:
            seen: set[Items] = set()  # (every alternative this rule has had: see _spread)
            alts = self._spread([_items(o) for o in _options(self.rules[name])], name, seen)
            while any(a and isinstance(a[0], RuleRef) and a[0].name in self.done for a in alts):
                out: list[Items] = []
                for a in alts:
                    if a and isinstance(a[0], RuleRef) and a[0].name in self.done:
                        out.extend(self._spread([b + a[1:] for b in self.done[a[0].name]], name, seen))
                    else:
                        out.append(a)
                alts = out
            recursive = [a[1:] for a in alts if a and a[0] == RuleRef(name) and len(a) > 1]
            base = [a for a in alts if not (a and a[0] == RuleRef(name))]
            if recursive:
                loop = Repeat(alt(*(seq(*a) for a in recursive)), 0, None)
                base = [(*b, loop) for b in base]
            self.done[name] = base
            self.rules[name] = alt(*(seq(*b) for b in base)) if base else NOTHING

    def _spread(self, alts: list[Items], name: str, seen: set[Items]) -> list[Items]:
        """The same alternatives (their union), each starting with a rule of the group or
        unable to reach one first. An alternative met again (in `seen`) is dropped: it came
        back through parts that matched the empty string, and adds nothing to the union."""
        out: list[Items] = []
        todo = list(reversed(alts))
        while todo:
            if len(out) + len(todo) > MAX_ALTERNATIVES:
                _refuse(
                    self.members, name, f"rewriting it takes more than {MAX_ALTERNATIVES:,} alternatives", self.source
                )
            a = todo.pop()
            self.steps += 1
            if self.steps > MAX_STEPS:
                _refuse(self.members, name, f"rewriting it takes more than {MAX_STEPS:,} steps", self.source)
            if a in seen:
                continue
            seen.add(a)
            x = a[0] if a else None
            if x is None or (isinstance(x, RuleRef) and x.name in self.member_set) or not self._reaches(a):
                out.append(a)
            elif isinstance(x, Seq):
                todo.append(x.items + a[1:])
            elif isinstance(x, Alt):
                todo.extend(_items(o) + a[1:] for o in reversed(x.options))
            elif isinstance(x, Repeat) and x.max == 0:
                todo.append(a[1:])
            elif isinstance(x, Repeat):
                more = () if x.max == 1 else (Repeat(x.item, max(x.min - 1, 0), None if x.max is None else x.max - 1),)
                if x.min == 0:
                    todo.append(a[1:])
                todo.append((x.item, *more, *a[1:]))
            elif isinstance(x, RuleRef) and x.name in self.rules:  # (outside the group: it cannot reach it first)
                todo.append(_items(self.rules[x.name]) + a[1:])
            elif isinstance(x, Literal) and x.text == "":
                todo.append(a[1:])
            else:
                out.append(a)  # (an undefined rule: check_grammar names it)
        return out

    def _reaches(self, a: Items) -> bool:
        """Can these items start with a rule of the group (after parts that match the empty string)?"""
        return any(r in self.member_set for r in left_refs(seq(*a), self.nullable))


def _refuse(members: list[str], name: str, why: str, source: str) -> None:
    cycle = " -> ".join([*members, members[0]])
    raise GrammarError(f"left recursion: {cycle} cannot be rewritten: {why}", source=source, rule=name)


def _options(e: Expr) -> tuple[Expr, ...]:
    return e.options if isinstance(e, Alt) else (e,)


def _items(e: Expr) -> Items:
    if isinstance(e, Seq):
        return e.items
    if e == EMPTY:
        return ()
    return (e,)


__all__ = ["remove_left_recursion"]
